r"""The structural term of cellgraph's discovery recipe: a learned logit per iteration and
candidate slot, added to the value score (docs/paper-notes.md, *Extension: the discovery
recipe*).

Algorithm 2 ranks the candidates of iteration ``k`` by

.. math::
    \mathrm{score}_k(c) = \alpha(v_c) + s_k[\mathrm{slot}(c)], \qquad
    \mathrm{slot}(c) = (r, o, u, i, j)

where ``alpha`` is the paper's per-sample scoring network and ``s_k`` a table of learned
logits, one per iteration ``k`` and slot (weight tuple, op, activation and the positions of
the two operands in Algorithm 2's node list). ``s`` plays the part of DARTS' architecture
weights (Liu et al., 2019), but *beside* ``alpha`` rather than instead of it: ``s`` says which
cell the model builds by default, ``alpha`` where a sample or a step departs from it. With
``s = 0`` the score is the paper's. With ``alpha`` frozen at a zero output layer (the discovery
recipe's ``score_lr = 0``) every score is ``s_k[slot]`` plus a constant, so the model builds one
cell for every sample and step.

Slots are numbered by the search's candidate key
(:class:`~cellgraph.backends.torch.algorithm2.candidates.KeyCode`), a mixed radix over
``(r, o, u, i, j)`` with ``M = n_leaves + N`` node positions, so one iteration's logits are a
flat ``(n_r n_o n_u M^2,)`` vector and a block of candidates reads its own by their keys.

RRNN-GRU's structural term is the same idea on its fixed tree: one logit per choosing node
and tuple it may choose.
"""

from __future__ import annotations

import torch
from torch import nn

from cellgraph.backends.torch.algorithm2.candidates import KeyCode
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["n_slots", "slot", "zero_logits"]


def n_slots(space: SearchSpace) -> int:
    """Slots of one iteration of ``space``: ``n_r n_o n_u M^2`` with ``M = n_leaves + N``, the
    first key past the last tuple's."""
    return KeyCode.of(space).encode(len(space.tuples), 0, 0, 0, 0)


def slot(space: SearchSpace, r: int, o: str, u: str, i: int, j: int) -> int:
    """The slot of the candidate ``u(o(L_r c_i, R_r c_j) + b_r)`` (``r`` a layout tuple index,
    ``i < j`` node-list positions): the search's candidate key (:class:`KeyCode`)."""
    code = KeyCode.of(space)
    if not 0 <= i < j < code.M:
        raise CellGraphError(f"slot: operand positions must satisfy 0 <= i < j < {code.M}, got ({i}, {j})")
    try:
        r_pos, o_pos, u_pos = space.tuples.index(r), space.ops.index(o), space.activations.index(u)
    except ValueError:
        raise CellGraphError(f"slot: tuple {r}, op {o!r} or activation {u!r} is not in the search space") from None
    return code.encode(r_pos, o_pos, u_pos, i, j)


def zero_logits(rows: int, columns: int) -> nn.Parameter:
    """A ``(rows, columns)`` table of structural logits, zero: the paper's score at the start."""
    return nn.Parameter(torch.zeros(rows, columns))
