"""Minimal, well-conditioned teachers: the filters a ``minimal:SEED[:LOW-HIGH]`` teacher's cell
passes (docs/discover.md, *Random teacher screening*).

A random cell (:func:`cellgraph.data.planted.random_teacher`) can compute with nodes that do no
work, so that a smaller structure fits its data as well (``random:9:4-7`` computes
``tanh(1 - x_t)``: its ``x`` cancels and it never reads ``h``), or have states that grow, that
amplify an input (chaotic) or forget it within a few steps. Such a teacher fails the
identifiability check for reasons visible before any training. This module judges a one-state
cell ``h_t = root`` (data leaf ``x``, previous state ``h``, ``h_0 = 0``) with given tuples
``params[r] = (L_r, R_r, b_r)`` (numpy, float64) on probe inputs ``x`` ``(n, T, p)``:

* :func:`conditioning_problem`: its states are finite with ``max |h| <=`` :data:`MAX_STATE`, and
  its sensitivity profile ``s_t`` (:func:`sensitivity`: the mean over the sequences of
  ``|h_t(x_a + eps d) - h_t(x_a)| / eps``, ``d`` a unit vector per sequence, ``a =``
  :data:`PERTURBED`) has ``s_a >=`` :data:`MIN_SENSITIVITY` (``h_a`` reads ``x_a``: not
  ``deaf``), ``s_T <= s_a`` (an input's effect does not grow: not ``chaotic``) and
  ``s_T >=`` :data:`MIN_MEMORY` ``* s_a`` (nor vanishes within ``T - a`` steps: not
  ``forgetful``);
* :func:`minimality_problem`: every ablation of a node (:func:`ablations`) changes the state
  sequence by a relative ``delta = mean((h' - h)^2) / var(h) >=`` :data:`TOLERANCE`, ``h'`` the
  ablated cell's states over the same inputs with the same tuples. The ablations of node ``n``:

  - ``remove``: ``n`` replaced by one of its operands (the ``remove`` mutation of
    :mod:`cellgraph.discover.mutations`: one node fewer), and again (``refit``) with new
    tuples for the trainable ``add`` nodes among the kept operand ``c`` (fitted to compute
    ``n``'s values) and ``n``'s readers (fitted to compute their own values with ``c`` in place of
    ``n``): each the least squares fit of ``u^-1(goal)`` on the node's operands over the teacher's
    run, ``u`` its activation (the goal clipped into its range). So two affine maps in a row, which
    one trainable node computes, are found;
  - ``drop``: an operand of an ``add`` node replaced by the zero leaf (the rewire to ``zero``:
    one matrix fewer on a trainable node);
  - ``constant``: ``n``'s value replaced by its mean over the probe, unit by unit (a saturated
    gate, or a node whose variation does not matter);
  - ``linear``: a ``tanh`` or ``sigmoid`` replaced by its tangent at 0 (``z``, ``1/2 + z/4``): a
    nonlinearity used in its linear range (the ``activation -> identity`` neighbour).

  Each is a structure no larger than the teacher's whose error, with the teacher's own tuples
  and before any training, is about ``delta`` of the targets' variance; retrained it can only do
  better, so one with a small ``delta`` fits the teacher's data about as well as the teacher's
  own structure (1e-5 to 1e-3 in the identifiability check's fits) at no more complexity.

:func:`minimal_problem` runs both (conditioning first: it is cheaper). Each problem is a line
``KIND: detail``, ``KIND`` one of :data:`KINDS`, so refusals can be counted by kind.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np

from cellgraph.backend import backend
from cellgraph.cell.expr import Expr, Node, h, substitute, x, zero

__all__ = ["PERTURBED", "EPS", "MAX_STATE", "MIN_SENSITIVITY", "MIN_MEMORY", "TOLERANCE", "KINDS", "node_values",
           "sensitivity", "ablations", "relative_change", "conditioning_problem", "minimality_problem",
           "minimal_problem"]

Params = Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]

#: The step (1-based) whose input the conditioning check perturbs.
PERTURBED = 2
#: The finite difference's step on that input.
EPS = 1e-6
#: The largest ``|h|`` over the probe.
MAX_STATE = 5.0
#: The least ``s_a``: how much a unit change of ``x_a`` moves ``h_a``.
MIN_SENSITIVITY = 1e-3
#: The least ``s_T / s_a``: what an input's effect keeps over the probe's last ``T - a`` steps.
MIN_MEMORY = 1e-2
#: The least relative change of the states an ablation may make.
TOLERANCE = 1e-2
#: The kinds of problem, conditioning's then the ablations'.
KINDS = ("unbounded", "deaf", "chaotic", "forgetful", "remove", "drop", "constant", "linear")
#: Activation -> (slope, value) of its tangent at 0: ``u(z) ~ value + slope * z``.
TANGENTS = {"tanh": (1.0, 0.0), "sigmoid": (0.25, 0.5)}
#: Activation -> its inverse, on values clipped into its range.
_CLIP = 1e-9
INVERSES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda v: v,
    "one_minus": lambda v: 1 - v,
    "tanh": lambda v: np.arctanh(np.clip(v, _CLIP - 1, 1 - _CLIP)),
    "sigmoid": lambda v: np.log(np.clip(v, _CLIP, 1 - _CLIP)) - np.log1p(-np.clip(v, _CLIP, 1 - _CLIP)),
}
SIDES = ("left", "right")


def node_values(root: Expr, params: Params, inputs: np.ndarray) -> dict[Expr, np.ndarray]:
    """Node -> ``(n, T, p)`` values of the cell ``h_t = root`` (every generated node and the
    root, which may be a leaf) over ``inputs`` ``(n, T, p)`` fed to ``x``, from ``h_0 = 0``;
    numpy backend, float64 (overflow is not checked: a value may be infinite or NaN)."""
    n, steps, p = inputs.shape
    evaluate = backend("numpy").evaluate
    kept = tuple(dict.fromkeys((*root.internal_nodes(), root)))
    out: dict[Expr, list[np.ndarray]] = {e: [] for e in kept}
    prev = np.zeros((n, p))
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps):
            values = evaluate(root, {x: inputs[:, t], h: prev}, params)
            for e in kept:
                out[e].append(np.broadcast_to(values[e], (n, p)))
            prev = out[root][-1]
    return {e: np.stack(v, axis=1) for e, v in out.items()}


def sensitivity(run: Callable[[np.ndarray], np.ndarray], inputs: np.ndarray, step: int = 1, seed: int = 0,
                states: np.ndarray | None = None) -> np.ndarray:
    """``(n, T)``: ``|h_t(x_step + eps d) - h_t(x_step)| / eps`` for every sequence and step ``t``
    (0 before ``step``, 1-based), ``h = run(inputs)`` ``(n, T, p)``, ``d`` a random unit vector per
    sequence (drawn from ``seed``), ``eps`` :data:`EPS`, in float64: how much a unit change of
    the input at ``step`` moves the state ``t``. ``states``: ``run(inputs)`` when the caller has
    it."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(inputs[:, step - 1].shape)
    moved = inputs.copy()
    moved[:, step - 1] += EPS * direction / np.linalg.norm(direction, axis=1, keepdims=True)
    base = run(inputs) if states is None else states
    with np.errstate(over="ignore", invalid="ignore"):
        return np.linalg.norm(run(moved) - base, axis=2) / EPS


