"""The candidate block of one search iteration as one autograd node, with its backward pass
written out (:mod:`cellgraph.backends.torch.algorithm2.search`; paper, Algorithm 2 and Sec. 3.2).

For the ``P`` pairs of an iteration, tuples ``r``, operations ``o`` and activations ``u`` the
block computes

    z = o(L_r c_i, R_r c_j) + b_r                           (B, n_o, n_r, P, p)
    v = u(z)              for the non-affine u               (B, n_nl, n_o, n_r, P, p)
    alpha(v) = w2 . sigmoid(W1 v + b1)                       (B, n_nl n_o n_r P)
    alpha(a z + c) = w2 . sigmoid(a W1 z + c W1 1 + b1)      (B, n_a n_o n_r P)

(the scoring network in the sigmoid form of :class:`~cellgraph.backends.torch.algorithm2.scoring.SearchParams`;
for ``o = add``, ``W1 z = W1 L_r c_i + W1 R_r c_j + W1 b_r`` is a sum of per-node projections).
Built from torch ops, that is some 25 autograd nodes an iteration, each with its own saved
tensors, gradient buffers and a stack that copies ``z`` and ``v`` once more; here it is one node
that writes ``z`` and ``v`` in place and computes the gradients of every input in one pass.
Values and gradients are those of the op-by-op block (the tests compare them in float64), but
for ``tanh``, computed as ``2 sigmoid(2z) - 1`` (within a few units of rounding of
``torch.tanh``, and five times faster on a CPU).

It covers the built-in ``add`` and ``mul`` and the built-in non-affine activations whose
derivative is a function of their output (``sigmoid``, ``tanh``, ``relu``), without candidate
normalisation or with the per-candidate one (``sample``: ``v`` and, for the affine
activations, ``z`` replaced by ``(v - mean) / sqrt(var + eps)`` over each candidate's
features, where ``W1 zn = (W1 z - mean W1 1) / sqrt(var + eps)`` keeps the per-node sum for
``o = add``); :func:`fusable` says whether a layout is covered.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from cellgraph.algorithm2 import NORM_EPS

__all__ = ["affine_scores_backward", "fusable", "fused_block", "unscored"]


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
    return (norm in ("none", "sample") and all(add or o is torch.mul for o, add in zip(ops, additive))
            and all(u in _ACTIVATIONS for u in nonlinear))


def unscored(Z: Tensor, n_activations: int) -> Tensor:
    """The scores ``(B, n_act n_o n_r P)`` of a block ``Z`` ``(B, n_o, n_r, P, p)`` whose scoring
    network is skipped: all zero, since ``alpha(v) = b_2`` (the discovery recipe's constant
    ``alpha``), which :func:`~cellgraph.backends.torch.algorithm2.scoring.score_block` adds."""
    return Z.new_zeros(Z.shape[0], n_activations * (Z[0].numel() // Z.shape[-1]))


def _layer_norm(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(xn, mean, rstd)`` over the last dimension (no affine part)."""
    return torch.native_layer_norm(x, (x.shape[-1],), None, None, NORM_EPS)


