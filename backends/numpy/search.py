"""Algorithm 2 (construction of the computational tree of the ``t``-th cell), written
literally in float64 numpy for one sample: the reference every faster search must match
(paper, Sec. 3.2 and Appendix "Extensions of RRNN model"; the exact rules are those of
:mod:`cellgraph.algorithm2`, docs/paper-notes.md, *Algorithm 2: exact semantics*).

    P_0 = {}
    for k = 1 .. N_bar:
        V_t^k = { u(o(L_r c_i, R_r c_j) + b_r) : r, o, u; c_i, c_j in S_data, S_prev, S_aux, P_{k-1}, i < j }
        c_k* = argmax { alpha(v) : v in V_t^k, v not in P_{k-1} }
        P_k = P_{k-1} + [c_k*]
    h_t = c_{N_bar}*, T_t = the tree rooted at c_{N_bar}*

With cellgraph's discovery recipe (docs/paper-notes.md, *Extension: the discovery recipe*)
the score is ``alpha(v) + s_k(slot)``, a structural logit per iteration and candidate slot
``(r, o, u, i, j)``, and "``v`` not in ``P_{k-1}``" may exclude by slot (the candidates already
chosen) rather than by value (``structure``, ``exclusion`` of :func:`search`).

Every candidate is rebuilt at every iteration (no incremental bookkeeping): clarity over
speed. Leaf vectors have shape ``(p,)``; scores come from any callable ``alpha`` on a
``(p,)`` vector, e.g. :func:`~cellgraph.backends.numpy.eval.mlp_alpha`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from cellgraph.algorithm2 import (CANDIDATE_NORMS, EXCLUSION_TOL, EXCLUSIONS, TAU_UNITS, candidate_key, normalize,
                                  pairs, score_spread, tie_tolerance)
from cellgraph.backends.numpy.eval import (
    Params,
    as_leaf_vector,
    as_params,
    combine,
    numpy_activation,
    numpy_op,
)
from cellgraph.cell.constants import default_leaf_values
from cellgraph.cell.expr import Expr, Leaf, Node, Role
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["SearchResult", "search", "search_cell"]

Alpha = Callable[[np.ndarray], float]


@dataclass
class SearchResult:
    """One run of Algorithm 2 for one sample.

    Attributes:
        root: ``c_{N_bar}*``, the root of the cell (its vector is the state made).
        chosen: ``(c_1*, ..., c_N*)`` in the order generated.
        vectors: ``(p,)`` vector of every leaf and every chosen node.
        scores: ``(N,)`` ``alpha(c_k*)``.
        second_scores: ``(N,)`` ``alpha(c_k**)``, the best eligible candidate whose vector
            differs from ``c_k*``; ``nan`` when there is none.
        n_candidates: ``(N,)`` number of eligible candidates at iteration ``k`` (those of
            ``V_t^k``, counted with multiplicity, whose vector is not in ``P_{k-1}``).
        state: name of the state made (``"h"``, or ``"c"`` for an LSTM's first run).
        trail: ``(n_leaves + N, p)`` the leaf vectors, then the vector each iteration added
            to ``P`` (in soft mode the mixture, which :attr:`vectors` cannot hold apart when
            the argmax repeats a node).
        keys: ``(N,)`` the :func:`~cellgraph.algorithm2.candidate_key` of each ``c_k*``.
    """

    root: Expr
    chosen: tuple[Node, ...]
    vectors: dict[Expr, np.ndarray]
    scores: np.ndarray
    second_scores: np.ndarray
    n_candidates: np.ndarray
    state: str = "h"
    trail: np.ndarray | None = None
    keys: tuple[tuple[int, int, int, int, int], ...] = ()

    @property
    def graph(self) -> CellGraph:
        """The cell DAG rooted at ``c_{N_bar}*``."""
        return CellGraph(self.root, self.state)

    @property
    def value(self) -> np.ndarray:
        """The state made, ``h_t = c_{N_bar}*``."""
        return self.vectors[self.root]

    def margin(self, M: float) -> np.ndarray:
        """``(N,)`` margin terms ``m(N_k) = -(1/M) min(M, alpha(c_k*) - alpha(c_k**))``
        (paper Sec. 3.3); an iteration without a second candidate gives 0, as in the torch
        loss (it has nothing to separate; the term is a constant either way)."""
        if not M > 0:
            raise CellGraphError(f"margin: M must be > 0, got {M}")
        gap = np.where(np.isnan(self.second_scores), 0.0, self.scores - self.second_scores)
        return -np.minimum(M, gap) / M


class _Candidate(NamedTuple):
    key: tuple[int, int, int, int, int]
    score: float
    vector: np.ndarray


def _in(v: np.ndarray, rows: np.ndarray, tol: float) -> bool:
    """Whether ``v`` equals (max-abs within ``tol``) any row of ``rows`` ``(m, p)``."""
    return bool(len(rows)) and bool(np.any(np.max(np.abs(rows - v), axis=1) <= tol))


#: The structural term of the discovery recipe: ``(k, (r, o, u, i, j)) -> s_k`` of that slot.
Structure = Callable[[int, tuple[int, int, int, int, int]], float]


def _score(alpha: Alpha, v: np.ndarray, key: tuple[int, ...]) -> float:
    score = float(alpha(v))
    if math.isnan(score):
        raise CellGraphError(f"alpha returned nan for the candidate with key {key}")
    return score


def _choose(eligible: list[_Candidate]) -> _Candidate:
    """Highest score; scores within ``tie_tolerance`` of it tie, the smallest key wins."""
    best = max(c.score for c in eligible)
    floor = best - tie_tolerance(best)
    return min((c for c in eligible if c.score >= floor), key=lambda c: c.key)


def search(
    space: SearchSpace,
    params: Params,
    leaves: Mapping[Leaf, np.ndarray],
    alpha: Alpha,
    exclusion_tol: float = EXCLUSION_TOL,
    state: str = "h",
    candidate_norm: str = "none",
    mode: str = "hard",
    tau: float = 1.0,
    tau_units: str = "score",
    structure: Structure | None = None,
    exclusion: str = "value",
) -> SearchResult:
    """Run Algorithm 2 on one sample.

    In ``soft`` mode (docs/paper-notes.md, *Scoring, choice modes and the margin*) the vector
    added to ``P`` is the ``softmax(alpha / (tau sigma))``-weighted sum of the eligible
    candidates (``sigma`` 1, or with ``tau_units = "std"`` the spread of their scores),
    not ``c_k*``'s; later candidates are built from it and checked against it. The recorded
    structure, scores and second scores are those of the argmax ``c_k*``.

    Args:
        space: the sets ``L, R, B`` (``space.tuples``), ``U``, ``O``, the leaf groups and
            ``N_bar``.
        params: ``(L_r, R_r, b_r)`` per layout tuple index.
        leaves: ``(p,)`` vectors of the data, prev and current leaves (constants are filled).
        alpha: scoring function on a ``(p,)`` vector.
        exclusion_tol: max-abs distance under which a vector counts as already in ``P``.
        state: name of the state made.
        candidate_norm: ``none`` or ``sample`` (:data:`cellgraph.algorithm2.CANDIDATE_NORMS`:
            every candidate normalised over its features before it is scored; ``batch``
            needs a batch, so the one-sample reference does not take it).
        mode: ``hard`` (Algorithm 2) or ``soft`` (the mixture, above).
        tau: the softmax temperature of ``soft`` mode.
        tau_units: ``score`` or ``std`` (:data:`cellgraph.algorithm2.TAU_UNITS`).
        structure: ``s_k(key)``, the structural logit added to ``alpha`` at iteration ``k``
            (from 1) for the candidate of key ``(r, o, u, i, j)`` (positions in ``space``'s
            tuples, ops and activations, and in the node list); ``None``: the paper's score.
        exclusion: ``value`` (the paper's: no vector already in ``P_{k-1}``) or ``slot`` (no
            candidate already chosen, by its key; :data:`cellgraph.algorithm2.EXCLUSIONS`).
    """
    if exclusion not in EXCLUSIONS:
        raise CellGraphError(f"search: exclusion {exclusion!r} is not one of {', '.join(EXCLUSIONS)}")
    if mode not in ("hard", "soft"):
        raise CellGraphError(f"search: mode {mode!r} is not one of hard, soft (the reference's modes)")
    if tau_units not in TAU_UNITS:
        raise CellGraphError(f"search: tau_units {tau_units!r} is not one of {', '.join(TAU_UNITS)}")
    if candidate_norm not in ("none", "sample"):
        raise CellGraphError(f"search: candidate_norm {candidate_norm!r} is not one of none, sample "
                             f"(the one-sample reference; {', '.join(CANDIDATE_NORMS)} exist)")
    weights = as_params(params)
    for r in space.tuples:
        if r >= len(weights):
            raise CellGraphError(f"search space uses tuple {r} but params hold {len(weights)} tuples")
    p = weights[0][2].shape[0]
    given = default_leaf_values(space, leaves, p)
    nodes: list[Expr] = list(space.leaves)
    vectors = [as_leaf_vector(leaf, given[leaf], p, batched=False) for leaf in space.leaves]
    ops = [numpy_op(o) for o in space.ops]
    acts = [numpy_activation(u) for u in space.activations]
    chosen: list[Node] = []
    scores: list[float] = []
    second_scores: list[float] = []
    counts: list[int] = []
    keys: list[tuple[int, int, int, int, int]] = []
    for k in range(1, space.n_iterations + 1):
        generated = np.array(vectors[len(space.leaves):]).reshape(-1, p)  # P_{k-1}
        eligible: list[_Candidate] = []
        for r_pos, r in enumerate(space.tuples):
            for o_pos, o in enumerate(ops):
                for u_pos, u in enumerate(acts):
                    for i, j in pairs(len(nodes)):
                        v = combine(weights[r], o, u, vectors[i], vectors[j])
                        if candidate_norm == "sample":
                            v = normalize(v)
                        key = candidate_key(r_pos, o_pos, u_pos, i, j)
                        if key in keys if exclusion == "slot" else _in(v, generated, exclusion_tol):
                            continue
                        score = _score(alpha, v, key) + (0.0 if structure is None else float(structure(k, key)))
                        eligible.append(_Candidate(key, score, v))
        if not eligible:
            raise CellGraphError(
                f"search (state {state!r}): iteration {k} has no eligible candidate, every "
                f"candidate's vector is already in P_{k - 1} (within {exclusion_tol})"
            )
        best = _choose(eligible)
        differs = np.max(np.abs(np.array([c.vector for c in eligible]) - best.vector), axis=1) > exclusion_tol
        second = max((c.score for c, d in zip(eligible, differs) if d), default=math.nan)
        r_pos, o_pos, u_pos, i, j = best.key
        node = Node(space.ops[o_pos], space.activations[u_pos], space.tuples[r_pos], nodes[i], nodes[j])
        nodes.append(node)
        vectors.append(best.vector if mode == "hard" else _mixture(eligible, tau, tau_units))
        chosen.append(node)
        keys.append(best.key)
        scores.append(best.score)
        second_scores.append(second)
        counts.append(len(eligible))
    return SearchResult(
        root=chosen[-1],
        chosen=tuple(chosen),
        vectors=dict(zip(nodes, vectors)),
        scores=np.array(scores),
        second_scores=np.array(second_scores),
        n_candidates=np.array(counts),
        state=state,
        trail=np.array(vectors),
        keys=tuple(keys),
    )


def _mixture(eligible: list[_Candidate], tau: float, tau_units: str) -> np.ndarray:
    """``sum_c softmax(alpha / (tau sigma))_c v_c`` over the eligible candidates."""
    scores = np.array([c.score for c in eligible])
    logits = scores / (tau if tau_units == "score" else tau * score_spread(scores))
    weights = np.exp(logits - logits.max())
    return (weights[:, None] * np.array([c.vector for c in eligible])).sum(0) / weights.sum()


def search_cell(
    spaces: Sequence[SearchSpace],
    params: Params,
    leaves: Mapping[Leaf, np.ndarray],
    alphas: Alpha | Sequence[Alpha],
    states: Sequence[str],
    exclusion_tol: float = EXCLUSION_TOL,
) -> list[SearchResult]:
    """Algorithm 2 run once per state (Appendix "Extensions of RRNN model"): run ``i`` sees
    ``x_t``, the previous states, the states made by runs ``< i`` (as
    ``Leaf(state, Role.CURRENT)``, listed in ``spaces[i].prev``) and the constants.

    ``alphas`` is one scoring function for every run or one per run.
    """
    alphas = [alphas] * len(spaces) if callable(alphas) else list(alphas)
    if not len(alphas) == len(states) == len(spaces):
        raise CellGraphError(
            f"search_cell: {len(spaces)} spaces need as many alphas and states, got "
            f"{len(alphas)} alphas and {len(states)} states"
        )
    known = dict(leaves)
    results: list[SearchResult] = []
    for space, alpha, state in zip(spaces, alphas, states):
        result = search(space, params, known, alpha, exclusion_tol, state)
        known[Leaf(state, Role.CURRENT)] = result.value
        results.append(result)
    return results
