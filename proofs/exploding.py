"""Theorem exploding, a necessary condition (paper, Sec. 4 thm:exploding, Appendix
thm:explodingapp; docs/paper-notes.md, *Errata*, item 3).

    Let l_min = floor(log2(N + 1)) + 1. If gradients explode, at least one of these holds,
    with theta = (N + 1)^(-1 / (3 l_min)):
      (i)   some u in U has ||u'|| >= theta;
      (ii)  some P in L u R has ||P|| >= theta;
      (iii) for infinitely many t a parent-child pair (v, v_1) has ||do/d(L v_1)|| >= theta;
      (iv)  for infinitely many t a parent-child pair (v, v_2) has ||do/d(R v_2)|| >= theta.

The proof would bound every edge of a root-to-leaf path by ``theta^3 = (N+1)^(-1/l_min)``
and ``||dh_t/dh_{t-1}|| <= sum_k theta^(3 l_k) <= (N+1) theta^(3 l_min) = 1``. That needs
``l_k >= l_min`` for *every* leaf, but ``floor(log2(N+1)) + 1`` is the smallest possible
*height* of a tree, not its smallest leaf depth: a caterpillar (every internal node has a
leaf child) has leaves at depths ``1, 2, ..., N, N``.

Counterexample (literal): ``N = 8``, a caterpillar of ``*`` nodes with ``h_{t-1}`` on every
leaf, ``U = {u(z) = s z}``, ``L = R = a I``, ``b = (1/s - a^2) 1`` so that ``h = 1`` is a
fixed point; ``s = a = theta (1 - 1e-3)`` with ``theta = 9^(-1/12) = 0.8327``, so every
factor of every edge (``||u'||``, ``||P||``, ``||R v_2||_inf = a``) is just under ``theta`` and
no condition holds. The exact Jacobian is ``sum_k (s a^2)^{l_k} I``, about ``1.35 I``, and
``||dh_T/dh_1||`` grows like ``1.35^(T-1)``.

Corrected statement: take ``l_min`` = the smallest leaf depth of the actual tree
``T_t^pred``. If no condition holds with ``theta_t = (N_t + 1)^(-1/(3 l_min,t))``, every edge
factor is ``< theta_t^3`` and ``||dh_t/dh_{t-1}|| <= sum_k theta_t^(3 l_k) <=
(N_t + 1) theta_t^(3 l_min,t) = 1``. The counterexample satisfies (i)-(iv) under the corrected
threshold (its ``l_min`` is 1), so it does not contradict it. Checked, by the consequence
(bounded growth) measured against the bound, each part able to fail:

(a) random tree shapes (``N <= 10``) with ``h_{t-1}`` on every leaf and every factor
    ``theta_t (1 - MARGIN)`` (no condition holds by construction, so the conditions are not
    what is checked): the exact ``||dh_t/dh_{t-1}||`` must stay under ``sum_k theta_t^(3 l_k)``
    and under 1, ``||dh_T/dh_1||`` under 1. The bound is sharp (balanced trees come within
    ``1 - (1 - MARGIN)^(3 l_min)`` of 1). Negative control: the same shapes with the paper's
    threshold must explode, every one of them (``sum_k (N+1)^(-l_k / l_min) > sum_k 2^(-l_k) = 1``
    since ``(N+1)^(1/l_min) < 2``), so the measurement tells a wrong threshold from a right one.
(b) random cells built by Algorithm 2 with random scoring (``O = {*}``,
    ``U = {sigma, u(z) = s z}``), weighted to sit at the threshold: positive diagonal
    ``L_r, R_r`` with entries in ``[1 - SPREAD, 1]`` times ``s``, biases that make ``1`` a
    fixed point of every node, inputs and ``h_0`` in ``[1 - SPREAD, 1]``, and ``s`` raised to
    ``(1 - MARGIN)`` times the smallest ``theta_t`` of the trees the cell builds (positive
    diagonal weights leave the Jacobian no cancellation to hide behind). The conditions are
    evaluated on the trees Algorithm 2 chose; on every step where none holds
    ``||dh_t/dh_{t-1}|| < 1``, and ``||dh_T/dh_1|| <= 1`` where none holds at any step.
    Measured (seeds 0-2, 3 cells): ``max ||dh_t/dh_{t-1}||`` 0.05-0.33 at the threshold; with
    the threshold doubled every seed's cells exceed 1, with it 1.5 times too large two seeds' do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cellgraph.backends.numpy.plugin import mlp_alpha, search
from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Node, h, one, x
from cellgraph.cell.layout import SearchSpace
from cellgraph.proofs.gradients import (
    Params,
    Trajectory,
    op_derivative_norms,
    run_fixed,
    run_search,
    slope_activation,
    spectral_norm,
    state_jacobians,
    unrolled_jacobian,
)
from cellgraph.cell.tree import unfold
from cellgraph.proofs.lemma2 import leaf_depth_sequences
from cellgraph.proofs.report import Outcome, Result, timed

__all__ = [
    "literal_threshold",
    "corrected_threshold",
    "caterpillar",
    "tree_from_depths",
    "fixed_point_tuple",
    "fixed_point_params",
    "condition_factors",
    "conditions_hold",
    "Growth",
    "growth",
    "SearchCells",
    "check",
]

#: "Just under": every factor is ``theta (1 - MARGIN)``.
MARGIN = 1e-3
#: The random diagonal weights, inputs and ``h_0`` of the Algorithm 2 cells lie in ``[1 - SPREAD, 1]``
#: times their largest value.
SPREAD = 0.1


def literal_threshold(n_internal: int) -> float:
    """``(N + 1)^(-1/(3 l_min))`` with the paper's ``l_min = floor(log2(N + 1)) + 1``."""
    l_min = math.floor(math.log2(n_internal + 1)) + 1
    return (n_internal + 1) ** (-1.0 / (3 * l_min))


