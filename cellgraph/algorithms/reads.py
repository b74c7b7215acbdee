"""What a cell's output reads: the leaves the output state ``h_t`` reaches in its DAG, and
whether the cell is an identity chain (paper, Sec. 3.2 and Appendix "Extensions of RRNN model";
docs/paper-notes.md, *Objects: leaves, nodes, tuples*).

A leaf is *read* by ``h_t`` when a path of operands leads from the root of the output run to
it. A leaf of role ``current`` is the state an earlier run of a multi-state cell made in the
same step: the path goes on into that run's DAG (an LSTM's ``h_t = o_t * tanh(c_t)`` reads
``x_t``, ``h_{t-1}`` and ``c_{t-1}`` through ``c_t``). One path does not count: the other
operand of a ``mul`` node whose operand is the constant ``zero``, since
``u(L_r a ⊙ R_r 0 + b_r) = u(b_r)`` whatever ``a`` is (Algorithm 2 builds such nodes when
``S_aux`` holds the zero vector). Past that the reach is structural: a trained matrix that
happens to cancel an operand is not looked at.

:func:`cell_reads` reports, for the data leaves (``S_data``, ``x_t``) and for the previous
value of every state of the cell (``S_prev``, ``h_{t-1}``, ``c_{t-1}``), whether ``h_t``
reads it; ``reads_input`` is "reads some data leaf" and ``reads_state`` "reads the previous
value of the output state itself" (``h_{t-1}`` for ``h_t``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.cell.names import leaf_parts, subscripted
from cellgraph.errors import CellGraphError

__all__ = ["CellReads", "cell_reads", "leaves_reached", "is_identity_chain"]


@dataclass(frozen=True)
class CellReads:
    """Which leaves the output state ``state`` reads: ``data`` and ``prev`` map leaf names to
    ``True`` (read) or ``False`` (not read), data leaves first, then previous states in the
    cell's run order."""

    state: str
    data: dict[str, bool]
    prev: dict[str, bool]

    @property
    def reads_input(self) -> bool:
        """Whether ``h_t`` reads a data leaf (``x_t``)."""
        return any(self.data.values())

    @property
    def reads_state(self) -> bool:
        """Whether ``h_t`` reads the previous value of its own state (``h_{t-1}``)."""
        return self.prev.get(self.state, False)

    def describe(self) -> str:
        """``h_t reads x_t, h_{t-1}; not c_{t-1}`` (display names of
        :mod:`cellgraph.cell.names`)."""
        names = {**{n: (Leaf(n, Role.DATA), r) for n, r in self.data.items()},
                 **{n: (Leaf(n, Role.PREV), r) for n, r in self.prev.items()}}
        read = [subscripted(*leaf_parts(leaf)) for leaf, r in names.values() if r]
        unread = [subscripted(*leaf_parts(leaf)) for leaf, r in names.values() if not r]
        return (f"{self.state}_t reads {', '.join(read) or 'none of its inputs'}"
                + (f"; not {', '.join(unread)}" if unread else ""))

    def flags(self) -> dict[str, bool]:
        """Leaf name -> read, data leaves then previous states (the structure logs' ``reads``)."""
        return {**self.data, **self.prev}


def _operands(node: Node) -> tuple[Expr, ...]:
    """The operands ``node``'s value depends on: none for ``mul`` with the zero constant."""
    if node.op == "mul" and any(isinstance(e, Leaf) and e.role is Role.CONST and e.name == "zero"
                                for e in node.children):
        return ()
    return node.children


def leaves_reached(cell: MultiCell, state: str | None = None) -> frozenset[Leaf]:
    """The data, previous-state and constant leaves that run ``state`` (default: the output,
    the last run) reaches, through the runs its ``current`` leaves name (module docstring)."""
    roots = {g.state: g.root for g in cell}
    state = cell.output.state if state is None else state
    if state not in roots:
        raise CellGraphError(f"the cell makes no state {state!r} (it makes {', '.join(roots)})")
    found: set[Leaf] = set()
    seen: set[Expr] = set()
    stack = [roots[state]]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, Node):
            stack.extend(_operands(e))
        elif e.role is Role.CURRENT:
            stack.append(roots[e.name])  # MultiCell checked that an earlier run makes it
        else:
            found.add(e)
    return frozenset(found)


def cell_reads(cell: MultiCell, data: Iterable[str] = ("x",)) -> CellReads:
    """Which inputs the output state reads: every name of ``data`` (the task's data leaves) and
    every data leaf of the cell, and the previous value of every state the cell makes and
    every previous-state leaf it has, each ``True`` where ``h_t`` reaches it."""
    reached = leaves_reached(cell)
    leaves = {leaf for g in cell for leaf in g.leaves()}
    data_names = list(dict.fromkeys([*data, *sorted(l.name for l in leaves if l.role is Role.DATA)]))
    prev_names = list(dict.fromkeys([*cell.states, *sorted(l.name for l in leaves if l.role is Role.PREV)]))
    both = sorted(set(data_names) & set(prev_names))
    if both:
        raise CellGraphError(f"leaf name {both[0]!r} names both a data leaf and a previous state")
    return CellReads(
        cell.output.state,
        {name: Leaf(name, Role.DATA) in reached for name in data_names},
        {name: Leaf(name, Role.PREV) in reached for name in prev_names},
    )


def is_identity_chain(cell: MultiCell, layout: Layout) -> bool:
    """Whether every generated node of ``cell`` is ``c_i + c_j`` through the identity tuple
    ``(I, I, 0)`` and the identity activation: the state is then a plain sum of leaves (e.g.
    ``h_t = h_{t-1} + k x_t``), the cell an untrained search builds most often rather than a
    discovery."""
    identity = layout.identity_indices
    return all(node.op == "add" and node.act == "identity" and node.tuple in identity
               for graph in cell for node in graph.internal_nodes())
