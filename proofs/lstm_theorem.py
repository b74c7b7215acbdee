"""Theorem LSTM (paper, Sec. 4 thm:LSTM and Appendix thm:LSTMapp; docs/paper-notes.md,
*Errata*, item 2).

    There is a scoring function alpha such that Algorithm 2, applied twice, generates

        f_t = sigma(W_f x_t + W_f' h_{t-1} + b_f)      i_t = sigma(W_i x_t + W_i' h_{t-1} + b_i)
        o_t = sigma(W_o x_t + W_o' h_{t-1} + b_o)
        c_t = c_{t-1} * f_t + i_t * tanh(W_c x_t + W_c' h_{t-1} + b_c)
        h_t = o_t * tanh(c_t).

The paper's second run has only the identity tuple ``(I, I, 0)``, ``U = {tanh, id}``,
``O = {+, *}``, ``N = 2`` and the leaves ``x_t, h_{t-1}, c_{t-1}, c_t, 0``. It never sees
``o_t`` (a node of the first run, which passes on only ``c_t``) nor ``(W_o, W_o', b_o)``, so no
scoring function can make it output ``h_t``. The literal check enumerates *every* tree of at
most 2 generated nodes over those leaves, tuple, operations and activations (operands in both
orders and repeated, a superset of what Algorithm 2 can build) and evaluates each on random
inputs: none equals ``h_t``.

Corrected construction (the ``lstm`` target): run 2 gets the tuple ``(W_o, W_o', b_o)``,
sigmoid and ``N = 3`` (``o_t``, ``tanh(c_t + 0)``, their product). With the corrected
Lemma 1 scoring per run (:mod:`cellgraph.proofs.expressibility`), the reference
``search_cell`` reproduces the equations above within ``1e-12`` and, with the ``lstm_torch``
target and copied weights, ``torch.nn.LSTMCell`` within ``1e-10`` (float64). As for Theorem GRU
(:mod:`cellgraph.proofs.gru_theorem`), the tree count can fail only when the construction does
not steer Algorithm 2 (a tie), never through a wrong target tree, which only the comparison of
the states can reject; the negative control builds alpha for the ``lstm`` tree with
``h_t = o_t * sigma(c_t)`` (run 2's tanh replaced by sigmoid) and passes only when Algorithm 2
builds that tree and the equations reject it on every draw.
"""

from __future__ import annotations

from itertools import product
from typing import Iterator

import numpy as np

from cellgraph.backends.numpy.plugin import evaluate
from cellgraph.cell.expr import Expr, Leaf, Node, Role, c, h, x, zero
from cellgraph.proofs.gru_theorem import (
    P_VALUES,
    Draw,
    cell_tuples,
    check_target,
    negative_control,
    outcome,
    random_tuples,
    torch_cell,
    with_activation,
)
from cellgraph.proofs.report import Outcome, Result, joined, timed
from cellgraph.targets import target

__all__ = ["lstm_equations", "paper_second_run_trees", "check"]

C_NOW = Leaf("c", Role.CURRENT)
#: The paper's second run: leaves, identity tuple 0, U, O, N.
SECOND_RUN_LEAVES = (x, h, c, C_NOW, zero)
SECOND_RUN_U = ("tanh", "identity")
SECOND_RUN_O = ("add", "mul")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def lstm_equations(x_t: np.ndarray, h_prev: np.ndarray, c_prev: np.ndarray, params) -> dict[str, np.ndarray]:
    """``c_t`` and ``h_t`` of the paper's LSTM equations; ``params`` in the ``lstm`` target's
    layout ``[(W_f, W_f', b_f), (W_i, W_i', b_i), (W_c, W_c', b_c), (W_o, W_o', b_o), ...]``;
    vectors ``(p,)`` or batches ``(B, p)``."""
    gate = lambda r: x_t @ params[r][0].T + h_prev @ params[r][1].T + params[r][2]  # noqa: E731
    f, i, o = _sigmoid(gate(0)), _sigmoid(gate(1)), _sigmoid(gate(3))
    c_t = c_prev * f + i * np.tanh(gate(2))
    return {"c": c_t, "h": o * np.tanh(c_t)}


def paper_second_run_trees() -> Iterator[Node]:
    """Every tree of at most 2 generated nodes the paper's second run could output: nodes
    ``u(o(I a, I b) + 0)`` over its leaves, operands in any order, repeats allowed."""
    forms = list(product(SECOND_RUN_O, SECOND_RUN_U))
    for a, b in product(SECOND_RUN_LEAVES, repeat=2):
        for o, u in forms:
            first = Node(o, u, 0, a, b)
            yield first
            operands = [(first, leaf) for leaf in SECOND_RUN_LEAVES]
            operands += [(leaf, first) for leaf in SECOND_RUN_LEAVES] + [(first, first)]
            for (left, right), (o2, u2) in product(operands, forms):
                yield Node(o2, u2, 0, left, right)


