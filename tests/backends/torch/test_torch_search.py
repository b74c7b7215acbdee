"""The batched torch Algorithm 2 against the float64 numpy reference (on every device: the CPU,
and CUDA where a GPU is present; each with and without reads from the device mid-search), and
its soft modes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from devices import DEVICES, needs_cuda
from hypothesis import given, settings, strategies as st

from cellgraph.backends.numpy.plugin import mlp_alpha, search as np_search
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.backends.torch.algorithm2.search import KeyCode, prepare, search
from cellgraph.backends.torch.algorithm2.logits import n_slots
from cellgraph.cell.expr import Leaf, Role, h, x, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError
from cellgraph.targets import GRU_U, OPS


#: ``(device, sync_free)``: each device's default path (sync-free on CUDA only) and the other one.
PATHS = [pytest.param("cpu", None, id="cpu"), pytest.param("cpu", True, id="cpu-sync-free"),
         pytest.param("cuda", None, id="cuda", marks=needs_cuda),
         pytest.param("cuda", False, id="cuda-reading", marks=needs_cuda)]


def _space(n_iterations: int) -> SearchSpace:
    """The paper's GRU search space: tuples 0..3 (3 = identity), U, O, leaves x, h, zero."""
    return SearchSpace((0, 1, 2, 3), GRU_U, OPS, (x,), (h,), (zero,), n_iterations)


def _case(seed: int, p: int, B: int, H: int, weights: str, leaves: str):
    """Random float64 tuples (tuple 3 is the identity), scoring weights and leaf vectors."""
    rng = np.random.default_rng(seed)
    draw = (lambda *s: rng.integers(-1, 2, size=s).astype(float)) if weights == "integer" \
        else (lambda *s: rng.normal(size=s))
    params = [(draw(p, p), draw(p, p), draw(p)) for _ in range(3)] + [(np.eye(p), np.eye(p), np.zeros(p))]
    alpha = (rng.normal(size=(H, p)), rng.normal(size=H), rng.normal(size=H), float(rng.normal()))
    X = draw(B, p)
    Hs = {"random": draw(B, p), "zero": np.zeros((B, p)), "equal_x": X.copy()}[leaves]
    return params, alpha, np.stack([X, Hs, np.zeros((B, p))], 1)


def _torch_search(space, params, alpha, leaf_values, mode="hard", tau=1.0, norm="none", device="cpu",
                  tau_units="score", sync_free=None, structure=None, exclusion="value"):
    L, R, b = (torch.tensor(np.stack([t[i] for t in params]), device=device) for i in range(3))
    W1, b1, w2, b2 = (torch.tensor(np.asarray(a, dtype=float), device=device) for a in alpha)
    leaves = torch.tensor(leaf_values, device=device)
    structure = None if structure is None else torch.tensor(structure, device=device)
    trace = search(prepare(space, L, R, b, W1, b1, w2, b2, norm, structure=structure, exclusion=exclusion), leaves,
                   mode, tau, tau_units=tau_units, sync_free=sync_free)
    assert trace.vectors.device.type == torch.device(device).type
    return trace.to("cpu")


