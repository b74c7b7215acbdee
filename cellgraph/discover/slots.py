"""A fixed slot encoding of candidates as categorical parameters, for samplers that search
a space of parameters, such as Optuna's ``TPESampler`` (docs/discover.md, *Strategies*).

A candidate of a :class:`~cellgraph.discover.space.CellSpace` with at most ``N =
max_nodes`` generated nodes is written in ``N`` slots ``n0, ..., n{N-1}``. Slot ``i`` holds
one node by five categorical parameters,

    n{i}.op     one of the space's ops
    n{i}.act    one of its activations
    n{i}.kind   one of its tuple kinds (``W`` a trainable tuple of the node's own, ``I`` the
                identity tuple)
    n{i}.left   an operand: a leaf's name or an earlier slot, ``n0`` .. ``n{i-1}``
    n{i}.right  the other operand, likewise

and ``nodes`` (``min_nodes`` .. ``N``) says how many slots are used; the last used slot,
``n{nodes-1}``, is the root. The space is conditional: slot ``i``'s parameters exist only
when ``nodes > i``, which is what the grouped multivariate TPE models (Optuna's
``TPESampler(multivariate=True, group=True)`` decomposes the space into the groups of
parameters that occur together: ``nodes`` with ``n0``'s, then each further slot's).

:meth:`SlotEncoding.decode` builds the candidate from its root, so slots no used slot reads
drop out (several parameter sets decode to one candidate), and
:func:`~cellgraph.discover.space.validate` names why it is not a candidate where it is not
(a leaf not read, a node of constants only, ...). :meth:`SlotEncoding.encode` writes a
candidate in its nodes' children-first order (:meth:`~cellgraph.cell.expr.Expr.internal_nodes`),
every slot used, so that ``decode(encode(root))`` is ``root``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from optuna.distributions import CategoricalDistribution
from optuna.trial import BaseTrial

from cellgraph.cell.expr import Expr, Leaf, Node
from cellgraph.discover.space import IDENTITY, CellSpace, kind, renumber, validate
from cellgraph.errors import CellGraphError

__all__ = ["NODES", "FIELDS", "Decoded", "SlotEncoding"]

#: The parameter that says how many slots are used.
NODES = "nodes"
#: A slot's parameters, ``n{i}.FIELD``.
FIELDS = ("op", "act", "kind", "left", "right")


@dataclass(frozen=True)
class Decoded:
    """The candidate ``root`` of a parameter set, or None and the ``reason`` it is not one."""

    root: Node | None
    reason: str | None = None


def _slot(i: int) -> str:
    return f"n{i}"


class SlotEncoding:
    """The slot encoding of the candidates of ``space`` (module docstring).

    Attributes:
        space: the candidates.
        distributions: every parameter's ``CategoricalDistribution``, by name.
    """

    def __init__(self, space: CellSpace) -> None:
        self.space = space
        leaves = tuple(leaf.name for leaf in space.leaves)
        self.distributions: dict[str, CategoricalDistribution] = {
            NODES: CategoricalDistribution(tuple(range(space.min_nodes, space.max_nodes + 1)))}
        for i in range(space.max_nodes):
            operands = (*leaves, *(_slot(j) for j in range(i)))
            for name, choices in zip(FIELDS, (space.ops, space.activations, space.kinds, operands, operands)):
                self.distributions[f"{_slot(i)}.{name}"] = CategoricalDistribution(tuple(choices))

    def suggest(self, trial: BaseTrial) -> dict[str, Any]:
        """Draw a parameter set from ``trial``: ``nodes``, then the used slots' parameters."""
        def draw(name: str) -> Any:
            return trial.suggest_categorical(name, self.distributions[name].choices)

        nodes = draw(NODES)
        return {NODES: nodes, **{f"{_slot(i)}.{f}": draw(f"{_slot(i)}.{f}") for i in range(nodes) for f in FIELDS}}

    def decode(self, params: Mapping[str, Any]) -> Decoded:
        """The candidate of ``params`` (a set :meth:`suggest` or :meth:`encode` made), or why
        it is none."""
        by_name: dict[str, Expr] = {leaf.name: leaf for leaf in self.space.leaves}
        nodes = params[NODES]
        for i in range(nodes):
            field = {f: params[f"{_slot(i)}.{f}"] for f in FIELDS}
            tuple_index = IDENTITY if field["kind"] == "I" else i + 1
            by_name[_slot(i)] = Node(field["op"], field["act"], tuple_index, by_name[field["left"]],
                                     by_name[field["right"]])
        root = renumber(by_name[_slot(nodes - 1)])
        reason = validate(root, self.space)
        return Decoded(None, reason) if reason else Decoded(root)  # type: ignore[arg-type]

    def encode(self, root: Expr) -> dict[str, Any]:
        """The parameters of candidate ``root``: its nodes children first, one slot each, the
        root last. Raises when ``root`` is not a candidate of the space."""
        reason = validate(root, self.space)
        if reason:
            raise CellGraphError(f"the slot encoding holds candidates of its space; this cell is not one: {reason}")
        order = root.internal_nodes()
        name = {n: _slot(i) for i, n in enumerate(order)}

        def operand(e: Expr) -> str:
            return e.name if isinstance(e, Leaf) else name[e]  # type: ignore[index]

        params: dict[str, Any] = {NODES: len(order)}
        for n in order:
            values = (n.op, n.act, kind(n), operand(n.left), operand(n.right))
            params.update({f"{name[n]}.{f}": v for f, v in zip(FIELDS, values)})
        return params
