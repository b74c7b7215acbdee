"""cellgraph.proofs: every statement run once at the reduced sizes of `cellgraph prove --quick`
(suite.QUICK); the corrected statements hold, the errata of docs/paper-notes.md, *Errata*
reproduce, the negative controls detect what they plant, `cellgraph prove` prints a table /
parseable JSON. The full run is in the slow suite (`pytest -m slow`)."""

import json
import math

import numpy as np
import pytest

pytest.importorskip("torch", reason="the proofs measure Jacobians with torch.autograd")

from cellgraph import CellGraphError, Node, target  # noqa: E402
from cellgraph.algorithms.canonical import isomorphic  # noqa: E402
from cellgraph.cell import registry  # noqa: E402
from cellgraph.cell.expr import h, x  # noqa: E402
from cellgraph.cli import main  # noqa: E402
from cellgraph.proofs import (  # noqa: E402
    exploding,
    expressibility,
    gru_theorem,
    lemma1,
    lemma2,
    lstm_theorem,
    suite,
)
from cellgraph.cell.tree import unfold  # noqa: E402
from cellgraph.proofs.report import Outcome, Result, exit_code, format_table, to_json  # noqa: E402


def assert_erratum_reproduced(result: Result) -> None:
    assert result.erratum.startswith("erratum ")
    assert not result.literal.holds, result.literal.summary
    assert result.corrected is not None and result.corrected.holds, result.corrected
    assert result.counterexample
    assert result.ok


def assert_holds_as_stated(result: Result) -> None:
    assert result.erratum == "" and result.corrected is None
    assert result.literal.holds, result.literal.summary
    assert result.ok


@pytest.fixture(scope="module")
def quick() -> dict[str, Result]:
    """Every statement at the sizes of `cellgraph prove --quick`, seed 0, run once."""
    return {result.name: result for result in suite.run(seed=0, quick=True)}


def test_quick_prove_run_covers_every_statement(quick):
    assert list(quick) == list(suite.STATEMENTS) == list(suite.QUICK)
    assert exit_code(quick.values()) == 0
    assert "7/7 statements as expected" in format_table(quick.values())


# --- Lemma 1 ----------------------------------------------------------------------------
def test_lemma1_literal_fails_and_corrected_holds(quick):
    result = quick["lemma1"]
    assert_erratum_reproduced(result)
    assert result.evidence["sets"] == suite.QUICK["lemma1"]["n_sets"] == 100
    assert result.evidence["literal_failures"] > 90
    assert result.evidence["corrected_failures"] == 0
    assert result.evidence["max_alpha_minus_rank"] < 0.5
    assert result.evidence["min_distance"] < 1e-9  # near-duplicates were exercised


def test_ranked_alpha_puts_each_vector_in_its_band_even_for_near_duplicates():
    rng = np.random.default_rng(5)
    points = rng.normal(size=(7, 3))
    points[6] = points[2] + 1e-9
    alpha = lemma1.ranked_alpha(points)
    scores = np.array([alpha(v) for v in points])
    ranks = np.arange(1, 8)
    assert np.all(scores >= ranks) and np.all(scores < ranks + 0.5)
    assert np.all(np.diff(scores) > 0)


def test_paper_alpha_follows_geometry_not_indices():
    points = np.array([[0.0], [1.0], [2.0]])  # the middle point is closest to the others
    alpha = lemma1.paper_alpha(points)
    scores = [alpha(v) for v in points]
    assert not scores[0] > scores[1] > scores[2]


def test_lemma1_rejects_equal_vectors():
    with pytest.raises(CellGraphError, match="distinct"):
        lemma1.ranked_alpha(np.ones((3, 2)))


# --- expressibility -----------------------------------------------------------------------
def assert_control_rejects_wrong_tree(evidence: dict, n: int) -> None:
    """The negative control: Algorithm 2 built the wrong tree on every draw (the tree count
    cannot see it) and the comparison of the states rejected it on every draw."""
    assert evidence["control_draws"] == evidence["control_built"] == evidence["control_rejected"] == n