@pytest.mark.parametrize("device, sync_free", PATHS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    p=st.integers(2, 4),
    B=st.integers(1, 4),
    n_iterations=st.integers(1, 5),
    weights=st.sampled_from(["normal", "integer"]),
    leaves=st.sampled_from(["random", "zero", "equal_x"]),
)
def test_hard_search_matches_numpy_reference(device, sync_free, seed, p, B, n_iterations, weights, leaves):
    space = _space(n_iterations)
    params, alpha, leaf_values = _case(seed, p, B, 3, weights, leaves)
    try:
        trace = _torch_search(space, params, alpha, leaf_values, device=device, sync_free=sync_free)
    except CellGraphError as err:  # then the reference must fail the same way
        assert "no eligible candidate" in str(err)
        with pytest.raises(CellGraphError, match="no eligible candidate"):
            for b in range(B):
                np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha))
        return
    for b in range(B):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha))
        assert trace.graph(b) == CellGraph(ref.root, "h")
        got = trace.vectors[b].numpy()
        want = np.stack([ref.vectors[e] for e in (*space.leaves, *ref.chosen)])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10)  # 1e-10, or float64 resolution for large |v|
        np.testing.assert_allclose(trace.best_score[b].detach().numpy(), ref.scores, rtol=1e-10, atol=1e-10)
        second = trace.second_score[b].detach().numpy()
        np.testing.assert_array_equal(np.isneginf(second), np.isnan(ref.second_scores))
        mask = ~np.isnan(ref.second_scores)
        np.testing.assert_allclose(second[mask], ref.second_scores[mask], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device, sync_free", PATHS)
@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 4), B=st.integers(1, 3), n_iterations=st.integers(1, 5),
       leaves=st.sampled_from(["random", "zero"]), mode=st.sampled_from(["hard", "soft"]),
       exclusion=st.sampled_from(["slot", "value"]))
def test_the_recipes_search_matches_numpy_reference(device, sync_free, seed, p, B, n_iterations, leaves, mode,
                                                     exclusion):
    """The discovery recipe's score, ``alpha + s_k[slot]`` (a structural logit per iteration
    and slot, large enough to change choices), and exclusion by slot, in both backends."""
    space = _space(n_iterations)
    params, alpha, leaf_values = _case(seed, p, B, 3, "normal", leaves)
    table = 3 * np.random.default_rng(seed + 1).normal(size=(n_iterations, n_slots(space)))
    code = KeyCode.of(space)
    trace = _torch_search(space, params, alpha, leaf_values, mode=mode, device=device, sync_free=sync_free,
                          structure=table, exclusion=exclusion)
    for b in range(B):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha), mode=mode,
                        structure=lambda k, key: table[k - 1, code.encode(*key)], exclusion=exclusion)
        assert trace.graph(b) == CellGraph(ref.root, "h")
        np.testing.assert_allclose(trace.vectors[b].detach().numpy(), ref.trail, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(trace.best_score[b].detach().numpy(), ref.scores, rtol=1e-10, atol=1e-10)


def test_the_references_slot_exclusion_builds_the_grus_own_node_again_as_h1():
    """With ``h_0 = 0`` and a score that asks for it, exclusion by slot lets iteration 2 choose
    a candidate whose vector equals iteration 1's node; by value the reference refuses it."""
    space = _space(2)
    params, alpha, leaf_values = _case(0, 3, 1, 3, "normal", "zero")
    leaves = dict(zip(space.leaves, leaf_values[0]))
    # iteration 1: tuple 3 (identity) adds x and h = 0, giving x; iteration 2: identity adds x and
    # 0 again (slot (3, add, identity, 0, 2) after (3, add, identity, 0, 1)): the same vector
    first, again = (3, 0, GRU_U.index("identity"), 0, 1), (3, 0, GRU_U.index("identity"), 0, 2)
    wanted = {1: first, 2: again}
    structure = lambda k, key: 100.0 if key == wanted[k] else 0.0  # noqa: E731
    by_slot = np_search(space, params, leaves, mlp_alpha(*alpha), structure=structure, exclusion="slot")
    assert by_slot.keys == (first, again)
    np.testing.assert_allclose(by_slot.trail[-1], by_slot.trail[-2])
    by_value = np_search(space, params, leaves, mlp_alpha(*alpha), structure=structure)
    assert by_value.keys[0] == first and by_value.keys[1] != again
    with pytest.raises(CellGraphError, match="exclusion 'bogus' is not one of value, slot"):
        np_search(space, params, leaves, mlp_alpha(*alpha), exclusion="bogus")


@pytest.mark.parametrize("device, sync_free", PATHS)
@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 4), B=st.integers(1, 3), n_iterations=st.integers(1, 4))
def test_sample_normalised_search_matches_numpy_reference(device, sync_free, seed, p, B, n_iterations):
    """candidate_norm='sample': every candidate normalised over its features, in both backends."""
    space = _space(n_iterations)
    params, alpha, leaf_values = _case(seed, p, B, 3, "normal", "random")
    trace = _torch_search(space, params, alpha, leaf_values, norm="sample", device=device, sync_free=sync_free)
    for b in range(B):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha),
                        candidate_norm="sample")
        assert trace.graph(b) == CellGraph(ref.root, "h")
        want = np.stack([ref.vectors[e] for e in (*space.leaves, *ref.chosen)])
        np.testing.assert_allclose(trace.vectors[b].numpy(), want, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(trace.best_score[b].detach().numpy(), ref.scores, rtol=1e-10, atol=1e-10)
        chosen = want[len(space.leaves):]
        np.testing.assert_allclose(chosen.mean(-1), 0, atol=1e-10)  # normalised nodes


@pytest.mark.parametrize("device, sync_free", PATHS)
@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 4), B=st.integers(1, 3), n_iterations=st.integers(1, 4),
       tau=st.sampled_from([0.3, 1.0, 3.0]), norm=st.sampled_from(["none", "sample"]),
       tau_units=st.sampled_from(["score", "std"]))
