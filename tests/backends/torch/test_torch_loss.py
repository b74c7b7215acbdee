"""The batched Eq. 5 loss against the core's float64 distances, its gradients and switches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from cellgraph.algorithms.distance import MATCHES, multiplicities, td, td_dag, td_iso
from cellgraph.algorithms.isomorphism import iso_class_size, iso_swaps
from cellgraph.backends.torch.training import loss as torch_loss
from cellgraph.backends.torch.training.loss import RRNNLoss, TargetTree, l2_loss, margin_loss, td_loss
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.expr import Expr, Leaf, Node, h, x, zero
from cellgraph.cell.layout import SearchSpace
from cellgraph.cell.tree import Tree, unfold
from cellgraph.errors import CellGraphError
from cellgraph.targets import GRU_U, OPS, target

SPACE_LEAVES = (x, h, zero)
GRU_TREE = TargetTree(target("gru").graph.unfold())


def _space(n: int) -> SearchSpace:
    return SearchSpace((0, 1, 2, 3), GRU_U, OPS, (x,), (h,), (zero,), n)


class _Vectors:
    """A random vector per (DAG node, sample): equal nodes get equal vectors, as in a cell."""

    def __init__(self, seed: int, p: int) -> None:
        self.rng, self.p, self.table = np.random.default_rng(seed), p, {}

    def __call__(self, e: Expr, b: int) -> np.ndarray:
        if isinstance(e, Leaf):
            return np.zeros(self.p)
        return self.table.setdefault((e, b), self.rng.normal(size=self.p))


def _trace(structure: list[list[tuple[int, int, int, int, int]]], vec: _Vectors, scores=None) -> SearchTrace:
    """A float64 SearchTrace whose sample ``b`` builds ``structure[b]`` (rows ``(i, j, r, o, u)``)."""
    cols = torch.tensor(structure, dtype=torch.int64)  # (B, N, 5)
    B, N, _ = cols.shape
    nl = len(SPACE_LEAVES)
    best, second = scores if scores is not None else (torch.zeros(B, N), torch.full((B, N), -torch.inf))
    tr = SearchTrace(_space(N), "h", torch.zeros(B, nl + N, vec.p, dtype=torch.float64),
                     cols[..., 0], cols[..., 1], cols[..., 2], cols[..., 3], cols[..., 4], best, second)
    for b in range(B):
        for i, e in enumerate(tr.nodes(b)):
            tr.vectors[b, i] = torch.from_numpy(vec(e, b))
    return tr


@st.composite
def _structures(draw, B: int, n_leaves: int, max_n: int):
    """Random per-sample DAGs of the same length (children among all earlier nodes, so
    nodes get shared and some are left out of the tree)."""
    N = draw(st.integers(1, max_n))
    rows = []
    for _ in range(B):
        sample = []
        for k in range(N):
            i = draw(st.integers(0, n_leaves + k - 2))
            j = draw(st.integers(i + 1, n_leaves + k - 1))
            sample.append((i, j, draw(st.integers(0, 2)), draw(st.integers(0, 1)), draw(st.integers(0, 3))))
        rows.append(sample)
    return rows


@st.composite
def _target_trees(draw):
    """The GRU target, or a random small target DAG over the same leaves and tuples."""
    if draw(st.booleans()):
        return GRU_TREE
    nodes: list[Expr] = list(SPACE_LEAVES)
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(nodes) - 2))
        j = draw(st.integers(i + 1, len(nodes) - 1))
        nodes.append(Node(OPS[draw(st.integers(0, 1))], GRU_U[draw(st.integers(0, 3))],
                          draw(st.integers(0, 2)), nodes[i], nodes[j]))
    return TargetTree(unfold(nodes[-1]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), B=st.integers(1, 3), p=st.integers(1, 3), seed=st.integers(0, 2**16),
       match=st.sampled_from(MATCHES))
def test_td_loss_equals_core_td_and_td_iso(data, B, p, seed, match):
    structure = data.draw(_structures(B, len(SPACE_LEAVES), 6))
    tgt = data.draw(_target_trees())
    vec = _Vectors(seed, p)
    tr = _trace(structure, vec)
    tv = torch.stack([torch.from_numpy(np.stack([vec(e, b) for e in tgt.exprs])) for b in range(B)])
    with_iso, without = td_loss(tr, tv, tgt, match=match), td_loss(tr, tv, tgt, iso=False, match=match)
    for b in range(B):
        pred = tr.graph(b).unfold().with_vectors(lambda e: vec(e, b))
        ref = tgt.tree.with_vectors(lambda e: vec(e, b))
        np.testing.assert_allclose(with_iso[b].item(), td_iso(pred, ref, match=match), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(without[b].item(), td(pred, ref, match=match), rtol=1e-10, atol=1e-12)
        assert with_iso[b] <= without[b] + 1e-12


def _per_label(tree: Tree, vectors: dict[int, np.ndarray], label: int = 1) -> Tree:
    """``tree`` with the vector of heap label ``label`` taken from ``vectors``."""
    if tree.is_leaf:
        return tree
    children = tuple(_per_label(c, vectors, 2 * label + k) for k, c in enumerate(tree.children))
    return Tree(tree.expr, children, tree.edges, vectors[label])


@settings(max_examples=25, deadline=None)
@given(data=st.data(), p=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_td_loss_with_vectors_per_position_equals_core_td(data, p, seed):
    """Target vectors need not be functions of the DAG node (e.g. a teacher's positions)."""
    structure = data.draw(_structures(2, len(SPACE_LEAVES), 5))
    vec = _Vectors(seed, p)
    tr = _trace(structure, vec)
    tv = torch.from_numpy(vec.rng.normal(size=(2, GRU_TREE.n_positions, p)))
    out = td_loss(tr, tv, GRU_TREE, iso=False)
    dag = td_loss((tr.vectors, tr.left, tr.right, tr.reachable()), tv, GRU_TREE, iso=False)
    for b in range(2):
        ref = _per_label(GRU_TREE.tree, dict(zip(GRU_TREE.labels, tv[b].numpy())))
        expected = td(tr.graph(b).unfold().with_vectors(lambda e: vec(e, b)), ref)
        assert out[b].item() == pytest.approx(expected, rel=1e-10)
        assert td_dag(tr.graph(b).root, lambda e: vec(e, b), ref) == pytest.approx(expected, rel=1e-10)
    torch.testing.assert_close(out, dag, rtol=0, atol=0)


def _gru_as_pred(vec: _Vectors, swap_root: bool):
    """The GRU target itself as a predicted DAG (tuple form), its root's children swapped
    on request (an isomorph: ``add`` is commutative)."""
    nodes = list(SPACE_LEAVES) + list(target("gru").graph.internal_nodes())
    index = {e: i for i, e in enumerate(nodes)}
    left = [index[n.left] for n in nodes[3:]]
    right = [index[n.right] for n in nodes[3:]]
    if swap_root:
        left[-1], right[-1] = right[-1], left[-1]
    vectors = torch.from_numpy(np.stack([vec(e, 0) for e in nodes]))[None]
    mult = torch.zeros(1, len(nodes), dtype=torch.int64)
    for e, k in multiplicities(nodes[-1]).items():
        mult[0, index[e]] = k
    return vectors, torch.tensor([left]), torch.tensor([right]), mult


def test_isomorph_of_the_target_is_at_distance_zero_only_with_iso():
    vec = _Vectors(0, 4)
    tv = torch.from_numpy(np.stack([vec(e, 0) for e in GRU_TREE.exprs]))[None]
    same = _gru_as_pred(vec, swap_root=False)
    swapped = _gru_as_pred(vec, swap_root=True)
    assert td_loss(same, tv, GRU_TREE, iso=False).item() == 0.0
    assert td_loss(swapped, tv, GRU_TREE, iso=True).item() == 0.0
    assert td_loss(swapped, tv, GRU_TREE, iso=False).item() > 1.0


def test_target_tree_enumerates_the_iso_class():
    for name in ("gru", "gru_torch"):
        tree = target(name).graph.unfold()
        tt = TargetTree(tree)
        assert tt.n_isomorphs == iso_class_size(tree)
        assert tt.n_positions == tree.n_internal() and tt.labels[0] == 1
        rows = {tuple(f) + tuple(s) for f, s in zip(tt.first.tolist(), tt.second.tolist())}
        assert len(rows) == tt.n_orientations < tt.n_isomorphs
        # every member of Iso(T) whose internal children order differs gets its own row
        internal = {tuple(label for label in swap if (2 * label) in tt.labels or (2 * label + 1) in tt.labels)
                    for swap in map(sorted, iso_swaps(tree))}
        assert tt.n_orientations == len(internal)
        assert tt.first[0].tolist() == [tt.labels.index(2 * l) if 2 * l in tt.labels else tt.n_positions
                                        for l in tt.labels]
        root_mass = tt.subtree[0].sum().item()
        assert root_mass == tt.n_positions
    with pytest.raises(CellGraphError, match="max_size"):
        TargetTree(target("gru").graph.unfold(), max_size=8)
    with pytest.raises(CellGraphError, match="no vector"):
        GRU_TREE.lay({})


def test_td_loss_rejects_mismatched_target_vectors():
    tr = _trace([[(0, 1, 0, 0, 0)]], _Vectors(0, 2))
    with pytest.raises(CellGraphError, match="target vectors of shape"):
        td_loss(tr, torch.zeros(1, 3, 2, dtype=torch.float64), GRU_TREE)


@pytest.mark.parametrize("match", MATCHES)
def test_td_loss_gradcheck(match):
    vec = _Vectors(3, 2)
    tr = _trace([[(0, 1, 0, 0, 1), (1, 3, 1, 1, 0), (3, 4, 2, 0, 3)],
                 [(1, 2, 0, 0, 0), (0, 3, 1, 0, 1), (3, 4, 1, 1, 3)]], vec)
    tv = torch.from_numpy(vec.rng.normal(size=(2, GRU_TREE.n_positions, 2)))
    mult = tr.reachable()

    def f(vectors, target_vectors):
        return td_loss((vectors, tr.left, tr.right, mult), target_vectors, GRU_TREE, match=match)

    assert torch.autograd.gradcheck(f, (tr.vectors.clone().requires_grad_(), tv.clone().requires_grad_()))


def _scored_trace(best: torch.Tensor, second: torch.Tensor) -> SearchTrace:
    B, N = best.shape
    structure = [[(0, 1, 0, 0, 0)] + [(1, 2 + k, 0, 0, 0) for k in range(1, N)]] * B
    return _trace(structure, _Vectors(0, 1), (best, second))


def test_margin_loss_values_and_gradcheck():
    best = torch.tensor([[2.0, 1.0, 0.0], [5.0, 0.3, 1.0]], dtype=torch.float64)
    second = torch.tensor([[1.5, -torch.inf, -3.0], [0.0, 0.2, 1.0]], dtype=torch.float64)
    M = 2.0
    out = margin_loss(_scored_trace(best, second), M)
    # gaps 0.5, (none), 3 -> min(M, .) = 0.5, 0, 2 ; 5, 0.1, 0 -> 2, 0.1, 0
    torch.testing.assert_close(out, torch.tensor([-2.5 / M, -2.1 / M], dtype=torch.float64))
    with pytest.raises(CellGraphError, match="positive"):
        margin_loss(_scored_trace(best, second), 0.0)

    finite = torch.tensor([[0.4, 0.1, -1.0], [2.5, 0.0, 0.7]], dtype=torch.float64)

    def f(b, s):
        return margin_loss(_scored_trace(b, torch.where(torch.isfinite(second), s, second)), M)

    assert torch.autograd.gradcheck(f, (best.clone().requires_grad_(), finite.requires_grad_()))


def test_l2_loss():
    a, b = torch.tensor([1.0, -2.0]), torch.tensor([[3.0]])
    assert l2_loss([a, b]).item() == 14.0
    with pytest.raises(CellGraphError, match="no parameters"):
        l2_loss([])


def _loss_inputs():
    """Two steps of a two-run cell (as an LSTM-shaped model gives them)."""
    vec = _Vectors(7, 3)
    best = torch.tensor([[1.0, 0.5], [2.0, 0.1]], dtype=torch.float64, requires_grad=True)
    second = torch.tensor([[0.2, -torch.inf], [1.9, 0.0]], dtype=torch.float64)
    step = []
    for s in range(2):
        tr = _trace([[(0, 1, s, 0, 1), (1, 3, 1, 1, 0)], [(0, 2, 0, 1, 2), (2, 3, 2, 0, 1)]], vec, (best, second))
        step.append(tr)
    traces = [step, step]
    tv = [[torch.from_numpy(vec.rng.normal(size=(2, GRU_TREE.n_positions, 3))) for _ in step] for _ in traces]
    params = [torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)]
    return traces, tv, [GRU_TREE, GRU_TREE], params, best