def _with_operand(n: Node, side: int, operand: Expr) -> Node:
    operands = list(n.children)
    operands[side] = operand
    return Node(n.op, n.act, n.tuple, *operands)


def _tangent(n: Node, params: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tuple that makes ``identity(o(L a, R b) + b)`` the tangent at 0 of node ``n``
    (``slope * o(...) + slope * b + value``: both matrices scaled under ``add``, one under ``mul``)."""
    slope, value = TANGENTS[n.act]
    L, R, b = params[n.tuple]
    return slope * L, slope * R if n.op == "add" else R, slope * b + value


def _operand(e: Expr, root: Expr, values: dict[Expr, np.ndarray], inputs: np.ndarray) -> np.ndarray | None:
    """The ``(n, T, p)`` values operand ``e`` takes (``h``: the previous states), ``None`` for ``zero``."""
    if e == zero:
        return None
    if e == x:
        return inputs
    if e == h:
        states = values[root]
        return np.concatenate([np.zeros_like(states[:, :1]), states[:, :-1]], axis=1)
    return values[e]


def _refit(act: str, operands: Sequence[Expr], goal: np.ndarray, root: Expr, values: dict[Expr, np.ndarray],
           inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tuple ``(L, R, b)`` whose ``add`` node ``act(L a + R b + bias)`` over ``operands``
    ``(a, b)`` fits ``goal`` ``(n, T, p)`` best in least squares on the pre-activation
    ``act^-1(goal)`` (an operand that is the zero leaf keeps a zero matrix)."""
    p = goal.shape[-1]
    given = [_operand(e, root, values, inputs) for e in operands]
    columns = [v.reshape(-1, p) for v in given if v is not None]
    design = np.concatenate([*columns, np.ones((len(goal.reshape(-1, p)), 1))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        solution = np.linalg.lstsq(design, INVERSES[act](goal.reshape(-1, p)), rcond=None)[0]
    blocks = iter(np.split(solution[:-1], len(columns)) if columns else ())
    L, R = (np.zeros((p, p)) if v is None else next(blocks).T for v in given)
    return L, R, solution[-1]


def _bypassed(root: Node, n: Node, kept: Expr, params: list, values: dict[Expr, np.ndarray], inputs: np.ndarray,
              identity: frozenset[int]) -> tuple[Expr, list]:
    """``root`` with ``n`` replaced by operand ``kept``, and each trainable ``add`` node among
    ``kept`` and ``n``'s readers on a new tuple fitted by :func:`_refit` (module docstring)."""
    def refittable(e: Expr) -> bool:
        return isinstance(e, Node) and e.op == "add" and e.tuple not in identity

    built: dict[Expr, Expr] = {}
    params = list(params)
    for e in root.walk():
        if e == n:
            built[e] = built[kept]
        elif isinstance(e, Node):
            reader = n in e.children
            index = e.tuple
            if refittable(e) and (reader or e == kept):
                operands = [kept if reader and child == n else child for child in e.children]
                params.append(_refit(e.act, operands, values[n if e == kept else e], root, values, inputs))
                index = len(params) - 1
            built[e] = Node(e.op, e.act, index, built[e.left], built[e.right])
        else:
            built[e] = e
    return built[root], params


def ablations(root: Node, params: Params, values: dict[Expr, np.ndarray], inputs: np.ndarray,
              identity: frozenset[int] = frozenset()
              ) -> Iterator[tuple[str, Expr, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]]:
    """``(name, ablated root, its params)`` for every ablation of every node of ``root`` (module
    docstring), nodes named ``n0, n1, ...`` children first (``root.internal_nodes()``), e.g.
    ``"remove n1 keep right n0"``, ``"remove n1 keep right n0 refit"``, ``"drop n2 left h"``,
    ``"constant n3"``, ``"linear n0"``. ``values``: :func:`node_values` of ``root`` over
    ``inputs``; ``identity``: the indices of identity tuples (no refit). A new tuple an ablation
    needs is appended to ``params``, so tuples shared with other nodes stay as they are."""
    nodes = root.internal_nodes()
    label = {n: f"n{i}" for i, n in enumerate(nodes)}

    def name(e: Expr) -> str:
        return label.get(e, str(e))

    params = list(params)
    fresh, p = len(params), len(params[0][2])
    for n in nodes:
        at = name(n)
        for side, operand in enumerate(n.children):
            removal = f"remove {at} keep {SIDES[side]} {name(operand)}"
            yield removal, substitute(root, n, operand), params
            yield (f"{removal} refit", *_bypassed(root, n, operand, params, values, inputs, identity))
        for side, operand in enumerate(n.children):
            if n.op == "add" and operand != zero:
                yield (f"drop {at} {SIDES[side]} {name(operand)}", substitute(root, n, _with_operand(n, side, zero)),
                       params)
        mean = (np.zeros((p, p)), np.zeros((p, p)), values[n].mean(axis=(0, 1)))
        yield f"constant {at}", substitute(root, n, Node("add", "identity", fresh, zero, zero)), [*params, mean]
        if n.act in TANGENTS:
            yield (f"linear {at}", substitute(root, n, Node(n.op, "identity", fresh, *n.children)),
                   [*params, _tangent(n, params)])


def relative_change(states: np.ndarray, other: np.ndarray) -> float:
    """``mean((other - states)^2) / var(states)``; infinite where that is not finite."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        change = float(np.mean((other - states) ** 2) / states.var())
    return change if np.isfinite(change) else np.inf


def conditioning_problem(root: Node, params: Params, inputs: np.ndarray) -> str | None:
    """What keeps the cell from being well conditioned on ``inputs`` (``unbounded``, ``deaf``,
    ``chaotic``, ``forgetful``: module docstring), or ``None``."""
    states = node_values(root, params, inputs)[root]
    largest = np.abs(states).max()
    if not largest <= MAX_STATE:
        return f"unbounded: max |h| = {largest:.3g} > {MAX_STATE:g}"
    profile = sensitivity(lambda v: node_values(root, params, v)[root], inputs, PERTURBED,
                          states=states).mean(axis=0)
    first, last, steps = profile[PERTURBED - 1], profile[-1], len(profile)
    if not first >= MIN_SENSITIVITY:
        return f"deaf: s_{PERTURBED} = {first:.3g} < {MIN_SENSITIVITY:g}"
    if not last <= first:
        return f"chaotic: s_{steps} = {last:.3g} > s_{PERTURBED} = {first:.3g}"
    if not last >= MIN_MEMORY * first:
        return f"forgetful: s_{steps} / s_{PERTURBED} = {last / first:.3g} < {MIN_MEMORY:g}"
    return None


def minimality_problem(root: Node, params: Params, inputs: np.ndarray, identity: frozenset[int] = frozenset(),
                       tolerance: float = TOLERANCE) -> str | None:
    """The first ablation (:func:`ablations`; ``identity``: the identity tuples' indices) that
    changes the states over ``inputs`` by less than ``tolerance`` (:func:`relative_change`), as
    ``"KIND: NAME changes h by DELTA of its variance"``, or ``None``."""
    values = node_values(root, params, inputs)
    for name, ablated, ablated_params in ablations(root, params, values, inputs, identity):
        change = relative_change(values[root], node_values(ablated, ablated_params, inputs)[ablated])
        if change < tolerance:
            return f"{name.split()[0]}: {name} changes h by {change:.2g} of its variance (< {tolerance:g})"
    return None


def minimal_problem(root: Node, params: Params, inputs: np.ndarray, identity: frozenset[int] = frozenset()
                    ) -> str | None:
    """:func:`conditioning_problem`, then :func:`minimality_problem`: the first problem, or ``None``."""
    return conditioning_problem(root, params, inputs) or minimality_problem(root, params, inputs, identity)