def test_gru_theorem_holds(quick):
    result, sizes = quick["gru"], suite.QUICK["gru"]
    assert_holds_as_stated(result)
    assert result.evidence["trees_isomorphic"] == result.evidence["values_match"] == sizes["n_draws"]
    assert result.evidence["worst_error"] <= 1e-12
    assert_control_rejects_wrong_tree(result.evidence, sizes["n_controls"])
    assert "negative control" in result.literal.summary


def test_gru_torch_matches_torch_gru_cell(quick):
    result, sizes = quick["gru_torch"], suite.QUICK["gru_torch"]
    assert_holds_as_stated(result)
    assert result.evidence["values_match"] == sizes["n_draws"]
    assert result.evidence["worst_error"] <= 1e-10
    assert_control_rejects_wrong_tree(result.evidence, sizes["n_controls"])


def test_negative_control_detects_a_wrong_tree_and_only_a_wrong_one():
    """alpha built for the GRU with h~ through sigmoid: Algorithm 2 builds that tree (so the
    tree count passes) and the equations reject it; with the true tree the control fails."""
    tgt = target("gru")
    rng = np.random.default_rng(3)

    def draws(n):
        for p in (1, 5)[:n]:
            leaves = {x: rng.normal(size=p), h: rng.uniform(-1, 1, size=p)}
            params = gru_theorem.random_tuples(rng, tgt, p)
            yield p, leaves, params, {"h": gru_theorem.gru_equations(leaves[x], leaves[h], params)}

    wrong = gru_theorem.with_activation(tgt, "h", "tanh", "sigmoid")
    assert [n.act for n in wrong.graph.internal_nodes()].count("tanh") == 0
    assert not isomorphic(wrong.graph.root, tgt.graph.root, tgt.layout)
    control, evidence = gru_theorem.negative_control(wrong, draws(2), 1e-12)
    assert control.holds, control.summary
    assert_control_rejects_wrong_tree(evidence, 2)
    true_tree, evidence = gru_theorem.negative_control(tgt, draws(2), 1e-12)
    assert not true_tree.holds and evidence["control_rejected"] == 0
    with pytest.raises(CellGraphError, match="no node with activation"):
        gru_theorem.with_activation(tgt, "h", "relu", "tanh")


def test_lstm_literal_fails_exhaustively_and_corrected_matches_equations_and_torch(quick):
    result, sizes = quick["lstm"], suite.QUICK["lstm"]
    assert_erratum_reproduced(result)
    assert result.evidence["second_run_trees"] == 4500
    assert result.evidence["closest_error"] > 1e-3
    assert result.evidence["trees_isomorphic"] == result.evidence["values_match"] == 2 * sizes["n_draws"]
    assert_control_rejects_wrong_tree(result.evidence, sizes["n_controls"])
    assert result.evidence["worst_error_equations"] <= 1e-12
    assert result.evidence["worst_error_torch"] <= 1e-10


def test_paper_second_run_trees_cover_one_and_two_node_trees():
    trees = list(lstm_theorem.paper_second_run_trees())
    assert len(set(trees)) == len(trees)
    assert sum(t.size == 1 for t in trees) == 5 * 5 * 2 * 2
    assert all(t.size <= 3 and t.tuple == 0 for t in trees)


def test_construction_rejects_a_node_the_search_space_cannot_build():
    tgt = target("gru")
    p = 2
    params = gru_theorem.random_tuples(np.random.default_rng(0), tgt, p)
    wrong = Node("add", "relu", 0, x, h)  # relu is not in the GRU space's U
    with pytest.raises(CellGraphError, match="not a candidate"):
        expressibility.intended_alpha(tgt.spaces[0], params, {x: np.ones(p), h: np.zeros(p)}, [wrong])
    backwards = Node("add", "sigmoid", 0, h, x)  # the earlier node x must be the left operand
    with pytest.raises(CellGraphError, match="not a candidate"):
        expressibility.intended_alpha(tgt.spaces[0], params, {x: np.ones(p), h: np.zeros(p)}, [backwards])


