"""Symbolic export of cells to sympy and LaTeX (paper, Sec. 3.1 Eq. 1-4 and Appendix
"Expressibility" Eq. LSTMeq1-5; docs/paper-notes.md, *Symbolic export and canonical forms*).

Every generated node ``c = u(o(L_r c_i, R_r c_j) + b_r)`` becomes one equation between
``p x 1`` matrix expressions:

* leaves are ``MatrixSymbol``s named by role: data ``x`` -> ``x_t``, previous state ``h`` ->
  ``h_{t-1}``, a state made earlier in the same step ``c`` -> ``c_t``; constants ``zero`` ->
  ``ZeroMatrix(p, 1)``, ``one`` -> ``OneMatrix(p, 1)``, unit vector ``e3`` -> ``e_3``;
* tuple ``r`` gives ``L_r``, ``R_r`` (``p x p``) and ``b_r`` (``p x 1``). With a
  :class:`~cellgraph.cell.layout.Layout` they take the tuple's display names (``W_r``, ``W_r'``,
  ``b_r``; ``I`` is ``Identity(p)``, ``0`` a zero matrix and ``a+b`` a sum), an identity
  tuple gives ``Identity(p)`` and a zero bias, so it disappears;
* ``o`` and ``u`` are the registry's sympy forms (entry-wise products stay
  ``HadamardProduct`` in the order built, activations ``ElementwiseApplyFunction``).

Generated nodes are named ``c_1, c_2, ...`` in DAG order (children first, the runs of a
multi-state cell in turn); the root of a run is named by its state (``h_t``, ``c_t``), as
Algorithm 2 names ``c_{N_bar}* = h_t``.

Example (the paper's GRU)::

    >>> from cellgraph.targets import target
    >>> gru = target("gru")
    >>> for eq in equations(gru.cell, gru.layout):
    ...     print(sstr(eq))
    c_1 = sigma(W_z*x_t + W_z'*h_{t-1} + b_z)
    c_2 = h_{t-1} ⊙ c_1
    ...
    h_t = c_2 + c_7
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import Sequence

import sympy
from sympy.matrices.expressions import MatrixExpr
from sympy.matrices.expressions.applyfunc import ElementwiseApplyFunction
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import CellLike, as_multicell, leaf_parts, node_names, subscripted
from cellgraph.errors import CellGraphError

__all__ = [
    "P",
    "leaf_symbol",
    "tuple_matrices",
    "equations",
    "expression",
    "state_expressions",
    "canonical",
    "sstr",
    "latex",
]

#: The dimension ``p`` of every vector (a symbol unless a number is given).
P = sympy.Symbol("p", integer=True, positive=True)

#: Bound variable of every exported activation, so that equal cells give equal expressions
#: (``applyfunc`` binds a fresh ``Dummy`` each call).
_Z = sympy.Symbol("z")


def leaf_symbol(leaf: Leaf, p: sympy.Expr | int = P) -> MatrixExpr:
    """The ``p x 1`` matrix of a leaf (``ZeroMatrix``/``OneMatrix`` for ``zero``/``one``)."""
    if leaf.role is Role.CONST and leaf.name == "zero":
        return sympy.ZeroMatrix(p, 1)
    if leaf.role is Role.CONST and leaf.name == "one":
        return sympy.OneMatrix(p, 1)
    return sympy.MatrixSymbol(subscripted(*leaf_parts(leaf)), p, 1)


def _named_matrix(name: str, rows: sympy.Expr | int, cols: sympy.Expr | int, what: str) -> MatrixExpr:
    """A display name as a matrix: ``I`` identity, ``0`` zero, ``a+b`` a sum of symbols."""
    terms = [t.strip() for t in name.split("+")]
    if not all(terms):
        raise CellGraphError(f"{what}: matrix name {name!r} has an empty term")
    mats = []
    for t in terms:
        if t == "0":
            mats.append(sympy.ZeroMatrix(rows, cols))
        elif t == "I":
            if cols != rows:
                raise CellGraphError(f"{what}: 'I' names an identity matrix, not a vector")
            mats.append(sympy.Identity(rows))
        else:
            mats.append(sympy.MatrixSymbol(t, rows, cols))
    return reduce(operator.add, mats)


def tuple_matrices(
    r: int, layout: Layout | None = None, p: sympy.Expr | int = P
) -> tuple[MatrixExpr, MatrixExpr, MatrixExpr]:
    """``(L_r, R_r, b_r)`` of tuple ``r``: ``MatrixSymbol``s ``L_r, R_r, b_r`` without a
    layout, else named from the layout's :class:`~cellgraph.cell.layout.TupleSpec`."""
    if layout is None:
        return (sympy.MatrixSymbol(f"L_{r}", p, p), sympy.MatrixSymbol(f"R_{r}", p, p),
                sympy.MatrixSymbol(f"b_{r}", p, 1))
    layout.check_index(r, "symbolic export: ")
    spec = layout.tuples[r]
    if spec.identity:
        return sympy.Identity(p), sympy.Identity(p), sympy.ZeroMatrix(p, 1)
    what = f"tuple {spec.name!r}"
    return (
        _named_matrix(spec.L or f"L_{spec.name}", p, p, what),
        _named_matrix(spec.R or f"R_{spec.name}", p, p, what),
        _named_matrix(spec.b or f"b_{spec.name}", p, 1, what),
    )