def test_rrnn_loss_composes_eq5_over_steps_and_runs():
    """Eq. 5's reduction: per sample the sum over steps (and runs) of task, TD and margin, the
    batch mean of those sums, L2 once; every reported term is weighted and they add up."""
    traces, tv, trees, params, best = _loss_inputs()
    task = torch.tensor([0.7, 1.3])  # (B,) per-sample task sums, float32 beside float64 structure terms
    loss = RRNNLoss(lambda_task=2.0, lambda_td=0.1, lambda_margin=0.01, lambda_l2=0.001, margin=0.5, iso=True)
    out = loss(task, traces, tv, trees, params)
    per_sample_td = sum(td_loss(tr, v, t) for step, vs in zip(traces, tv) for tr, v, t in zip(step, vs, trees))
    per_sample_margin = sum(margin_loss(tr, 0.5) for step in traces for tr in step)
    assert per_sample_td.shape == per_sample_margin.shape == (2,)
    assert out.task == pytest.approx(2.0 * 1.0)
    assert out.td == pytest.approx(0.1 * per_sample_td.mean().item())
    assert out.margin == pytest.approx(0.01 * per_sample_margin.mean().item())
    assert out.l2 == pytest.approx(0.001 * 5.0)
    assert out.total.item() == pytest.approx(out.task + out.td + out.margin + out.l2)
    out.total.backward()
    assert best.grad is not None and params[0].grad is not None


