"""RRNN, RRNN-GRU and baseline modules: shapes, exports, multi-state cells, training."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cellgraph.backends.torch.plugin import backend
from cellgraph.backends.torch.models.gated import GRUBaseline, LSTMBaseline
from cellgraph.backends.torch.models.freeze import freeze
from cellgraph.backends.torch.models.rrnn import RRNN, RRNNCell, structure
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU, RRNNGRUCell
from cellgraph.cell.expr import Leaf, Role
from cellgraph.cell.graph import MultiCell
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

P = 6


def _data(T=4, B=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, B, P, generator=g), torch.randn(T, B, P, generator=g)


def _train(model: nn.Module, steps: int = 30, lr: float = 0.02, recurrent: bool = True
           ) -> tuple[list[float], dict[str, torch.Tensor]]:
    """MSE of a linear readout of the outputs to a random target on one fixed batch, in
    float64 (the straight-through trajectory amplifies rounding, so in float32 the outcome
    changed with the thread count). ``recurrent=False`` trains the readout alone. Returns the
    losses and the model's gradients of the first step."""
    torch.manual_seed(0)
    inputs, targets = (t.double() for t in _data())
    model, readout = model.double(), nn.Linear(P, P).double()
    trained = (list(model.parameters()) if recurrent else []) + list(readout.parameters())
    opt = torch.optim.Adam(trained, lr=lr)
    losses, first = [], {}
    for _ in range(steps):
        output = model(inputs)[0]
        loss = (readout(output) - targets).pow(2).mean()
        opt.zero_grad()
        for param in model.parameters():
            param.grad = None
        loss.backward()
        first = first or {name: param.grad for name, param in model.named_parameters()}
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    return losses, first


@pytest.mark.parametrize("make, steps", [
    (lambda: RRNN(P, n_iterations=3, scoring_hidden=8, mode="soft"), 30),
    # straight-through gives the argmax cell its whole gradient: from a random start the cells
    # are sums whose values grow along the sequence, so the candidates are normalised, and the
    # structural term with exclusion by slot (the discovery recipe's search) lets the cell move
    (lambda: RRNN(P, n_iterations=3, scoring_hidden=8, mode="straight-through", candidate_norm="sample",
                  structure_term=True, exclusion="slot"), 60),
    (lambda: RRNNGRU(P, scoring_hidden=8, mode="soft"), 30),
    (lambda: GRUBaseline(P), 30),
    (lambda: LSTMBaseline(P), 30),
], ids=["rrnn-soft", "rrnn-st", "rrnn-gru", "gru", "lstm"])
def test_training_reaches_every_parameter_and_beats_the_readout_alone(make, steps):
    """Every parameter gets a gradient, and training the model beats training its readout
    alone on the same data for as many steps (so the recurrent part learns, not just the readout)."""
    torch.manual_seed(1)
    losses, grads = _train(make(), steps)
    missing = [name for name, grad in grads.items() if grad is None or not grad.abs().sum() > 0]
    assert not missing, f"no gradient reaches {missing}"
    torch.manual_seed(1)
    readout_only, _ = _train(make(), steps, recurrent=False)
    assert losses[-1] < 0.8 * losses[0]
    assert losses[-1] < 0.8 * readout_only[-1], (losses[-1], readout_only[-1])


def test_rrnn_shapes_traces_and_batch_first():
    torch.manual_seed(0)
    model = RRNN(P, n_iterations=4, scoring_hidden=8, mode="hard")
    inputs, _ = _data()
    output, state, traces = model(inputs)
    assert output.shape == (4, 5, P) and state.shape == (5, P)
    assert len(traces) == 4 and traces[2][0].vectors.shape == (5, 3 + 4, P)
    torch.testing.assert_close(output[-1], state)
    torch.testing.assert_close(output[1], traces[1][0].vectors[:, -1])
    model.batch_first = True
    out_bf, _, _ = model(inputs.transpose(0, 1))
    torch.testing.assert_close(out_bf, output.transpose(0, 1))
    model.return_traces = False
    assert model(inputs.transpose(0, 1))[2] is None


def _layout_params(cell):
    L, R, b = (t.detach() for t in cell.layout_tuples())
    return [(L[r], R[r], b[r]) for r in range(len(cell.layout))]


def test_hard_rrnn_step_equals_its_exported_cell_frozen():
    torch.manual_seed(2)
    cell = RRNNCell(P, n_iterations=5, scoring_hidden=8, mode="hard")
    x, hs = torch.randn(3, P), torch.randn(3, P)
    with torch.no_grad():
        h_new, traces = cell(x, hs)
        for b in range(3):
            frozen = freeze(structure(traces, b), _layout_params(cell), cell.layout)
            torch.testing.assert_close(frozen(x[b:b + 1], hs[b:b + 1])[0], h_new[b])