def test_soft_search_matches_the_literal_numpy_mixture(device, sync_free, seed, p, B, n_iterations, tau, norm,
                                                       tau_units):
    """Soft mode, the one every RRNN trains with, against the literal float64 reference: each
    iteration adds the softmax(alpha / (tau sigma)) mixture of the candidates whose vectors are
    not in P_{k-1} (sigma 1, or the spread of their scores), later candidates are built from
    it; the argmax and the scores are recorded."""
    space = _space(n_iterations)
    params, alpha, leaf_values = _case(seed, p, B, 3, "normal", "random")
    trace = _torch_search(space, params, alpha, leaf_values, "soft", tau=tau, norm=norm, device=device,
                          tau_units=tau_units, sync_free=sync_free)
    for b in range(B):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha),
                        candidate_norm=norm, mode="soft", tau=tau, tau_units=tau_units)
        np.testing.assert_allclose(trace.vectors[b].detach().numpy(), ref.trail, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(trace.best_score[b].detach().numpy(), ref.scores, rtol=1e-10, atol=1e-10)
        got = [(int(trace.tuple_pos[b, k]), int(trace.op_pos[b, k]), int(trace.act_pos[b, k]),
                int(trace.left[b, k]), int(trace.right[b, k])) for k in range(n_iterations)]
        assert got == list(ref.keys)
        second = trace.second_score[b].detach().numpy()
        np.testing.assert_array_equal(np.isneginf(second), np.isnan(ref.second_scores))
        mask = ~np.isnan(ref.second_scores)
        np.testing.assert_allclose(second[mask], ref.second_scores[mask], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_batch_normalised_candidates_use_the_statistics_of_their_slot_over_the_batch(device):
    """candidate_norm='batch': the first chosen node of every sample is its candidate
    ``u(o(L_r c_i, R_r c_j) + b_r)`` normalised with the mean and variance of that candidate
    slot over the whole batch and the features (computed here literally)."""
    from cellgraph.algorithm2 import NORM_EPS
    from cellgraph.backends.numpy.eval import combine, numpy_activation, numpy_op

    space = _space(1)
    params, alpha, leaf_values = _case(7, 4, 5, 3, "normal", "random")
    trace = _torch_search(space, params, alpha, leaf_values, norm="batch", device=device)
    for b in range(5):
        i, j, r, o, u = (int(t[b, 0]) for t in (trace.left, trace.right, trace.tuple_pos, trace.op_pos, trace.act_pos))
        slot = np.stack([combine(params[space.tuples[r]], numpy_op(space.ops[o]), numpy_activation(space.activations[u]),
                                 leaf_values[s, i], leaf_values[s, j]) for s in range(5)])
        want = (slot[b] - slot.mean()) / np.sqrt(slot.var() + NORM_EPS)
        np.testing.assert_allclose(trace.vectors[b, 3].numpy(), want, rtol=1e-10, atol=1e-10)
    alone = _torch_search(space, params, alpha, leaf_values[:1], norm="batch", device=device)
    assert not torch.allclose(alone.vectors[0, 3], trace.vectors[0, 3])  # batch statistics matter


@pytest.mark.parametrize("norm", ["batch", "sample"])
def test_normalised_first_iteration_scores_and_mixes_every_candidate_literally(norm):
    """Both normalisations, iteration 1, every candidate ``u(o(L_r c_i, R_r c_j) + b_r)`` of
    every (r, o, u, i < j) normalised literally: the best score is the maximum of their
    scores, and the soft node is their ``softmax(alpha / tau)`` mixture (the affine
    activations included, which the search derives from the normalised ``z``)."""
    from cellgraph.algorithm2 import NORM_EPS
    from cellgraph.backends.numpy.eval import combine, numpy_activation, numpy_op

    space, B, tau = _space(1), 4, 0.6
    params, alpha, leaf_values = _case(3, 5, B, 3, "normal", "random")
    score = mlp_alpha(*alpha)
    slots = np.stack([
        combine(params[rr], numpy_op(oo), numpy_activation(uu), leaf_values[:, i], leaf_values[:, j])
        for rr in space.tuples for oo in space.ops for uu in space.activations
        for i in range(3) for j in range(i + 1, 3)
    ], 1)  # (B, candidates, p)
    axes = (0, 2) if norm == "batch" else (2,)
    mean, var = slots.mean(axes, keepdims=True), slots.var(axes, keepdims=True)
    cands = (slots - mean) / np.sqrt(var + NORM_EPS)
    scores = np.stack([score(cands[b]) for b in range(B)])
    hard = _torch_search(space, params, alpha, leaf_values, "hard", norm=norm)
    np.testing.assert_allclose(hard.best_score[:, 0].detach().numpy(), scores.max(1), rtol=1e-10)
    soft = _torch_search(space, params, alpha, leaf_values, "soft", tau=tau, norm=norm)
    w = np.exp((scores - scores.max(1, keepdims=True)) / tau)
    mixed = (w[:, :, None] * cands).sum(1) / w.sum(1)[:, None]
    np.testing.assert_allclose(soft.vectors[:, 3].detach().numpy(), mixed, rtol=1e-9, atol=1e-10)


def test_unknown_candidate_norm_is_an_error():
    with pytest.raises(CellGraphError, match="unknown candidate_norm"):
        _torch_search(_space(1), *_case(0, 2, 1, 3, "normal", "random"), norm="layer")
    with pytest.raises(CellGraphError, match="candidate_norm 'batch' is not one of none, sample"):
        space = _space(1)
        params, alpha, leaves = _case(0, 2, 1, 3, "normal", "random")
        np_search(space, params, dict(zip(space.leaves, leaves[0])), mlp_alpha(*alpha), candidate_norm="batch")


@pytest.mark.parametrize("device, sync_free", PATHS)
def test_exclusion_and_ties_are_exercised(device, sync_free):
    """With h = 0 = zero and integer weights many candidates coincide: the search must skip
    vectors already in P and break ties by Algorithm 2's enumeration order."""
    space = _space(6)
    params, alpha, leaf_values = _case(7, 3, 2, 3, "integer", "zero")
    trace = _torch_search(space, params, alpha, leaf_values, device=device, sync_free=sync_free)
    for b in range(2):
        generated = trace.vectors[b, len(space.leaves):]
        dist = (generated[:, None] - generated[None]).abs().amax(-1) + torch.eye(6) * 1e9
        assert dist.min() > 1e-9  # no two chosen nodes share a vector
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha))
        assert trace.graph(b) == CellGraph(ref.root, "h")