def corrected_threshold(root: Expr) -> float:
    """``(N + 1)^(-1/(3 l_min))`` with ``l_min`` the smallest leaf depth of ``root``'s tree."""
    tree = unfold(root)
    return (tree.n_internal() + 1) ** (-1.0 / (3 * min(tree.leaf_depths())))


def caterpillar(n_internal: int, act: str) -> Node:
    """``*`` nodes each with ``h`` as one operand: leaves at depths ``1, 2, ..., N, N``."""
    node = Node("mul", act, 0, h, h)
    for _ in range(n_internal - 1):
        node = Node("mul", act, 0, node, h)
    return node


def tree_from_depths(depths: Sequence[int], act: str) -> Expr:
    """The full binary tree of ``*`` nodes with left-to-right leaf depths ``depths`` and ``h``
    on every leaf."""
    position = 0

    def build(depth: int) -> Expr:
        nonlocal position
        if depths[position] == depth:
            position += 1
            return h
        left = build(depth + 1)
        return Node("mul", act, 0, left, build(depth + 1))

    return build(0)


def fixed_point_tuple(left: np.ndarray, right: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(diag left, diag right, 1/s - left * right)``: with ``u(z) = s z`` a ``*`` node over
    operands equal to ``1`` is ``1``."""
    return np.diag(left), np.diag(right), 1.0 / s - left * right


def fixed_point_params(p: int, a: float, s: float) -> Params:
    """One tuple ``(a I, a I, (1/s - a^2) 1)``: with ``u(z) = s z`` every ``*`` node over
    operands equal to ``1`` is ``1``, so ``h = 1`` is a fixed point of the cell."""
    return [fixed_point_tuple(np.full(p, a), np.full(p, a), s)]


def condition_factors(root: Expr, values: dict[Expr, np.ndarray], params: Params,
                      activations: Sequence[str], tuples: Sequence[int]) -> tuple[float, ...]:
    """The largest quantity of each condition (i)-(iv) at one step: ``||u'||`` over ``U``,
    ``||P||`` over the tuples' ``L``, ``R``, ``||do/d(L v_1)||`` and ``||do/d(R v_2)||`` over
    the parent-child pairs of the tree."""
    norms = [op_derivative_norms(node, values, params) for node in root.internal_nodes()]
    return (max(registry.activation(u).derivative_bound for u in activations),
            max(spectral_norm(m) for r in tuples for m in params[r][:2]),
            max((n[0] for n in norms), default=0.0), max((n[1] for n in norms), default=0.0))


def conditions_hold(root: Expr, values: dict[Expr, np.ndarray], params: Params,
                    activations: Sequence[str], tuples: Sequence[int], theta: float) -> tuple[bool, ...]:
    """Which of the conditions (i)-(iv) hold at one step with threshold ``theta``."""
    return tuple(f >= theta for f in condition_factors(root, values, params, activations, tuples))


@dataclass(frozen=True)
class Growth:
    """Measured Jacobians of a trajectory: ``max_t ||dh_t/dh_{t-1}||`` and
    ``||dh_T/dh_1||`` (end-to-end autograd) for the horizons ``T``."""

    max_jacobian: float
    horizons: tuple[int, ...]
    end_to_end: tuple[float, ...]

    @property
    def rate(self) -> float:
        """``||dh_T/dh_1||^(1/(T-1))`` at the longest horizon."""
        return self.end_to_end[-1] ** (1.0 / (self.horizons[-1] - 1))


def growth(traj: Trajectory, horizons: Sequence[int]) -> Growth:
    jac = max(spectral_norm(j) for j in state_jacobians(traj))
    ends = tuple(spectral_norm(unrolled_jacobian(traj, T)) for T in horizons)
    return Growth(jac, tuple(horizons), ends)


def _tight_cell(depths: Sequence[int], theta_of, p: int, T: int) -> tuple[Trajectory, float]:
    """A tree with ``h`` on every leaf, every factor ``theta (1 - MARGIN)`` for the threshold
    ``theta = theta_of(tree)``, run from the fixed point ``h = 1``: the trajectory and ``theta``."""
    theta = theta_of(tree_from_depths(depths, "identity"))
    act, s = slope_activation(theta * (1 - MARGIN))
    root = tree_from_depths(depths, act)
    return run_fixed(root, fixed_point_params(p, s, s), np.zeros((T, p)), np.ones(p)), theta


def _literal(T: int) -> tuple[Outcome, dict, str]:
    n = 8
    theta = literal_threshold(n)
    act, s = slope_activation(theta * (1 - MARGIN))
    traj = run_fixed(caterpillar(n, act), fixed_point_params(3, s, s), np.zeros((T, 3)), np.ones(3))
    held = [conditions_hold(r, v, traj.params, (act,), (0,), theta) for r, v in zip(traj.roots, traj.vectors)]
    none_hold = not any(any(c) for c in held)
    measured = growth(traj, (2, T // 2, T))
    corrected = corrected_threshold(traj.roots[0])
    corrected_held = conditions_hold(traj.roots[0], traj.vectors[0], traj.params, (act,), (0,), corrected)
    holds = not none_hold or measured.end_to_end[-1] <= 1.0
    summary = (f"caterpillar N={n}, h on every leaf, every factor {s:.4f} < theta = {theta:.4f}: no condition "
               f"holds, yet ||dh_t/dh_t-1|| = {measured.max_jacobian:.3f} and ||dh_{T}/dh_1|| = "
               f"{measured.end_to_end[-1]:.3g} (rate {measured.rate:.3f}^(T-1))")
    ends = ", ".join(f"T={t}: {e:.4g}" for t, e in zip(measured.horizons, measured.end_to_end))
    example = (
        f"N = 8, l_min = floor(log2 9) + 1 = 4, theta = 9^(-1/12) = {theta:.5f}; tree (leaf depths "
        f"{unfold(traj.roots[0]).leaf_depths()}):\n  {traj.roots[0]}\n"
        f"  u(z) = {s} z, L = R = {s} I, b = (1/s - a^2) 1 = {traj.params[0][2][0]:.5f} 1, p = 3, h_0 = 1 "
        f"(a fixed point: max |h_T - 1| = {max(float(np.max(np.abs(v - 1))) for v in traj.states):.2g})\n"
        f"  conditions (i)-(iv) hold at no step of {T}: {none_hold}\n"
        f"  ||dh_t/dh_t-1|| = {measured.max_jacobian:.5f}; ||dh_T/dh_1||: {ends}\n"
        f"  with the corrected l_min = 1 (theta = {corrected:.4f}) conditions (i)-(iv) hold: {corrected_held}"
    )
    evidence = {"counterexample_jacobian": measured.max_jacobian, "counterexample_rate": measured.rate,
                f"counterexample_dhT_dh1_T{T}": measured.end_to_end[-1]}
    return Outcome(holds, summary), evidence, example


@dataclass(frozen=True)
class SearchCells:
    """What the random Algorithm 2 cells measured on their steps without any condition."""

    cells: int
    steps: int  # steps without any condition
    closest: float  # max over those steps of (largest factor of (i)-(iv)) / theta_t
    max_jacobian: float  # max ||dh_t/dh_{t-1}|| over them; the bound is 1
    max_end: float  # max ||dh_T/dh_1|| over the cells without a condition at any step
    violations: int


def _threshold_cell(rng: np.random.Generator, T: int, n_iterations: int = 3) -> tuple[Trajectory, SearchSpace]:
    """A random Algorithm 2 cell (module docstring, (b)) with ``s`` and ``||L_r|| = ||R_r||``
    at ``(1 - MARGIN)`` times the smallest corrected threshold of the trees it builds: that
    factor is raised from the floor ``(2^N)^(-1/3)`` of every ``theta_t`` and the cell rerun
    until its trees, which change with the weights, give it back."""
    p = int(rng.choice([2, 4]))
    shapes = [(rng.uniform(1 - SPREAD, 1, size=p), rng.uniform(1 - SPREAD, 1, size=p)) for _ in range(2)]
    alpha = mlp_alpha(rng.normal(size=(8, p)), rng.normal(size=8), rng.normal(size=8), 0.0)
    xs, h0 = rng.uniform(1 - SPREAD, 1, size=(T, p)), rng.uniform(1 - SPREAD, 1, size=p)

    def run(factor: float) -> tuple[Trajectory, SearchSpace]:
        act, s = slope_activation(factor)
        space = SearchSpace((0, 1), ("sigmoid", act), ("mul",), (x,), (h,), (one,), n_iterations)
        params = [fixed_point_tuple(s * a / a.max(), s * b / b.max(), s) for a, b in shapes]

        def step(x_t, h_prev):
            result = search(space, params, {x: x_t, h: h_prev}, alpha)
            return result.root, result.vectors

        return run_search(step, params, xs, h0), space

    factor = (1 - MARGIN) * (2 ** n_iterations) ** (-1.0 / 3)
    traj, space = run(factor)
    for _ in range(3):
        wanted = (1 - MARGIN) * min(corrected_threshold(root) for root in traj.roots)
        if wanted == factor:
            break
        factor = wanted
        traj, space = run(factor)
    return traj, space


def _search_cells(rng: np.random.Generator, n_cells: int, T: int) -> SearchCells:
    """``n_cells`` cells of :func:`_threshold_cell`: the conditions at the corrected threshold
    of each step's tree, and the Jacobians of the steps (and cells) without any."""
    steps = violations = 0
    closest = worst_step = worst_end = 0.0
    for _ in range(n_cells):
        traj, space = _threshold_cell(rng, T)
        free = 0
        for root, values, jac in zip(traj.roots, traj.vectors, state_jacobians(traj)):
            ratio = max(condition_factors(root, values, traj.params, space.activations, space.tuples))
            ratio /= corrected_threshold(root)
            if ratio < 1.0:
                norm = spectral_norm(jac)
                free += 1
                closest, worst_step = max(closest, ratio), max(worst_step, norm)
                violations += norm >= 1.0
        if free == len(traj.roots):
            end = spectral_norm(unrolled_jacobian(traj, T))
            worst_end = max(worst_end, end)
            violations += end > 1.0
        steps += free
    return SearchCells(n_cells, steps, closest, worst_step, worst_end, violations)


@timed
@registry.scoped()  # the slope_* activations it registers last for the check only
def check(seed: int = 0, n_shapes: int = 60, n_search_cells: int = 3, T: int = 50) -> Result:
    """Literal: the caterpillar over ``T`` steps. Corrected: ``n_shapes`` random shapes and
    ``n_search_cells`` Algorithm 2 cells (``T`` steps each, end-to-end Jacobians)."""
    rng = np.random.default_rng([seed, 7])
    literal, evidence, example = _literal(T)
    shapes = leaf_depth_sequences(10)
    horizon = 20
    explode_literal = tight_violations = 0
    tight_max = tight_over_sum = 0.0
    for _ in range(n_shapes):
        n = int(rng.integers(1, 11))
        depths = shapes[n][int(rng.integers(0, len(shapes[n])))]
        traj, theta = _tight_cell(depths, corrected_threshold, 1, horizon)
        leaf_sum = float(sum(theta ** (3 * d) for d in depths))  # the proof's bound, <= 1
        measured = growth(traj, (horizon,))
        tight_max = max(tight_max, measured.max_jacobian)
        tight_over_sum = max(tight_over_sum, measured.max_jacobian / leaf_sum)
        tight_violations += (measured.max_jacobian > leaf_sum or measured.max_jacobian >= 1.0
                             or measured.end_to_end[-1] > 1.0)
        literal_traj, _ = _tight_cell(depths, lambda root: literal_threshold(n), 1, 2)
        explode_literal += growth(literal_traj, (2,)).max_jacobian > 1.0
    cells = _search_cells(rng, n_search_cells, T)
    holds = (tight_violations == 0 and explode_literal == n_shapes and cells.violations == 0
             and cells.steps > 0)
    corrected = Outcome(holds, (
        f"l_min = smallest leaf depth: {n_shapes} random shapes with every factor just under theta_t: "
        f"max ||dh_t/dh_t-1|| = {tight_max:.4f} (bound 1), at most {tight_over_sum:.4f} of sum_k theta_t^(3 l_k); "
        f"negative control: with the literal theta the same shapes explode, {explode_literal}/{n_shapes}; "
        f"{cells.cells} Algorithm 2 cells with factors up to {cells.closest:.4f} theta_t, {cells.steps} steps "
        f"without any condition: max ||dh_t/dh_t-1|| = {cells.max_jacobian:.3g} (bound 1), "
        f"max ||dh_{T}/dh_1|| = {cells.max_end:.3g}"
    ))
    evidence.update({
        "random_shapes": n_shapes,
        "shapes_exploding_under_literal_theta": explode_literal,
        "max_jacobian_tight_corrected": tight_max,
        "max_jacobian_over_leaf_sum": tight_over_sum,
        "search_cells": cells.cells,
        "steps_without_condition": cells.steps,
        "max_factor_over_theta_search_cells": cells.closest,
        "max_jacobian_search_cells": cells.max_jacobian,
        f"max_dhT_dh1_search_cells_T{T}": cells.max_end,
        "violations": tight_violations + cells.violations,
    })
    return Result(
        name="exploding",
        title="Theorem exploding (necessary condition, l_min = floor(log2(N+1)) + 1)",
        literal=literal,
        corrected=corrected,
        erratum="erratum 3",
        evidence=evidence,
        counterexample=example,
    )
