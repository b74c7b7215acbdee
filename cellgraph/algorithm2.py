"""Backend-independent semantics of Algorithm 2 (paper, Sec. 3.2; docs/paper-notes.md,
*Algorithm 2: exact semantics*).

Every backend that runs the cell search must follow these rules, so that the float64
numpy reference and the batched torch search choose exactly the same trees.

Node list
    ``S_data``, then ``S_prev`` (previous states, then states already made at this step),
    then ``S_aux``, then ``P_{k-1}`` (``c_1*, ..., c_{k-1}*``) in the order generated.

Candidates at iteration ``k``
    every ``(r, o, u)`` of the search space and every ordered pair ``i < j`` of the node
    list; the candidate is ``u(o(L_r c_i, R_r c_j) + b_r)`` (the earlier node takes ``L_r``).
    Their *enumeration order* is the literal loop order of Algorithm 2: tuple position,
    then op position, then activation position (positions in the search space's
    ``tuples``, ``ops``, ``activations``), then the pair ``(i, j)`` lexicographically.
    :func:`candidate_key` gives that order.

Exclusion by value
    a candidate is *eligible* unless its vector equals (``max |v - w| <= EXCLUSION_TOL``)
    a vector already in ``P_{k-1}``. (The GRU proof needs it: ``id(0 + I z + 0) = z``.)

Choice
    ``c_k*`` is the eligible candidate of highest score ``alpha(v)``. Scores within
    ``tie_tolerance(best)`` of the best are ties; a tie goes to the smallest
    :func:`candidate_key`. No eligible candidate at all is an error.

Second best (margin term, Eq. 5)
    ``c_k**`` is the eligible candidate of highest score whose vector differs from
    ``c_k*`` (``C_k`` is a set of vectors); ``None``/``nan`` when there is none.

Choice modes (:data:`MODES`)
    ``hard`` adds ``c_k*`` to ``P``; ``soft`` adds the ``softmax(alpha / (tau sigma))``-weighted
    sum of the eligible candidates; ``straight-through`` adds ``c_k*`` forward and
    differentiates the soft mixture. ``sigma`` is 1 with ``tau_units = "score"`` (the paper's)
    and :func:`score_spread` of the eligible scores with ``tau_units = "std"``, so that the
    sharpness of the mixture is set by ``tau`` alone and the scoring network cannot undo an
    annealed temperature by shrinking its scores. The argmax never depends on ``sigma``.

Output
    ``h_t = c_{N_bar}*``; the tree is the one rooted there (nodes of ``P`` not reachable
    from the root are not part of it).

Incremental form: scores of candidates built from old nodes do not change inside
one cell, so iteration ``k`` only builds the pairs ``(i, new)`` that involve ``c_{k-1}*``.
"""

from __future__ import annotations

from typing import Iterator

from cellgraph.errors import CellGraphError

__all__ = [
    "EXCLUSION_TOL",
    "MODES",
    "TAU_UNITS",
    "SPREAD_FLOOR",
    "score_spread",
    "check_mode",
    "check_tau_units",
    "TIE_RTOL",
    "CANDIDATE_NORMS",
    "NORM_EPS",
    "normalize",
    "tie_tolerance",
    "candidate_key",
    "pairs",
    "n_candidates",
]

#: Max-abs difference under which a candidate's vector counts as already in ``P_{k-1}``.
EXCLUSION_TOL = 1e-9

#: Relative tolerance under which two scores are a tie (resolved by :func:`candidate_key`).
TIE_RTOL = 1e-12


#: How a step chooses among the candidates: argmax, softmax mixture, or argmax forward and
#: mixture backward.
MODES = ("hard", "soft", "straight-through")

#: The unit of the softmax temperature: ``score`` (``softmax(alpha / tau)``, the paper's) or
#: ``std`` (``softmax(alpha / (tau sigma))``, ``sigma`` = :func:`score_spread`).
TAU_UNITS = ("score", "std")

#: The least ``sigma`` of ``tau_units = "std"`` (one eligible candidate, or equal scores).
SPREAD_FLOOR = 1e-12


#: Candidate normalisation (an option of the full RRNN; its authors' "batch normalization"):
#: ``none``; ``batch``: every candidate slot of an iteration is normalised with the mean and
#: (biased) variance of its entries over the batch and the features, no running statistics,
#: the same in training and evaluation (the authors' ``BatchNorm1d(affine=False,
#: track_running_stats=False)`` over the candidates); ``sample``: the same statistics over the
#: features of each sample's candidate alone (the batch-of-one case, so a sample's cell does
#: not depend on the other samples of its batch). The normalised vector ``(v - mean) /
#: sqrt(var + NORM_EPS)`` is what is scored, excluded, mixed and propagated.
CANDIDATE_NORMS = ("none", "batch", "sample")

#: What Algorithm 2's "``v`` not in ``P_{k-1}``" excludes: ``value`` (the paper's reading: any
#: candidate whose vector equals a generated node's within :data:`EXCLUSION_TOL`) or ``slot``
#: (cellgraph's discovery recipe: only the candidates already chosen, by their ``(r, o, u, i,
#: j)``, so that no node is built twice; vectors may coincide, as the GRU's
#: ``h_1 = (1 - z_1) n_1`` does with its own node ``(1 - z_1) n_1`` when ``h_0 = 0``).
EXCLUSIONS = ("value", "slot")
NORM_EPS = 1e-5


def normalize(v, axis=-1):
    """``(v - mean) / sqrt(var + NORM_EPS)`` over ``axis`` (numpy arrays)."""
    mean = v.mean(axis=axis, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=axis, keepdims=True)
    return (v - mean) / (var + NORM_EPS) ** 0.5


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else a clear error."""
    if mode not in MODES:
        raise CellGraphError(f"unknown choice mode {mode!r} (known: {', '.join(MODES)})")
    return mode


def check_tau_units(tau_units: str) -> str:
    """``tau_units`` if it is one of :data:`TAU_UNITS`, else a clear error."""
    if tau_units not in TAU_UNITS:
        raise CellGraphError(f"unknown tau_units {tau_units!r} (known: {', '.join(TAU_UNITS)})")
    return tau_units


def score_spread(scores):
    """``sigma``: the population standard deviation of one sample's eligible scores at one
    iteration, at least :data:`SPREAD_FLOOR` (numpy array of the eligible scores). Backends
    treat it as a constant of the temperature (no gradient flows through it)."""
    return max(float(scores.std()), SPREAD_FLOOR)


def tie_tolerance(best_score: float) -> float:
    """Scores ``>= best - tie_tolerance(best)`` tie with the best."""
    return TIE_RTOL * max(1.0, abs(best_score))


def candidate_key(r_pos: int, o_pos: int, u_pos: int, i: int, j: int) -> tuple[int, int, int, int, int]:
    """Sort key of a candidate in Algorithm 2's enumeration order (smaller = earlier)."""
    return (r_pos, o_pos, u_pos, i, j)


def pairs(n_nodes: int) -> Iterator[tuple[int, int]]:
    """Ordered pairs ``i < j`` of a node list of length ``n_nodes``, lexicographically."""
    for i in range(n_nodes):
        for j in range(i + 1, n_nodes):
            yield i, j


def n_candidates(n_nodes: int, n_tuples: int, n_ops: int, n_acts: int) -> int:
    """``|V_t^k|`` counted with multiplicity, for a node list of length ``n_nodes``."""
    return n_tuples * n_ops * n_acts * n_nodes * (n_nodes - 1) // 2
