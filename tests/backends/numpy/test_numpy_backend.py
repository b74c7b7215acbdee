"""The float64 numpy reference backend: evaluation against the paper's and torch's GRU/LSTM,
Algorithm 2 (exclusion, ties, second best, multi-state runs) and constants."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from cellgraph import CellGraphError, Leaf, Node, Role, SearchSpace, target
from cellgraph.algorithm2 import n_candidates
from cellgraph.backends.numpy.plugin import SearchResult, evaluate, evaluate_cell, mlp_alpha, search, search_cell
from cellgraph.cell import registry
from cellgraph.cell.constants import constant_vector, default_leaf_values
from cellgraph.cell.expr import c, h, one, x, zero
from cellgraph.targets import torch_tuples

P = 5


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def random_params(rng, n_trainable, p=P):
    eye = np.eye(p)
    trainable = [(rng.normal(size=(p, p)), rng.normal(size=(p, p)), rng.normal(size=p)) for _ in range(n_trainable)]
    return trainable + [(eye, eye, np.zeros(p))]


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is needed to compare with torch's own cells")


def torch_cell_weights(cell):
    return [t.detach().numpy() for t in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]


def distance_alpha(targets):
    """Scores ``alpha(v) = max_k (N + 1 - k - 1e6 ||v - t_k||)``: ``t_k`` scores exactly
    ``N + 1 - k``, a vector away from every target scores below 1; so iteration ``k``
    (``t_1..t_{k-1}`` excluded from it) chooses ``t_k``."""
    n = len(targets)
    return lambda v: max(n + 1 - k - 1e6 * np.linalg.norm(v - t) for k, t in enumerate(targets, 1))


def all_candidates(space, nodes):
    """Every candidate node of Algorithm 2 over the node list ``nodes`` (brute force)."""
    return [
        Node(o, u, r, nodes[i], nodes[j])
        for r, o, u in itertools.product(space.tuples, space.ops, space.activations)
        for i, j in itertools.combinations(range(len(nodes)), 2)
    ]


# --- constants ---------------------------------------------------------------------------

def test_constant_vectors():
    assert constant_vector(zero, 3).tolist() == [0, 0, 0]
    assert constant_vector(one, 3).tolist() == [1, 1, 1]
    assert constant_vector(Leaf("e2", "const"), 4).tolist() == [0, 0, 1, 0]
    with pytest.raises(CellGraphError, match="unknown constant leaf 'e02'"):
        constant_vector(Leaf("e02", "const"), 4)
    with pytest.raises(CellGraphError, match="unknown constant leaf 'two'"):
        constant_vector(Leaf("two", "const"), 4)
    with pytest.raises(CellGraphError, match="'e4': unit index 4 out of range for p = 4"):
        constant_vector(Leaf("e4", "const"), 4)
    with pytest.raises(CellGraphError, match="leaf 'h' has role 'prev'"):
        constant_vector(h, 4)


def test_default_leaf_values_fill_constants_in_algorithm_order():
    space = target("lstm").spaces[1]
    values = default_leaf_values(space, {c: 3.0, Leaf("c", Role.CURRENT): 4.0, h: 2.0, x: 1.0}, 2)
    assert list(values) == [x, h, c, Leaf("c", Role.CURRENT), zero]
    assert values[zero].tolist() == [0, 0] and values[c] == 3.0
    with pytest.raises(CellGraphError, match=r"no value given for leaf Leaf\('c', 'current'\) \(role current\)"):
        default_leaf_values(space, {x: 1.0, h: 2.0, c: 3.0}, 2)


# --- evaluation against the textbook cells ---------------------------------------------

def test_gru_matches_paper_equations(rng):
    (Wr, Wr_, br), (Wz, Wz_, bz), (Wh, Wh_, bh), ident = params = random_params(rng, 3)
    xv, hv = rng.normal(size=P), rng.normal(size=P)
    r = sigmoid(Wr @ xv + Wr_ @ hv + br)
    z = sigmoid(Wz @ xv + Wz_ @ hv + bz)
    h_tilde = np.tanh(Wh @ xv + Wh_ @ (r * hv) + bh)
    expected = z * hv + (1 - z) * h_tilde
    out = evaluate_cell(target("gru").cell, {x: xv, h: hv}, params)
    assert set(out) == {"h"}
    np.testing.assert_allclose(out["h"], expected, rtol=0, atol=1e-12)


def test_lstm_matches_paper_equations(rng):
    (Wf, Wf_, bf), (Wi, Wi_, bi), (Wc, Wc_, bc), (Wo, Wo_, bo), _ = params = random_params(rng, 4)
    xv, hv, cv = rng.normal(size=(3, P))
    f = sigmoid(Wf @ xv + Wf_ @ hv + bf)
    i = sigmoid(Wi @ xv + Wi_ @ hv + bi)
    o = sigmoid(Wo @ xv + Wo_ @ hv + bo)
    c_t = cv * f + i * np.tanh(Wc @ xv + Wc_ @ hv + bc)
    out = evaluate_cell(target("lstm").cell, {x: xv, h: hv, c: cv}, params)
    np.testing.assert_allclose(out["c"], c_t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["h"], o * np.tanh(c_t), rtol=0, atol=1e-12)


def test_gru_torch_matches_torch_grucell(torch, rng):
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(P, P).double()
    xb, hb = torch.tensor(rng.normal(size=(2, 4, P)))
    expected = cell(xb, hb).detach().numpy()
    out = evaluate_cell(target("gru_torch").cell, {x: xb.numpy(), h: hb.numpy()},
                        torch_tuples("gru_torch", *torch_cell_weights(cell)))
    np.testing.assert_allclose(out["h"], expected, rtol=0, atol=1e-10)


def test_lstm_torch_matches_torch_lstmcell(torch, rng):
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(P, P).double()
    xb, hb, cb = torch.tensor(rng.normal(size=(3, 4, P)))
    h_t, c_t = (t.detach().numpy() for t in cell(xb, (hb, cb)))
    out = evaluate_cell(target("lstm_torch").cell, {x: xb.numpy(), h: hb.numpy(), c: cb.numpy()},
                        torch_tuples("lstm_torch", *torch_cell_weights(cell)))
    np.testing.assert_allclose(out["h"], h_t, rtol=0, atol=1e-10)
    np.testing.assert_allclose(out["c"], c_t, rtol=0, atol=1e-10)


def test_batched_evaluate_equals_per_sample(rng):
    t, params = target("gru"), random_params(rng, 3)
    xb, hb = rng.normal(size=(2, 6, P))
    batched = evaluate(t.graph.root, {x: xb, h: hb}, params)
    for b in range(6):
        single = evaluate(t.graph.root, {x: xb[b], h: hb[b]}, params)
        for node, value in single.items():
            expected = batched[node] if node == zero else batched[node][b]
            np.testing.assert_allclose(value, expected, rtol=0, atol=1e-14)
    assert batched[t.graph.root].shape == (6, P)


def test_user_registered_activation_is_used(rng, monkeypatch):
    softsign = registry.Activation("softsign", lambda v: v, {"numpy": lambda z: z / (1 + np.abs(z))})
    monkeypatch.setitem(registry._ACTIVATIONS, "softsign", softsign)
    params = random_params(rng, 1)
    xv, hv = rng.normal(size=(2, P))
    node = Node("add", "softsign", 0, x, h)
    z = params[0][0] @ xv + params[0][1] @ hv + params[0][2]
    np.testing.assert_allclose(evaluate(node, {x: xv, h: hv}, params)[node], z / (1 + np.abs(z)), atol=1e-14)
    torch_only = registry.Activation("torch_only", lambda v: v, {"torch": abs})
    monkeypatch.setitem(registry._ACTIVATIONS, "torch_only", torch_only)
    with pytest.raises(CellGraphError, match=r"activation 'torch_only' has no numpy form \(has: \['torch'\]\)"):
        evaluate(Node("add", "torch_only", 0, x, h), {x: xv, h: hv}, params)


def test_evaluation_errors(rng):
    root, params = target("gru").graph.root, random_params(rng, 3)
    with pytest.raises(CellGraphError, match=r"no value given for leaf Leaf\('h'\) \(role prev\)"):
        evaluate(root, {x: np.ones(P)}, params)
    with pytest.raises(CellGraphError, match="uses tuple 3 but params hold 3 tuples"):
        evaluate(root, {x: np.ones(P), h: np.ones(P)}, params[:3])
    with pytest.raises(CellGraphError, match=r"leaf Leaf\('x'\): value of shape \(4,\), expected"):
        evaluate(root, {x: np.ones(4), h: np.ones(P)}, params)
    with pytest.raises(CellGraphError, match=r"params\[1\]: expected L, R of shape \(5, 5\)"):
        evaluate(root, {x: np.ones(P), h: np.ones(P)}, [params[0], (np.eye(4), np.eye(4), np.zeros(4))])


def test_mlp_alpha_is_linear_tanh_linear(torch, rng):
    H = 7
    W1, b1, w2, b2 = rng.normal(size=(H, P)), rng.normal(size=H), rng.normal(size=H), 0.3
    alpha = mlp_alpha(W1, b1, w2, b2)
    v = rng.normal(size=(4, P))
    net = torch.nn.Sequential(torch.nn.Linear(P, H), torch.nn.Tanh(), torch.nn.Linear(H, 1)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor(W1)), net[0].bias.copy_(torch.tensor(b1))
        net[2].weight.copy_(torch.tensor(w2[None])), net[2].bias.fill_(b2)
    expected = net(torch.tensor(v))[:, 0].detach().numpy()
    assert isinstance(alpha(v[0]), float)
    assert alpha(v[0]) == pytest.approx(expected[0], abs=1e-12)
    np.testing.assert_allclose(alpha(v), expected, atol=1e-12)
    with pytest.raises(CellGraphError, match="mlp_alpha: expected W1"):
        mlp_alpha(W1, b1, w2[:3], b2)


# --- Algorithm 2 -------------------------------------------------------------------------

def test_search_rebuilds_gru_target(rng):
    t, params = target("gru"), random_params(rng, 3)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P)}
    values = evaluate(t.graph.root, leaves, params)
    order = t.graph.internal_nodes()
    result = search(t.spaces[0], params, leaves, distance_alpha([values[n] for n in order]))
    assert result.root == t.graph.root
    assert result.chosen == order
    assert result.graph.root == t.graph.root and result.graph.state == "h"
    np.testing.assert_array_equal(result.scores, np.arange(8, 0, -1))
    assert np.all(result.second_scores < result.scores)
    for node in result.chosen:
        np.testing.assert_array_equal(result.vectors[node], values[node])
    assert set(result.vectors) == set(t.spaces[0].leaves) | set(order)
    total = [n_candidates(n, 4, 2, 4) for n in range(3, 11)]
    assert result.n_candidates[0] == total[0] and np.all(result.n_candidates <= total)


def test_search_cell_rebuilds_lstm_runs(rng):
    t, params = target("lstm"), random_params(rng, 4)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P), c: rng.normal(size=P)}
    states = evaluate_cell(t.cell, leaves, params)
    alphas = []
    for g in t.cell:
        known = {**leaves, Leaf("c", Role.CURRENT): states["c"]}
        values = evaluate(g.root, known, params)
        alphas.append(distance_alpha([values[n] for n in g.internal_nodes()]))
    results = search_cell(t.spaces, params, leaves, alphas, t.cell.states)
    assert [r.state for r in results] == ["c", "h"]
    assert [r.root for r in results] == [g.root for g in t.cell]
    for r in results:
        np.testing.assert_allclose(r.value, states[r.state], rtol=0, atol=1e-14)
    with pytest.raises(CellGraphError, match="2 spaces need as many alphas and states, got 1 alphas"):
        search_cell(t.spaces, params, leaves, alphas[:1], t.cell.states)


def test_exclusion_by_value(rng):
    t, params = target("gru"), random_params(rng, 3)
    space = dataclasses.replace(t.spaces[0], n_iterations=2)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P)}
    z_node = Node("add", "sigmoid", 1, x, h)
    z = evaluate(z_node, leaves, params)[z_node]
    result = search(space, params, leaves, lambda v: -np.linalg.norm(v - z))
    assert result.chosen[0] == z_node
    # id(0 + I z + 0) = z scores best at k = 2 but is already in P_1: skipped
    copy_of_z = Node("add", "identity", 3, zero, z_node)
    np.testing.assert_allclose(evaluate(copy_of_z, leaves, params)[copy_of_z], z, atol=1e-15)
    assert result.chosen[1] != copy_of_z
    assert np.max(np.abs(result.vectors[result.chosen[1]] - z)) > 1e-6
    candidates = all_candidates(space, [x, h, zero, z_node])
    equal_to_z = sum(np.max(np.abs(evaluate(n, leaves, params)[n] - z)) <= 1e-9 for n in candidates)
    assert equal_to_z >= 2  # z itself and id(0 + I z + 0)
    assert result.n_candidates[1] == len(candidates) - equal_to_z


def test_tie_goes_to_smallest_candidate_key(rng):
    space, params = target("gru").spaces[0], random_params(rng, 3)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P)}
    # the zero vector is made by tanh(x*0) and id(x*0) (and with h): the first in loop order wins
    result = search(dataclasses.replace(space, n_iterations=1), params, leaves, lambda v: -np.max(np.abs(v)))
    assert result.chosen[0] == Node("mul", "tanh", 3, x, zero)
    # every score equal, or equal within the tie tolerance: the loop order decides
    short = dataclasses.replace(space, n_iterations=2)
    flat = search(short, params, leaves, lambda v: 0.0)
    assert flat.chosen == (Node("add", "sigmoid", 0, x, h), Node("add", "sigmoid", 0, x, zero))
    nearly_flat = search(short, params, leaves, lambda v: 1.0 + 1e-14 * np.tanh(v.sum()))
    assert nearly_flat.chosen == flat.chosen


def test_second_best_differs_by_value(rng):
    space, params = dataclasses.replace(target("gru").spaces[0], n_iterations=1), random_params(rng, 3)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P)}
    alpha = lambda v: -np.max(np.abs(v))  # noqa: E731
    result = search(space, params, leaves, alpha)
    assert result.scores[0] == 0.0
    vectors = [evaluate(n, leaves, params)[n] for n in all_candidates(space, [x, h, zero])]
    nonzero = [alpha(v) for v in vectors if np.max(np.abs(v)) > 1e-9]
    assert len(nonzero) < len(vectors) - 1  # several candidates tie with the best by value
    assert result.second_scores[0] == max(nonzero) < 0


def test_margin():
    result = SearchResult(h, (), {}, np.array([3.0, 1.0, 2.0]), np.array([2.5, -4.0, math.nan]), np.array([1, 1, 1]))
    np.testing.assert_allclose(result.margin(2.0), [-0.25, -1.0, 0.0])  # no second: 0, as torch
    with pytest.raises(CellGraphError, match="M must be > 0"):
        result.margin(0)


def test_search_errors(rng):
    params = random_params(rng, 3)
    dead_end = SearchSpace((3,), ("identity",), ("mul",), (x,), (), (zero,), 2)
    with pytest.raises(CellGraphError, match="iteration 2 has no eligible candidate"):
        search(dead_end, params, {x: np.ones(P)}, lambda v: 0.0)
    with pytest.raises(CellGraphError, match="search space uses tuple 3 but params hold 3 tuples"):
        search(dead_end, params[:3], {x: np.ones(P)}, lambda v: 0.0)
    with pytest.raises(CellGraphError, match=r"leaf Leaf\('x'\): value of shape \(2, 5\), expected \(p,\)"):
        search(dead_end, params, {x: np.ones((2, P))}, lambda v: 0.0)
    with pytest.raises(CellGraphError, match="alpha returned nan for the candidate with key"):
        search(dead_end, params, {x: np.ones(P)}, lambda v: math.nan)
