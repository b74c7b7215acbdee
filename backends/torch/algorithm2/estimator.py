r"""The straight-through estimator of a hard choice (Bengio et al., 2013; the gradient of the
straight-through Gumbel-softmax of Jang et al., 2017, without the noise).

A choice among candidate vectors ``v_c`` with scores ``s_c`` is relaxed to the weights
``w = softmax(s / tau)``, and

.. math::
    y = v_{c^*} + \Big(\sum_c w_c\, \mathrm{sg}(v_c) - \mathrm{sg}\big(\sum_c w_c\, v_c\big)\Big)

The forward value is ``v_{c*}``, Algorithm 2's argmax candidate, exactly. Backward, the chosen
vector gets the whole gradient (the other candidates none), as through ``y = sum_c y_c v_c``
with ``y = onehot(c*) + w - sg(w)``, and the scores get the relaxation's:
``dL/ds_c = w_c (v_c - sum_d w_d v_d) . g / tau``. (Mixing the candidate vectors themselves, ``hard +
(soft - sg(soft))``, would instead give the chosen vector only ``w_{c*}`` of its gradient and
spread the rest over every other candidate, whose weights share its tuples.)

cellgraph's discovery recipe trains with it (``mode = straight-through``) so that the cell
that training runs, validation scores and the exports show is one and the same
(docs/paper-notes.md, *Extension: the discovery recipe*). No Gumbel noise: the forward pass
stays the deterministic argmax cell that is exported.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["straight_through"]


def straight_through(hard: Tensor, soft: Tensor) -> Tensor:
    """``hard`` forward, ``soft``'s gradient backward (``soft``: the weights' mixture of the
    detached candidate vectors, module docstring)."""
    return hard + (soft - soft.detach())
