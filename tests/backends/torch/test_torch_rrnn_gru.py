"""RRNN-GRU's batched step (stacked projections, x projected for the whole sequence, repeated
nodes computed once) against the equations of the paper computed literally, tuple by tuple
and node by node, for both placements of the weight tuples (in float64, on every device: the
CPU, and CUDA where a GPU is present), and a finite-difference gradient check."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES

from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.cell.expr import h, x, zero
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

P, N, T = 4, 3, 6


def _allowed(node, placement: str) -> list[int]:
    """The tuples a node of the paper's GRU tree may use, written from the definitions:
    flexible: r -> tuple 0, z -> tuple 1, every other node any of the N trainable tuples or
    the identity (index N); gates: r, z, h~ any trainable tuple, the rest the identity."""
    gru = target("gru")
    trainable = node.tuple not in gru.layout.identity_indices
    if placement == "flexible":
        return [node.tuple] if node.tuple in (0, 1) else list(range(N + 1))
    return list(range(N)) if trainable else [N]


def _tuples(cell):
    eye = torch.eye(P, dtype=cell.weight_L.dtype, device=cell.weight_L.device)
    if cell.identity_trainable:
        return list(zip(cell.weight_L, cell.weight_R, cell.bias))
    return list(zip(cell.weight_L, cell.weight_R, cell.bias)) + [(eye, eye, torch.zeros_like(eye[0]))]


def _literal_step(cell, x_t: torch.Tensor, h_prev: torch.Tensor, mode: str):
    """The GRU tree node by node; each choosing node scores ``u(o(L_k c_i, R_k c_j) + b_k)``
    for every allowed tuple ``k`` separately with the scoring module, then mixes or picks."""
    gru = target("gru")
    B = x_t.shape[0]
    tuples = _tuples(cell)
    values = {x: x_t, h: h_prev, zero: torch.zeros_like(x_t)}
    columns = []
    for node in gru.graph.internal_nodes():
        op, act = torch_ops.op(node.op), torch_ops.activation(node.act)
        a, b = values[node.left], values[node.right]
        allowed = _allowed(node, cell.placement)
        cands = [act(op(a @ tuples[k][0].T, b @ tuples[k][1].T) + tuples[k][2]) for k in allowed]
        if len(allowed) == 1:
            values[node] = cands[0]
            columns.append((torch.full((B,), allowed[0], device=a.device), a.new_zeros(B),
                            a.new_full((B,), -torch.inf)))
            continue
        scores = torch.stack([cell.scoring(c)[:, 0] for c in cands], 1)
        ranked = scores.detach().argsort(1, descending=True)
        hard = torch.stack([cands[k][s] for s, k in enumerate(ranked[:, 0].tolist())])
        tau = cell.tau if cell.tau_units == "score" else cell.tau * scores.detach().std(1, unbiased=False, keepdim=True)
        weights = torch.softmax(scores / tau, 1)
        soft = sum(weights[:, k, None] * cands[k] for k in range(len(allowed)))
        relaxed = sum(weights[:, k, None] * cands[k].detach() for k in range(len(allowed)))  # the scores' gradient only
        values[node] = {"hard": hard, "soft": soft, "straight-through": hard + (relaxed - relaxed.detach())}[mode]
        chosen = torch.tensor(allowed, device=a.device)[ranked[:, 0]]
        columns.append((chosen, scores.gather(1, ranked[:, :1])[:, 0], scores.gather(1, ranked[:, 1:2])[:, 0]))
    vectors = torch.stack([values[leaf] for leaf in (x, h, zero)]
                          + [values[n] for n in gru.graph.internal_nodes()], 1)
    return values[gru.graph.root], vectors, [torch.stack(c, 1) for c in zip(*columns)]


PLACEMENTS = [("flexible", False), ("flexible", True), ("gates", False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("placement, identity_trainable", PLACEMENTS)
@pytest.mark.parametrize("mode", ["soft", "hard", "straight-through"])
@pytest.mark.parametrize("recompute, B", [(False, 5), (True, 5), (False, 1)])
def test_step_equals_the_literal_equations_values_traces_and_gradients(placement, identity_trainable, mode,
                                                                       recompute, B, device):
    """Batch 1 too: every step's trace keeps its own choices."""
    torch.manual_seed(0)
    model = RRNNGRU(P, N, scoring_hidden=6, mode=mode, tau=0.7, recompute=recompute, placement=placement,
                    identity_trainable=identity_trainable).double()
    if identity_trainable:  # move the identity tuple away from (I, I, 0): it trains
        with torch.no_grad():
            model.cell.weight_L[-1].add_(0.1 * torch.randn(P, P, dtype=torch.float64))
    inputs = torch.randn(T, B, P, dtype=torch.float64)
    weights = torch.randn(T, B, P, dtype=torch.float64)
    model, inputs, weights = model.to(device), inputs.to(device), weights.to(device)
    output, h_T, traces = model(inputs)
    (output * weights).sum().add(sum(tr[0].best_score.sum() for tr in traces)).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    state, outputs, loss = inputs.new_zeros(B, P), [], 0
    for t in range(T):
        state, vectors, (tuple_pos, best, second) = _literal_step(model.cell, inputs[t], state, mode)
        trace = traces[t][0]
        torch.testing.assert_close(trace.vectors, vectors, rtol=0, atol=1e-12)
        assert torch.equal(trace.tuple_pos, tuple_pos)
        torch.testing.assert_close(trace.best_score, best, rtol=0, atol=1e-12)
        torch.testing.assert_close(trace.second_score, second, rtol=0, atol=1e-12)
        outputs.append(state)
        loss = loss + best.sum()
    torch.testing.assert_close(output, torch.stack(outputs), rtol=0, atol=1e-12)
    (torch.stack(outputs) * weights).sum().add(loss).backward()
    for a, b in zip(got, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    choices = torch.stack([tr[0].tuple_pos for tr in traces])
    assert (choices != choices[:1]).any()  # the steps chose differently: the check above had teeth


def test_without_traces_the_outputs_and_gradients_do_not_change():
    """Soft mode ranks no candidates when no trace is asked for; nothing else changes."""
    results = []
    for return_traces in (True, False):
        torch.manual_seed(1)
        model = RRNNGRU(P, N, scoring_hidden=6, return_traces=return_traces, batch_first=True)
        output, _, traces = model(torch.randn(5, T, P))
        output.square().sum().backward()
        assert (traces is None) is not return_traces
        results.append([output.detach()] + [p.grad for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_the_cell_alone_projects_x_itself():
    torch.manual_seed(3)
    model = RRNNGRU(P, N, scoring_hidden=6, mode="straight-through")
    inputs, h0 = torch.randn(2, 5, P), torch.randn(5, P)
    output, _, traces = model(inputs, h0)
    h1, (trace,) = model.cell(inputs[0], h0)
    h2, none = model.cell(inputs[1], h1, traces=False)
    torch.testing.assert_close(torch.stack([h1, h2]), output)
    torch.testing.assert_close(trace.vectors, traces[0][0].vectors)
    assert none == []


def _r_and_z(trace):
    """The vectors of the nodes r and z (positions of the gru tree's tuple-0 and tuple-1 nodes)."""
    gru = target("gru")
    pos = {node.tuple: 3 + k for k, node in enumerate(gru.graph.internal_nodes()) if node.tuple in (0, 1)}
    return trace.vectors[:, pos[0]], trace.vectors[:, pos[1]]


def test_flexible_r_and_z_differ_gates_ties_them():
    """The paper's model has r != z on random weights; the gates-only reading makes them equal
    (same candidates, same scores)."""
    for placement in ("flexible", "gates"):
        torch.manual_seed(4)
        model = RRNNGRU(P, N, scoring_hidden=6, mode="hard", placement=placement)
        _, _, traces = model(torch.randn(T, 5, P))
        r, z = _r_and_z(traces[-1][0])
        assert torch.equal(r, z) is (placement == "gates")


def test_flexible_nodes_choose_the_identity_tuple_too():
    """Across a batch every choosing node of the flexible placement picks the identity tuple
    somewhere: it is a candidate (a fixed-identity model would never show index N)."""
    torch.manual_seed(5)
    model = RRNNGRU(P, N, scoring_hidden=6, mode="hard")
    _, _, traces = model(torch.randn(T, 64, P))
    chosen = torch.stack([model.cell.choices(tr[0]) for tr in traces])
    assert model.cell.choosing_nodes and (chosen == N).any() and (chosen < N).any()


def test_bad_placements_are_errors():
    with pytest.raises(CellGraphError, match="unknown RRNN-GRU placement"):
        RRNNGRU(P, N, placement="everywhere")
    with pytest.raises(CellGraphError, match="n_tuples must be at least 2"):
        RRNNGRU(P, 1)
    with pytest.raises(CellGraphError, match="identity_trainable needs placement 'flexible'"):
        RRNNGRU(P, N, placement="gates", identity_trainable=True)


@pytest.mark.parametrize("placement", ["flexible", "gates"])
def test_gradcheck_soft_mode(placement):
    torch.manual_seed(2)
    model = RRNNGRU(3, 2, scoring_hidden=3, mode="soft", placement=placement).double()
    names = [n for n, _ in model.named_parameters()]

    def run(inputs, h0, *params):
        output, _, traces = torch.func.functional_call(model, dict(zip(names, params)), (inputs, h0))
        return output, traces[-1][0].best_score

    args = [torch.randn(2, 2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)]
    args += [p.detach().clone() for p in model.parameters()]
    assert torch.autograd.gradcheck(run, [a.requires_grad_() for a in args])



@pytest.mark.parametrize("tau_units", ["score", "std"])
def test_tau_in_std_units_is_the_literal_softmax_and_ignores_the_scale_of_the_scores(tau_units):
    """``tau_units='std'``: each choosing node mixes by ``softmax(alpha / (tau sigma))``,
    ``sigma`` the population std of its scores (the literal step), so scaling the scoring
    network's output layer changes nothing; in ``score`` units it changes the mixture."""
    torch.manual_seed(6)
    model = RRNNGRU(P, N, scoring_hidden=6, mode="soft", tau=0.5, tau_units=tau_units).double()
    inputs = torch.randn(T, 5, P, dtype=torch.float64)
    output, _, _ = model(inputs)
    state = inputs.new_zeros(5, P)
    for t in range(T):
        state, _, _ = _literal_step(model.cell, inputs[t], state, "soft")
        torch.testing.assert_close(output[t], state, rtol=0, atol=1e-12)
    with torch.no_grad():
        model.cell.scoring[2].weight.mul_(7.0)
        model.cell.scoring[2].bias.mul_(7.0)
    scaled, _, _ = model(inputs)
    assert torch.allclose(scaled, output, rtol=1e-10, atol=1e-12) is (tau_units == "std")
