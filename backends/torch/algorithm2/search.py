"""Batched Algorithm 2 in torch: every sample of a batch builds its own cell (paper,
Algorithm 2 and Sec. 3.2; the rules of :mod:`cellgraph.algorithm2`; docs/paper-notes.md,
*Algorithm 2: exact semantics* and *Scoring, choice modes and the margin*).

For a batch of ``B`` samples with leaf vectors ``(B, n_leaves, p)`` the search runs
``N_bar`` iterations; iteration ``k`` scores the candidates

    v = u(z),   z = o(L_r c_i, R_r c_j) + b_r,    i < j over  S_data, S_prev, S_aux, P_{k-1}

with the scoring network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` and appends
``c_k*`` to the node list. All work is batched over (sample, tuple, op, activation, pair);
the only Python loop runs over the iterations ``k``.

This module holds the search (:func:`search`, :class:`CompiledSearch`) and its choice of
``c_k*`` and ``c_k**``; the weights of a run and the scored blocks of candidates are in
:mod:`cellgraph.backends.torch.algorithm2.scoring` (:class:`SearchParams`, :func:`prepare`), the table of
all candidates so far, their keys and exclusion in :mod:`cellgraph.backends.torch.algorithm2.candidates`.

Work saved, results unchanged:

* incremental candidates: iteration ``k >= 2`` builds only the pairs
  ``(i, c_{k-1}*)``; the scores of older candidates are kept, and so are their vectors
  (one *block* per iteration, stored once, never re-concatenated);
* every node is projected once: one matmul gives ``L_r c`` and ``R_r c`` for all ``r``
  (and ``W1 L_r c``, ``W1 R_r c`` when the shortcut below applies);
* an *affine* activation ``u(z) = a z + c`` (``identity``, ``one_minus``) is never
  materialized in the differentiable graph: a block stores ``z`` and the non-affine ``u(z)``
  only, and the soft mixture of the affine candidates is derived from ``z``;
* the first layer of ``alpha`` is linear, so ``W_1 u(z) + b_1 = a W_1 z + (c W_1 1 + b_1)``
  is shared by all affine activations of a ``(r, o, pair)``
  (:class:`~cellgraph.backends.torch.algorithm2.scoring._AffineScores`, which keeps ``W_1 z`` for the
  backward pass and recomputes the sigmoids, rather than keeping them), and for ``o = add`` ``W_1 z`` is a sum of per-node projections (no ``p x H``
  product per candidate);
* exclusion by value (``max |v - w| <= EXCLUSION_TOL``) is decided on a scalar key
  ``g . v`` first (computed in the working dtype, held as an interval that covers the
  tolerance and the rounding): two vectors whose intervals do not overlap cannot be equal,
  and only the rare remaining pairs are compared entry by entry, looked up in a detached
  table of every candidate's vector (written once per block: one index op per lookup,
  however many blocks the pairs come from);
* the block is one autograd node where its layout allows (:mod:`cellgraph.backends.torch.algorithm2.fused`).

The search and :func:`prepare` run in the *working dtype*, that of the parameters, with
autocast switched off inside them (mixed precision is not applied to the full-RRNN search):
a bfloat16 matmul would round candidate vectors by ~1e-2, far beyond ``EXCLUSION_TOL``, so
equal candidates could escape the exclusion test, and the keys' error bound
(:class:`~cellgraph.backends.torch.algorithm2.candidates.KeyRule`) is that of the working dtype.

The whole search of a time step can run through ``torch.compile`` as one graph
(:class:`CompiledSearch`; where compilation fails it warns once and runs eagerly). Traced, the
block is built op by op (inductor fuses it), the pairs whose key intervals overlap are listed
as an operation of data-dependent size rather than a graph break, and the soft mixture is
rebuilt whole at every iteration instead of from per-block partial sums, whose upkeep branches
on values read from the device. Compiled for a GPU, the search is *sync-free* (``sync_free`` of
:func:`search`): it compares every candidate with its references instead of listing the near
pairs, so that the graph has fixed shapes and the host never waits for the device in it.

Candidate normalisation (``norm`` of :func:`prepare`; :data:`cellgraph.algorithm2.CANDIDATE_NORMS`)
standardises every candidate before it is scored; the shortcut above still holds for the
affine activations with ``|a| = 1`` (:mod:`cellgraph.backends.torch.algorithm2.scoring`).

Choice modes: ``hard`` (argmax with Algorithm 2's tie rule), ``soft`` (the node
vector is the ``softmax(alpha / tau)``-weighted sum of the eligible candidates; the
recorded structure is the argmax) and ``straight-through`` (forward hard, backward soft).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.compiler import is_compiling

from cellgraph.algorithm2 import TIE_RTOL, check_mode, check_tau_units
from cellgraph.backends.torch.algorithm2.candidates import (KeyCode, Candidates, chosen_refs, chosen_ref_intervals,
                                                            KeyRule, block_keys, matching, iteration_pairs)
from cellgraph.backends.torch.runtime.compiled import Compiled
from cellgraph.backends.torch.runtime.device import no_autocast
from cellgraph.backends.torch.algorithm2.estimator import straight_through
from cellgraph.backends.torch.algorithm2.scoring import SearchParams, Block, score_block, Projections, prepare
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.errors import CellGraphError

__all__ = ["CompiledSearch", "KeyCode", "SearchParams", "prepare", "search"]


class CompiledSearch(Compiled):
    """:func:`search` through ``torch.compile`` for one model (:class:`Compiled`: eager after
    one warning where compilation fails, for this model only). Dynamo captures the operations
    of data-dependent output size (``nonzero``) and the scalars read from tensors, so that a
    time step's search is one graph but for the final check that every sample had a
    candidate."""

    def __init__(self, mode: str = "default") -> None:
        super().__init__(search, "the cell search", dynamic=None, duration="minutes", mode=mode,
                         dynamo_config={"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True})


def search(params: SearchParams, leaves: Tensor, mode: str = "hard", tau: float = 1.0,
           state: str = "h", tau_units: str = "score", sync_free: bool | None = None) -> SearchTrace:
    """Run Algorithm 2 for every sample of a batch, in the parameters' dtype (``leaves`` are
    cast to it; autocast is off inside).

    Args:
        params: the run's weights from :func:`prepare`.
        leaves: ``(B, n_leaves, p)`` leaf vectors in ``space.leaves`` order.
        mode: ``hard``, ``soft`` or ``straight-through``.
        tau: softmax temperature of the soft modes.
        state: the name of the state the run makes.
        tau_units: ``score`` or ``std`` (:data:`cellgraph.algorithm2.TAU_UNITS`: the soft
            modes divide ``alpha`` by ``tau`` times the spread of each sample's eligible
            scores).
        sync_free: read nothing from the device until the search ends (then once, whether a
            sample ran out of candidates), so that the host never waits for an accelerator
            mid-search and a compiled search is one graph of fixed shapes; ``None``: when
            compiled for a device other than the CPU. The exclusion tests then compare every
            candidate with its references entry by entry, the soft mixture is rebuilt whole at
            every iteration and the hard node is gathered from every block: more operations
            and arithmetic (BENCHMARKS.md, *On a GPU*), the same results. Otherwise they read
            how many pairs' key intervals overlap, which blocks an exclusion changed and which
            blocks hold the chosen candidates.

    Returns:
        a :class:`SearchTrace` with ``vectors (B, n_leaves + N, p)``; its generated vectors
        are the propagated ones (soft mixtures in ``soft`` mode).
    """
    with no_autocast():
        check_mode(mode)
        check_tau_units(tau_units)
        space, plan = params.space, params.plan
        B, n_leaves, p = leaves.shape
        if n_leaves != len(space.leaves):
            raise CellGraphError(
                f"search: got {n_leaves} leaf vectors for the {len(space.leaves)} leaves "
                f"{[str(l) for l in space.leaves]}"
            )
        if n_leaves < 2:
            raise CellGraphError(f"search: Algorithm 2 needs at least two leaves, got {n_leaves}")
        leaves = leaves.to(params.proj_weight.dtype)
        device = leaves.device
        sync_free = device.type != "cpu" and is_compiling() if sync_free is None else sync_free
        N, n_r = space.n_iterations, len(space.tuples)
        code = KeyCode.of(space)
        rule = None if sync_free else KeyRule.of(p, leaves.dtype, device)  # sync-free: no keys, dense tests
        soft = mode == "soft" or (mode == "straight-through" and torch.is_grad_enabled())

        proj = Projections(params)
        proj.add(leaves)
        nodes = list(leaves.unbind(1))
        made_keys: tuple[list[Tensor], list[Tensor]] = ([], [])  # the key intervals of P_{k-1} (with a rule)
        total = len(space.activations) * len(space.ops) * n_r * sum(
            len(iteration_pairs(n_leaves + k - 1, k)[0]) for k in range(1, N + 1))
        read_free = sync_free or is_compiling()
        structure, by_value = params.structure, params.exclusion == "value"
        partial_sums = soft and tau_units == "score" and not read_free and structure is None  # s_k changes with k
        cands = Candidates(leaves.new_empty(total, B, p), rule, partial_sums, read_free)
        rows = torch.arange(B, device=device)
        chosen_keys, best_scores, second_scores, no_choice = [], [], [], []
        for k in range(1, N + 1):
            left, right = iteration_pairs(len(nodes), k)
            Z, Vn, scores = score_block(
                params, proj.gather("L", left), proj.gather("R", right),
                proj.gather("GL", left), proj.gather("GR", right),
            )
            cands.add(Block(params, Z, Vn, scores), block_keys(plan, n_r, code, left, right, device))
            if structure is not None:
                cands.offset = structure[k - 1][cands.keyid]
            if k > 1 and by_value:  # the new block against P_{k-1}
                _exclude_made(cands, nodes[n_leaves:], made_keys)
            choice, eligible, none = _choose(cands)
            no_choice.append(none)
            chosen_keys.append(cands.keyid[choice])
            best_scores.append(cands.total.gather(1, choice[:, None])[:, 0])
            hard = None if mode == "soft" else (cands.vectors(rows, choice) if torch.is_grad_enabled()
                                                  else cands.looked_up(rows, choice))
            node = hard
            if soft:
                mixed = cands.softmax_mix(tau if tau_units == "score" else tau * cands.spread(),
                                          detach_values=mode == "straight-through")
                node = mixed if mode == "soft" else straight_through(hard, mixed)
            nodes.append(node)
            with torch.no_grad():  # candidates equal to c_k* (for c_k**) and, soft, to the new node
                soft_node = node.detach() if mode == "soft" and k < N else None
                refs = (1 + (soft_node is not None) if rule is None
                        else chosen_ref_intervals(cands, choice, soft_node, rule))
                same = matching(cands, functools.partial(chosen_refs, cands, choice, hard, soft_node), refs,
                                known=choice)
            second_scores.append(_second_score(cands, eligible & ~same[:, :, 0]))
            if k == N:
                break
            if not by_value:  # the chosen slot only
                cands.exclude(torch.arange(cands.size, device=device) == choice[:, None])
            else:
                if rule is not None:
                    for keys, bound in zip(made_keys, refs):
                        keys.append(bound[:, -1])
                cands.exclude(same[:, :, -1])
            proj.add(node[:, None])

        _check_eligible(no_choice)
        r, o, u, i, j = code.decode(torch.stack(chosen_keys, 1))
        return SearchTrace(
            space, state, torch.stack(nodes, 1), i, j, r, o, u,
            torch.stack(best_scores, 1), torch.stack(second_scores, 1),
        )


def _exclude_made(cands: Candidates, made: list[Tensor], made_keys: tuple[list[Tensor], list[Tensor]]) -> None:
    """Exclude the candidates of the newest block whose vectors are already in ``P_{k-1}``
    (``made``: its ``(B, p)`` vectors, stacked only for the rare pairs whose key intervals
    ``made_keys`` (lo, hi) overlap; for all pairs where the candidates have no keys:
    :func:`~cellgraph.backends.torch.algorithm2.candidates.matching`)."""
    last = len(cands.blocks) - 1
    refs = len(made) if cands.rule is None else tuple(torch.stack(keys, 1) for keys in made_keys)
    with torch.no_grad():
        matches = matching(cands, lambda b, m: torch.stack(made, 1).detach()[b, m], refs, first=last)
        cands.exclude(matches.any(-1), first=last)


def _choose(cands: Candidates) -> tuple[Tensor, Tensor, Tensor]:
    """``(choice (B,), eligible (B, C), none (B,))``: ``c_k*``, the eligible candidate of
    highest score, ties (within :data:`~cellgraph.algorithm2.TIE_RTOL`) to the smallest key;
    ``none`` marks the samples without an eligible candidate (their choice is meaningless:
    :func:`_check_eligible` makes them an error once the search ends, so that no iteration
    waits for the device to say so)."""
    with torch.no_grad():
        s, eligible = cands.total, ~cands.excluded
        best = s.masked_fill(~eligible, -torch.inf).max(1).values
        tied = eligible & (s >= (best - TIE_RTOL * best.abs().clamp(min=1.0))[:, None])
        return torch.where(tied, cands.keyid, torch.iinfo(torch.int64).max).argmin(1), eligible, torch.isneginf(best)


def _check_eligible(none: list[Tensor]) -> None:
    """Raise for the first iteration (and its first sample) that had no eligible candidate;
    ``none`` holds :func:`_choose`'s ``(B,)`` flags of iterations ``1, 2, ...``."""
    flags = torch.stack(none)
    if flags.any():
        k, b = (int(i) for i in flags.nonzero()[0])
        raise CellGraphError(
            f"Algorithm 2, iteration {k + 1}: sample {b} has no eligible candidate "
            f"(every candidate vector is already in P_{k})"
        )


def _second_score(cands: Candidates, others: Tensor) -> Tensor:
    """``(B,)`` the score of ``c_k**``, the best of ``others`` (eligible candidates whose
    vectors differ from ``c_k*``'s), with its gradient; ``-inf`` where there is none."""
    total = cands.total
    value, index = total.detach().masked_fill(~others, -torch.inf).max(1)
    return torch.where(torch.isneginf(value), value, total.gather(1, index[:, None])[:, 0])