WEIGHTS = dict(lambda_task=1.0, lambda_td=0.1, lambda_margin=0.01, lambda_l2=0.001)


@pytest.mark.parametrize("off", list(WEIGHTS))
def test_rrnn_loss_terms_switch_off(off, monkeypatch):
    traces, tv, trees, params, _ = _loss_inputs()
    task = torch.tensor([0.7, 0.2], dtype=torch.float64)
    weights = dict(WEIGHTS)
    full = RRNNLoss(**weights)(task, traces, tv, trees, params)
    weights[off] = 0.0

    def boom(*args, **kwargs):
        raise AssertionError("a switched-off term was computed")

    name = {"lambda_task": None, "lambda_td": "td_loss", "lambda_margin": "margin_loss", "lambda_l2": "l2_loss"}[off]
    if name is not None:
        monkeypatch.setattr(torch_loss, name, boom)
    out = RRNNLoss(**weights)(task, traces, tv, trees, params)
    field = {"lambda_task": "task", "lambda_td": "td", "lambda_margin": "margin", "lambda_l2": "l2"}[off]
    assert getattr(out, field) is None
    assert out.total.item() == pytest.approx(full.total.item() - getattr(full, field))


def test_rrnn_loss_needs_its_inputs():
    traces, tv, trees, params, _ = _loss_inputs()
    with pytest.raises(CellGraphError, match="task loss"):
        RRNNLoss()(None, traces, tv, trees, params)
    with pytest.raises(CellGraphError, match="per-sample task loss"):
        RRNNLoss()(torch.tensor(2.0), traces, tv, trees, params)  # a scalar is not (B,)
    with pytest.raises(CellGraphError, match="target vectors"):
        RRNNLoss(lambda_task=0)(None, traces, None, trees, params)
    with pytest.raises(CellGraphError, match="one of each per run"):
        RRNNLoss(lambda_task=0)(None, traces, tv, trees[:1], params)
    with pytest.raises(CellGraphError, match="switched off"):
        RRNNLoss(0, 0, 0, 0)(None)
    only_task = RRNNLoss(1, 0, 0, 0)(torch.tensor([2.0, 4.0]))
    assert only_task.total.item() == 3.0 and only_task.td is None


