"""The candidate block of one search iteration as one autograd node, with its backward pass
written out (:mod:`cellgraph.backends.torch.search`; paper, Algorithm 2 and Sec. 3.2).

For the ``P`` pairs of an iteration, tuples ``r``, operations ``o`` and activations ``u`` the
block computes

    z = o(L_r c_i, R_r c_j) + b_r                           (B, n_o, n_r, P, p)
    v = u(z)              for the non-affine u               (B, n_nl, n_o, n_r, P, p)
    alpha(v) = w2 . sigmoid(W1 v + b1)                       (B, n_nl n_o n_r P)
    alpha(a z + c) = w2 . sigmoid(a W1 z + c W1 1 + b1)      (B, n_a n_o n_r P)

(the scoring network in the sigmoid form of :class:`~cellgraph.backends.torch.search.SearchParams`;
for ``o = add``, ``W1 z = W1 L_r c_i + W1 R_r c_j + W1 b_r`` is a sum of per-node projections).
Built from torch ops, that is some 25 autograd nodes an iteration, each with its own saved
tensors, gradient buffers and a stack that copies ``z`` and ``v`` once more; here it is one node
that writes ``z`` and ``v`` in place and computes the gradients of every input in one pass.
Values and gradients are those of the op-by-op block (the tests compare them in float64), but
for ``tanh``, computed as ``2 sigmoid(2z) - 1`` (within a few units of rounding of
``torch.tanh``, and five times faster on a CPU).

It covers the built-in ``add`` and ``mul`` and the built-in non-affine activations whose
derivative is a function of their output (``sigmoid``, ``tanh``, ``relu``), without candidate
normalisation; :func:`fusable` says whether a layout is covered.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["fusable", "fused_block"]


def _tanh_into(z: Tensor, out: Tensor) -> None:
    torch.mul(z, 2.0, out=out).sigmoid_().mul_(2.0).sub_(1.0)  # tanh z = 2 sigmoid(2z) - 1


# activation -> (write u(z) into out, gradient of u from the output: (grad, u(z)) -> grad z)
_ACTIVATIONS: dict[Callable, tuple[Callable[[Tensor, Tensor], None], Callable[[Tensor, Tensor], Tensor]]] = {
    torch.sigmoid: (lambda z, out: torch.sigmoid(z, out=out), torch.ops.aten.sigmoid_backward),
    torch.tanh: (_tanh_into, torch.ops.aten.tanh_backward),
    torch.relu: (lambda z, out: torch.clamp(z, min=0.0, out=out),
                 lambda g, y: torch.ops.aten.threshold_backward(g, y, 0.0)),
}


def fusable(ops: tuple[Callable, ...], additive: tuple[bool, ...], nonlinear: tuple[Callable, ...],
            norm: str) -> bool:
    """Whether the block of a layout (its torch ops, which of them are the built-in ``add``,
    its non-affine activations) and candidate normalisation ``norm`` runs fused."""
    return (norm == "none" and all(add or o is torch.mul for o, add in zip(ops, additive))
            and all(u in _ACTIVATIONS for u in nonlinear))


def _affine_first_layer(u: int, t: Tensor | None, GL: Tensor | None, base: Tensor | None,
                        offset: Tensor, scale: Tensor) -> Tensor:
    """``a_u W1 z + offset_u`` ``(B, n_r, P, H)``: from ``t = W1 z`` or, for ``o = add``, from
    ``W1 z = GL + base`` (``base = W1 R_r c_j + W1 b_r``, which broadcasts over ``P``)."""
    if t is not None:
        return torch.addcmul(offset[u], t, scale[u])
    return torch.addcmul(torch.addcmul(offset[u], base, scale[u]), GL, scale[u])


class _FusedBlock(torch.autograd.Function):
    """``(Z, Vn, scores)`` of :func:`fused_block`, one autograd node."""

    @staticmethod
    def forward(ctx, Lc: Tensor, Rc: Tensor, bias: Tensor, GL: Tensor | None, GR: Tensor | None,
                W1_bias: Tensor, W1T: Tensor, b1: Tensor, w2: Tensor, offset: Tensor, scale: Tensor,
                layout: tuple[tuple[Callable, ...], tuple[bool, ...]]) -> tuple[Tensor, Tensor | None, Tensor]:
        nonlinear, additive = layout
        B, n_r, P, p = Lc.shape
        n_o, n_nl, n_a = len(additive), len(nonlinear), scale.shape[0]
        Z = Lc.new_empty(B, n_o, n_r, P, p)
        for o, add in enumerate(additive):
            if add:
                torch.add(Lc, Rc + bias, out=Z[:, o])
            else:
                torch.mul(Lc, Rc, out=Z[:, o]).add_(bias)
        scores, Vn, h1 = [], None, None
        if n_nl:
            Vn = Lc.new_empty(B, n_nl, n_o, n_r, P, p)
            for u, act in enumerate(nonlinear):
                _ACTIVATIONS[act][0](Z, Vn[:, u])
            h1 = torch.addmm(b1, Vn.view(-1, p), W1T).sigmoid_()
            scores.append((h1 @ w2).view(B, -1))
        ts: list[Tensor | None] = []
        base = None
        if n_a:
            per_op = []
            for o, add in enumerate(additive):
                if add:
                    base = GR + W1_bias
                t = None if add else torch.matmul(Z[:, o], W1T)
                ts.append(t)
                per_op.append(torch.stack([_affine_first_layer(u, t, GL, base, offset, scale).sigmoid_() @ w2
                                           for u in range(n_a)], 1))
            scores.append(torch.stack(per_op, 2).view(B, -1))
        ctx.layout = layout
        ctx.set_materialize_grads(False)  # no gradient of the scores (hard mode): no scoring backward
        ctx.save_for_backward(Lc, Rc, bias, GL, GR, W1_bias, base, W1T, w2, offset, scale, Z, Vn, h1, *ts)
        return Z, Vn, torch.cat(scores, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, dZ: Tensor | None, dVn: Tensor | None, dscores: Tensor | None) -> tuple[Tensor | None, ...]:
        Lc, Rc, bias, GL, GR, W1_bias, base, W1T, w2, offset, scale, Z, Vn, h1, *ts = ctx.saved_tensors
        nonlinear, additive = ctx.layout
        B, n_o, n_r, P, p = Z.shape
        n_nl, n_a, X = len(nonlinear), scale.shape[0], n_o * n_r * P
        dZ = torch.zeros_like(Z) if dZ is None else dZ.clone()
        grads = dict.fromkeys(("W1T", "b1", "w2", "offset", "GL", "GR", "W1_bias"))
        dV = dVn
        if n_nl and dscores is not None:  # alpha(v) = w2 . h1, h1 = sigmoid(W1 v + b1)
            g = dscores[:, :n_nl * X].reshape(-1)
            grads["w2"] = torch.mv(h1.T, g)
            dh1 = torch.ops.aten.sigmoid_backward(w2.expand_as(h1), h1).mul_(g[:, None])
            grads["b1"] = dh1.sum(0)
            grads["W1T"] = torch.mm(Vn.view(-1, p).T, dh1)
            dV = (torch.mm(dh1, W1T.T) if dVn is None else torch.addmm(dVn.reshape(-1, p), dh1, W1T.T)).view_as(Vn)
        if dV is not None:
            for u, act in enumerate(nonlinear):
                dZ.add_(_ACTIVATIONS[act][1](dV[:, u], Vn[:, u]))
        if n_a and dscores is not None:
            _affine_backward(ctx, dscores[:, n_nl * X:].reshape(B, n_a, n_o, n_r, P), dZ, grads,
                             (GL, GR, W1_bias, base, W1T, w2, offset, scale, Z, ts))
        dLc, dRc, dbias = _operations_backward(additive, dZ, Lc, Rc, bias)
        return (dLc, dRc, dbias, grads["GL"], grads["GR"], grads["W1_bias"], grads["W1T"], grads["b1"],
                grads["w2"], grads["offset"], None, None)


def _accumulate(grads: dict[str, Tensor | None], name: str, value: Tensor) -> None:
    grads[name] = value if grads[name] is None else grads[name].add_(value)


def _affine_backward(ctx, g: Tensor, dZ: Tensor, grads: dict[str, Tensor | None], saved: tuple) -> None:
    """Gradients of the affine activations' scores ``g (B, n_a, n_o, n_r, P)``: the first
    layer's sigmoids are recomputed one ``(B, n_r, P, H)`` slab at a time (not kept); ``W1 z``
    of ``o = add`` flows to ``GL``, ``GR`` and ``W1 b_r``, that of other ops to ``z`` and ``W1``."""
    GL, GR, W1_bias, base, W1T, w2, offset, scale, Z, ts = saved
    offsets = []
    for o, add in enumerate(ctx.layout[1]):
        t = ts[o] if ts else None
        dt = None
        for u in range(scale.shape[0]):
            s = _affine_first_layer(u, None if add else t, GL, base, offset, scale).sigmoid_()
            gu = g[:, u, o]
            _accumulate(grads, "w2", torch.mv(s.view(-1, s.shape[-1]).T, gu.reshape(-1)))
            ds = torch.ops.aten.sigmoid_backward(w2.expand_as(s), s).mul_(gu[..., None])
            offsets.append((u, ds.sum((0, 1, 2))))
            dt = ds.mul_(scale[u]) if dt is None else dt.addcmul_(ds, scale[u])
        if add:
            _accumulate(grads, "GL", dt)
            dbase = dt.sum_to_size(base.shape)
            grads["GR"] = dbase.sum_to_size(GR.shape).clone()
            grads["W1_bias"] = dbase.sum_to_size(W1_bias.shape).clone()
        else:
            _accumulate(grads, "W1T", torch.mm(Z[:, o].reshape(-1, Z.shape[-1]).T, dt.view(-1, dt.shape[-1])))
            dZ[:, o].add_(torch.matmul(dt, W1T.T))
    per_u = [sum(v for k, v in offsets if k == u) for u in range(scale.shape[0])]
    grads["offset"] = torch.stack(per_u).view_as(offset)


def _operations_backward(additive: tuple[bool, ...], dZ: Tensor, Lc: Tensor, Rc: Tensor, bias: Tensor
                         ) -> tuple[Tensor, Tensor, Tensor]:
    """``(dLc, dRc, dbias)`` from ``dZ (B, n_o, n_r, P, p)``: ``z = Lc + Rc + b`` or
    ``z = Lc * Rc + b`` (``Rc`` may broadcast over ``P``)."""
    dLc = dRc = dbias = None
    for o, add in enumerate(additive):
        g = dZ[:, o]
        left, right = (g, g.sum_to_size(Rc.shape)) if add else (g * Rc, (g * Lc).sum_to_size(Rc.shape))
        dLc = left.clone() if dLc is None else dLc.add_(left)
        dRc = right.clone() if dRc is None else dRc.add_(right)
        db = g.sum_to_size(bias.shape)
        dbias = db.clone() if dbias is None else dbias.add_(db)
    return dLc, dRc, dbias


def fused_block(Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None, bias: Tensor, W1_bias: Tensor,
                W1T: Tensor, b1: Tensor, w2: Tensor, offset: Tensor, scale: Tensor,
                nonlinear: tuple[Callable, ...], additive: tuple[bool, ...]) -> tuple[Tensor, Tensor | None, Tensor]:
    """The candidates of one iteration and their scores, one autograd node.

    Args:
        Lc, Rc: ``(B, n_r, P, p)`` ``L_r c_i``, ``R_r c_j`` (``Rc`` may broadcast over ``P``).
        GL, GR: ``W1 L_r c_i``, ``W1 R_r c_j`` ``(B, n_r, P, H)`` (None without an ``add``
            among the operations or without an affine activation).
        bias, W1_bias: ``(n_r, 1, p)`` ``b_r``, ``(n_r, 1, H)`` ``W1 b_r``.
        W1T, b1, w2: the first layer ``(p, H)`` (transposed), ``(H,)`` and the output weights
            ``(H,)`` of the scoring network (sigmoid form, without ``b2``).
        offset, scale: ``(n_a, 1, 1, H)`` ``c W1 1 + b1`` and ``(n_a, 1, 1, 1)`` ``a`` of the
            affine activations ``u(z) = a z + c``.
        nonlinear: the torch functions of the non-affine activations (:func:`fusable`).
        additive: per operation, whether it is ``add`` (else ``mul``).

    Returns:
        ``Z (B, n_o, n_r, P, p)``, ``Vn (B, n_nl, n_o, n_r, P, p)`` (None without a non-affine
        activation) and the scores without ``b2`` ``(B, (n_nl + n_a) n_o n_r P)`` in the
        block's flat order (activation, operation, tuple, pair).
    """
    return _FusedBlock.apply(Lc, Rc, bias, GL, GR, W1_bias, W1T, b1, w2, offset, scale, (nonlinear, additive))