def _bind_z(expr: MatrixExpr) -> MatrixExpr:
    """Rename the bound variable of every entry-wise function to ``z``."""
    return expr.replace(
        lambda a: isinstance(a, ElementwiseApplyFunction) and a.function.variables != (_Z,),
        lambda a: ElementwiseApplyFunction(sympy.Lambda(_Z, a.function(_Z)), a.expr),
    )


def _times(M: MatrixExpr, v: MatrixExpr) -> MatrixExpr:
    """``M v`` without touching ``v``: ``I v = v``, ``0 v = M 0 = 0``."""
    if isinstance(M, sympy.Identity):
        return v
    if isinstance(M, sympy.ZeroMatrix) or isinstance(v, sympy.ZeroMatrix):
        return sympy.ZeroMatrix(M.rows, v.cols)
    return sympy.MatMul(M, v)


def _node_value(n: Node, left: MatrixExpr, right: MatrixExpr, layout: Layout | None,
                p: sympy.Expr | int) -> MatrixExpr:
    """``u(o(L_r left, R_r right) + b_r)`` with the registry's sympy forms.

    The forms are applied to placeholders that are then replaced by the operands: sympy's
    ``+`` runs a deep ``doit()`` that would re-sort every entry-wise product inside an
    operand. Only this node's own sum is simplified (zero terms and the zero bias drop).
    """
    L, R, b = tuple_matrices(n.tuple, layout, p)
    a, c, z = (sympy.MatrixSymbol(f"_{k}", p, 1) for k in "acz")
    pre = registry.op(n.op).sympy(a, c).xreplace({a: _times(L, left), c: _times(R, right)})
    pre = sympy.MatAdd(pre, b).doit(deep=False)
    return _bind_z(registry.activation(n.act).sympy(z).xreplace({z: pre}))


def equations(cell: CellLike, layout: Layout | None = None, p: sympy.Expr | int = P) -> list[sympy.Eq]:
    """One equation ``c_k = u(o(L_r c_i, R_r c_j) + b_r)`` per generated node, children
    first; right-hand sides refer to earlier nodes by name (see
    :func:`cellgraph.cell.names.node_names`). A run whose root is a leaf gives ``state_t = leaf``."""
    names = node_names(cell)
    symbols: dict[Expr, MatrixExpr] = {n: sympy.MatrixSymbol(subscripted(*nm), p, 1) for n, nm in names.items()}
    out: list[sympy.Eq] = []
    done: set[Node] = set()
    for g in as_multicell(cell):
        for e in g.root.walk():
            if isinstance(e, Leaf):
                symbols.setdefault(e, leaf_symbol(e, p))
            elif e not in done:
                done.add(e)
                rhs = _node_value(e, symbols[e.left], symbols[e.right], layout, p)
                out.append(sympy.Eq(symbols[e], rhs, evaluate=False))
        if isinstance(g.root, Leaf):
            state = sympy.MatrixSymbol(subscripted(g.state, "t"), p, 1)
            out.append(sympy.Eq(state, symbols[g.root], evaluate=False))
    return out


def expression(graph: Expr | CellGraph, layout: Layout | None = None, p: sympy.Expr | int = P) -> MatrixExpr:
    """The root's value with every generated node substituted (leaves stay symbols,
    states made earlier in the step included)."""
    root = graph.root if isinstance(graph, CellGraph) else graph
    values: dict[Expr, MatrixExpr] = {}
    for e in root.walk():
        values[e] = (leaf_symbol(e, p) if isinstance(e, Leaf)
                     else _node_value(e, values[e.left], values[e.right], layout, p))
    return values[root]


