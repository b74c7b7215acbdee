"""Drawings of cells with Graphviz (paper, Sec. 3.1, Figure 1).

As in Figure 1, every generated node shows its 3-tuple (binary operation, activation,
weight tuple) with the name of its vector in red (``c_k``, or the state ``h_t``), every edge
from a child to its parent carries its matrix in blue (``L_r``/``R_r``, or the layout's
names such as ``W_r``, ``W_r'``; ``I`` for the identity tuple), and leaves are filled by
role (data, previous state, state of this step, constant). A multi-state cell draws one
cluster per run, with a dashed edge from the run that makes a state to its uses. A key under
the drawing (:func:`key`) says what the colours and the triple's symbols mean.

Two views: ``"dag"`` draws every distinct node once (Algorithm 2's graph, shared nodes
have several parents); ``"tree"`` draws the unfolded tree of the paper, one box per
position, in the order of a :class:`~cellgraph.cell.tree.Tree` (swapped children included).

:func:`to_dot` builds a ``graphviz.Digraph``; :func:`render` writes ``.dot`` source (no
Graphviz program needed) or ``.svg``/``.png``/``.pdf`` through the ``dot`` program.
"""

from __future__ import annotations

import html
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Mapping

import graphviz

from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import as_multicell, leaf_parts, node_names
from cellgraph.cell.tree import Tree
from cellgraph.errors import CellGraphError
from cellgraph.files import atomic_write

__all__ = ["ROLE_COLORS", "VIEWS", "FORMATS", "key", "to_dot", "render"]

#: Fill colour of a leaf by role.
ROLE_COLORS: dict[Role, str] = {
    Role.DATA: "#9ecae1",
    Role.PREV: "#fdd49e",
    Role.CURRENT: "#c7e9c0",
    Role.CONST: "#d9d9d9",
}
VIEWS = ("dag", "tree")
#: Output formats of :func:`render` by file suffix (``dot``/``gv``: source text).
FORMATS = ("dot", "gv", "svg", "png", "pdf")

# Figure 1's short activation labels; other activations show their registry name.
_ACT_LABELS = {"sigmoid": "σ", "one_minus": "1−", "identity": "id"}
_VECTOR_COLOR = "#c0392b"
_MATRIX_COLOR = "#1f4e9c"
#: How each role's fill colour is named in the key.
_ROLE_NAMES = {Role.DATA: "input", Role.PREV: "previous state", Role.CURRENT: "state of this step",
               Role.CONST: "constant"}

Drawable = Expr | CellGraph | MultiCell | Tree | Mapping[str, Tree]


def _sub(base: str, sub: str = "") -> str:
    """HTML text ``base`` with subscript ``sub``."""
    text = html.escape(base)
    return f"{text}<sub>{html.escape(sub)}</sub>" if sub else text


def _named(name: str) -> str:
    """A display name such as ``W_r'`` or ``h_{t-1}`` as HTML with a subscript."""
    base, _, sub = name.partition("_")
    return _sub(base, sub.strip("{}"))


def _runs(obj: Drawable) -> list[tuple[str, Expr, Tree | None]]:
    """``(state, root, tree or None)`` per run, in run order."""
    if isinstance(obj, Tree):
        return [("h", obj.expr, obj)]
    if isinstance(obj, Mapping):
        if not obj or not all(isinstance(t, Tree) for t in obj.values()):
            raise CellGraphError("to draw a mapping it must map state names to Trees")
        return [(state, t.expr, t) for state, t in obj.items()]
    return [(g.state, g.root, None) for g in as_multicell(obj)]


def _edge_names(n: Node, layout: Layout | None) -> dict[str, str]:
    """HTML labels of the ``L`` and ``R`` edges of ``n``."""
    if layout is None:
        return {"L": _sub("L", str(n.tuple)), "R": _sub("R", str(n.tuple))}
    layout.check_index(n.tuple, f"drawing {n}: ")
    spec = layout.tuples[n.tuple]
    return {side: _named(getattr(spec, side) or f"{side}_{spec.name}") for side in ("L", "R")}


def _node_label(n: Node, name: tuple[str, str], layout: Layout | None) -> str:
    op = registry.op(n.op).symbol or n.op
    act = _ACT_LABELS.get(n.act, n.act)
    tup = layout.tuples[n.tuple].name if layout is not None else str(n.tuple)
    return (f'<<font color="{_VECTOR_COLOR}">{_sub(*name)}</font><br/>'
            f"({html.escape(op)}, {html.escape(act)}, {html.escape(tup)})>")


