"""Lemma 1 (paper, Appendix "Expressibility of RRNN", lemma:scoring; docs/paper-notes.md,
*Errata*, item 1).

    Given n distinct vectors v_1, ..., v_n in R^p there is a scoring function alpha with
    alpha(v_1) > ... > alpha(v_n).

The paper's proof takes

    alpha(v) = sum_{k=1}^n k exp(-||v - v_k||^2 / (2 sigma0^2)),
    sigma0^2 >= Delta / (log(n^2) - log(n^2 - 1)),  Delta = min_{j != k} ||v_j - v_k||^2 / 2.

That ``sigma0`` is *large*: every Gaussian is almost flat over the set, the self term
``k exp(0) = k`` is dropped by the proof's upper bound, and the order of the scores follows
the geometry of the set, not the indices. The literal construction fails almost always.

Corrected construction (used by the GRU and LSTM checks): a *small* ``sigma0`` with

    epsilon = exp(-d_min^2 / (2 sigma0^2)) < 1 / (n (n + 1)),   d_min = min_{j != k} ||v_j - v_k||,

here ``sigma0^2 = d_min^2 / (2 log(2 n (n + 1)))``, i.e. ``epsilon = 1 / (2 n (n + 1))``. Then

    alpha(v_i) = i + sum_{k != i} k exp(-||v_i - v_k||^2 / (2 sigma0^2)) in [i, i + epsilon n(n+1)/2) = [i, i + 1/4) within [i, i + 1/2),

so ``alpha(v_1) < alpha(v_2) < ... < alpha(v_n)``: **the last vector listed scores highest**
(list the vectors in reverse for the paper's direction). Any order is made by listing.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from cellgraph.errors import CellGraphError
from cellgraph.proofs.report import Outcome, Result, timed

__all__ = [
    "gaussian_alpha",
    "min_distance",
    "paper_sigma0",
    "corrected_sigma0",
    "paper_alpha",
    "ranked_alpha",
    "check",
]

Alpha = Callable[[np.ndarray], float]


def gaussian_alpha(vectors: np.ndarray, sigma0: float) -> Alpha:
    """``alpha(v) = sum_k k exp(-||v - v_k||^2 / (2 sigma0^2))`` over the rows ``v_k`` of
    ``vectors`` ``(n, p)``, ``k = 1..n``; ``v`` is ``(p,)``."""
    points = np.asarray(vectors, dtype=np.float64)
    weights = np.arange(1, len(points) + 1, dtype=np.float64)
    scale = 2.0 * sigma0 * sigma0

    def alpha(v: np.ndarray) -> float:
        d2 = np.sum((points - v) ** 2, axis=1)
        return float(weights @ np.exp(-d2 / scale))

    return alpha


def min_distance(vectors: np.ndarray) -> float:
    """``min_{j != k} ||v_j - v_k||`` (Euclidean) over the rows of ``vectors`` ``(n, p)``."""
    points = np.asarray(vectors, dtype=np.float64)
    if len(points) < 2:
        raise CellGraphError(f"Lemma 1 needs at least two vectors, got {len(points)}")
    best = math.inf
    for k in range(1, len(points)):  # row-wise differences: exact for near-duplicates
        best = min(best, float(np.min(np.sum((points[:k] - points[k]) ** 2, axis=1))))
    if best == 0.0:
        raise CellGraphError("Lemma 1 needs distinct vectors, two rows are equal")
    return math.sqrt(best)


def paper_sigma0(vectors: np.ndarray) -> float:
    """The proof's ``sigma0``: ``sigma0^2 = Delta / (log(n^2) - log(n^2 - 1))``."""
    n = len(vectors)
    delta = min_distance(vectors) ** 2 / 2.0
    return math.sqrt(delta / (math.log(n * n) - math.log(n * n - 1)))


def corrected_sigma0(d_min: float, n: int) -> float:
    """``sigma0`` with ``exp(-d_min^2 / (2 sigma0^2)) = 1 / (2 n (n + 1))`` (erratum 1)."""
    return d_min / math.sqrt(2.0 * math.log(2.0 * n * (n + 1)))


