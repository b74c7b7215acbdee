"""The program order both tree compilers share (:class:`~cellgraph.backends.torch.models.freeze.FrozenCell`
and :class:`~cellgraph.backends.torch.models.rrnn_gru.RRNNGRUCell`).

A node ``u(o(L_r c_i, R_r c_j) + b_r)`` costs an elementwise op over its children's
projections. Nodes that read the same children with the same ``o`` and ``u`` differ only in
their tuple rows, so they are computed as *one* op over the stacked rows of all of them: the
GRU's ``r`` and ``z`` (tuples 0 and 1), or the candidates of an RRNN-GRU node that chooses
among tuples. :func:`group_nodes` finds these groups and orders them so that every group comes
after the nodes its children are.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

from cellgraph.cell.expr import Node

__all__ = ["group_nodes"]


def group_nodes(nodes: Sequence[Node], key: Callable[[Node], Hashable | None]) -> list[tuple[Node, ...]]:
    """``nodes`` (in an order where children come first) as groups in program order: the
    nodes with the same ``key`` (typically their children's registers, op and activation)
    form one group at the place of its first member, whose children are made by then since
    all members have the same children; a node whose key is ``None`` is a group of its own.
    Members keep the order of ``nodes``."""
    groups: dict[Hashable, list[Node]] = {}
    order: list[list[Node]] = []
    for n in nodes:
        k = key(n)
        if k is None:
            order.append([n])
        elif k in groups:
            groups[k].append(n)
        else:
            groups[k] = [n]
            order.append(groups[k])
    return [tuple(members) for members in order]