def test_merge_close_keeps_one_point_per_group():
    points = np.array([[0.0, 0.0], [1e-12, 0.0], [1.0, 0.0], [1.0, 2e-10]])
    merged = expressibility.merge_close(points)
    assert len(merged) == 2


# --- Lemma 2 ------------------------------------------------------------------------------
def test_leaf_depth_sequences_enumerate_each_shape_once():
    shapes = lemma2.leaf_depth_sequences(4)
    assert [len(s) for s in shapes] == [lemma2.catalan(n) for n in range(5)] == [1, 1, 2, 5, 14]
    assert sorted(map(tuple, shapes[2])) == [(1, 2, 2), (2, 2, 1)]


def test_lemma2_holds_on_every_small_tree(quick):
    result = quick["lemma2"]
    assert_holds_as_stated(result)
    max_internal = suite.QUICK["lemma2"]["max_internal"]
    assert result.evidence["trees"] == sum(lemma2.catalan(n) for n in range(1, max_internal + 1))
    assert math.isclose(result.evidence["max_sum_over_bound"], 1.0, rel_tol=1e-9)  # caterpillars


# --- gradient theorems --------------------------------------------------------------------
def test_vanishing_holds_with_exact_jacobians(quick):
    result = quick["vanishing"]
    assert_holds_as_stated(result)
    assert result.evidence["cells"] == suite.QUICK["vanishing"]["n_search_cells"] + 4  # + gru, gru_torch at 2 C0
    assert result.evidence["max_jacobian_over_bound"] <= 1.0
    assert result.evidence["max_leaf_depth_sum"] < 1.0
    assert result.evidence["max_gradient_decay_rate"] < result.evidence["max_1_minus_eps"]
    assert result.evidence["cells_outside_precondition"] == 0


def test_vanishing_precondition_is_not_a_conclusion():
    """A cell with C0 >= 1/2 is outside the theorem (left out, counted), not a violation; a
    cell under it whose Jacobian exceeds the bound violates it."""
    from cellgraph.proofs.vanishing import CellCheck

    fine = dict(steps=3, max_jacobian=0.5, max_jacobian_over_bound=0.9, max_bound=0.8,
                max_gradient_over_bound=0.5, decay_rate=0.5, direct=1.0)
    outside = CellCheck(c0=0.6, **{**fine, "max_bound": 0.6})
    assert not outside.applies and outside.holds
    assert CellCheck(c0=0.3, **fine).applies and CellCheck(c0=0.3, **fine).holds
    assert not CellCheck(c0=0.3, **{**fine, "max_jacobian_over_bound": 1.2}).holds


def test_exploding_caterpillar_grows_like_1_35_power_and_corrected_holds(quick):
    result = quick["exploding"]
    assert not any(name.startswith("slope_") for name in registry.activation_names())  # they were scoped
    assert_erratum_reproduced(result)
    assert 1.34 < result.evidence["counterexample_jacobian"] < 1.37
    assert math.isclose(result.evidence["counterexample_rate"], result.evidence["counterexample_jacobian"],
                        rel_tol=1e-6)
    assert result.evidence["violations"] == 0
    assert result.evidence["max_jacobian_tight_corrected"] < 1.0
    # negative control: the literal threshold makes every shape explode under the same measurement
    assert result.evidence["shapes_exploding_under_literal_theta"] == suite.QUICK["exploding"]["n_shapes"]
    # the Algorithm 2 cells sit at the threshold, not far under it
    assert result.evidence["max_factor_over_theta_search_cells"] > 0.99
    assert result.evidence["steps_without_condition"] > 0
    assert result.evidence["max_jacobian_search_cells"] > 0.1  # 0.059 before they were raised to it


