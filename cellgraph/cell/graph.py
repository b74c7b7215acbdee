"""Cell graphs: the DAG of one state, and multi-state cells (paper, Sec. 3.2 and Appendix
"Extensions of RRNN model"; docs/paper-notes.md, *Objects: leaves, nodes, tuples*).

* :class:`CellGraph` wraps the root :class:`~cellgraph.cell.expr.Node` of one state (``h_t``,
  or ``c_t`` for an LSTM's first run). ``nodes()`` lists the DAG, ``unfold()`` gives the
  paper's tree, ``to_networkx()``/``from_networkx()`` convert to a plain ``DiGraph``.
* :class:`MultiCell` is the ordered list of graphs of an M-state cell: run ``i`` may use
  the states made by runs ``< i`` as leaves of role ``current``. The last state is the
  output ``h_t``.

Every invalid construction raises :class:`~cellgraph.errors.CellGraphError` naming the
node and the broken rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.layout import Layout
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError

__all__ = ["CellGraph", "MultiCell"]


@dataclass(frozen=True)
class CellGraph:
    """The DAG computing one state ``state`` of a cell, rooted at ``root``."""

    root: Expr
    state: str = "h"

    def __post_init__(self) -> None:
        if not isinstance(self.root, Expr):
            raise CellGraphError(f"cell root must be a Leaf or Node, got {type(self.root).__name__}")

    def nodes(self) -> tuple[Expr, ...]:
        """Distinct nodes, children before parents."""
        return tuple(self.root.walk())

    def leaves(self) -> tuple[Leaf, ...]:
        return self.root.leaves()

    def internal_nodes(self) -> tuple[Node, ...]:
        return self.root.internal_nodes()

    def unfold(self) -> Tree:
        return unfold(self.root)

    def validate(self, layout: Layout | None = None) -> "CellGraph":
        """Check tuple indices against ``layout`` (node construction checked the rest)."""
        if layout is not None:
            for n in self.internal_nodes():
                layout.check_index(n.tuple, f"{n}: ")
        return self

    # --- networkx ----------------------------------------------------------------------
    def to_networkx(self) -> nx.DiGraph:
        """A ``DiGraph`` with an edge child -> parent per operand.

        Node ids are ``0..n-1`` in :meth:`nodes` order. Node attributes: ``kind``
        (``leaf``/``node``), ``name`` and ``role`` for leaves, ``op``, ``act``, ``tuple`` for
        generated nodes; edge attribute ``edge`` is ``"L"`` or ``"R"``. The root has
        graph attribute ``root``.
        """
        g = nx.DiGraph(root=None, state=self.state)
        ids = {e: i for i, e in enumerate(self.nodes())}
        for e, i in ids.items():
            if isinstance(e, Leaf):
                g.add_node(i, kind="leaf", name=e.name, role=e.role.value)
            else:
                g.add_node(i, kind="node", op=e.op, act=e.act, tuple=e.tuple)
                g.add_edge(ids[e.left], i, edge="L")
                g.add_edge(ids[e.right], i, edge="R")
        g.graph["root"] = ids[self.root]
        return g

    @staticmethod
    def from_networkx(g: nx.DiGraph, root=None, state: str | None = None) -> "CellGraph":
        """Build from a ``DiGraph`` in the :meth:`to_networkx` convention, with checks."""
        if not nx.is_directed_acyclic_graph(g):
            cycle = nx.find_cycle(g)
            raise CellGraphError(f"node {cycle[0][0]!r}: the graph has a cycle {cycle}")
        root = g.graph.get("root") if root is None else root
        if root not in g:
            raise CellGraphError(f"root {root!r} is not a node of the graph")
        built: dict = {}
        for n in nx.topological_sort(g):
            attrs = g.nodes[n]
            ins = {d.get("edge"): u for u, _, d in g.in_edges(n, data=True)}
            kind = attrs.get("kind", "leaf" if not ins else "node")
            try:
                if kind == "leaf":
                    if ins:
                        raise CellGraphError("a leaf cannot have children")
                    built[n] = Leaf(attrs.get("name", str(n)), attrs.get("role"))
                else:
                    if g.in_degree(n) != 2 or set(ins) != {"L", "R"}:
                        raise CellGraphError(
                            f"an internal node needs exactly one 'L' and one 'R' child, "
                            f"got {g.in_degree(n)} in-edges labelled {sorted(map(str, ins))}"
                        )
                    built[n] = Node(attrs.get("op"), attrs.get("act"), attrs.get("tuple"),
                                    built[ins["L"]], built[ins["R"]])
            except CellGraphError as err:
                raise CellGraphError(f"node {n!r}: {err}") from None
        return CellGraph(built[root], state or g.graph.get("state", "h"))


@dataclass(frozen=True)
class MultiCell:
    """An M-state cell: ``graphs[i]`` makes state ``graphs[i].state``; the last is ``h_t``."""

    graphs: tuple[CellGraph, ...]

    def __post_init__(self) -> None:
        if not self.graphs:
            raise CellGraphError("a multi-state cell needs at least one graph")
        made: list[str] = []
        for i, g in enumerate(self.graphs):
            for leaf in g.leaves():
                if leaf.role is Role.CURRENT and leaf.name not in made:
                    raise CellGraphError(
                        f"run {i} ({g.state}): leaf {leaf.name!r} refers to a state of this step "
                        f"that no earlier run makes (made so far: {made})"
                    )
            if g.state in made:
                raise CellGraphError(f"state {g.state!r} is made twice")
            made.append(g.state)

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(g.state for g in self.graphs)

    @property
    def output(self) -> CellGraph:
        return self.graphs[-1]

    def validate(self, layout: Layout | None = None) -> "MultiCell":
        for g in self.graphs:
            g.validate(layout)
        return self

    def __iter__(self):
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)