class _Builder:
    """Adds the nodes and edges of one run to a (sub)graph with unique ids."""

    def __init__(self, names: dict[Node, tuple[str, str]], layout: Layout | None) -> None:
        self.names = names
        self.layout = layout
        self.count = 0
        self.current_uses: list[tuple[str, str]] = []  # (dot id, state name)

    def _new_id(self) -> str:
        self.count += 1
        return f"n{self.count}"

    def _leaf(self, g: graphviz.Digraph, leaf: Leaf) -> str:
        nid = self._new_id()
        g.node(nid, f"<{_sub(*leaf_parts(leaf))}>", shape="ellipse", style="filled",
               fillcolor=ROLE_COLORS[leaf.role], tooltip=f"{leaf.name} ({leaf.role.value})")
        if leaf.role is Role.CURRENT:
            self.current_uses.append((nid, leaf.name))
        return nid

    def _internal(self, g: graphviz.Digraph, n: Node, is_root: bool) -> str:
        nid = self._new_id()
        g.node(nid, _node_label(n, self.names[n], self.layout), shape="box", style="rounded",
               peripheries="2" if is_root else "1")
        return nid

    def _edge(self, g: graphviz.Digraph, child: str, parent: str, label: str) -> None:
        g.edge(child, parent, label=f"<{label}>", fontcolor=_MATRIX_COLOR)

    def dag(self, g: graphviz.Digraph, root: Expr) -> str:
        ids: dict[Expr, str] = {}
        for e in root.walk():
            if isinstance(e, Leaf):
                ids[e] = self._leaf(g, e)
                continue
            ids[e] = self._internal(g, e, e == root)
            edges = _edge_names(e, self.layout)
            self._edge(g, ids[e.left], ids[e], edges["L"])
            self._edge(g, ids[e.right], ids[e], edges["R"])
        return ids[root]

    def tree(self, g: graphviz.Digraph, t: Tree, is_root: bool = True) -> str:
        if t.is_leaf:
            return self._leaf(g, t.expr)  # type: ignore[arg-type]
        nid = self._internal(g, t.expr, is_root)  # type: ignore[arg-type]
        edges = _edge_names(t.expr, self.layout)  # type: ignore[arg-type]
        for child, side in zip(t.children, t.edges):
            self._edge(g, self.tree(g, child, False), nid, edges[side])
        return nid


def _symbol(symbol: str, name: str) -> str:
    """``σ sigmoid``, or ``tanh`` alone where the drawing shows the name itself."""
    return name if symbol == name else f"{symbol} {name}"


def key() -> str:
    """The key under every drawing, as a Graphviz HTML label: the vector's colour, the
    ``(op, activation, tuple)`` triple and its symbols, the matrices' colour, the leaves' fills."""
    ops = ", ".join(_symbol(registry.op(name).symbol or name, name) for name in registry.op_names())
    acts = ", ".join(_symbol(_ACT_LABELS.get(name, name), name) for name in registry.activation_names())
    leaves = ", ".join(f'<font color="{ROLE_COLORS[role]}">■</font> {what}' for role, what in _ROLE_NAMES.items())
    return (f'<<font point-size="10"><font color="{_VECTOR_COLOR}">c<sub>k</sub></font>: the vector a node '
            f"makes; (op, activation, weight tuple): {html.escape(ops)}; {html.escape(acts)}<br/>"
            f'<font color="{_MATRIX_COLOR}">blue</font>: the matrix on an edge (I: identity); '
            f"leaves: {leaves}</font>>")


def to_dot(obj: Drawable, view: str = "dag", layout: Layout | None = None,
           name: str = "cell") -> graphviz.Digraph:
    """A Graphviz drawing of a cell.

    Args:
        obj: an expression, :class:`CellGraph`, :class:`MultiCell`, :class:`Tree`, or a
            mapping ``state -> Tree`` (a multi-state cell's trees).
        view: ``"dag"`` (every distinct node once) or ``"tree"`` (the unfolded tree).
        layout: names the tuples and their matrices; without it tuple ``r`` shows as ``r``
            and its edges as ``L_r``, ``R_r``.
        name: the graph's name in the ``.dot`` source.
    """
    if view not in VIEWS:
        raise CellGraphError(f"unknown view {view!r} (known: {', '.join(VIEWS)})")
    runs = _runs(obj)
    names = node_names(MultiCell(tuple(CellGraph(root, state) for state, root, _ in runs)))
    dot = graphviz.Digraph(name, graph_attr={"rankdir": "BT", "fontname": "Helvetica", "label": key(),
                                             "labelloc": "b"},
                           node_attr={"fontname": "Helvetica"}, edge_attr={"fontname": "Helvetica"})
    builder = _Builder(names, layout)
    roots: dict[str, str] = {}
    for i, (state, root, tree) in enumerate(runs):
        with _cluster(dot, i, state, len(runs) > 1) as g:
            if view == "tree":
                roots[state] = builder.tree(g, tree if tree is not None else CellGraph(root).unfold())
            else:
                roots[state] = builder.dag(g, root)
    for nid, state in builder.current_uses:
        dot.edge(roots[state], nid, style="dashed", color="gray40", arrowhead="none")
    return dot


def _cluster(dot: graphviz.Digraph, i: int, state: str,
             clustered: bool) -> AbstractContextManager[graphviz.Digraph]:
    """The subgraph that holds run ``i`` (the graph itself for a one-state cell)."""
    if not clustered:
        return nullcontext(dot)
    return dot.subgraph(name=f"cluster_{i}", graph_attr={"label": f"<state {_sub(state, 't')}>",
                                                          "labelloc": "t", "style": "dashed"})


def render(obj: Drawable, path: str | Path, view: str = "dag", layout: Layout | None = None) -> Path:
    """Write a drawing to ``path``; the suffix picks the format (:data:`FORMATS`).

    ``.dot``/``.gv`` write Graphviz source and need no Graphviz program; ``.svg``,
    ``.png`` and ``.pdf`` run ``dot``. The file is written atomically.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise CellGraphError(
            f"{path}: unknown drawing format {path.suffix or '(none)'!r} (known: "
            f"{', '.join('.' + f for f in FORMATS)})"
        )
    dot = to_dot(obj, view, layout, name=path.stem)
    if fmt in ("dot", "gv"):
        data = dot.source.encode()
    else:
        try:
            data = dot.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            raise CellGraphError(
                f"{path}: writing .{fmt} needs the Graphviz program 'dot', which is not on PATH; "
                f"install it (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
                f"graphviz) or write .dot source instead, which works without it"
            ) from None
        except graphviz.CalledProcessError as err:
            raise CellGraphError(f"{path}: Graphviz 'dot' failed: {err}") from None
    atomic_write(path, data)
    return path