@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize("mode", ["hard", "soft", "straight-through"])
def test_no_eligible_candidate_is_an_error(mode, sync_free):
    """In every mode, though the search checks only once it has run all iterations (so that no
    iteration waits for the device): the first iteration without a candidate is named."""
    one = Leaf("one")
    space = SearchSpace((0,), ("identity",), ("mul",), (), (), (zero, one), 2)
    p = 2
    params = [(np.eye(p), np.eye(p), np.zeros(p))]
    alpha = (np.ones((2, p)), np.zeros(2), np.ones(2), 0.0)
    with pytest.raises(CellGraphError, match="iteration 2: sample 0 has no eligible candidate"):
        _torch_search(space, params, alpha, np.stack([np.zeros((1, p)), np.ones((1, p))], 1), mode=mode,
                      sync_free=sync_free)


def test_unknown_mode_is_an_error():
    params, alpha, leaf_values = _case(0, 2, 1, 2, "normal", "random")
    with pytest.raises(CellGraphError, match="unknown choice mode 'argmax'"):
        _torch_search(_space(1), params, alpha, leaf_values, mode="argmax")
    with pytest.raises(CellGraphError, match="unknown tau_units 'bits'"):
        _torch_search(_space(1), params, alpha, leaf_values, mode="soft", tau_units="bits")
    with pytest.raises(CellGraphError, match="unknown tau_units 'bits'"):
        RRNNGRU(3, 2, tau_units="bits")


