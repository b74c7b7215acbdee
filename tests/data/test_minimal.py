"""The filters of minimal teachers: ablations that find nodes doing no work, and the conditioning
of a teacher's states; and the ``minimal:SEED[:LOW-HIGH]`` teachers drawn with them."""

from collections import Counter
from itertools import islice

import numpy as np
import pytest

from cellgraph import CellGraphError, Node, target
from cellgraph.cell.expr import h, x, zero
from cellgraph.data import minimal, planted
from cellgraph.data.minimal import (
    TOLERANCE, ablations, conditioning_problem, minimal_problem, minimality_problem, node_values, relative_change,
)
from cellgraph.data.planted import (
    MAX_DRAWS, first_cell, probe_problem, random_spec, random_teacher, refusals, teacher_draws, teacher_folder,
)
from cellgraph.data.planted_values import load_planted_values
from cellgraph.experiment.cellspec import resolve_cell

P = 4
RNG = np.random.default_rng(0)
INPUTS = RNG.standard_normal((32, 10, P))
I, O = np.eye(P), np.zeros((P, P))
IDENTITY = (I, I, np.zeros(P))


def _tuple(rng, scale=1.0, bias=0.0):
    return rng.standard_normal((P, P)) * scale / np.sqrt(P), rng.standard_normal((P, P)) * scale / np.sqrt(P), \
        np.full(P, bias) + 0.1 * rng.standard_normal(P)


def _changes(root, params, identity=frozenset(), inputs=INPUTS):
    """Ablation name -> relative change of the states over ``inputs``, in the ablations' order."""
    values = node_values(root, params, inputs)
    return {name: relative_change(values[root], node_values(r, p, inputs)[r])
            for name, r, p in ablations(root, params, values, inputs, identity)}


def test_node_values_run_the_cell_recurrently_from_zero_states():
    W, U, b = _tuple(np.random.default_rng(1))
    root = Node("add", "tanh", 0, x, h)
    states = np.zeros((32, P))
    for t in range(10):
        states = np.tanh(INPUTS[:, t] @ W.T + states @ U.T + b)
    assert np.allclose(node_values(root, [(W, U, b)], INPUTS)[root][:, -1], states)


def test_random_9_computes_tanh_of_1_minus_x_and_is_refused_as_not_minimal():
    """``random:9:4-7``: its ``x`` cancels (``n2 = sigmoid(x + 1 - x - n0)``, ``h = tanh(n2 + 1 - x - n2)``),
    so removing a node leaves its states as they are, and h_T does not depend on x_1 at all."""
    tgt = random_teacher(9, 0, (4, 7))
    root, rng = tgt.cell.output.root, np.random.default_rng(3)
    params = planted.teacher_tuples(rng, P, 1.0, 0.1, tgt.layout)
    assert np.allclose(node_values(root, params, INPUTS)[root], np.tanh(1 - INPUTS))
    changes = _changes(root, params, tgt.layout.identity_indices)
    assert min(changes.values()) < 1e-20 and changes["remove n1 keep right n0"] < 1e-20
    assert minimality_problem(root, params, INPUTS).startswith("remove: remove n0 keep left h changes h by ")
    assert conditioning_problem(root, params, INPUTS).startswith("forgetful: s_10 / s_2 = 0 < 0.01")
    assert probe_problem(tgt, 9, 0) is not None


def test_the_named_teachers_are_minimal_where_their_nonlinearities_are_used():
    """MGU at the search's weight scale 2 passes both filters; the GRU at weight scale 1 uses its
    reset gate in its linear range (a tangent changes h by less than 1% of its variance), and the
    first ablation under the tolerance is the problem named."""
    mgu = load_planted_values("mgu", 0, n_train=64, n_val=8, n_test=8, weight_scale=2.0)
    root = mgu.cell.output.root
    assert minimal_problem(root, mgu.params, mgu.inputs["train"], mgu.layout.identity_indices) is None
    gru = load_planted_values("gru", 0, n_train=64, n_val=8, n_test=8, weight_scale=1.0)
    args = gru.cell.output.root, gru.params, gru.layout.identity_indices, gru.inputs["train"]
    changes = _changes(*args)
    assert min(v for k, v in changes.items() if k.startswith("linear")) < TOLERANCE
    first = next(k for k, v in changes.items() if v < TOLERANCE)
    assert minimality_problem(*args[:2], args[3], args[2]) == (
        f"{first.split()[0]}: {first} changes h by {changes[first]:.2g} of its variance (< {TOLERANCE:g})")


def test_two_affine_nodes_in_a_row_are_found_by_the_refit_only():
    """``h = tanh(x + A(B h + b) + a)``: ``A`` and ``B`` on two trainable nodes compute what one does.
    The plain removal of either changes h; refitted, removing the inner node (its reader fitted to read
    ``h``) or the outer one (the inner node fitted to the outer one's values) does not."""
    rng = np.random.default_rng(2)
    inner = Node("add", "identity", 1, h, zero)
    root = Node("add", "tanh", 0, x, Node("add", "identity", 2, zero, inner))
    params = [IDENTITY, _tuple(rng), _tuple(rng)]
    changes = _changes(root, params, frozenset({0}))
    assert changes["remove n0 keep left h refit"] < 1e-20 and changes["remove n1 keep right n0 refit"] < 1e-20
    assert min(v for k, v in changes.items() if not k.endswith("refit")) > TOLERANCE
    assert minimality_problem(root, params, INPUTS, frozenset({0})).startswith(
        "remove: remove n0 keep left h refit changes h by ")
    # identity tuples are never refitted: then the refit is the plain removal
    plain = _changes(root, params, frozenset({0, 1, 2}))
    assert plain["remove n1 keep right n0 refit"] == plain["remove n1 keep right n0"] > TOLERANCE


