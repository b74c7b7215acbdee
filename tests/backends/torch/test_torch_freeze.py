"""Frozen cells against torch's own GRU/LSTM cells, the numpy reference and their contract."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, strategies as st
from torch import nn
from torch.overrides import TorchFunctionMode

import cellgraph
from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.models.freeze import FrozenCell, FrozenRNN, freeze
from cellgraph.backends.torch.training.task import _core
from cellgraph.cell.expr import Leaf, Node, h, x, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.cell.registry import Activation, register_activation
from cellgraph.errors import CellGraphError
from cellgraph.experiment.cellspec import resolve_cell
from cellgraph.experiment.config import resolve_config
from cellgraph.targets import target, torch_tuples
from strategies import DETERMINISTIC, exprs

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
        if func in (torch.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.matmul,
                    torch.addmm, nn.functional.linear):
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


def test_fixed_matrices_stay_the_identity_and_zero_and_do_not_train():
    """gru_torch's n reads r * hn through a matrix named I: fixed_matrices keeps it the
    identity (torch.nn.GRUCell's values whatever its parameter entries hold, which stay zero
    under Adam with an L2 term); without it the matrix is drawn and trains."""
    torch.manual_seed(3)
    ref = nn.GRUCell(P, P).double()
    weights = [t.detach().numpy() for t in (ref.weight_ih, ref.weight_hh, ref.bias_ih, ref.bias_hh)]
    x_t, h_0 = _rand(4, P, seed=9), _rand(4, P, seed=10)
    fixed = freeze(target("gru_torch"), torch_tuples("gru_torch", *weights), dtype=torch.float64,
                   fixed_matrices=True)
    assert not fixed.weight_R[3].any()
    with torch.no_grad():
        fixed.weight_R[3] += 1.0  # entries that are never read
    torch.testing.assert_close(fixed(x_t, h_0), ref(x_t, h_0), rtol=0, atol=1e-10)
    with torch.no_grad():
        fixed.weight_R[3] = 0.0
    optimizer = torch.optim.Adam(fixed.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        (fixed(x_t, h_0).sum() + sum((w * w).sum() for w in fixed.parameters())).backward()
        assert not fixed.weight_R.grad[3].any() and fixed.weight_R.grad[1].any()
        optimizer.step()
    assert not fixed.weight_R[3].any() and fixed.weight_L[3].ne(torch.as_tensor(weights[0][2 * P:])).any()
    free = freeze(target("gru_torch"), hidden_size=P)
    free(x_t.float(), h_0.float()).sum().backward()
    assert free.weight_R[3].abs().sum() > 0 and free.weight_R.grad[3].abs().sum() > 0


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


@cellgraph.cell.registry.scoped()
def test_torch_forms_of_user_activations():
    name = "softsign_torch_test"
    register_activation(Activation(name, lambda v: v, {"numpy": lambda z: z / (1 + abs(z))}))
    with pytest.raises(CellGraphError, match=f"activation '{name}' has no torch form"):
        torch_ops.activation(name)
    register_activation(Activation(name, lambda v: v, {"numpy": lambda z: z / (1 + abs(z)),
                                                       "torch": nn.functional.softsign}), replace=True)
    cell = freeze(CellGraph(Node("add", name, 0, x, zero)), hidden_size=P)
    out = cell(torch.randn(2, P))
    assert out.abs().max() < 1


def test_registrations_in_a_scope_end_with_it():
    before = cellgraph.cell.registry.activation_names()
    test_torch_forms_of_user_activations()
    test_torch_forms_of_user_activations()  # twice in one process: the name is free again
    assert cellgraph.cell.registry.activation_names() == before
    with pytest.raises(CellGraphError, match="unknown activation 'softsign_torch_test'"):
        cellgraph.cell.registry.activation("softsign_torch_test")



def test_frozen_rnn_equals_torch_gru_and_lstm_over_a_sequence():
    """The sequence path (x projected for all steps before the loop) against torch.nn.GRU /
    LSTM with the same weights, float64, batch_first and a given initial state."""
    torch.manual_seed(2)
    inputs = _rand(3, 6, P, seed=6)  # (B, T, p)
    for rnn_type, cell_type in ((nn.GRU, nn.GRUCell), (nn.LSTM, nn.LSTMCell)):
        rnn = rnn_type(P, P, batch_first=True).double()
        cell = cell_type(P, P).double()
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).data.copy_(getattr(rnn, f"{name}_l0"))
        frozen = FrozenRNN(FrozenCell.from_torch(cell), batch_first=True)
        h0, c0 = _rand(3, P, seed=7), _rand(3, P, seed=8)
        if rnn_type is nn.GRU:
            want, h_n = rnn(inputs, h0[None])
            got, h_T, traces = frozen(inputs, h0)
            torch.testing.assert_close(h_T, h_n[0], rtol=0, atol=1e-10)
        else:
            want, (h_n, c_n) = rnn(inputs, (h0[None], c0[None]))
            got, (c_T, h_T), traces = frozen(inputs, (c0, h0))
            torch.testing.assert_close((c_T, h_T), (c_n[0], h_n[0]), rtol=0, atol=1e-10)
        assert traces is None
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


# two trainable tuples and the identity tuple, the constants zero and one, and a
# non-additive op: groups (equal children), biases not fused (mul), projections of constants
_SPACE = SearchSpace((0, 1, 2), ("sigmoid", "tanh", "identity", "one_minus"), ("add", "mul"),
                     (x,), (h,), (zero, Leaf("one", "const")), 7)
_LAYOUT = Layout((TupleSpec("a"), TupleSpec("b"), TupleSpec.identity_tuple()))


_A = Node("mul", "tanh", 0, h, x)  # with _B: a group of two (same children, op, act), bias not fused
_B = Node("mul", "tanh", 1, h, x)
_C = Node("add", "sigmoid", 0, _A, x)  # with _D: a group whose biases are fused into x's projection
_D = Node("add", "sigmoid", 1, _A, x)
#: every compiled form at once: groups, unfused and right-fused biases, identity nodes, c + 0
_GROUPED = Node("mul", "one_minus", 2, Node("add", "identity", 2, _C, Node("add", "tanh", 2, zero, _D)), _B)


def _params(seed: int) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(seed)
    params = [tuple(rng.normal(size=s) for s in ((P, P), (P, P), (P,))) for _ in range(2)]
    return params + [(np.eye(P), np.eye(P), np.zeros(P))]


@settings(DETERMINISTIC, max_examples=60)
@given(exprs(_SPACE, min_nodes=1), st.integers(0, 2**16))
@example(_GROUPED, 0)
def test_random_cells_agree_with_the_numpy_reference_node_by_node(root, seed):
    rng = np.random.default_rng(seed)
    leaves = {x: rng.normal(size=(3, P)), h: rng.normal(size=(3, P))}
    want = cellgraph.backend("numpy").evaluate(root, leaves, _params(seed))
    cell = freeze(CellGraph(root, "h"), _params(seed), _LAYOUT, dtype=torch.float64)
    with torch.no_grad():
        got = cell.node_values({leaf: torch.from_numpy(v) for leaf, v in leaves.items()})
    assert set(got) == set(want)
    for node, value in want.items():
        np.testing.assert_allclose(np.broadcast_to(got[node].numpy(), value.shape), value, rtol=0, atol=1e-10)


@settings(DETERMINISTIC, max_examples=25)
@given(exprs(_SPACE, min_nodes=1), st.integers(0, 2**16))
@example(_GROUPED, 0)
def test_frozen_rnn_equals_a_loop_of_cell_steps_values_and_gradients(root, seed):
    """The sequence module (weights gathered once, projections of x and of the constants made
    ahead) against the cell called step by step."""
    torch.manual_seed(seed)
    cell = freeze(CellGraph(root, "h"), _params(seed), _LAYOUT, dtype=torch.float64)
    inputs = _rand(4, 2, P, seed=seed).requires_grad_()
    results = []
    for run in (lambda: FrozenRNN(cell)(inputs)[0], lambda: torch.stack(_loop(cell, inputs))):
        cell.zero_grad()
        inputs.grad = None
        output = run()
        (output * _rand(*output.shape, seed=1)).sum().backward() if output.requires_grad else None
        results.append([output.detach()] + [t.grad for t in (inputs, *cell.parameters())])
    for a, b in zip(*results):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def _loop(cell: FrozenCell, inputs: torch.Tensor) -> list[torch.Tensor]:
    state, outputs = None, []
    for x_t in inputs:
        state = cell(x_t, state)
        outputs.append(state.expand(x_t.shape))
    return outputs


def test_gradcheck_of_the_frozen_sequence_module():
    """Gradients of inputs, initial state and the stacked tuples, through the fused biases,
    the groups and the projections made ahead (float64, finite differences)."""
    cell = FrozenCell.from_torch(nn.LSTMCell(3, 3).double())
    rnn = FrozenRNN(cell)
    names = [n for n, _ in cell.named_parameters()]

    def run(inputs, c0, h0, *params):
        output, (c_T, _), _ = torch.func.functional_call(rnn, {f"cell.{n}": t for n, t in zip(names, params)},
                                                         (inputs, (c0, h0)))
        return output, c_T

    args = [_rand(3, 2, 3, seed=9), _rand(2, 3, seed=10), _rand(2, 3, seed=11)]
    args += [t.detach().clone() for t in cell.parameters()]
    assert torch.autograd.gradcheck(run, [a.requires_grad_() for a in args])


def _train_pass(rnn: FrozenRNN, inputs: torch.Tensor, state=None) -> list[torch.Tensor | None]:
    """Output, final state(s) and the gradients of inputs, initial state(s) and parameters of
    one pass with gradients on (the loss: the outputs and final states weighted at random)."""
    rnn.zero_grad(set_to_none=True)
    inputs = inputs.detach().requires_grad_()
    leaves = () if state is None else tuple(s.detach().requires_grad_() for s in
                                            (state if isinstance(state, tuple) else (state,)))
    output, final, _ = rnn(inputs, leaves if len(leaves) > 1 else leaves[0] if leaves else None)
    finals = final if isinstance(final, tuple) else (final,)
    loss = sum((t * _rand(*t.shape, seed=k)).sum() for k, t in enumerate((output, *finals)))
    loss.backward()
    return [output.detach(), *(t.detach() for t in finals), inputs.grad,
            *(s.grad for s in leaves), *(p.grad for p in rnn.parameters())]


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_compiled_frozen_rnn_compiles_its_training_passes_only(monkeypatch, mode):
    """``compile``: the sequence with gradients on goes through ``torch.compile`` (in its
    mode), once per call; without gradients the module runs eagerly."""
    calls = []

    def compile(fn, **kwargs):
        assert kwargs["mode"] == mode and kwargs["dynamic"] is False

        def traced(*args):
            calls.append(torch.is_grad_enabled())
            return fn(*args)
        return traced

    monkeypatch.setattr(torch, "compile", compile)
    rnn = FrozenRNN(freeze(target("gru"), hidden_size=P, dtype=torch.float64), compile=True, compile_mode=mode)
    eager = FrozenRNN(rnn.cell)
    inputs = _rand(3, 2, P, seed=3)
    with torch.no_grad():
        rnn(inputs)
    assert calls == []
    for a, b in zip(_train_pass(rnn, inputs), _train_pass(eager, inputs)):
        assert torch.equal(a, b)
    assert calls == [True]


def test_the_config_key_reaches_the_frozen_cell():
    for compile in (False, True):
        config = resolve_config(overrides={"model": "cell", "cell": "gru", "compile": str(compile).lower(),
                                           "compile_mode": "reduce-overhead"})
        core = _core(config, ("h",), resolve_cell(config.cell))
        assert isinstance(core, FrozenRNN) and (core.compiled is not None) is compile
        if compile:
            assert core.compiled.mode == "reduce-overhead" and core.compiled.fn == core._run


@pytest.mark.slow
@pytest.mark.parametrize("cell, state", [
    ("grouped", None),  # every compiled form: groups, unfused and right-fused biases, identity nodes, c + 0
    ("lstm_torch", (_rand(2, P, seed=6), _rand(2, P, seed=7))),  # two states, given
])
def test_compiled_and_eager_frozen_rnns_agree(cell, state):
    """Real compilation (tens of seconds on a 2-core machine): the same outputs, final states
    and gradients as the eager module, in float64 (to its rounding)."""
    frozen = (freeze(CellGraph(_GROUPED, "h"), _params(0), _LAYOUT, dtype=torch.float64) if cell == "grouped"
              else freeze(target(cell), hidden_size=P, dtype=torch.float64))
    inputs = _rand(4, 2, P, seed=5)
    eager = _train_pass(FrozenRNN(frozen), inputs, state)
    compiled_rnn = FrozenRNN(frozen, compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would make this test vacuous
        compiled = _train_pass(compiled_rnn, inputs, state)
    assert not compiled_rnn.compiled.fell_back
    assert len(compiled) == len(eager)
    for a, b in zip(eager, compiled):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