def paper_alpha(vectors: np.ndarray) -> Alpha:
    """The literal construction of the paper's proof."""
    return gaussian_alpha(vectors, paper_sigma0(vectors))


def ranked_alpha(vectors: np.ndarray) -> Alpha:
    """The corrected construction: ``alpha(v_i) in [i, i + 1/2)`` for row ``i = 1..n``, so the
    rows are scored in increasing order (the last row is the best)."""
    points = np.asarray(vectors, dtype=np.float64)
    return gaussian_alpha(points, corrected_sigma0(min_distance(points), len(points)))


def _random_set(rng: np.random.Generator, near: float | None) -> np.ndarray:
    """A random set of ``n`` vectors; with ``near`` two of them are ``near`` apart."""
    n = int(rng.integers(3, 13))
    p = int(rng.choice([1, 2, 5, 16]))
    points = rng.normal(size=(n, p))
    if near is not None:
        direction = rng.normal(size=p)
        points[-1] = points[int(rng.integers(0, n - 1))] + near * direction / np.linalg.norm(direction)
    return points


def _counterexample(points: np.ndarray, scores: np.ndarray) -> str:
    with np.printoptions(precision=4, suppress=True):
        rows = "\n".join(f"  v_{k + 1} = {v}   alpha = {s:.6f}" for k, (v, s) in enumerate(zip(points, scores)))
    return (
        f"n = {len(points)}, p = {points.shape[1]}, paper's sigma0 = {paper_sigma0(points):.4f}\n{rows}\n"
        f"  claimed alpha(v_1) > ... > alpha(v_n); measured order of the scores, best first: "
        f"{', '.join(f'v_{k + 1}' for k in np.argsort(-scores))}"
    )


@timed
def check(seed: int = 0, n_sets: int = 1000) -> Result:
    """Literal construction on ``n_sets`` random sets; corrected one on ``n_sets`` random sets
    and ``n_sets`` sets with near-duplicates (distances down to ``1e-10``)."""
    rng = np.random.default_rng([seed, 1])
    literal_fail = reversed_ok = 0
    example = ""
    for _ in range(n_sets):
        points = _random_set(rng, None)
        scores = np.array([paper_alpha(points)(v) for v in points])
        decreasing = bool(np.all(np.diff(scores) < 0))
        reversed_ok += bool(np.all(np.diff(scores) > 0))
        if not decreasing:
            literal_fail += 1
            if not example and len(points) <= 4:
                example = _counterexample(points, scores)
    near_gaps = (1e-2, 1e-4, 1e-6, 1e-8, 1e-10)
    corrected_fail = 0
    worst_excess = 0.0  # max over sets of alpha(v_i) - i; must stay < 1/2
    min_gap = math.inf
    n_checked = 0
    for trial in range(2 * n_sets):
        near = None if trial < n_sets else near_gaps[trial % len(near_gaps)]
        points = _random_set(rng, near)
        min_gap = min(min_gap, min_distance(points))
        alpha = ranked_alpha(points)
        excess = np.array([alpha(v) for v in points]) - np.arange(1, len(points) + 1)
        worst_excess = max(worst_excess, float(excess.max()))
        corrected_fail += not bool(np.all((excess >= 0) & (excess < 0.5)))
        n_checked += 1
    literal = Outcome(
        literal_fail == 0,
        f"paper's sigma0 misorders {literal_fail}/{n_sets} random sets "
        f"(increasing order instead: {reversed_ok}/{n_sets})",
    )
    corrected = Outcome(
        corrected_fail == 0,
        f"small sigma0: alpha(v_i) in [i, i+1/2) on {n_checked - corrected_fail}/{n_checked} sets "
        f"(increasing order: the last vector is the best)",
    )
    return Result(
        name="lemma1",
        title="Lemma 1 (a scoring function orders any n distinct vectors)",
        literal=literal,
        corrected=corrected,
        erratum="erratum 1",
        evidence={
            "literal_failures": literal_fail,
            "sets": n_sets,
            "corrected_sets": n_checked,
            "corrected_failures": corrected_fail,
            "max_alpha_minus_rank": worst_excess,
            "min_distance": min_gap,
        },
        counterexample=example,
    )