def _layer_norm_grad(grad: Tensor, x: Tensor, mean: Tensor, rstd: Tensor) -> Tensor:
    """The gradient of ``x`` from that of :func:`_layer_norm`'s output."""
    return torch.ops.aten.native_layer_norm_backward(grad, x, (x.shape[-1],), mean, rstd, None, None,
                                                     (True, False, False))[0]


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
                W1_sum: Tensor, layout: tuple[tuple[Callable, ...], tuple[bool, ...], bool, bool]
                ) -> tuple[Tensor, Tensor | None, Tensor]:
        nonlinear, additive, sample, scored = layout
        B, n_r, P, p = Lc.shape
        n_o, n_nl, n_a = len(additive), len(nonlinear), scale.shape[0]
        Z = Lc.new_empty(B, n_o, n_r, P, p)
        for o, add in enumerate(additive):
            if add:
                torch.add(Lc, Rc + bias, out=Z[:, o])
            else:
                torch.mul(Lc, Rc, out=Z[:, o]).add_(bias)
        scores, Vr, Vn, h1, v_stats = [], None, None, None, (None, None)
        if n_nl:
            Vr = Lc.new_empty(B, n_nl, n_o, n_r, P, p)
            for u, act in enumerate(nonlinear):
                _ACTIVATIONS[act][0](Z, Vr[:, u])
            Vn, *v_stats = _layer_norm(Vr) if sample else (Vr, None, None)
            if scored:
                h1 = torch.addmm(b1, Vn.view(-1, p), W1T).sigmoid_()
                scores.append((h1 @ w2).view(B, -1))
        ts: list[Tensor | None] = []
        base, Zn, z_stats = None, Z, (None, None)
        if n_a and sample:
            Zn, *z_stats = _layer_norm(Z)
        if n_a and scored:
            per_op = []
            for o, add in enumerate(additive):
                if add:
                    base = GR + W1_bias
                t = None
                if not add:
                    t = torch.matmul(Zn[:, o], W1T)
                elif sample:  # W1 zn = (W1 z - mean W1 1) rstd
                    t = (GL + base).sub_(z_stats[0][:, o] * W1_sum).mul_(z_stats[1][:, o])
                ts.append(t)
                per_op.append(torch.stack([_affine_first_layer(u, t, GL, base, offset, scale).sigmoid_() @ w2
                                           for u in range(n_a)], 1))
            scores.append(torch.stack(per_op, 2).view(B, -1))
        if not scored:
            scores.append(unscored(Z, n_nl + n_a))
        ctx.layout = layout
        ctx.set_materialize_grads(False)  # no gradient of the scores (hard mode): no scoring backward
        ctx.save_for_backward(Lc, Rc, bias, GL, GR, W1_bias, base, W1T, w2, offset, scale, W1_sum, Z, Zn,
                              *z_stats, Vr, Vn, *v_stats, h1, *ts)
        return Zn, Vn, torch.cat(scores, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, dZn: Tensor | None, dVn: Tensor | None, dscores: Tensor | None) -> tuple[Tensor | None, ...]:
        (Lc, Rc, bias, GL, GR, W1_bias, base, W1T, w2, offset, scale, W1_sum, Z, Zn, z_mean, z_rstd,
         Vr, Vn, v_mean, v_rstd, h1, *ts) = ctx.saved_tensors
        nonlinear, additive, sample, scored = ctx.layout
        if not scored:  # the scores are constant
            dscores = None
        B, n_o, n_r, P, p = Z.shape
        n_nl, n_a, X = len(nonlinear), scale.shape[0], n_o * n_r * P
        normed = sample and n_a > 0  # the block's Z is zn
        dZn = torch.zeros_like(Z) if dZn is None else dZn.clone()
        dZ = torch.zeros_like(Z) if normed else dZn  # the gradient of the raw z
        grads = dict.fromkeys(("W1T", "b1", "w2", "offset", "GL", "GR", "W1_bias", "W1_sum"))
        dV = dVn
        if n_nl and dscores is not None:  # alpha(v) = w2 . h1, h1 = sigmoid(W1 v + b1)
            g = dscores[:, :n_nl * X].reshape(-1)
            grads["w2"] = torch.mv(h1.T, g)
            dh1 = torch.ops.aten.sigmoid_backward(w2.expand_as(h1), h1).mul_(g[:, None])
            grads["b1"] = dh1.sum(0)
            grads["W1T"] = torch.mm(Vn.view(-1, p).T, dh1)
            dV = (torch.mm(dh1, W1T.T) if dVn is None else torch.addmm(dVn.reshape(-1, p), dh1, W1T.T)).view_as(Vn)
        if dV is not None:
            if sample:
                dV = _layer_norm_grad(dV, Vr, v_mean, v_rstd)
            for u, act in enumerate(nonlinear):
                dZ.add_(_ACTIVATIONS[act][1](dV[:, u], Vr[:, u]))
        if n_a and dscores is not None:
            _affine_backward(additive, dscores[:, n_nl * X:].reshape(B, n_a, n_o, n_r, P), dZn, dZ, grads,
                             (GL, GR, W1_bias, base, W1T, w2, offset, scale, W1_sum, Zn, z_mean, z_rstd, ts))
        if normed:
            dZ.add_(_layer_norm_grad(dZn, Z, z_mean, z_rstd))
        dLc, dRc, dbias = _operations_backward(additive, dZ, Lc, Rc, bias)
        return (dLc, dRc, dbias, grads["GL"], grads["GR"], grads["W1_bias"], grads["W1T"], grads["b1"],
                grads["w2"], grads["offset"], None, grads["W1_sum"], None)


def _accumulate(grads: dict[str, Tensor | None], name: str, value: Tensor) -> None:
    grads[name] = value if grads[name] is None else grads[name].add_(value)


def affine_scores_backward(first_layer: Callable[[int], Tensor], grad: Tensor, w2: Tensor, scale: Tensor
                           ) -> tuple[Tensor, list[Tensor], Tensor]:
    """The backward pass of ``scores[:, u] = w2 . sigmoid(first_layer(u))`` with
    ``first_layer(u) = a_u t + offset_u`` ``(B, n_r, P, H)`` (``scale`` the ``a``), from the
    scores' gradient ``grad (B, n_a, n_r, P)``. The sigmoids are recomputed one slab at a time,
    so that each is reused while it is in cache. Returns the gradients of ``t``, of each
    ``offset_u`` ``(H,)`` and of ``w2``."""
    dt = dw2 = None
    doffset = []
    for u in range(scale.shape[0]):
        s = first_layer(u).sigmoid_()
        g = grad[:, u]
        gw = torch.mm(g.reshape(1, -1), s.view(-1, s.shape[-1]))[0]  # not mv: see scoring.matvec
        dw2 = gw if dw2 is None else dw2.add_(gw)
        ds = torch.ops.aten.sigmoid_backward(w2.expand_as(s), s).mul_(g[..., None])
        doffset.append(ds.sum((0, 1, 2)))
        dt = ds.mul_(scale[u]) if dt is None else dt.addcmul_(ds, scale[u])
    return dt, doffset, dw2


