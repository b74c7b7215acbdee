"""Theorem vanishing (paper, Sec. 4 thm:vanishing, Appendix thm:vanishingapp, Lemmas
nodechild and length; it holds, docs/paper-notes.md, *Errata*).

    If ||L||, ||R|| <= C1 (vanishCond1), ||u'||_inf <= C2 (vanishCond2),
    ||do(L v1, R v2)/d(L v1)||, ||do/d(R v2)|| <= C3 (vanishCond3), ||dE_t/dh_t|| <= C4
    (vanishCond4) and C0 = C1 C2 C3 < 1/2 (vanishCond5), then
    ||dh_t/dh_{t-1}|| <= sum_k C0^{l_k} <= 1 - eps (eps = 1/2 - C0, l_k the leaf depths) and
    ||dE_T/dh_T dh_T/dh_1 d+h_1/dphi|| <= C4 (1 - eps)^{T-1} ||d+h_1/dphi|| -> 0.

Cells checked, each run for ``T = 100`` steps on random inputs:

* *search cells*: random search spaces (2 tuples, ``O = {+, *}``, 2 random activations,
  ``N_bar`` 3 or 4), the tree of every step chosen by the reference Algorithm 2 with a random
  scoring network (the tree changes with ``t``);
* *targets*: the ``gru`` and ``gru_torch`` trees with random weights, every tuple (the
  identity tuple too) scaled.

How the conditions are met: every ``L_r``, ``R_r`` is scaled to spectral norm ``C1``;
``C2`` is the largest ``derivative_bound`` of the space's activations (registry); ``C3`` is
measured: 1 for ``+``, and for ``*`` the largest ``||L_r v||_inf``, ``||R_r v||_inf`` over
the tuples and every vector ``v`` on the trees of the trajectory. ``C1`` is chosen for a
wanted ``C0`` and lowered until the measured ``C0 = C1 C2 C3 < 1/2``. The loss is
``E_T = w . h_T`` with a random ``w``, ``C4 = ||w||``; ``phi`` is the bias of step 1 only (its direct
gradient ``d+h_1/dphi``), so ``||dE_T/dphi||`` is the quantity of the theorem.

Measured: the exact Jacobian ``dh_t/dh_{t-1}`` (torch.autograd, float64) of every step
against ``sum_k C0^{l_k}`` of that step's tree and ``1 - eps``, and ``||dE_T/dphi||`` by
backpropagation through ``T`` steps against ``C4 (1 - eps)^{T-1} ||d+h_1/dphi||`` for
``T`` up to 100.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from cellgraph.backends.numpy.plugin import mlp_alpha, search
from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Leaf, h, one, x, zero
from cellgraph.cell.layout import SearchSpace
from cellgraph.proofs.gradients import (
    Params,
    Trajectory,
    frozen,
    run_fixed,
    run_search,
    scale_to_norm,
    spectral_norm,
    state_jacobians,
)
from cellgraph.cell.tree import unfold
from cellgraph.proofs.report import Outcome, Result, timed
from cellgraph.targets import target

__all__ = ["Conditions", "conditions", "leaf_depth_sum", "CellCheck", "check_cell", "check"]

HORIZONS = (1, 2, 5, 10, 25, 50, 100)
ACTIVATIONS = ("sigmoid", "tanh", "identity", "relu", "one_minus")


@dataclass(frozen=True)
class Conditions:
    """The constants of (vanishCond1-3) measured on a trajectory, and ``C0 = C1 C2 C3``."""

    c1: float
    c2: float
    c3: float

    @property
    def c0(self) -> float:
        return self.c1 * self.c2 * self.c3


def conditions(traj: Trajectory, tuples: tuple[int, ...], activations: tuple[str, ...],
               ops: tuple[str, ...]) -> Conditions:
    """``C1`` over the tuples' ``L``, ``R``; ``C2`` over ``U``; ``C3`` over ``O``, the tuples
    and every vector on the trees of ``traj`` (condition vanishCond3 ranges over all of them)."""
    mats = [m for r in tuples for m in traj.params[r][:2]]
    c1 = max(spectral_norm(m) for m in mats)
    c2 = max(registry.activation(u).derivative_bound for u in activations)
    c3 = 1.0 if "add" in ops else 0.0
    if "mul" in ops:
        stacked = np.stack(mats)  # (2 n_r, p, p)
        for values in traj.vectors:
            v = np.stack(list(values.values()))  # (n, p)
            c3 = max(c3, float(np.max(np.abs(np.einsum("mij,nj->mni", stacked, v)))))
    return Conditions(c1, c2, c3)


def leaf_depth_sum(root: Expr, c0: float) -> float:
    """``sum_k C0^{l_k}`` over the leaves of the unfolded tree of ``root`` (Lemma 2's sum)."""
    return float(sum(c0 ** d for d in unfold(root).leaf_depths()))


@dataclass
class CellCheck:
    """What was measured on one cell."""

    c0: float
    steps: int
    max_jacobian: float  # max_t ||dh_t/dh_{t-1}||
    max_jacobian_over_bound: float  # max_t ||dh_t/dh_{t-1}|| / sum_k C0^{l_k}
    max_bound: float  # max_t sum_k C0^{l_k}, <= 1 - eps
    max_gradient_over_bound: float  # max_T ||dE_T/dphi|| / (C4 (1-eps)^{T-1} ||d+h_1/dphi||)
    decay_rate: float  # max_T (||dE_T/dphi|| / (C4 ||d+h_1/dphi||))^(1/(T-1)) over nonzero gradients
    direct: float  # ||d+h_1/dphi||

    @property
    def eps(self) -> float:
        return 0.5 - self.c0

    @property
    def applies(self) -> bool:
        """The theorem's precondition (vanishCond5): ``C0 < 1/2``."""
        return self.c0 < 0.5

    @property
    def holds(self) -> bool:
        """The theorem's conclusions (whether or not the precondition is met)."""
        return (self.max_jacobian_over_bound <= 1 + 1e-9 and self.max_bound <= 1 - self.eps + 1e-12
                and self.max_gradient_over_bound <= 1 + 1e-9)


TITLE = "Theorem vanishing (C1 C2 C3 < 1/2 => ||dh_t/dh_t-1|| <= 1 - eps, gradients vanish)"


def _gradients(traj: Trajectory, w: np.ndarray) -> tuple[np.ndarray, float]:
    """``||dE_T/dphi||`` for ``T`` in :data:`HORIZONS` by backpropagation through the
    unrolled cell (``phi`` = the biases of step 1's own module), and ``||d+h_1/dphi||``."""
    first = frozen(traj.roots[0], traj.params)
    cells: dict[Expr, torch.nn.Module] = {}
    state = torch.from_numpy(traj.states[0])
    states = []
    for t, root in enumerate(traj.roots):
        cell = first if t == 0 else cells.setdefault(root, frozen(root, traj.params))
        state = cell.run({x: torch.from_numpy(traj.xs[t]), h: state})[0]
        states.append(state)
    weight = torch.from_numpy(w)
    norms = []
    for T in HORIZONS:
        (grad,) = torch.autograd.grad(weight @ states[T - 1], first.bias, retain_graph=True, allow_unused=True)
        norms.append(0.0 if grad is None else float(grad.norm()))
    rows = []
    for i in range(states[0].shape[0]):
        (grad,) = torch.autograd.grad(states[0][i], first.bias, retain_graph=True, allow_unused=True)
        rows.append(torch.zeros_like(first.bias).reshape(-1) if grad is None else grad.reshape(-1))
    direct = spectral_norm(torch.stack(rows).detach().numpy())
    return np.array(norms), direct


def check_cell(traj: Trajectory, cond: Conditions, w: np.ndarray) -> CellCheck:
    """Measure one trajectory against the theorem's bounds with the constants ``cond``."""
    c0 = cond.c0
    jac = np.array([spectral_norm(j) for j in state_jacobians(traj)])
    bounds = np.array([leaf_depth_sum(root, c0) for root in traj.roots])
    norms, direct = _gradients(traj, w)
    c4 = float(np.linalg.norm(w))
    horizons = np.array(HORIZONS, dtype=np.float64)
    theorem = c4 * (1.0 - (0.5 - c0)) ** (horizons - 1.0) * direct
    seen = (horizons > 1) & (norms > 0)
    rates = (norms[seen] / (c4 * direct)) ** (1.0 / (horizons[seen] - 1.0)) if direct > 0 else np.zeros(0)
    return CellCheck(
        c0=c0, steps=len(traj.roots), max_jacobian=float(jac.max()),
        max_jacobian_over_bound=float(np.max(jac / bounds)), max_bound=float(bounds.max()),
        max_gradient_over_bound=float(np.max(norms / theorem)) if direct > 0 else 0.0,
        decay_rate=float(rates.max(initial=0.0)), direct=direct,
    )


def _scaled_run(run, params: Params, measure, c0_wanted: float, c2: float) -> tuple[Trajectory, Conditions]:
    """Scale ``L``, ``R`` for ``C0 = c0_wanted`` (assuming ``C3 = 1``), run, measure, and
    lower ``C1`` until the measured ``C0 < 1/2``."""
    c1 = c0_wanted / c2
    for _ in range(8):
        traj = run(scale_to_norm(params, c1))
        cond = measure(traj)
        if cond.c0 < 0.5:
            return traj, cond
        c1 *= 0.45 / cond.c0
    return traj, cond


def _random_params(rng: np.random.Generator, n: int, p: int) -> Params:
    return [(rng.normal(size=(p, p)), rng.normal(size=(p, p)), rng.normal(scale=0.5, size=p)) for _ in range(n)]


def _search_cell(rng: np.random.Generator, T: int) -> tuple[Trajectory, Conditions]:
    p = int(rng.choice([2, 4, 8]))
    acts = tuple(str(a) for a in rng.choice(ACTIVATIONS, size=2, replace=False))
    aux: tuple[Leaf, ...] = (zero,) if rng.random() < 0.5 else (one,)
    space = SearchSpace((0, 1), acts, ("add", "mul"), (x,), (h,), aux, int(rng.integers(3, 5)))
    H = 8
    alpha = mlp_alpha(rng.normal(size=(H, p)), rng.normal(size=H), rng.normal(size=H), 0.0)
    xs, h0 = rng.normal(size=(T, p)), rng.uniform(-1, 1, size=p)

    def run(params: Params) -> Trajectory:
        def step(x_t, h_prev):
            result = search(space, params, {x: x_t, h: h_prev}, alpha)
            return result.root, result.vectors
        return run_search(step, params, xs, h0)

    c2 = max(registry.activation(u).derivative_bound for u in acts)
    return _scaled_run(run, _random_params(rng, 2, p), lambda tr: conditions(tr, space.tuples, acts, space.ops),
                       float(rng.uniform(0.2, 0.49)), c2)


def _target_cell(rng: np.random.Generator, name: str, c0: float, T: int) -> tuple[Trajectory, Conditions]:
    tgt = target(name)
    space = tgt.spaces[0]
    p = int(rng.choice([4, 8]))
    xs, h0 = rng.normal(size=(T, p)), rng.uniform(-1, 1, size=p)
    root = tgt.graph.root
    c2 = max(registry.activation(u).derivative_bound for u in space.activations)
    return _scaled_run(lambda params: run_fixed(root, params, xs, h0), _random_params(rng, len(tgt.layout), p),
                       lambda tr: conditions(tr, space.tuples, space.activations, space.ops), c0, c2)


@timed
def check(seed: int = 0, n_search_cells: int = 4, T: int = 100) -> Result:
    """``n_search_cells`` random search cells and the ``gru``/``gru_torch`` trees at
    ``C0 ~ 0.3`` and ``C0 ~ 0.49``, each for ``T`` steps (``T >= 100`` for every horizon)."""
    rng = np.random.default_rng([seed, 6])
    cells = [_search_cell(rng, T) for _ in range(n_search_cells)]
    cells += [_target_cell(rng, name, c0, T) for name in ("gru", "gru_torch") for c0 in (0.3, 0.49)]
    measured = [check_cell(traj, cond, rng.normal(size=traj.states[0].shape[0])) for traj, cond in cells]
    checks = [c for c in measured if c.applies]  # a cell whose C0 stayed >= 1/2 tests nothing
    outside = len(measured) - len(checks)
    if not checks:
        return Result(name="vanishing", title=TITLE, literal=Outcome(
            False, f"not checked: none of the {outside} cells could be scaled to C0 < 1/2"),
            evidence={"cells": 0, "cells_outside_precondition": outside})
    holds = all(c.holds for c in checks)
    worst = max(checks, key=lambda c: c.max_jacobian_over_bound)
    summary = (
        f"{len(checks)} cells x {T} steps with C0 = C1 C2 C3 in [{min(c.c0 for c in checks):.2f}, "
        f"{max(c.c0 for c in checks):.2f}]: ||dh_t/dh_t-1|| <= sum C0^l_k <= 1-eps on every step "
        f"(max ratio {worst.max_jacobian_over_bound:.3f}), ||dE_T/dphi|| <= C4 (1-eps)^(T-1) ||d+h_1/dphi|| "
        f"for T <= {T} (max ratio {max(c.max_gradient_over_bound for c in checks):.3g})"
        + (f"; {outside} cells left out: their C0 stayed >= 1/2 (the precondition)" if outside else "")
    )
    return Result(
        name="vanishing", title=TITLE,
        literal=Outcome(holds, summary if holds else "VIOLATED: " + summary),
        evidence={
            "cells": len(checks),
            "cells_outside_precondition": outside,
            "steps": sum(c.steps for c in checks),
            "max_jacobian": max(c.max_jacobian for c in checks),
            "max_jacobian_over_bound": worst.max_jacobian_over_bound,
            "max_leaf_depth_sum": max(c.max_bound for c in checks),
            "max_gradient_over_theorem_bound": max(c.max_gradient_over_bound for c in checks),
            "max_gradient_decay_rate": max(c.decay_rate for c in checks),
            "max_1_minus_eps": max(1.0 - c.eps for c in checks),
        },
    )