def test_td_loss_on_an_rrnn_search_with_the_self_target():
    """End to end: a real soft RRNN step, its own-tuple GRU target, the core's td_iso."""
    from cellgraph.backends.torch.models.rrnn import RRNNCell
    from cellgraph.backends.torch.training.td_targets import SelfTargetProvider

    torch.manual_seed(0)
    cell = RRNNCell(hidden_size=3, n_tuples=3, n_iterations=5, scoring_hidden=4).double()
    xs, hs = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    _, traces = cell(xs, hs)
    provider = SelfTargetProvider("gru")
    (tv,) = provider(traces, cell.layout_tuples())
    loss = td_loss(traces[0], tv, provider.trees[0])
    for b in range(4):
        nodes = traces[0].nodes(b)
        values = dict(zip(nodes, traces[0].vectors[b].detach().numpy()))
        pred = traces[0].graph(b).unfold().with_vectors(values)
        ref = provider.trees[0].tree.with_vectors(
            dict(zip(provider.trees[0].exprs, tv[b].detach().numpy())) | {e: np.zeros(3) for e in (x, h, zero)})
        assert loss[b].item() == pytest.approx(td_iso(pred, ref), rel=1e-10)
    loss.sum().backward()
    assert cell.weight_L.grad.abs().sum() > 0
    assert all(p.grad is not None for p in cell.scoring_parameters()[:2])