def test_soft_mode_records_the_argmax_and_tends_to_hard():
    space = _space(4)
    params, alpha, leaf_values = _case(3, 3, 3, 4, "normal", "random")
    hard = _torch_search(space, params, alpha, leaf_values, "hard")
    sharp = _torch_search(space, params, alpha, leaf_values, "soft", tau=1e-9)
    torch.testing.assert_close(sharp.vectors, hard.vectors, rtol=0, atol=1e-8)
    for name in ("left", "right", "tuple_pos", "op_pos", "act_pos"):
        assert torch.equal(getattr(sharp, name), getattr(hard, name))
    smooth = _torch_search(space, params, alpha, leaf_values, "soft", tau=1.0)
    # first iteration: same candidates in both modes, so the recorded argmax agrees
    assert torch.equal(smooth.tuple_pos[:, 0], hard.tuple_pos[:, 0])
    assert not torch.allclose(smooth.vectors[:, -1], hard.vectors[:, -1])


def test_straight_through_is_hard_forward_soft_backward():
    space = _space(3)
    params, alpha, leaf_values = _case(5, 3, 2, 4, "normal", "random")
    W1 = torch.tensor(alpha[0], requires_grad=True)
    L, R, b = (torch.tensor(np.stack([t[i] for t in params])) for i in range(3))
    rest = [torch.tensor(np.asarray(a, dtype=float)) for a in alpha[1:]]
    grads = {}
    for mode in ("hard", "straight-through"):
        trace = search(prepare(space, L, R, b, W1, *rest), torch.tensor(leaf_values), mode)
        grads[mode] = (trace.vectors[:, -1].sum(), torch.autograd.grad(trace.vectors[:, -1].sum(), W1,
                                                                      allow_unused=True)[0])
    assert grads["hard"][0].item() == grads["straight-through"][0].item()
    hard_grad = grads["hard"][1]  # argmax: no gradient reaches alpha through the vectors
    assert hard_grad is None or not hard_grad.any()
    assert grads["straight-through"][1].abs().sum() > 0


