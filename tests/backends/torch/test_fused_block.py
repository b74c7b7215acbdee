"""The fused candidate block (one autograd node, its backward written out) against the op-by-op
block it replaces: the same values and gradients in float64, for every layout it covers, with
and without the per-sample candidate normalisation, and the same search results; layouts it
does not cover run op by op."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from cellgraph.backends.torch.algorithm2 import scoring
from cellgraph.backends.torch.algorithm2.search import prepare, search
from cellgraph.cell import registry
from cellgraph.cell.expr import h, x, zero
from cellgraph.cell.layout import SearchSpace
from cellgraph.targets import GRU_U, OPS

LAYOUTS = [
    (GRU_U, OPS),
    (("sigmoid", "tanh", "relu"), OPS),
    (("identity", "one_minus"), OPS),
    (GRU_U, ("add",)),
    (GRU_U, ("mul",)),
    (("tanh",), ("mul",)),
]


def _params(activations, ops, p=5, H=7, seed=0, norm="none"):
    space = SearchSpace((0, 1, 2), activations, ops, (x,), (h,), (zero,), 3)
    g = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)  # noqa: E731
    weights = [draw(3, p, p), draw(3, p, p), draw(3, p), draw(H, p), draw(H), draw(H), draw(())]
    return prepare(space, *weights, norm=norm), weights


def _inputs(params, P, broadcast, B=3, seed=1):
    """``Lc, Rc, GL, GR`` of ``P`` pairs (``Rc``, ``GR`` one node's when ``broadcast``)."""
    g = torch.Generator().manual_seed(seed)
    n_r, p, H = params.bias.shape[0], params.bias.shape[-1], params.W1T.shape[1]
    right = 1 if broadcast else P
    draw = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)  # noqa: E731
    return draw(B, n_r, P, p), draw(B, n_r, right, p), draw(B, n_r, P, H), draw(B, n_r, right, H)


def _outputs_and_grads(block, params, weights, inputs, seed=2):
    """The block's ``(Z, Vn, scores)`` and the gradients of the weights and inputs of a
    random linear function of all three."""
    GL, GR = inputs[2:] if params.shortcut else (None, None)
    outputs = [o for o in block(params, inputs[0], inputs[1], GL, GR) if o is not None]
    g = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() for o in outputs)
    leaves = weights + list(inputs[:2]) + ([GL, GR] if GL is not None else [])
    grads = torch.autograd.grad(loss, leaves, allow_unused=True, retain_graph=True)
    return [o.detach() for o in outputs], grads


def _op_by_op(params, Lc, Rc, GL, GR):
    Z, Vn, scores = scoring.block_scores(params, Lc, Rc, GL, GR)
    return Z, Vn, scores + params.b2


@pytest.mark.parametrize("norm", ["none", "sample"])
@pytest.mark.parametrize("activations, ops", LAYOUTS)
@pytest.mark.parametrize("P, broadcast", [(4, True), (3, False), (1, True)])
def test_fused_block_equals_the_op_by_op_block(activations, ops, P, broadcast, norm):
    params, weights = _params(activations, ops, norm=norm)
    assert params.fused
    inputs = _inputs(params, P, broadcast)
    fused, fused_grads = _outputs_and_grads(scoring.score_block, params, weights, inputs)
    plain, plain_grads = _outputs_and_grads(_op_by_op, params, weights, inputs)
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused_grads, plain_grads):
        if b is None:  # b2 of an all-affine layout has no nonlinear path; both agree on None
            assert a is None or not a.any()
            continue
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block", [scoring.score_block, _op_by_op], ids=["fused", "op by op"])
@pytest.mark.parametrize("norm", ["none", "sample"])
@pytest.mark.parametrize("activations, ops", LAYOUTS)
def test_an_unscored_block_is_the_block_of_a_zero_output_layer(activations, ops, norm, block):
    """``scored=False`` (alpha's output weights zero and frozen) skips the scoring network: the
    same candidates, the scores ``b_2``, and the same gradients of the candidates' inputs."""
    params, weights = _params(activations, ops, norm=norm)
    with torch.no_grad():
        weights[5].zero_()  # w_2
    params = prepare(params.space, *weights, norm=norm)
    unscored = dataclasses.replace(params, scored=False)
    inputs = _inputs(params, 3, True)
    (want, want_grads), (got, got_grads) = (_outputs_and_grads(block, w, weights, inputs) for w in (params, unscored))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert torch.equal(got[-1], torch.full_like(got[-1], weights[6].item()))  # b_2
    for k in (0, 1, 2, 7, 8):  # L, R, b; Lc, Rc
        torch.testing.assert_close(got_grads[k], want_grads[k], rtol=1e-10, atol=1e-12)
    assert got_grads[3] is None and got_grads[4] is None  # W_1, b_1: not run


