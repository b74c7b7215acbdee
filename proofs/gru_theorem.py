"""Theorem GRU (paper, Sec. 4 thm:GRU and Appendix thm:GRUapp), checked by construction.

    There is a scoring function alpha such that Algorithm 2 with N = 8, S_data = {x_t},
    S_prev = {h_{t-1}}, S_aux = {0}, L = {W_r, W_z, W_h, I}, R = {W_r', W_z', W_h', I},
    B = {b_r, b_z, b_h, 0}, U = {sigma, tanh, 1 - ., id}, O = {+, *} generates

        r_t = sigma(W_r x_t + W_r' h_{t-1} + b_r)
        z_t = sigma(W_z x_t + W_z' h_{t-1} + b_z)
        h~_t = tanh(W_h x_t + W_h' (r_t * h_{t-1}) + b_h)
        h_t = z_t * h_{t-1} + (1 - z_t) * h~_t.

For every random draw of ``(x_t, h_{t-1}, weights)`` the check builds alpha by the corrected
Lemma 1 over every candidate Algorithm 2 meets along the intended path
(:mod:`cellgraph.proofs.expressibility`), runs the float64 reference Algorithm 2 and checks
that the tree is isomorphic to the ``gru`` target and that ``h_t`` equals the equations above
(written out here independently of the cell graph) within ``1e-12``.

What each count can detect. alpha is built *from* the target tree, so the isomorphism count
compares the tree with the tree it was steered to: it fails only when the construction does
not steer Algorithm 2 (a tie, candidates closer than the exclusion tolerance, candidate sets
that differ from the search's). It cannot detect a wrong target tree. Only the comparison of
``h_t`` with the independently written equations can, and the negative control shows that it
does: alpha is built for a deliberately wrong tree (:func:`with_activation`: ``h~_t`` through
sigmoid instead of tanh), the same machinery (:func:`check_target`) runs, and the control
passes only when Algorithm 2 builds that tree and the equations reject it on every draw.

The same with the ``gru_torch`` target (reset after the matrix, two biases: 9 nodes, 5 tuples)
against ``torch.nn.GRUCell`` with copied weights, float64, within ``1e-10``, and the same
negative control.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Iterator

import numpy as np

from cellgraph.algorithms.canonical import isomorphic
from cellgraph.cell.expr import h, relabel, x
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.errors import CellGraphError
from cellgraph.proofs.expressibility import construct
from cellgraph.proofs.report import Outcome, Result, joined, timed
from cellgraph.targets import Target, target, torch_tuples

__all__ = [
    "gru_equations", "random_tuples", "check_target", "outcome", "with_activation", "negative_control",
    "torch_cell", "cell_tuples", "check", "check_torch",
]

P_VALUES = (1, 2, 5, 16)

#: One draw: ``(p, leaves, params, expected state vectors)``.
Draw = tuple[int, dict, list, dict]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def gru_equations(x_t: np.ndarray, h_prev: np.ndarray, params) -> np.ndarray:
    """``h_t`` of the paper's Eq. (1)-(4) with ``params = [(W_r, W_r', b_r), (W_z, W_z', b_z),
    (W_h, W_h', b_h), ...]``."""
    (Wr, Wr_, br), (Wz, Wz_, bz), (Wh, Wh_, bh) = params[:3]
    r = _sigmoid(Wr @ x_t + Wr_ @ h_prev + br)
    z = _sigmoid(Wz @ x_t + Wz_ @ h_prev + bz)
    h_tilde = np.tanh(Wh @ x_t + Wh_ @ (r * h_prev) + bh)
    return z * h_prev + (1.0 - z) * h_tilde


def random_tuples(rng: np.random.Generator, tgt: Target, p: int) -> list:
    """Random ``(L, R, b)`` for the trainable tuples of ``tgt`` (entries ``N(0, 1/p)``, biases
    ``N(0, 1/4)``) and ``(I, I, 0)`` for its identity tuples."""
    eye = np.eye(p)
    scale = 1.0 / np.sqrt(p)
    return [
        (eye, eye.copy(), np.zeros(p)) if r in tgt.layout.identity_indices
        else (rng.normal(scale=scale, size=(p, p)), rng.normal(scale=scale, size=(p, p)),
              rng.normal(scale=0.5, size=p))
        for r in range(len(tgt.layout))
    ]


def check_target(tgt: Target, draws: Iterable[Draw], tol: float) -> tuple[dict, list[str]]:
    """Run the construction on every draw ``(p, leaves, params, expected)``; compare each
    state the search makes with ``expected[state]`` and each tree with the target's.

    Returns the evidence (``trees_isomorphic``: draws whose trees are the target's, which only
    a construction failing to steer Algorithm 2 can lower; ``values_match``: draws whose
    states all equal ``expected`` within ``tol``) and one failure description per failed draw."""
    worst = 0.0
    failures: list[str] = []
    n_points = n_draws = n_isomorphic = n_match = 0
    for p, leaves, params, expected in draws:
        results, n = construct(tgt.cell, tgt.spaces, params, leaves)
        n_points = max(n_points, n)
        problems = []
        same_trees = same_values = True
        for result, graph in zip(results, tgt.cell):
            if not isomorphic(result.root, graph.root, tgt.layout):
                same_trees = False
                problems.append(f"run {graph.state} built {result.root}, not the target tree")
            err = float(np.max(np.abs(result.value - expected[graph.state])))
            worst = max(worst, err)
            if err > tol:
                same_values = False
                problems.append(f"state {graph.state} differs by {err:.3g} > {tol:g}")
        n_isomorphic += same_trees
        n_match += same_values
        if problems:
            failures.append(f"p={p}: " + "; ".join(problems))
        n_draws += 1
    evidence = {"draws": n_draws, "p_values": "/".join(map(str, P_VALUES)), "trees_isomorphic": n_isomorphic,
                "values_match": n_match, "worst_error": worst, "tolerance": tol, "ranked_points_max": n_points}
    return evidence, failures


def _leaves(rng: np.random.Generator, p: int) -> dict:
    return {x: rng.normal(size=p), h: rng.uniform(-1.0, 1.0, size=p)}


def outcome(what: str, evidence: dict, failures: list[str]) -> Outcome:
    """The outcome of :func:`check_target`: ``what`` held on how many draws, each count, first failure."""
    n = evidence["draws"]
    summary = (f"{what} on {n - len(failures)}/{n} draws (tree count {evidence['trees_isomorphic']}/{n}: "
               f"fails only by a tie in the construction; states {evidence['values_match']}/{n})")
    return Outcome(not failures, summary + (f"; first failure: {failures[0]}" if failures else ""))


def with_activation(tgt: Target, state: str, old: str, new: str) -> Target:
    """A deliberately wrong ``tgt`` for a negative control: every node of the graph of
    ``state`` with activation ``old`` gets ``new`` (same search spaces and layout)."""
    graphs = [graph if graph.state != state else CellGraph(
        relabel(graph.root, lambda n: (n.op, new if n.act == old else n.act, n.tuple)), state) for graph in tgt.cell]
    if tuple(g.root for g in graphs) == tuple(g.root for g in tgt.cell):
        raise CellGraphError(f"target {tgt.name}: state {state!r} has no node with activation {old!r}")
    return replace(tgt, cell=MultiCell(tuple(graphs)),
                   description=f"the {tgt.name} tree of {state} with {old} replaced by {new}")


def negative_control(wrong: Target, draws: Iterable[Draw], tol: float) -> tuple[Outcome, dict]:
    """:func:`check_target` with alpha built for the deliberately wrong tree ``wrong`` and
    ``expected`` the true cell's states. Algorithm 2 builds ``wrong``, so the isomorphism count
    cannot see the mistake (alpha and reference are the same tree); the control holds only when
    Algorithm 2 builds ``wrong`` and the comparison of the states rejects it on every draw."""
    evidence, _ = check_target(wrong, draws, tol)
    n, built = evidence["draws"], evidence["trees_isomorphic"]
    rejected = n - evidence["values_match"]
    summary = (f"negative control, alpha built for {wrong.description}: Algorithm 2 built that tree on "
               f"{built}/{n} draws (the tree count cannot see a wrong tree), the states rejected it on "
               f"{rejected}/{n}")
    return Outcome(n > 0 and built == rejected == n, summary), {
        "control_draws": n, "control_built": built, "control_rejected": rejected}


def _checked(tgt: Target, draws: Callable[[int], Iterator[Draw]], n_draws: int, n_controls: int, tol: float,
             what: str) -> tuple[Outcome, dict]:
    """:func:`check_target` of ``tgt`` on ``draws(n_draws)`` and :func:`negative_control` with
    ``h~``/``n`` through sigmoid instead of tanh on ``draws(n_controls)``."""
    evidence, failures = check_target(tgt, draws(n_draws), tol)
    control, control_evidence = negative_control(with_activation(tgt, "h", "tanh", "sigmoid"), draws(n_controls), tol)
    return joined(outcome(what, evidence, failures), control), {**evidence, **control_evidence}


@timed
def check(seed: int = 0, n_draws: int = 100, n_controls: int = 4) -> Result:
    """The paper's GRU (target ``gru``) on ``n_draws`` random draws, ``p`` cycling over 1, 2, 5, 16,
    and the negative control on ``n_controls`` more."""
    tgt = target("gru")
    rng = np.random.default_rng([seed, 2])

    def draws(n: int) -> Iterator[Draw]:
        for k in range(n):
            p = P_VALUES[k % len(P_VALUES)]
            leaves, params = _leaves(rng, p), random_tuples(rng, tgt, p)
            yield p, leaves, params, {"h": gru_equations(leaves[x], leaves[h], params)}

    literal, evidence = _checked(tgt, draws, n_draws, n_controls, 1e-12,
                                 "Algorithm 2 (N=8, the paper's sets), alpha by corrected Lemma 1: GRU tree and h_t")
    return Result(
        name="gru",
        title="Theorem GRU (Algorithm 2 can generate the GRU equations)",
        literal=literal,
        evidence=evidence,
    )


def torch_cell(kind: str, rng: np.random.Generator, p: int):
    """A float64 ``torch.nn.GRUCell``/``LSTMCell`` (``kind``) with ``N(0, 1/p)`` weights from ``rng``."""
    import torch

    cell = getattr(torch.nn, kind)(p, p, dtype=torch.float64)
    with torch.no_grad():
        for tensor in cell.parameters():
            tensor.copy_(torch.from_numpy(rng.normal(scale=1.0 / np.sqrt(p), size=tuple(tensor.shape))))
    return cell


def cell_tuples(name: str, cell) -> list:
    """``torch_tuples`` of a torch cell's weights."""
    return torch_tuples(name, *(t.detach().numpy() for t in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)))


@timed
def check_torch(seed: int = 0, n_draws: int = 100, n_controls: int = 4) -> Result:
    """GRU as ``torch.nn.GRUCell`` computes it (target ``gru_torch``), float64, tolerance 1e-10,
    on ``n_draws`` draws (a draw costs twice a ``gru`` draw: 9 iterations over 5 tuples), and the
    negative control on ``n_controls`` more."""
    import torch

    tgt = target("gru_torch")
    rng = np.random.default_rng([seed, 3])

    def draws(n: int) -> Iterator[Draw]:
        for k in range(n):
            p = P_VALUES[k % len(P_VALUES)]
            cell = torch_cell("GRUCell", rng, p)
            leaves = _leaves(rng, p)
            with torch.no_grad():
                out = cell(torch.from_numpy(leaves[x])[None], torch.from_numpy(leaves[h])[None])
            yield p, leaves, cell_tuples("gru_torch", cell), {"h": out[0].numpy()}

    literal, evidence = _checked(tgt, draws, n_draws, n_controls, 1e-10,
                                 "Algorithm 2 (N=9, 5 tuples), alpha by corrected Lemma 1: gru_torch tree, "
                                 "h_t = torch.nn.GRUCell")
    return Result(
        name="gru_torch",
        title="GRU as torch.nn.GRUCell computes it",
        literal=literal,
        evidence=evidence,
    )
