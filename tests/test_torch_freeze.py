"""Frozen cells against torch's own GRU/LSTM cells, the numpy reference and their contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import cellgraph
from cellgraph.backends import torch_ops
from cellgraph.backends.torch_freeze import FrozenCell, freeze
from cellgraph.errors import CellGraphError
from cellgraph.expr import Leaf, Node, h, x, zero
from cellgraph.graph import CellGraph
from cellgraph.registry import Activation, register_activation
from cellgraph.targets import target

P = 5


def _rand(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_gru_torch_equals_torch_grucell_over_a_sequence():
    torch.manual_seed(0)
    ref = nn.GRUCell(P, P).double()
    frozen = FrozenCell.from_torch(ref)
    hs_ref = hs = _rand(4, P, seed=1)
    for t, x_t in enumerate(_rand(6, 4, P, seed=2)):
        hs_ref, hs = ref(x_t, hs_ref), frozen(x_t, hs)
        torch.testing.assert_close(hs, hs_ref, rtol=0, atol=1e-10)


def test_lstm_torch_equals_torch_lstmcell_h_and_c():
    torch.manual_seed(1)
    ref = nn.LSTMCell(P, P).double()
    frozen = FrozenCell.from_torch(ref)
    assert frozen.states == ("c", "h")
    h_ref, c_ref = _rand(3, P, seed=3), _rand(3, P, seed=4)
    c, hs = c_ref, h_ref
    for x_t in _rand(5, 3, P, seed=5):
        h_ref, c_ref = ref(x_t, (h_ref, c_ref))
        c, hs = frozen(x_t, (c, hs))
        torch.testing.assert_close(hs, h_ref, rtol=0, atol=1e-10)
        torch.testing.assert_close(c, c_ref, rtol=0, atol=1e-10)


def test_paper_gru_agrees_with_numpy_reference():
    gru = target("gru")
    rng = np.random.default_rng(0)
    params = [tuple(rng.normal(size=s) for s in ((P, P), (P, P), (P,))) for _ in range(3)]
    params.append((np.eye(P), np.eye(P), np.zeros(P)))
    leaves = {x: rng.normal(size=(4, P)), h: rng.normal(size=(4, P))}
    want = cellgraph.backend("numpy").evaluate_cell(gru.cell, leaves, params)
    got = cellgraph.backend("torch").evaluate_cell(gru.cell, leaves, params)
    np.testing.assert_allclose(got["h"], want["h"], rtol=0, atol=1e-12)
    nodes = cellgraph.backend("torch").evaluate(gru.graph.root, leaves, params)
    assert set(nodes) == set(gru.graph.nodes())


class _CountMatmuls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.matmul):
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_one_matmul_per_child_read_through_trainable_edges():
    frozen = FrozenCell.from_torch(nn.GRUCell(P, P))
    with _CountMatmuls() as mode:
        frozen(torch.randn(2, P), torch.randn(2, P))
    # gru_torch reads x (W_ir, W_iz, W_in), h (W_hr, W_hz, W_hn), zero (hn's R) and r * hn
    # (n's R, a layout slot holding I) through non-identity tuples; identity edges are free
    assert mode.count == 4


def test_random_init_trains_only_non_identity_tuples():
    frozen = freeze(target("gru"), hidden_size=P)
    assert frozen.weight_L.shape == (3, P, P) and frozen.bias.shape == (3, P)
    out = frozen(torch.randn(2, P), torch.randn(2, P))
    out.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in frozen.parameters())
    assert frozen(torch.randn(2, P)).shape == (2, P)  # state None: zeros


def test_contract_errors_name_the_problem():
    gru = target("gru")
    bad = [(np.eye(P), np.eye(P), np.zeros(P))] * 3 + [(2 * np.eye(P), np.eye(P), np.zeros(P))]
    with pytest.raises(CellGraphError, match=r"tuple 3 \(id\) is an identity tuple"):
        freeze(gru, bad)
    with pytest.raises(CellGraphError, match="give params or hidden_size"):
        freeze(gru)
    with pytest.raises(CellGraphError, match="expected a torch.nn.GRUCell or LSTMCell"):
        FrozenCell.from_torch(nn.GRU(P, P))
    with pytest.raises(CellGraphError, match="expected 1 states"):
        freeze(gru, hidden_size=P)(torch.randn(2, P), (torch.randn(2, P),) * 2)
    cell = freeze(CellGraph(Node("add", "tanh", 0, x, Leaf("u", "data"))), hidden_size=P)
    with pytest.raises(CellGraphError, match="one data leaf, 'x'"):
        cell(torch.randn(2, P))


def test_torch_forms_of_user_activations():
    name = "softsign_torch_test"
    if name not in cellgraph.registry.activation_names():
        register_activation(Activation(name, lambda v: v, {"numpy": lambda z: z / (1 + abs(z))}))
    with pytest.raises(CellGraphError, match=f"activation '{name}' has no torch form"):
        torch_ops.activation(name)
    register_activation(Activation(name, lambda v: v, {"numpy": lambda z: z / (1 + abs(z)),
                                                       "torch": nn.functional.softsign}), replace=True)
    cell = freeze(CellGraph(Node("add", name, 0, x, zero)), hidden_size=P)
    out = cell(torch.randn(2, P))
    assert out.abs().max() < 1

