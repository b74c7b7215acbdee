"""RRNN-GRU's batched step (stacked projections, x projected for the whole sequence, fused
biases, repeated nodes computed once) against the equations of the paper computed literally,
tuple by tuple and node by node, and a finite-difference gradient check."""

from __future__ import annotations

import pytest
import torch

from cellgraph.backends import torch_ops
from cellgraph.backends.torch_rrnn import RRNNGRU
from cellgraph.expr import h, x, zero
from cellgraph.targets import target

P, N, T = 4, 3, 6


def _literal_step(cell, x_t: torch.Tensor, h_prev: torch.Tensor, mode: str):
    """The GRU tree node by node; each trainable node scores ``u(o(L_k c_i, R_k c_j) + b_k)``
    for every tuple ``k`` separately with the scoring module, then mixes or picks."""
    gru = target("gru")
    B = x_t.shape[0]
    values = {x: x_t, h: h_prev, zero: torch.zeros_like(x_t)}
    columns = []
    for node in gru.graph.internal_nodes():
        op, act = torch_ops.op(node.op), torch_ops.activation(node.act)
        a, b = values[node.left], values[node.right]
        if node.tuple in gru.layout.identity_indices:
            values[node] = act(op(a, b))
            columns.append((torch.full((B,), N), torch.zeros(B, dtype=a.dtype), torch.full((B,), -torch.inf)))
            continue
        cands = [act(op(a @ cell.weight_L[k].T, b @ cell.weight_R[k].T) + cell.bias[k]) for k in range(N)]
        scores = torch.stack([cell.scoring(c)[:, 0] for c in cands], 1)
        ranked = scores.detach().argsort(1, descending=True)
        hard = torch.stack([cands[k][s] for s, k in enumerate(ranked[:, 0].tolist())])
        weights = torch.softmax(scores / cell.tau, 1)
        soft = sum(weights[:, k, None] * cands[k] for k in range(N))
        values[node] = {"hard": hard, "soft": soft, "straight-through": hard + (soft - soft.detach())}[mode]
        columns.append((ranked[:, 0], scores.gather(1, ranked[:, :1])[:, 0], scores.gather(1, ranked[:, 1:2])[:, 0]))
    vectors = torch.stack([values[leaf] for leaf in (x, h, zero)]
                          + [values[n] for n in gru.graph.internal_nodes()], 1)
    return values[gru.graph.root], vectors, [torch.stack(c, 1) for c in zip(*columns)]


@pytest.mark.parametrize("mode", ["soft", "hard", "straight-through"])
@pytest.mark.parametrize("recompute, B", [(False, 5), (True, 5), (False, 1)])
def test_step_equals_the_literal_equations_values_traces_and_gradients(mode, recompute, B):
    """Batch 1 too: every step's trace keeps its own choices."""
    torch.manual_seed(0)
    model = RRNNGRU(P, N, scoring_hidden=6, mode=mode, tau=0.7, recompute=recompute).double()
    inputs = torch.randn(T, B, P, dtype=torch.float64)
    weights = torch.randn(T, B, P, dtype=torch.float64)
    output, h_T, traces = model(inputs)
    (output * weights).sum().add(sum(tr[0].best_score.sum() for tr in traces)).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    state, outputs, loss = torch.zeros(B, P, dtype=torch.float64), [], 0
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


def test_gradcheck_soft_mode():
    torch.manual_seed(2)
    model = RRNNGRU(3, 2, scoring_hidden=3, mode="soft").double()
    names = [n for n, _ in model.named_parameters()]

    def run(inputs, h0, *params):
        output, _, traces = torch.func.functional_call(model, dict(zip(names, params)), (inputs, h0))
        return output, traces[-1][0].best_score

    args = [torch.randn(2, 2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)]
    args += [p.detach().clone() for p in model.parameters()]
    assert torch.autograd.gradcheck(run, [a.requires_grad_() for a in args])
