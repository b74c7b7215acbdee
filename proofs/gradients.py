"""Measured quantities of the gradient theorems (paper, Appendix "Gradient Control"):
trajectories of a cell, the exact Jacobians ``dh_t/dh_{t-1}`` (torch.autograd, float64,
through :func:`cellgraph.backends.torch.models.freeze.freeze`), and the constants of the
conditions (vanishCond1-3) and of the exploding-gradient theorem.

For a node ``v = u(o(L_r v_1, R_r v_2) + b_r)`` of a tree the proof of Lemma nodechild bounds

    ||dv/dv_1|| <= ||u'||_inf * ||do/d(L_r v_1)|| * ||L_r||,

with ``do/d(L_r v_1) = I`` for ``o = +`` (norm 1) and ``diag(R_r v_2)`` for ``o = *`` (norm
``||R_r v_2||_inf``, the paper's discussion of (vanishCond3)); :func:`op_derivative_norms`
gives these two norms for the operands of one node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from cellgraph.backends.numpy.plugin import evaluate
from cellgraph.backends.torch.models.freeze import FrozenCell, freeze
from cellgraph.cell import registry
from cellgraph.cell.expr import Expr, Node, h, x
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.errors import CellGraphError

__all__ = [
    "Trajectory",
    "scale_to_norm",
    "op_derivative_norms",
    "spectral_norm",
    "run_fixed",
    "run_search",
    "frozen",
    "state_jacobians",
    "unrolled_jacobian",
    "slope_activation",
]

Params = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass
class Trajectory:
    """A cell run for ``T`` steps: ``roots[t]`` is the tree of step ``t + 1`` (from
    ``h_t = roots[t](x[t], states[t])``), ``states[t]`` is ``h_t`` (``states[0] = h_0``),
    ``vectors[t]`` the value of every node of that tree."""

    xs: np.ndarray
    roots: list[Expr]
    states: list[np.ndarray]
    vectors: list[dict[Expr, np.ndarray]]
    params: Params


def scale_to_norm(params: Params, c1: float) -> Params:
    """Every ``L_r``, ``R_r`` rescaled to spectral norm ``c1`` (condition vanishCond1); the
    biases unchanged."""
    return [(L * c1 / spectral_norm(L), R * c1 / spectral_norm(R), b) for L, R, b in params]


def spectral_norm(a: np.ndarray) -> float:
    return float(np.linalg.norm(a, 2))


def op_derivative_norms(node: Node, values: dict[Expr, np.ndarray], params: Params) -> tuple[float, float]:
    """``(||do/d(L v_1)||, ||do/d(R v_2)||)`` at ``node``'s operand values."""
    L, R, _ = params[node.tuple]
    if node.op == "add":
        return 1.0, 1.0
    if node.op == "mul":
        return float(np.max(np.abs(R @ values[node.right]))), float(np.max(np.abs(L @ values[node.left])))
    raise CellGraphError(f"op {node.op!r}: its derivative norm is known for add and mul only")


def run_fixed(root: Expr, params: Params, xs: np.ndarray, h0: np.ndarray) -> Trajectory:
    """The trajectory of a cell whose tree is ``root`` at every step (float64 numpy)."""
    return run_search(lambda x_t, h_prev: (root, evaluate(root, {x: x_t, h: h_prev}, params)), params, xs, h0)


def run_search(
    step: Callable[[np.ndarray, np.ndarray], tuple[Expr, dict[Expr, np.ndarray]]],
    params: Params, xs: np.ndarray, h0: np.ndarray,
) -> Trajectory:
    """The trajectory of a cell whose step ``(x_t, h_{t-1}) -> (tree, node values)`` is
    ``step`` (e.g. a run of Algorithm 2)."""
    roots, states, vectors = [], [np.asarray(h0, dtype=np.float64)], []
    for x_t in xs:
        root, values = step(x_t, states[-1])
        roots.append(root)
        vectors.append(values)
        states.append(values[root])
    return Trajectory(np.asarray(xs), roots, states, vectors, params)


def frozen(root: Expr, params: Params) -> FrozenCell:
    """The float64 torch module of tree ``root``; every tuple trainable (the scaled identity
    tuples of the gradient checks are not ``(I, I, 0)``)."""
    layout = Layout(tuple(TupleSpec(f"t{r}") for r in range(len(params))))
    return freeze(CellGraph(root, "h"), params, layout=layout, dtype=torch.float64)


def state_jacobians(traj: Trajectory) -> list[np.ndarray]:
    """The exact ``dh_t/dh_{t-1}`` of every step, ``(p, p)``, by ``torch.autograd``."""
    cells: dict[Expr, FrozenCell] = {}
    out = []
    for t, root in enumerate(traj.roots):
        cell = cells.setdefault(root, frozen(root, traj.params))
        x_t = torch.from_numpy(traj.xs[t])
        jac = torch.autograd.functional.jacobian(
            lambda h_prev: cell.run({x: x_t, h: h_prev})[0], torch.from_numpy(traj.states[t]),
            vectorize=True,
        )
        out.append(jac.detach().numpy())
    return out


def slope_activation(slope: float) -> tuple[str, float]:
    """The registered activation ``u(z) = s z`` with ``s`` = ``slope`` rounded *down* to 6
    decimals (so ``||u'||_inf = s <= slope``), registered on first use: ``(name, s)``."""
    slope = math.floor(slope * 1e6) / 1e6
    name = "slope_" + f"{slope:.6f}".replace(".", "_").replace("-", "m")
    if name not in registry.activation_names():
        registry.register_activation(registry.Activation(
            name, lambda v: slope * v,
            {"numpy": lambda z: slope * z, "torch": lambda z: slope * z},
            abs(slope), rf"{slope}\,\cdot",
        ))
    return name, slope


def unrolled_jacobian(traj: Trajectory, T: int) -> np.ndarray:
    """``dh_T/dh_1`` (``(p, p)``) by ``torch.autograd`` through steps ``2..T`` of ``traj``."""
    cells: dict[Expr, FrozenCell] = {}

    def unroll(h_1: torch.Tensor) -> torch.Tensor:
        state = h_1
        for t in range(1, T):
            root = traj.roots[t]
            cell = cells.setdefault(root, frozen(root, traj.params))
            state = cell.run({x: torch.from_numpy(traj.xs[t]), h: state})[0]
        return state

    return torch.autograd.functional.jacobian(unroll, torch.from_numpy(traj.states[1])).detach().numpy()
