r"""The straight-through estimator of a hard choice (Bengio et al., 2013; as the hard
Gumbel-softmax of Jang et al., 2017, without the noise).

.. math::
    y = \mathrm{hard} + (\mathrm{soft} - \mathrm{sg}(\mathrm{soft}))

The forward value is ``hard``, Algorithm 2's argmax candidate, exactly; the gradient is that of
``soft``, the ``softmax(score / tau)`` mixture of the eligible candidates. cellgraph's
discovery recipe trains with it (``mode = straight-through``) so that the cell that training
runs, validation scores and the exports show is one and the same (docs/paper-notes.md,
*Extension: the discovery recipe*). No Gumbel noise: the forward pass stays the deterministic
argmax cell that is exported; exploration comes from the soft gradient reaching every
eligible candidate, in proportion to its softmax weight.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["straight_through"]


def straight_through(hard: Tensor, soft: Tensor) -> Tensor:
    """``hard`` forward, ``soft``'s gradient backward."""
    return hard + (soft - soft.detach())