def _literal(rng: np.random.Generator, p: int = 4, batch: int = 16) -> tuple[Outcome, dict, str]:
    params = random_tuples(rng, target("lstm"), p)
    leaves = {x: rng.normal(size=(batch, p)), h: rng.uniform(-1, 1, size=(batch, p)),
              c: rng.normal(size=(batch, p))}
    states = lstm_equations(leaves[x], leaves[h], leaves[c], params)
    leaves[C_NOW] = states["c"]
    h_t = states["h"]
    eye = np.eye(p)
    identity_only = [(eye, eye, np.zeros(p))]
    n_trees = 0
    best: tuple[float, Expr] = (np.inf, zero)
    for tree in paper_second_run_trees():
        err = float(np.max(np.abs(evaluate(tree, leaves, identity_only)[tree] - h_t)))
        best = min(best, (err, tree), key=lambda e: e[0])
        n_trees += 1
    holds = best[0] <= 1e-6
    summary = (f"exhaustive: {n_trees} trees of <= 2 nodes of the paper's 2nd run, closest to "
               f"h_t = o_t*tanh(c_t) is off by {best[0]:.3g}")
    example = (f"paper's 2nd run: tuples {{(I, I, 0)}}, U = {{tanh, id}}, O = {{+, *}}, N = 2, "
               f"leaves x, h_(t-1), c_(t-1), c_t, 0; p = {p}, {batch} random samples.\n"
               f"  best of all {n_trees} trees: {best[1]}\n"
               f"  max |tree - h_t| = {best[0]:.4f} (h_t needs o_t, which depends on W_o, W_o', b_o)")
    return Outcome(holds, summary), {"second_run_trees": n_trees, "closest_error": best[0]}, example


@timed
def check(seed: int = 0, n_draws: int = 50, n_controls: int = 4) -> Result:
    """Literal: exhaustive search of the paper's second run. Corrected: the ``lstm`` target on
    ``n_draws`` draws against the equations, ``lstm_torch`` on ``n_draws`` draws against
    ``torch.nn.LSTMCell``, the negative control on ``n_controls`` draws against the equations."""
    import torch

    rng = np.random.default_rng([seed, 4])
    literal, evidence, example = _literal(rng)
    lstm, lstm_torch = target("lstm"), target("lstm_torch")

    def leaves(p: int) -> dict:
        return {x: rng.normal(size=p), h: rng.uniform(-1.0, 1.0, size=p), c: rng.normal(size=p)}

    def paper_draws(n: int) -> Iterator[Draw]:
        for k in range(n):
            p = P_VALUES[k % len(P_VALUES)]
            values, params = leaves(p), random_tuples(rng, lstm, p)
            yield p, values, params, lstm_equations(values[x], values[h], values[c], params)

    def torch_draws() -> Iterator[Draw]:
        for k in range(n_draws):
            p = P_VALUES[k % len(P_VALUES)]
            cell, values = torch_cell("LSTMCell", rng, p), leaves(p)
            with torch.no_grad():
                h_t, c_t = cell(torch.from_numpy(values[x])[None],
                                (torch.from_numpy(values[h])[None], torch.from_numpy(values[c])[None]))
            yield p, values, cell_tuples("lstm_torch", cell), {"c": c_t[0].numpy(), "h": h_t[0].numpy()}

    paper_evidence, paper_failures = check_target(lstm, paper_draws(n_draws), 1e-12)
    torch_evidence, torch_failures = check_target(lstm_torch, torch_draws(), 1e-10)
    control, control_evidence = negative_control(with_activation(lstm, "h", "tanh", "sigmoid"),
                                                 paper_draws(n_controls), 1e-12)
    paper = outcome("lstm (run 2 with (W_o, W_o', b_o), sigmoid, N=3): trees and c_t, h_t = equations",
                    paper_evidence, paper_failures)
    torched = outcome("lstm_torch = torch.nn.LSTMCell", torch_evidence, torch_failures)
    evidence.update({
        "draws": paper_evidence["draws"] + torch_evidence["draws"],
        "trees_isomorphic": paper_evidence["trees_isomorphic"] + torch_evidence["trees_isomorphic"],
        "values_match": paper_evidence["values_match"] + torch_evidence["values_match"],
        "worst_error_equations": paper_evidence["worst_error"],
        "worst_error_torch": torch_evidence["worst_error"],
        **control_evidence,
    })
    return Result(
        name="lstm",
        title="Theorem LSTM (Algorithm 2 applied twice generates the LSTM equations)",
        literal=literal,
        corrected=joined(paper, torched, control),
        erratum="erratum 2",
        evidence=evidence,
        counterexample=example,
    )
