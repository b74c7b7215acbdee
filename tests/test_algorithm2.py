"""Algorithm 2's backend-independent rules (cellgraph.algorithm2; paper Sec. 3.2): exclusion by
value at its stated tolerance, ties, the enumeration order, the candidate count and the
helpers every backend shares. Each test names the slip it guards against."""

import numpy as np
import pytest

from cellgraph import CellGraphError, Node, SearchSpace
from cellgraph.algorithm2 import (EXCLUSION_TOL, NORM_EPS, SPREAD_FLOOR, TIE_RTOL, candidate_key, check_mode,
                                  check_tau_units, n_candidates, normalize, pairs, score_spread, tie_tolerance)
from cellgraph.backends.numpy.plugin import search
from cellgraph.cell.expr import h, x, zero

P = 4
#: How far the near copy below lies from the vector it copies: visibly different (a thousand
#: times EXCLUSION_TOL), yet a thousand times closer than a tolerance loosened to 1e-3.
OFFSET = 1e-6


def _near_copy_setup():
    """A space whose tuple 1 is ``(I, I, OFFSET)``: at ``k = 2`` the node ``z = id(x + h)``
    chosen at ``k = 1`` has an exact copy ``id(0 + z)`` (tuple 0) and near copies
    ``z + OFFSET`` (tuple 1)."""
    eye = np.eye(P)
    params = [(eye, eye, np.zeros(P)), (eye, eye, np.full(P, OFFSET))]
    space = SearchSpace((0, 1), ("identity",), ("add",), (x,), (h,), (zero,), 2)
    rng = np.random.default_rng(7)
    leaves = {x: rng.normal(size=P), h: rng.normal(size=P)}
    return space, params, leaves, leaves[x] + leaves[h]


def test_exclusion_keeps_a_candidate_just_beyond_the_tolerance():
    """Exclusion by value removes vectors within EXCLUSION_TOL of ``P_{k-1}`` and nothing
    more: a candidate 1e-6 away from a chosen vector stays eligible and, scoring best, is
    chosen. Guards the tolerance (and the ``<=`` of the rule) against being loosened."""
    space, params, leaves, z = _near_copy_setup()
    result = search(space, params, leaves, lambda v: -np.max(np.abs(v - z)))
    assert result.chosen[0] == Node("add", "identity", 0, x, h)
    gap = np.max(np.abs(result.vectors[result.chosen[1]] - z))
    assert gap == pytest.approx(OFFSET, rel=1e-6)
    # k = 2 has 2 tuples x 3 pairs of (x, h, 0) + 2 tuples x 3 pairs with z; exactly the two
    # vectors equal to z (id(x + h) and id(0 + z), tuple 0) are excluded
    assert result.n_candidates[1] == n_candidates(4, 2, 1, 1) - 2


def test_exclusion_tolerance_is_far_below_a_visible_difference():
    """The rule's tolerance is an equality test for float64 round-off, not a closeness
    threshold (docs/paper-notes.md, *Algorithm 2: exact semantics*)."""
    assert 0 < EXCLUSION_TOL <= 1e-9
    assert 0 < TIE_RTOL <= 1e-12


def test_the_second_best_must_differ_by_more_than_the_tolerance():
    """``c_k**`` is the best eligible vector that differs from ``c_k*``: a near copy 1e-6
    away counts as different (its score, not nan, is the second score)."""
    space, params, leaves, z = _near_copy_setup()
    result = search(space, params, leaves, lambda v: -np.max(np.abs(v - z)))
    assert result.second_scores[0] == pytest.approx(-OFFSET, rel=1e-6)


def test_ties_are_relative_to_the_best_score_above_one():
    assert tie_tolerance(0.0) == TIE_RTOL
    assert tie_tolerance(0.5) == TIE_RTOL
    assert tie_tolerance(-1e6) == pytest.approx(TIE_RTOL * 1e6)
    assert tie_tolerance(1e6) == pytest.approx(TIE_RTOL * 1e6)


def test_candidate_key_is_the_literal_loop_order():
    """Tuple, then op, then activation, then the pair: the smaller key is the earlier."""
    assert candidate_key(1, 2, 3, 4, 5) == (1, 2, 3, 4, 5)
    assert candidate_key(0, 9, 9, 9, 9) < candidate_key(1, 0, 0, 0, 1)
    assert candidate_key(0, 0, 0, 1, 2) < candidate_key(0, 0, 0, 2, 0)


def test_pairs_are_every_i_below_j_in_lexicographic_order():
    assert list(pairs(4)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert list(pairs(1)) == [] and list(pairs(0)) == []


@pytest.mark.parametrize("n_nodes", [1, 2, 3, 7])
def test_candidate_count_is_the_product_of_the_sets_and_the_pairs(n_nodes):
    count = n_candidates(n_nodes, 2, 3, 5)
    assert count == 2 * 3 * 5 * len(list(pairs(n_nodes)))
    assert type(count) is int  # a count, also where a backend sizes an array with it


def test_normalize_is_zero_mean_unit_variance_with_eps():
    v = np.array([[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 0.0, 0.0]])
    out = normalize(v)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-15)
    var = v[0].var()
    np.testing.assert_allclose(out[0], (v[0] - v[0].mean()) / np.sqrt(var + NORM_EPS), rtol=1e-15)
    np.testing.assert_array_equal(out[1], 0.0)
    # over another axis: the statistics of each column
    np.testing.assert_allclose(normalize(v, axis=0)[:, 0], [0.5, -0.5] / np.sqrt(0.25 + NORM_EPS))


def test_score_spread_is_the_population_std_with_a_floor():
    np.testing.assert_allclose(score_spread(np.array([1.0, 3.0])), 1.0)
    assert score_spread(np.array([2.0, 2.0, 2.0])) == SPREAD_FLOOR
    assert score_spread(np.array([5.0])) == SPREAD_FLOOR


def test_mode_and_units_checks_name_the_known_values():
    assert check_mode("soft") == "soft" and check_tau_units("std") == "std"
    with pytest.raises(CellGraphError, match=r"^unknown choice mode 'argmax' \(known: hard, soft, straight-through\)$"):
        check_mode("argmax")
    with pytest.raises(CellGraphError, match=r"^unknown tau_units 'bits' \(known: score, std\)$"):
        check_tau_units("bits")