def state_expressions(cell: CellLike, layout: Layout | None = None,
                      p: sympy.Expr | int = P) -> dict[str, MatrixExpr]:
    """``{state: expression}`` for every run of a multi-state cell, in run order."""
    return {g.state: expression(g, layout, p) for g in as_multicell(cell)}


def canonical(expr: sympy.Basic) -> sympy.Basic:
    """A canonical form for comparing exports: operands of entry-wise products sorted (the
    product is commutative; exports keep the built order), sums and products re-evaluated,
    bound variables renamed alike. Equal canonical forms mean equal functions."""
    if not expr.args or isinstance(expr, (sympy.MatrixSymbol, sympy.Symbol)):
        return expr
    args = [canonical(a) for a in expr.args]
    if isinstance(expr, sympy.HadamardProduct):
        return sympy.hadamard_product(*args)
    if isinstance(expr, ElementwiseApplyFunction):
        return _bind_z(ElementwiseApplyFunction(*args))
    if isinstance(expr, (sympy.MatAdd, sympy.MatMul)):
        return expr.func(*args).doit(deep=False)
    return expr.func(*args)


def _applied_name(e: ElementwiseApplyFunction) -> str | None:
    """``"sigma"`` when ``e`` applies ``z -> sigma(z)``, else ``None``."""
    body, (var,) = e.function.expr, e.function.variables
    if isinstance(body, sympy.Function) and body.args == (var,):
        return type(body).__name__
    return None


def _grouped(printer: StrPrinter, operand: sympy.Basic, brackets: str) -> str:
    """An operand of an entry-wise product, bracketed unless it is atomic."""
    text = printer._print(operand)
    if isinstance(operand, (sympy.MatAdd, sympy.MatMul, sympy.HadamardProduct)):
        return brackets.format(text)
    return text


class _ExportStrPrinter(StrPrinter):
    """``sigma(W*x + b)`` for entry-wise functions, ``a ⊙ b`` for entry-wise products,
    ``lhs = rhs`` for equations."""

    def _print_ElementwiseApplyFunction(self, e: ElementwiseApplyFunction) -> str:
        name = _applied_name(e)
        if name is None:
            return super()._print_ElementwiseApplyFunction(e)
        return f"{name}({self._print(e.expr)})"

    def _print_HadamardProduct(self, e: sympy.HadamardProduct) -> str:
        return " ⊙ ".join(_grouped(self, a, "({})") for a in e.args)

    def _print_Equality(self, e: sympy.Eq) -> str:
        return f"{self._print(e.lhs)} = {self._print(e.rhs)}"


class _ExportLatexPrinter(LatexPrinter):
    """``\\sigma\\left(...\\right)`` for entry-wise functions, ``\\odot`` for entry-wise
    products (the paper's notation)."""

    def _print_ElementwiseApplyFunction(self, e: ElementwiseApplyFunction) -> str:
        name = _applied_name(e)
        if name is None:
            return super()._print_ElementwiseApplyFunction(e)
        return rf"{self._hprint_Function(name)}\left({self._print(e.expr)}\right)"

    def _print_HadamardProduct(self, e: sympy.HadamardProduct) -> str:
        return r" \odot ".join(_grouped(self, a, r"\left({}\right)") for a in e.args)


def sstr(obj: sympy.Basic | Sequence[sympy.Basic]) -> str:
    """Plain-text form of an export (one line per item of a sequence)."""
    if isinstance(obj, sympy.Basic):
        return _ExportStrPrinter().doprint(obj)
    return "\n".join(sstr(o) for o in obj)


def latex(obj: sympy.Basic | Sequence[sympy.Basic]) -> str:
    """LaTeX of an export; a sequence of equations becomes an ``aligned`` block."""
    printer = _ExportLatexPrinter()
    if isinstance(obj, sympy.Basic):
        return printer.doprint(obj)
    rows = []
    for o in obj:
        if isinstance(o, sympy.Eq):
            rows.append(f"{printer.doprint(o.lhs)} &= {printer.doprint(o.rhs)}")
        else:
            rows.append(printer.doprint(o))
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"