@pytest.mark.parametrize("tau_units", ["score", "std"])
@pytest.mark.parametrize("norm", ["none", "batch", "sample"])
def test_soft_mode_gradcheck(norm, tau_units, monkeypatch):
    """Soft mode is differentiable, also with a per-sample temperature (``std``): there the
    score spread is a constant of the backward pass by design, so the check holds it fixed
    (one value per sample) to compare the finite differences with it."""
    spread = torch.tensor([1.3, 0.6], dtype=torch.float64)
    monkeypatch.setattr("cellgraph.backends.torch.algorithm2.candidates.Candidates.spread", lambda self: spread)
    space, p = _space(2), 3
    params, alpha, leaf_values = _case(11, p, 2, 3, "normal", "random")
    L, R, b = (torch.tensor(np.stack([t[i] for t in params[:3]]), requires_grad=True) for i in range(3))
    W1, b1, w2 = (torch.tensor(a, requires_grad=True) for a in alpha[:3])
    b2 = torch.tensor(alpha[3])
    xh = torch.tensor(leaf_values[:, :2], requires_grad=True)  # the zero leaf stays a constant
    eye = torch.eye(p, dtype=torch.float64)

    def f(L, R, b, W1, b1, w2, xh):
        LL, RR = torch.cat([L, eye[None]]), torch.cat([R, eye[None]])
        bb = torch.cat([b, torch.zeros(1, p, dtype=torch.float64)])
        leaves = torch.cat([xh, torch.zeros(2, 1, p, dtype=torch.float64)], 1)
        trace = search(prepare(space, LL, RR, bb, W1, b1, w2, b2, norm), leaves, "soft", 0.7,
                       tau_units=tau_units)
        return trace.vectors[:, -2:], trace.best_score

    assert torch.autograd.gradcheck(f, (L, R, b, W1, b1, w2, xh), eps=1e-6, atol=1e-5)


def test_multi_state_leaves_follow_the_space():
    c_now = Leaf("c", Role.CURRENT)
    space = SearchSpace((0, 1), ("sigmoid", "identity"), OPS, (x,), (h, Leaf("c"), c_now), (zero,), 2)
    p, B = 3, 2
    rng = np.random.default_rng(1)
    params = [(rng.normal(size=(p, p)), rng.normal(size=(p, p)), rng.normal(size=p)) for _ in range(2)]
    alpha = (rng.normal(size=(4, p)), rng.normal(size=4), rng.normal(size=4), 0.0)
    leaf_values = rng.normal(size=(B, len(space.leaves), p))
    leaf_values[:, -1] = 0
    trace = _torch_search(space, params, alpha, leaf_values)
    for b in range(B):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha))
        assert trace.graph(b) == CellGraph(ref.root, "h")


@pytest.mark.parametrize("tau_units", ["score", "std"])
def test_tau_in_std_units_ignores_the_scale_of_the_scores(tau_units):
    """Scaling the scoring network's output layer by 7 scales every score: the argmax stays,
    the soft mixture stays only when tau is in units of the scores' spread."""
    space = _space(4)
    params, alpha, leaf_values = _case(11, 3, 4, 3, "normal", "random")
    W1, b1, w2, b2 = alpha
    base = _torch_search(space, params, alpha, leaf_values, "soft", tau=0.5, tau_units=tau_units)
    scaled = _torch_search(space, params, (W1, b1, 7 * w2, 7 * b2), leaf_values, "soft", tau=0.5,
                           tau_units=tau_units)
    assert torch.equal(base.tuple_pos[:, 0], scaled.tuple_pos[:, 0])
    same = torch.allclose(base.vectors, scaled.vectors, rtol=1e-10, atol=1e-12)
    assert same is (tau_units == "std")


@pytest.mark.parametrize("seed, leaves", [(0, "random"), (1, "random"), (2, "zero"), (3, "equal_x")])
def test_margin_term_matches_the_reference(seed, leaves):
    """Eq. 5's margin term of a search, ``sum_k m(N_k)``: the torch loss and the float64
    reference agree, an iteration without a second candidate counting 0 in both."""
    from cellgraph.backends.torch.training.loss import margin_loss

    space = _space(4)
    params, alpha, leaf_values = _case(seed, 3, 3, 3, "normal", leaves)
    trace = _torch_search(space, params, alpha, leaf_values)
    for M in (0.05, 1.0):
        got = margin_loss(trace, M).numpy()
        want = [np_search(space, params, dict(zip(space.leaves, leaf_values[b])), mlp_alpha(*alpha)).margin(M).sum()
                for b in range(3)]
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_margin_without_a_second_candidate_counts_zero_in_both_backends():
    """Where no eligible candidate differs from ``c_k*`` (second score -inf in torch, nan in
    the reference), both give 0 for that iteration."""
    from types import SimpleNamespace

    from cellgraph.backends.numpy.search import SearchResult
    from cellgraph.backends.torch.training.loss import margin_loss

    best, second = np.array([3.0, 1.0, 2.0]), np.array([2.5, -4.0, np.nan])
    ref = SearchResult(h, (), {}, best, second, np.ones(3)).margin(2.0)
    trace = SimpleNamespace(best_score=torch.from_numpy(best[None]),
                            second_score=torch.from_numpy(np.where(np.isnan(second), -np.inf, second)[None]))
    np.testing.assert_allclose(margin_loss(trace, 2.0).numpy(), [ref.sum()])
    assert ref[2] == 0.0