def test_two_run_lstm_style_cell_runs_and_exports_both_graphs():
    torch.manual_seed(3)
    model = RRNN(P, n_iterations=3, scoring_hidden=8, states=("c", "h"), mode="hard")
    space_c, space_h = model.cell.spaces
    assert Leaf("c", Role.CURRENT) in space_h.prev and Leaf("c", Role.CURRENT) not in space_c.prev
    inputs, _ = _data(T=3, B=2)
    with torch.no_grad():
        output, (c_T, h_T), traces = model(inputs)
    torch.testing.assert_close(output[-1], h_T)
    assert [tr.state for tr in traces[-1]] == ["c", "h"]
    cell = model.graph(traces, 2, 1)
    assert isinstance(cell, MultiCell) and cell.states == ("c", "h")
    # the exported two-state cell, frozen with the model's tuples, redoes the last step
    frozen = freeze(cell, _layout_params(model.cell), model.cell.layout)
    with torch.no_grad():
        _, (c_prev, h_prev), _ = model(inputs[:2])
        c_new, h_new = frozen(inputs[2, 1:2], (c_prev[1:2], h_prev[1:2]))
    torch.testing.assert_close(c_new[0], c_T[1])
    torch.testing.assert_close(h_new[0], h_T[1])


def test_explicit_spaces_need_a_layout_and_matching_states():
    lstm = target("lstm")
    with pytest.raises(CellGraphError, match="explicit spaces need their layout"):
        RRNNCell(P, spaces=lstm.spaces, states=("c", "h"))
    with pytest.raises(CellGraphError, match="2 search spaces for the states"):
        RRNNCell(P, spaces=lstm.spaces, layout=lstm.layout)
    cell = RRNNCell(P, spaces=lstm.spaces, layout=lstm.layout, states=("c", "h"), scoring_hidden=4)
    assert cell.weight_L.shape == (4, P, P)  # the four gates; the identity tuple is a buffer


def test_rrnn_gru_tree_is_the_gru_and_choices_are_recorded():
    torch.manual_seed(4)
    model = RRNNGRU(P, n_tuples=3, scoring_hidden=8, mode="hard")
    inputs, _ = _data(T=3, B=4)
    output, state, traces = model(inputs)
    trace = traces[1][0]
    gru = target("gru").graph
    for b in range(4):
        graph = trace.graph(b)
        shape = lambda e: (e.op, e.act, [shape(c) for c in e.children]) if not e.is_leaf else e.name  # noqa: E731
        assert shape(graph.root) == shape(gru.root)
    choices = model.cell.choices(trace)  # flexible placement: 6 nodes choose among 3 tuples + identity
    assert choices.shape == (4, 6) and choices.min() >= 0 and choices.max() <= 3
    fixed = [k for k in range(8) if k not in model.cell.choosing_nodes]  # r and z: tuples 0 and 1
    assert sorted(trace.tuple_pos[0, fixed].tolist()) == [0, 1]
    assert torch.isneginf(trace.second_score[:, fixed]).all()
    tuple_ids = {id(p) for p in model.tuple_parameters()}
    scoring_ids = {id(p) for p in model.scoring_parameters()}
    assert not tuple_ids & scoring_ids
    assert tuple_ids | scoring_ids == {id(p) for p in model.parameters()}


def test_baselines_follow_torch_and_the_state_order():
    torch.manual_seed(5)
    inputs, _ = _data(T=3, B=2)
    lstm = LSTMBaseline(P)
    c0, h0 = torch.randn(2, P), torch.randn(2, P)
    output, (c_T, h_T), traces = lstm(inputs, (c0, h0))
    ref, (h_ref, c_ref) = lstm.rnn(inputs, (h0[None], c0[None]))
    assert traces is None
    torch.testing.assert_close(output, ref)
    torch.testing.assert_close((c_T, h_T), (c_ref[0], h_ref[0]))
    gru = GRUBaseline(P)
    output, h_T, _ = gru(inputs)
    torch.testing.assert_close(output[-1], h_T)


def test_backend_object_exposes_the_modules():
    assert backend.name == "torch"
    for name in ("RRNNCell", "RRNN", "RRNNGRUCell", "RRNNGRU", "GRUBaseline", "LSTMBaseline",
                 "FrozenCell", "freeze"):
        assert hasattr(backend, name)
    assert backend.RRNNGRUCell is RRNNGRUCell