def _affine_backward(additive: tuple[bool, ...], g: Tensor, dZn: Tensor, dZ: Tensor,
                     grads: dict[str, Tensor | None], saved: tuple) -> None:
    """Gradients of the affine activations' scores ``g (B, n_a, n_o, n_r, P)``
    (:func:`affine_scores_backward` per operation); ``W1 z`` of ``o = add`` flows to ``GL``,
    ``GR`` and ``W1 b_r`` (and, normalised, to the raw ``z`` ``dZ`` through its mean and rstd,
    and to ``W1 1``), that of other ops to ``zn`` ``dZn`` and ``W1``."""
    GL, GR, W1_bias, base, W1T, w2, offset, scale, W1_sum, Zn, z_mean, z_rstd, ts = saved
    doffset = None
    for o, add in enumerate(additive):
        t = ts[o] if ts else None
        dt, per_u, dw2 = affine_scores_backward(lambda u: _affine_first_layer(u, t, GL, base, offset, scale),
                                                g[:, :, o], w2, scale)
        _accumulate(grads, "w2", dw2)
        doffset = per_u if doffset is None else [a.add_(b) for a, b in zip(doffset, per_u)]
        if add and z_mean is not None:  # t = (W1 z - m W1 1) r, m and r the mean and rstd of z
            _normalised_sum_backward(dt, t, Zn[:, o], z_mean[:, o], z_rstd[:, o], W1_sum, dZ[:, o], grads)
            dt = dt.mul_(z_rstd[:, o])  # the gradient of W1 z
        if add:
            _accumulate(grads, "GL", dt)
            dbase = dt.sum_to_size(base.shape)
            grads["GR"] = dbase.sum_to_size(GR.shape).clone()
            grads["W1_bias"] = dbase.sum_to_size(W1_bias.shape).clone()
        else:
            _accumulate(grads, "W1T", torch.mm(Zn[:, o].reshape(-1, Zn.shape[-1]).T, dt.view(-1, dt.shape[-1])))
            dZn[:, o].add_(torch.matmul(dt, W1T.T))
    grads["offset"] = torch.stack(doffset).view_as(offset)


def _normalised_sum_backward(dt: Tensor, t: Tensor, zn: Tensor, mean: Tensor, rstd: Tensor, W1_sum: Tensor,
                             dz: Tensor, grads: dict[str, Tensor | None]) -> None:
    """For ``t = (W1 z - m W1 1) r`` with ``m``, ``r = 1 / sqrt(var + eps)`` the mean and rstd
    of ``z`` over its ``p`` features (``t``, ``dt`` ``(B, n_r, P, H)``; ``zn``, ``dz``
    ``(B, n_r, P, p)``): add the gradient of ``z`` through ``m`` and ``r`` to ``dz``, and that of
    ``W1 1``. ``dm = -r (dt . W1 1)``, ``dr = dt . t / r``; ``dz_i = dm / p - dr r^2 zn_i / p``."""
    p = zn.shape[-1]
    dm = -(dt @ W1_sum)[..., None] * rstd
    dr = (dt * t).sum(-1, keepdim=True) / rstd
    dz.add_(dm / p).sub_(zn * (dr * rstd.square() / p))
    _accumulate(grads, "W1_sum", -(dt * (mean * rstd)).sum((0, 1, 2)))


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
        db = (right if add else g).sum_to_size(bias.shape)  # o = add: from dRc, already summed over P
        dbias = db.clone() if dbias is None else dbias.add_(db)
    return dLc, dRc, dbias


def fused_block(Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None, bias: Tensor, W1_bias: Tensor,
                W1T: Tensor, b1: Tensor, w2: Tensor, offset: Tensor, scale: Tensor, W1_sum: Tensor,
                nonlinear: tuple[Callable, ...], additive: tuple[bool, ...], norm: str = "none",
                scored: bool = True) -> tuple[Tensor, Tensor | None, Tensor]:
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
        W1_sum: ``(H,)`` ``W1 1`` (read under the ``sample`` normalisation).
        nonlinear: the torch functions of the non-affine activations (:func:`fusable`).
        additive: per operation, whether it is ``add`` (else ``mul``).
        norm: the candidate normalisation, ``none`` or ``sample``.
        scored: False: the scoring network is not run (its output weights are zero:
            :attr:`~cellgraph.backends.torch.algorithm2.scoring.SearchParams.scored`); the scores are zero,
            and ``GL``, ``GR``, ``W1_bias``, ``W1T``, ``b1``, ``w2``, ``offset``, ``W1_sum`` are
            not read.

    Returns:
        ``Z (B, n_o, n_r, P, p)`` (``zn`` under ``sample`` with an affine activation),
        ``Vn (B, n_nl, n_o, n_r, P, p)`` (normalised under ``sample``; None without a
        non-affine activation) and the scores without ``b2`` ``(B, (n_nl + n_a) n_o n_r P)``
        in the block's flat order (activation, operation, tuple, pair).
    """
    return _FusedBlock.apply(Lc, Rc, bias, GL, GR, W1_bias, W1T, b1, w2, offset, scale, W1_sum,
                             (nonlinear, additive, norm == "sample", scored))