@pytest.mark.parametrize("path", ["fused", "op by op"])
@pytest.mark.parametrize("norm", ["none", "sample"])
@pytest.mark.parametrize("activations", [GRU_U, ("sigmoid", "identity", "one_minus")])
def test_block_gradcheck(activations, norm, path):
    """Each path against finite differences, not only against the other: the two share
    :func:`affine_scores_backward`. The second layout puts ``a = -1`` on the second affine
    activation, the first on the first."""
    params, _ = _params(activations, OPS, p=3, H=4, norm=norm)
    Lc, Rc, GL, GR = _inputs(params, 2, True, B=2)
    names = ("bias", "W1_bias", "W1T", "b1", "w2", "offset", "W1_sum")
    consts = [getattr(params, name).detach().requires_grad_() for name in names]

    def block(Lc, Rc, GL, GR, *values):
        if path == "fused":
            return scoring.fused_block(Lc, Rc, GL, GR, *values[:6], params.scale, values[6],
                                             params.plan.nonlinear, params.plan.additive, norm)
        return scoring.block_scores(dataclasses.replace(params, **dict(zip(names, values))), Lc, Rc, GL, GR)

    assert torch.autograd.gradcheck(block, (Lc, Rc, GL, GR, *consts))


def test_layouts_the_fused_block_does_not_cover_run_op_by_op():
    assert _params(GRU_U, OPS)[0].fused
    assert _params(GRU_U, OPS, norm="sample")[0].fused
    assert not _params(GRU_U, OPS, norm="batch")[0].fused
    with registry.scoped():  # a user's own torch form of a built-in name is not the built-in
        entry = registry.activation("sigmoid")
        registry.register_activation(dataclasses.replace(entry, numeric={**entry.numeric, "torch": lambda z: 1 / (1 + (-z).exp())}),
                                     replace=True)
        assert not _params(GRU_U, OPS)[0].fused


@pytest.mark.parametrize("norm", ["none", "sample"])
@pytest.mark.parametrize("mode", ["hard", "soft", "straight-through"])
def test_search_fused_and_op_by_op_agree(mode, norm, monkeypatch):
    """Whole searches (float64): the same trees, the same vectors, the same gradients."""
    rng = np.random.default_rng(0)
    space = SearchSpace((0, 1, 2), GRU_U, OPS, (x,), (h,), (zero,), 5)
    p, H = 4, 6

    def run():
        weights = [torch.tensor(rng_copy.normal(size=s), requires_grad=True)
                   for s in ((3, p, p), (3, p, p), (3, p), (H, p), (H,), (H,), ())]
        leaves = torch.tensor(np.stack([rng_copy.normal(size=(3, p)), rng_copy.normal(size=(3, p)),
                                        np.zeros((3, p))], 1))
        trace = search(prepare(space, *weights, norm=norm), leaves, mode)
        trace.vectors.square().sum().backward()
        return trace, [w.grad for w in weights]

    state = rng.bit_generator.state
    results = []
    for fused in (True, False):
        rng_copy = np.random.default_rng()
        rng_copy.bit_generator.state = state
        if not fused:
            monkeypatch.setattr(scoring.SearchParams, "fused", property(lambda self: False))
        results.append(run())
    (a, grads_a), (b, grads_b) = results
    for name in ("left", "right", "tuple_pos", "op_pos", "act_pos"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    torch.testing.assert_close(a.vectors, b.vectors, rtol=1e-12, atol=1e-12)
    for ga, gb in zip(grads_a, grads_b):  # None (no path to the loss) reads as zero
        if ga is None and gb is None:
            continue
        torch.testing.assert_close(_dense(ga, gb), _dense(gb, ga), rtol=1e-9, atol=1e-12)


def _dense(grad, other):
    return torch.zeros_like(other) if grad is None else grad


def test_every_layout_of_the_paper_sets_is_fused():
    for n in range(1, len(GRU_U) + 1):
        for activations in itertools.combinations(GRU_U, n):
            assert _params(activations, OPS)[0].fused
