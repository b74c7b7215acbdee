"""Target providers: the teacher GRU matches torch, the self provider matches the numpy backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from cellgraph.backends.numpy.plugin import evaluate
from cellgraph.backends.torch.training.td_targets import SelfTargetProvider, TeacherTargetProvider, evaluate_target
from cellgraph.cell.expr import Leaf, Role, c, h, x
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

P, B = 5, 3


def _tuples(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, P, P, generator=g, dtype=torch.float64),
            torch.randn(n, P, P, generator=g, dtype=torch.float64),
            torch.randn(n, P, generator=g, dtype=torch.float64))


def _leaves(*leaves: Leaf, seed: int = 1) -> dict[Leaf, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {leaf: torch.randn(B, P, generator=g, dtype=torch.float64) for leaf in leaves}


def _numpy_positions(provider: SelfTargetProvider, run: int, leaves, params) -> np.ndarray:
    tree = provider.trees[run]
    values = evaluate(tree.tree.expr, {k: v.numpy() for k, v in leaves.items()}, params)
    return np.stack([values[e] for e in tree.exprs], 1)


def _params(tuples, order) -> list:
    """numpy params indexed by the target layout: model tuple ``k`` or the identity."""
    eye = (np.eye(P), np.eye(P), np.zeros(P))
    return [eye if k is None else tuple(t[k].numpy() for t in tuples) for k in order]


def test_self_provider_on_gru_equals_the_numpy_backend():
    provider = SelfTargetProvider("gru")
    assert provider.tuple_map == {0: 0, 1: 1, 2: 2, 3: None}
    tuples, leaves = _tuples(3), _leaves(x, h)
    (out,) = provider([leaves], tuples)
    assert out.shape == (B, provider.trees[0].n_positions, P)
    np.testing.assert_allclose(out.numpy(), _numpy_positions(provider, 0, leaves, _params(tuples, [0, 1, 2, None])),
                               rtol=1e-12, atol=1e-12)


def test_self_provider_tuple_map_and_gradients():
    """A custom map (r -> 3, z -> 0, h~ -> 2) uses those tuples; only they get gradients."""
    provider = SelfTargetProvider(target("gru"), {0: 3, 1: 0, 2: 2, 3: None})
    tuples = tuple(t.requires_grad_() for t in _tuples(4))
    leaves = _leaves(x, h)
    (out,) = provider([leaves], tuples)
    expected = _numpy_positions(provider, 0, leaves, _params(tuple(t.detach() for t in tuples), [3, 0, 2, None]))
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    L_grad = tuples[0].grad.abs().sum((1, 2))
    assert L_grad[1] == 0 and (L_grad[[0, 2, 3]] > 0).all()


def test_self_provider_on_lstm_evaluates_each_run_on_its_own_leaves():
    provider = SelfTargetProvider("lstm")
    c_now = Leaf("c", Role.CURRENT)
    run1, run2 = _leaves(x, h, c, seed=2), _leaves(x, h, c, c_now, seed=3)
    tuples = _tuples(4)
    outs = provider([run1, run2], tuples)
    params = _params(tuples, [0, 1, 2, 3, None])
    for run, (out, leaves) in enumerate(zip(outs, (run1, run2))):
        np.testing.assert_allclose(out.numpy(), _numpy_positions(provider, run, leaves, params), rtol=1e-12)


def test_self_provider_errors():
    with pytest.raises(CellGraphError, match="misses target tuples"):
        SelfTargetProvider("gru", {0: 0, 1: 1, 3: None})
    provider = SelfTargetProvider("gru")
    with pytest.raises(CellGraphError, match="out of range"):
        provider([_leaves(x, h)], _tuples(2))
    with pytest.raises(CellGraphError, match="runs given"):
        provider([], _tuples(3))
    with pytest.raises(CellGraphError, match="has no value"):
        provider([_leaves(x)], _tuples(3))
    with pytest.raises(CellGraphError, match="only 1 given"):
        evaluate_target(provider.trees[0], _leaves(x, h), [None])


def _teacher_gru(seed: int = 0) -> nn.GRU:
    torch.manual_seed(seed)
    return nn.GRU(P, P).double()


def test_teacher_root_equals_the_torch_gru_output():
    gru = _teacher_gru()
    inputs = torch.randn(6, B, P, dtype=torch.float64)
    h0 = torch.randn(B, P, dtype=torch.float64)
    expected, _ = gru(inputs, h0[None])
    for teacher in (TeacherTargetProvider(gru),
                    TeacherTargetProvider([gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0])):
        steps = teacher(inputs, h0)
        assert len(steps) == 6 and all(len(s) == 1 for s in steps)
        roots = torch.stack([s[0][:, 0] for s in steps])
        torch.testing.assert_close(roots, expected.detach(), rtol=1e-12, atol=1e-12)
        assert not steps[0][0].requires_grad


def test_teacher_gate_vectors_are_torchs():
    """The reset is applied after the matrix, with b_hn inside: r * (W_hn h + b_hn)."""
    cell = nn.GRUCell(P, P).double()
    teacher = TeacherTargetProvider(cell)
    xs, hs = torch.randn(B, P, dtype=torch.float64), torch.randn(B, P, dtype=torch.float64)
    vectors, h_new = teacher.step(xs, hs)
    torch.testing.assert_close(h_new, cell(xs, hs).detach(), rtol=1e-12, atol=1e-12)
    gi = xs @ cell.weight_ih.T + cell.bias_ih
    gh = hs @ cell.weight_hh.T + cell.bias_hh
    r = torch.sigmoid(gi[:, :P] + gh[:, :P])
    n = torch.tanh(gi[:, 2 * P:] + r * gh[:, 2 * P:])
    exprs = teacher.trees[0].exprs
    by_act = {(e.act, e.tuple): q for q, e in enumerate(exprs)}
    torch.testing.assert_close(vectors[:, by_act[("sigmoid", 0)]], r.detach())
    torch.testing.assert_close(vectors[:, by_act[("tanh", 3)]], n.detach())
    buggy = torch.tanh(gi[:, 2 * P:] + (r * hs) @ cell.weight_hh[2 * P:].T + r * cell.bias_hh[2 * P:])
    assert not torch.allclose(vectors[:, by_act[("tanh", 3)]], buggy.detach())


@pytest.mark.parametrize("module", [nn.GRU, nn.GRUCell])
def test_teacher_without_biases(module):
    torch.manual_seed(1)
    gru = module(P, P, bias=False).double()
    xs, hs = torch.randn(B, P, dtype=torch.float64), torch.randn(B, P, dtype=torch.float64)
    expected = gru(xs[None], hs[None])[0][0] if module is nn.GRU else gru(xs, hs)
    torch.testing.assert_close(TeacherTargetProvider(gru).step(xs, hs)[1], expected.detach())


def test_teacher_rejects_unsupported_grus():
    with pytest.raises(CellGraphError, match="one-layer"):
        TeacherTargetProvider(nn.GRU(P, P, num_layers=2))
    with pytest.raises(CellGraphError, match="batch_first"):
        TeacherTargetProvider(nn.GRU(P, P, batch_first=True))
    with pytest.raises(CellGraphError, match="input size = hidden size"):
        TeacherTargetProvider(nn.GRU(P + 1, P))
    with pytest.raises(CellGraphError, match="hidden size"):
        TeacherTargetProvider(_teacher_gru())(torch.zeros(2, B, P + 1, dtype=torch.float64))