def test_thresholds_and_trees_from_depths():
    assert math.isclose(exploding.literal_threshold(8), 9 ** (-1 / 12))
    assert round(exploding.literal_threshold(8), 4) == 0.8327
    depths = [2, 2, 1]
    root = exploding.tree_from_depths(depths, "identity")
    assert unfold(root).leaf_depths() == depths
    assert math.isclose(exploding.corrected_threshold(root), 3 ** (-1 / 3))
    assert unfold(exploding.caterpillar(4, "identity")).leaf_depths() == [4, 4, 3, 2, 1]


def test_fixed_point_params_make_ones_a_fixed_point():
    from cellgraph.backends.numpy.plugin import evaluate

    with registry.scoped():
        act, s = exploding.slope_activation(0.5)
        root = exploding.caterpillar(5, act)
        params = exploding.fixed_point_params(3, 0.4, s)
        assert np.allclose(evaluate(root, {h: np.ones(3)}, params)[root], 1.0, atol=1e-15)


# --- report and CLI -----------------------------------------------------------------------
def test_result_ok_requires_errata_to_reproduce():
    fails, holds = Outcome(False, "f"), Outcome(True, "h")
    assert Result("a", "A", fails, holds, erratum="erratum 1").ok
    assert not Result("a", "A", holds, holds, erratum="erratum 1").ok  # erratum not reproduced
    assert not Result("a", "A", fails, fails, erratum="erratum 1").ok  # correction fails
    assert not Result("b", "B", fails).ok
    assert exit_code([Result("b", "B", holds)]) == 0
    assert exit_code([Result("b", "B", holds), Result("a", "A", holds, holds, erratum="x")]) == 1
    text = format_table([Result("a", "A", fails, holds, erratum="erratum 1", counterexample="cx")])
    assert "reproduced" in text and "cx" in text


def test_suite_names_resolve_and_unknown_names_fail():
    for name in suite.STATEMENTS:
        assert callable(suite.statement(name))
    with pytest.raises(CellGraphError, match="unknown statement"):
        suite.run(["lemma3"])


def test_cli_prove_json_parses_and_quick_reduces_sizes(capsys):
    assert main(["prove", "--only", "lemma2", "--quick", "--json", "--seed", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["seed"] == 3 and doc["ok"] is True
    assert [r["name"] for r in doc["results"]] == ["lemma2"]
    assert doc["results"][0]["literal"]["holds"] is True
    assert doc["results"][0]["evidence"]["trees"] == sum(lemma2.catalan(n) for n in range(1, 9))  # not 12


def test_cli_prove_is_deterministic_for_a_seed(capsys):
    runs = []
    for _ in range(2):
        assert main(["prove", "--only", "lemma1", "--quick", "--json", "--seed", "2"]) == 0
        doc = json.loads(capsys.readouterr().out)
        for r in doc["results"]:
            r.pop("seconds")
        runs.append(doc)
    assert runs[0] == runs[1]
    assert main(["prove", "--only", "lemma1", "--quick", "--seed", "2"]) == 0
    assert "counterexample to the literal statement [lemma1]" in capsys.readouterr().out


def test_cli_prove_rejects_unknown_statement():
    with pytest.raises(SystemExit) as err:
        main(["prove", "--only", "lemma3"])
    assert err.value.code == 2


def test_to_json_carries_every_field():
    doc = json.loads(to_json([Result("a", "A", Outcome(True, "s"), evidence={"n": np.int64(3)})], seed=1))
    assert doc["results"][0]["evidence"] == {"n": 3}


@pytest.mark.slow
def test_full_prove_run_exits_zero(capsys):
    """The full run (every statement at full size, ~1-4 min); the default suite runs the quick one."""
    assert main(["prove"]) == 0
    assert "7/7 statements as expected" in capsys.readouterr().out