def test_a_saturated_gate_is_a_constant_and_a_small_tanh_is_linear():
    rng = np.random.default_rng(4)
    gate = Node("add", "sigmoid", 1, x, zero)
    root = Node("add", "tanh", 2, x, Node("mul", "identity", 0, h, gate))
    saturated = [IDENTITY, (0.01 * I, O, np.full(P, 20.0)), _tuple(rng)]
    changes = _changes(root, saturated, frozenset({0}))
    assert changes["constant n0"] < 1e-12 and minimality_problem(root, saturated, INPUTS, frozenset({0}))
    used = [IDENTITY, (2 * I, O, np.zeros(P)), _tuple(rng, 2.0)]
    assert _changes(root, used, frozenset({0}))["constant n0"] > TOLERANCE
    linear = _changes(root, [IDENTITY, (0.3 * I, O, np.zeros(P)), _tuple(rng, 2.0)], frozenset({0}))
    assert linear["linear n0"] < 1e-2 * linear["constant n0"]  # sigmoid(z) ~ 1/2 + z/4 for small z
    small = Node("add", "tanh", 1, x, h)
    changes = _changes(small, [IDENTITY, (0.01 * I, 0.01 * I, np.zeros(P))], frozenset({0}))
    assert changes["linear n0"] < 1e-6
    assert _changes(small, [IDENTITY, (2 * I, 0.5 * I, np.zeros(P))], frozenset({0}))["linear n0"] > TOLERANCE


def test_conditioning_names_unbounded_deaf_chaotic_and_forgetful_states():
    walk = Node("add", "identity", 0, h, x)  # h_t = x_1 + ... + x_t
    assert conditioning_problem(walk, [IDENTITY], INPUTS).startswith("unbounded: max |h| = ")
    assert conditioning_problem(Node("add", "tanh", 0, h, zero), [(I, O, np.ones(P))], INPUTS).startswith(
        "deaf: s_2 = 0 < 0.001")
    growing = Node("add", "identity", 0, x, h)  # h_t = 0.05 x_t + 1.2 h_(t-1): s_10 = 1.2^8 s_2
    assert conditioning_problem(growing, [(0.05 * I, 1.2 * I, np.zeros(P))], INPUTS) == (
        f"chaotic: s_10 = {0.05 * 1.2 ** 8:.3g} > s_2 = 0.05")
    assert conditioning_problem(growing, [(0.05 * I, 0.5 * I, np.zeros(P))], INPUTS) == (
        f"forgetful: s_10 / s_2 = {0.5 ** 8:.3g} < 0.01")
    assert conditioning_problem(growing, [(0.05 * I, 0.7 * I, np.zeros(P))], INPUTS) is None  # 0.7^8 = 0.058


def test_minimal_specs_parse_print_and_name_folders():
    spec = random_spec("minimal:9:4-7")
    assert (spec.seed, spec.sizes, spec.minimal, str(spec), spec.folder) == (9, (4, 7), True, "minimal:9:4-7",
                                                                          "minimal9-4to7")
    assert str(random_spec("minimal:3")) == "minimal:3" and teacher_folder("minimal:3") == "minimal3"
    assert not random_spec("random:9:4-7").minimal
    with pytest.raises(CellGraphError, match=r"^teacher minimal:x: expected minimal:SEED or minimal:SEED:LOW-HIGH"):
        random_spec("minimal:x")
    with pytest.raises(CellGraphError, match="sizes 7-4: need 1 <= LOW"):
        random_spec("minimal:1:7-4")


def test_a_minimal_teacher_is_the_first_cell_of_its_seed_that_passes_the_filters():
    spec = random_spec("minimal:9:4-7")
    refused = Counter()
    (first, tgt), (second, _) = islice(teacher_draws(spec, refused), 2)
    assert 0 < first < second and sum(refused.values()) == second - 1
    for draw in range(first):
        assert probe_problem(random_teacher(9, draw, (4, 7)), 9, draw) is not None
    assert probe_problem(tgt, 9, first) is None and tgt.cell == random_teacher(9, first, (4, 7)).cell
    assert tgt.name == "minimal:9:4-7" and "minimal and well conditioned" in tgt.description
    assert sum(refusals(spec, first + 1).values()) == first and set(refusals(spec, first + 1)) <= set(minimal.KINDS)
    assert first_cell(spec).cell == tgt.cell == resolve_cell("minimal:9:4-7").cell
    data = load_planted_values("minimal:9:4-7", 0, n_train=20, n_val=5, n_test=5, weight_scale=1.0)
    assert data.cell == tgt.cell and data.draws == first + 1 and data.info()["teacher"] == "minimal:9:4-7"
    other = load_planted_values("minimal:9:4-7", 1, n_train=20, n_val=5, n_test=5, weight_scale=1.0)
    assert other.cell == tgt.cell  # drawn from its seed alone, whatever the data seed
    # a random spec's draws are random_teacher's sub-seeds, unfiltered
    assert [d for d, _ in teacher_draws(random_spec("random:9:4-7"))] == list(range(MAX_DRAWS))
    assert refusals(random_spec("random:9:4-7"), 5) == {}


def test_no_minimal_cell_is_a_one_line_error_that_counts_the_refusals(monkeypatch):
    monkeypatch.setattr(planted, "MAX_MINIMAL_DRAWS", 1)
    with pytest.raises(CellGraphError, match=r"^teacher minimal:9:4-7: none of the cells of sub-seeds 0-0 is minimal "
                                             r"and well conditioned \(1 forgetful\)$"):
        load_planted_values("minimal:9:4-7", 0, n_train=20, n_val=5, n_test=5)
    with pytest.raises(CellGraphError, match="none of the cells"):
        resolve_cell("minimal:9:4-7")