def test_straight_through_gives_the_chosen_vector_the_gradient_and_the_scores_the_relaxations():
    """The estimator's formula (its module docstring): forward ``v_{c*}``; backward the chosen
    vector gets all of ``g``, the others nothing, and ``dL/ds_c = w_c (v_c - sum_d w_d v_d) . g / tau``."""
    from cellgraph.backends.torch.algorithm2.estimator import straight_through
    gen = torch.Generator().manual_seed(3)
    v = torch.randn(5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    s = torch.randn(5, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(4, dtype=torch.float64, generator=gen)
    tau, chosen = 0.7, 2
    w = torch.softmax(s / tau, 0)
    y = straight_through(v[chosen], (w[:, None] * v.detach()).sum(0))
    assert torch.equal(y.detach(), v[chosen].detach())
    dv, ds = torch.autograd.grad((y * g).sum(), (v, s))
    expected_dv = torch.zeros_like(dv)
    expected_dv[chosen] = g
    assert torch.equal(dv, expected_dv)
    wd, vd = w.detach(), v.detach()
    expected_ds = wd * ((vd - (wd[:, None] * vd).sum(0)) @ g) / tau
    assert torch.allclose(ds, expected_ds, rtol=1e-12, atol=1e-14) and expected_ds.abs().min() > 1e-3


def test_straight_through_search_splits_the_gradient_between_the_hard_and_the_soft_search():
    """One iteration: straight-through's forward is the hard search's; its gradient to the
    scoring weights (which the candidate vectors do not read) is the soft search's at the same
    ``tau``; and its gradient to the tuples ``(L, R, b)`` is the hard search's (the chosen vector
    only) plus the scores' share, which vanishes as ``1 / tau`` (the candidate vectors
    themselves get no mixture's gradient)."""
    space = _space(1)
    params, alpha, leaf_values = _case(7, 3, 4, 5, "normal", "random")
    grads, outs = {}, {}
    for mode, tau in (("hard", 1.0), ("soft", 0.8), ("straight-through", 0.8), ("straight-through", 1e7)):
        L, R, b = (torch.tensor(np.stack([t[i] for t in params]), requires_grad=True) for i in range(3))
        W1, b1, w2 = (torch.tensor(np.asarray(a, dtype=float), requires_grad=True) for a in alpha[:3])
        trace = search(prepare(space, L, R, b, W1, b1, w2, torch.tensor(alpha[3])),
                       torch.tensor(leaf_values), mode, tau)
        out = outs[mode, tau] = trace.vectors[:, -1]
        weights = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
        inputs = (L, R, b, W1, b1, w2)
        found = torch.autograd.grad((out * weights).sum(), inputs, allow_unused=True)
        grads[mode, tau] = [torch.zeros_like(t) if d is None else d for t, d in zip(inputs, found)]
    st, cold, hard, soft = (grads[k] for k in [("straight-through", 0.8), ("straight-through", 1e7),
                                               ("hard", 1.0), ("soft", 0.8)])
    assert torch.equal(outs["straight-through", 0.8].detach(), outs["hard", 1.0].detach())
    for st_grad, soft_grad in zip(st[3:], soft[3:]):
        assert soft_grad.abs().sum() > 1e-3
        assert torch.allclose(st_grad, soft_grad, rtol=1e-10, atol=1e-12)
    for st_grad, cold_grad, hard_grad in zip(st[:3], cold[:3], hard[:3]):
        assert hard_grad.abs().sum() > 1e-3 and (st_grad - hard_grad).abs().sum() > 1e-3
        assert torch.allclose(cold_grad, hard_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("weights", ["normal", "integer"])
def test_the_read_free_gather_of_the_hard_node_gives_the_same_vectors_and_gradients(seed, weights):
    """With gradients on, the hard node is gathered differentiably: one read tells which blocks
    hold the choices, or, read-free (sync-free), every block gathers and each sample keeps its
    own block's row. Both give the reference's vectors and the same gradients."""
    space = _space(4)
    params, alpha, leaf_values = _case(seed, 3, 5, 3, weights, "random")
    results = []
    for sync_free in (False, True):
        L = torch.tensor(np.stack([t[0] for t in params]), requires_grad=True)
        R, b = (torch.tensor(np.stack([t[i] for t in params])) for i in (1, 2))
        W1, b1, w2, b2 = (torch.tensor(np.asarray(a, dtype=float)) for a in alpha)
        try:
            trace = search(prepare(space, L, R, b, W1, b1, w2, b2), torch.tensor(leaf_values), "hard",
                           sync_free=sync_free)
        except CellGraphError as err:
            assert "no eligible candidate" in str(err)
            return
        grad, = torch.autograd.grad((trace.vectors[:, 3:] * torch.linspace(-1, 2, 3, dtype=torch.float64)).sum(), L)
        results.append((trace.vectors.detach(), grad))
    (v0, g0), (v1, g1) = results
    assert torch.equal(v0, v1) and torch.allclose(g0, g1, rtol=1e-12, atol=1e-14)
    for k in range(len(leaf_values)):
        ref = np_search(space, params, dict(zip(space.leaves, leaf_values[k])), mlp_alpha(*alpha))
        np.testing.assert_allclose(v1[k].numpy(), np.stack([ref.vectors[e] for e in (*space.leaves, *ref.chosen)]),
                                   rtol=1e-12, atol=1e-10)


def _prepared(space: SearchSpace, seed: int = 2):
    """The search's parameters of :func:`_case` (p = 3, two samples) and its leaf values."""
    params, alpha, leaf_values = _case(seed, 3, 2, 3, "normal", "random")
    L, R, b = (torch.tensor(np.stack([t[i] for t in params])) for i in range(3))
    W1, b1, w2, b2 = (torch.tensor(np.asarray(a, dtype=float)) for a in alpha)
    return prepare(space, L, R, b, W1, b1, w2, b2), leaf_values


def test_search_defaults_to_the_hard_search_at_temperature_one_and_casts_the_leaves():
    prepared, leaf_values = _prepared(_space(3))
    leaves = torch.tensor(leaf_values)
    assert torch.equal(search(prepared, leaves).vectors, search(prepared, leaves, "hard").vectors)
    assert torch.equal(search(prepared, leaves, "soft").vectors, search(prepared, leaves, "soft", 1.0).vectors)
    cast = search(prepared, leaves.float())
    assert cast.vectors.dtype == torch.float64
    assert torch.equal(cast.vectors, search(prepared, leaves.float().double()).vectors)


def test_search_names_a_wrong_number_of_leaves():
    prepared, leaf_values = _prepared(_space(2))
    with pytest.raises(CellGraphError, match=r"^search: got 2 leaf vectors for the 3 leaves \['x', 'h', 'zero'\]$"):
        search(prepared, torch.tensor(leaf_values[:, :2]))
    one, _ = _prepared(SearchSpace((0, 1, 2, 3), GRU_U, OPS, (x,), (), (), 1))
    with pytest.raises(CellGraphError, match=r"^search: Algorithm 2 needs at least two leaves, got 1$"):
        search(one, torch.tensor(leaf_values[:, :1]))
