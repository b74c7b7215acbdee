"""The symbolic export's printed forms and named matrices (:mod:`cellgraph.export.symbolic`):
the exact text and LaTeX a user copies, entry-wise products bracketed and joined with the
paper's ``⊙`` / ``\\odot``, layout names read as sums, zeros and identities, and the errors of
a bad display name."""

from __future__ import annotations

import sympy as sp

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError
from cellgraph.export import symbolic as S

CELL = Node("mul", "identity", 0, Node("add", "tanh", 0, x, h), Node("add", "sigmoid", 1, x, h))
EQUATIONS = ["c_1 = tanh(L_0*x_t + R_0*h_{t-1} + b_0)",
             "c_2 = sigma(L_1*x_t + R_1*h_{t-1} + b_1)",
             "h_t = (L_0*c_1) ⊙ (R_0*c_2) + b_0"]
LATEX_ROWS = [r"c_{1} &= \tanh\left(L_{0} x_{t} + R_{0} h_{t-1} + b_{0}\right)",
              r"c_{2} &= \sigma\left(L_{1} x_{t} + R_{1} h_{t-1} + b_{1}\right)",
              r"h_{t} &= \left(L_{0} c_{1}\right) \odot \left(R_{0} c_{2}\right) + b_{0}"]


def test_text_of_the_equations_and_of_the_expression():
    assert S.sstr(S.equations(CELL)).splitlines() == EQUATIONS
    assert S.sstr(S.expression(CELL)) == ("(L_0*tanh(L_0*x_t + R_0*h_{t-1} + b_0)) ⊙ "
                                          "(R_0*sigma(L_1*x_t + R_1*h_{t-1} + b_1)) + b_0")


def test_latex_of_equations_is_an_aligned_block():
    assert S.latex(S.equations(CELL)) == "\\begin{aligned}\n" + " \\\\\n".join(LATEX_ROWS) + "\n\\end{aligned}"


def test_latex_of_one_expression_and_of_a_list_of_expressions():
    one = S.latex(S.expression(CELL))
    assert one == (r"\left(L_{0} \tanh\left(L_{0} x_{t} + R_{0} h_{t-1} + b_{0}\right)\right) \odot "
                   r"\left(R_{0} \sigma\left(L_{1} x_{t} + R_{1} h_{t-1} + b_{1}\right)\right) + b_{0}")
    assert S.latex([S.expression(CELL)]) == "\\begin{aligned}\n" + one + "\n\\end{aligned}"


def test_a_function_that_is_not_one_named_call_prints_as_sympy_does():
    v = sp.MatrixSymbol("v", 2, 1)
    z = sp.Symbol("z")
    doubled = v.applyfunc(sp.Lambda(z, 2 * sp.tanh(z)))
    assert S.sstr(doubled) == sp.StrPrinter().doprint(doubled)
    assert S.latex(doubled) == sp.latex(doubled)
    scaled = v.applyfunc(sp.Lambda(z, sp.tanh(2 * z)))  # one call, but not of the variable itself
    assert S.sstr(scaled) == sp.StrPrinter().doprint(scaled) and "tanh(v)" not in S.sstr(scaled)


def test_the_equations_are_unevaluated_p_by_1_equalities():
    eqs = S.equations(Node("add", "identity", 0, x, zero))
    assert len(eqs) == 1 and isinstance(eqs[0], sp.Eq)
    assert eqs[0].lhs.shape == (S.P, 1) and S.sstr(eqs) == "h_t = L_0*x_t + b_0"
    small = S.equations(CELL, p=3) + S.equations(CellGraph(x, "h"), p=3)  # a leaf root: h_t = x_t
    assert all(eq.lhs.shape == (3, 1) and eq.rhs.shape == (3, 1) for eq in small)
    leaves = {m for eq in small for m in eq.rhs.atoms(sp.MatrixSymbol) if m.name in ("x_t", "h_{t-1}")}
    assert leaves and all(m.shape == (3, 1) for m in leaves)
    states = S.state_expressions(CELL, p=3)
    assert list(states) == ["h"] and states["h"].shape == (3, 1)


def test_layout_names_are_sums_zeros_and_identities():
    layout = Layout((TupleSpec("a", "W + V", "0", "b_a"), TupleSpec("c", "I", "I", "0")))
    L, R, b = S.tuple_matrices(0, layout, 3)
    assert L == sp.MatrixSymbol("W", 3, 3) + sp.MatrixSymbol("V", 3, 3)
    assert R == sp.ZeroMatrix(3, 3) and b == sp.MatrixSymbol("b_a", 3, 1)
    assert S.sstr(S.equations(Node("add", "tanh", 0, x, h), layout)) == "h_t = tanh((V + W)*x_t + b_a)"
    assert S.sstr(S.equations(Node("add", "identity", 1, x, h), layout)) == "h_t = h_{t-1} + x_t"


@pytest.mark.parametrize("spec, message", [
    (TupleSpec("a", "W +", "V", "b"), r"^tuple 'a': matrix name 'W \+' has an empty term$"),
    (TupleSpec("a", "W", "V", "I"), r"^tuple 'a': 'I' names an identity matrix, not a vector$"),
    (TupleSpec("a", "W", "+V", "b"), r"^tuple 'a': matrix name '\+V' has an empty term$"),
])
def test_bad_display_names_are_one_line_errors(spec, message):
    with pytest.raises(CellGraphError, match=message):
        S.tuple_matrices(0, Layout((spec,)))


def test_a_tuple_outside_the_layout_names_the_export():
    with pytest.raises(CellGraphError, match=r"^symbolic export: tuple index 1 out of range for a layout of 1 "
                                             r"tuples \(a\)$"):
        S.tuple_matrices(1, Layout((TupleSpec("a"),)))
