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
factor is ``< theta_t^3`` and ``||dh_t/dh_{t-1}|| < (N_t + 1) theta_t^(3 l_min,t) = 1``.
Checked on (a) random tree shapes (``N <= 10``) with ``h_{t-1}`` on every leaf and every
factor just under ``theta_t`` (the bound is sharp: balanced trees come close to 1), and
(b) random cells built by Algorithm 2 with random scoring (``O = {*}``,
``U = {sigma, u(z) = s z}``): no condition holds, ``||dh_t/dh_{t-1}|| < 1`` at every step
and ``||dh_T/dh_1|| <= 1`` for every ``T``. The counterexample satisfies (i)-(iv) under the
corrected threshold (its ``l_min`` is 1), so it does not contradict it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cellgraph import registry
from cellgraph.backends.numpy_backend import mlp_alpha, search
from cellgraph.expr import Expr, Node, h, one, x
from cellgraph.layout import SearchSpace
from cellgraph.proofs.gradients import (
    Params,
    Trajectory,
    op_derivative_norms,
    run_fixed,
    run_search,
    scale_to_norm,
    slope_activation,
    spectral_norm,
    state_jacobians,
    unrolled_jacobian,
)
from cellgraph.proofs.lemma2 import leaf_depth_sequences
from cellgraph.proofs.report import Outcome, Result, timed
from cellgraph.tree import unfold

__all__ = [
    "literal_threshold",
    "corrected_threshold",
    "caterpillar",
    "tree_from_depths",
    "fixed_point_params",
    "conditions_hold",
    "Growth",
    "growth",
    "check",
]

#: "Just under": every factor is ``theta (1 - MARGIN)``.
MARGIN = 1e-3


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


def fixed_point_params(p: int, a: float, s: float) -> Params:
    """One tuple ``(a I, a I, (1/s - a^2) 1)``: with ``u(z) = s z`` every ``*`` node over
    operands equal to ``1`` is ``1``, so ``h = 1`` is a fixed point of the cell."""
    eye = np.eye(p)
    return [(a * eye, a * eye, np.full(p, 1.0 / s - a * a))]


def conditions_hold(root: Expr, values: dict[Expr, np.ndarray], params: Params,
                    activations: Sequence[str], tuples: Sequence[int], theta: float) -> tuple[bool, ...]:
    """Which of the conditions (i)-(iv) hold at one step with threshold ``theta``: (i) over
    ``U``, (ii) over the tuples' ``L``, ``R``, (iii)/(iv) over the parent-child pairs of the tree."""
    first = any(registry.activation(u).derivative_bound >= theta for u in activations)
    second = any(spectral_norm(m) >= theta for r in tuples for m in params[r][:2])
    norms = [op_derivative_norms(node, values, params) for node in root.internal_nodes()]
    return (first, second, any(n[0] >= theta for n in norms), any(n[1] >= theta for n in norms))


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


def _tight_cell(depths: Sequence[int], theta_of, p: int, T: int) -> tuple[Trajectory, str, float]:
    """A tree with ``h`` on every leaf, every factor ``theta (1 - MARGIN)`` for the threshold
    ``theta_of(tree)``, run from the fixed point ``h = 1``."""
    theta = theta_of(tree_from_depths(depths, "identity"))
    act, s = slope_activation(theta * (1 - MARGIN))
    root = tree_from_depths(depths, act)
    traj = run_fixed(root, fixed_point_params(p, s, s), np.zeros((T, p)), np.ones(p))
    return traj, act, theta


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


def _search_cells(rng: np.random.Generator, n_cells: int, T: int) -> tuple[int, int, float, float, int]:
    """Random Algorithm 2 cells with no condition at the corrected threshold: returns the
    cells, steps without any condition, max ||dh_t/dh_t-1||, max ||dh_T/dh_1||, violations."""
    n_iterations = 3
    floor = (2 ** n_iterations) ** (-1.0 / 3)  # theta_t >= (N_t + 1)^(-1/3), N_t <= 2^N_bar - 1
    act, _ = slope_activation(floor * (1 - MARGIN))
    acts = ("sigmoid", act)
    steps = violations = 0
    worst_step = worst_end = 0.0
    for _ in range(n_cells):
        p = int(rng.choice([2, 4]))
        space = SearchSpace((0, 1), acts, ("mul",), (x,), (h,), (one,), n_iterations)
        params = scale_to_norm([(rng.normal(size=(p, p)), rng.normal(size=(p, p)), rng.normal(scale=0.5, size=p))
                                for _ in range(2)], floor * (1 - MARGIN) / math.sqrt(p))
        alpha = mlp_alpha(rng.normal(size=(8, p)), rng.normal(size=8), rng.normal(size=8), 0.0)

        def step(x_t, h_prev):
            result = search(space, params, {x: x_t, h: h_prev}, alpha)
            return result.root, result.vectors

        traj = run_search(step, params, rng.normal(size=(T, p)), rng.uniform(-1, 1, size=p))
        jac = [spectral_norm(j) for j in state_jacobians(traj)]
        for root, values, norm in zip(traj.roots, traj.vectors, jac):
            if not any(conditions_hold(root, values, params, acts, space.tuples, corrected_threshold(root))):
                steps += 1
                worst_step = max(worst_step, norm)
                violations += norm >= 1.0
        end = spectral_norm(unrolled_jacobian(traj, T))
        worst_end = max(worst_end, end)
        violations += end > 1.0
    return n_cells, steps, worst_step, worst_end, violations


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
    tight_max = 0.0
    for _ in range(n_shapes):
        n = int(rng.integers(1, 11))
        depths = shapes[n][int(rng.integers(0, len(shapes[n])))]
        traj, act, theta = _tight_cell(depths, corrected_threshold, 1, horizon)
        if any(any(conditions_hold(r, v, traj.params, (act,), (0,), theta))
               for r, v in zip(traj.roots, traj.vectors)):
            tight_violations += 1  # the construction must leave every condition false
        measured = growth(traj, (horizon,))
        tight_max = max(tight_max, measured.max_jacobian)
        tight_violations += measured.max_jacobian >= 1.0 or measured.end_to_end[-1] > 1.0
        literal_traj, _, _ = _tight_cell(depths, lambda root: literal_threshold(n), 1, 2)
        explode_literal += growth(literal_traj, (2,)).max_jacobian > 1.0
    n_cells, steps, worst_step, worst_end, violations = _search_cells(rng, n_search_cells, T)
    holds = tight_violations == 0 and violations == 0 and steps > 0
    corrected = Outcome(holds, (
        f"l_min = smallest leaf depth: {n_shapes} random shapes with every factor just under theta_t: "
        f"no condition, max ||dh_t/dh_t-1|| = {tight_max:.4f} < 1; {n_cells} Algorithm 2 cells, "
        f"{steps} steps without any condition: max ||dh_t/dh_t-1|| = {worst_step:.3g}, "
        f"max ||dh_{T}/dh_1|| = {worst_end:.3g}"
    ))
    evidence.update({
        "random_shapes": n_shapes,
        "shapes_exploding_under_literal_theta": explode_literal,
        "max_jacobian_tight_corrected": tight_max,
        "search_cells": n_cells,
        "steps_without_condition": steps,
        "max_jacobian_search_cells": worst_step,
        "violations": tight_violations + violations,
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
