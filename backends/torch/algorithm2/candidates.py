"""The candidate table of the batched Algorithm 2 in torch: every candidate a cell's search has
built so far, its key, its exclusion and the soft mixture (paper, Algorithm 2 and Sec. 3.2;
docs/paper-notes.md, *Algorithm 2: exact semantics* and *Scoring, choice modes and the
margin*). The search is :mod:`cellgraph.backends.torch.algorithm2.search`; the blocks of candidates the
table holds, one per iteration, are :class:`~cellgraph.backends.torch.algorithm2.scoring.Block`.

Iteration ``k`` ranks the candidates of all pairs ``i < j`` over ``S_data, S_prev, S_aux,
P_{k-1}`` built so far and chooses among those not excluded (``v not in P_{k-1}``). Here:

* :func:`iteration_pairs`, :class:`KeyCode`, :func:`block_keys`: the pairs iteration ``k`` builds (all at
  ``k = 1``, then those with ``c_{k-1}*``) and each candidate's key ``(r, o, u, i, j)`` as one
  int64, the smallest first in Algorithm 2's order;
* :class:`Candidates`: the blocks so far, their scores, a detached table ``(C, B, p)`` of every
  candidate's vector, the exclusion mask and the ``softmax(alpha / tau)``-weighted mixture;
* :class:`KeyRule`, :func:`matching`, :func:`_dense_matches`, :func:`chosen_ref_intervals`,
  :func:`chosen_refs`: exclusion by value (``max |v - w| <= EXCLUSION_TOL``), decided on a scalar
  key ``g . v`` first, held as an interval that covers the tolerance and the rounding: two
  vectors whose intervals do not overlap cannot be equal, and only the rare remaining pairs are
  compared entry by entry, looked up in the table (a sync-free search, without keys, compares
  every pair).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from cellgraph.algorithm2 import EXCLUSION_TOL, SPREAD_FLOOR
from cellgraph.backends.torch.algorithm2.scoring import Block, as_tensor_on, Plan, matvec
from cellgraph.cell.layout import SearchSpace

__all__ = ["KeyRule", "Candidates", "matching", "chosen_ref_intervals", "chosen_refs", "iteration_pairs", "KeyCode",
           "block_keys"]


@dataclass(frozen=True)
class KeyRule:
    """Exclusion keys: ``key(v) = g . v`` with ``g = linspace(1, 2, p)``, computed in the
    working dtype, held as the interval ``key -+ (sum(g) EXCLUSION_TOL / 2 + rel m)`` where
    ``m`` bounds ``g . |v|``. Two vectors within ``EXCLUSION_TOL`` (max-abs) have keys within
    ``sum(g) EXCLUSION_TOL``, each computed with an error below ``(p + 2) eps m``, so their
    intervals overlap: ``rel = 4 (p + 2) eps`` (the factor 4 covers the rounding of ``m`` and
    of the interval ends)."""

    g: Tensor
    g_sum: float
    rel: float

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def of(p: int, dtype: torch.dtype, device: torch.device) -> "KeyRule":
        """The rule of vectors of size ``p`` in the working ``dtype`` on ``device`` (made once:
        ``g_sum`` is read back from the device)."""
        g = torch.linspace(1.0, 2.0, p, dtype=dtype, device=device)
        return KeyRule(g, float(g.double().sum()), 4.0 * (p + 2) * torch.finfo(dtype).eps)

    def interval(self, key: Tensor, mag: Tensor) -> tuple[Tensor, Tensor]:
        """``(lo, hi)`` of keys ``key`` with magnitude bounds ``mag``."""
        radius = mag * self.rel + self.g_sum * EXCLUSION_TOL / 2
        return key - radius, key + radius

    def of_vectors(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """``(lo, hi)`` of the vectors ``v (..., p)``."""
        return self.interval(matvec(v, self.g), matvec(v.abs(), self.g))


class Candidates:
    """All blocks of a cell so far, with their flat scalar data concatenated, a detached table
    of every candidate's vector and the exclusion mask (both preallocated for the whole search,
    filled block by block), and the per-block partial sums of the soft mixture (recomputed
    only when a block's eligibility changes). ``partial_sums``: whether those sums are kept (a
    soft mixture with one temperature for all samples); only then does an exclusion read
    which blocks it changed. ``read_free``: :meth:`vectors` reads nothing from the device.
    ``rule``: the candidates' exclusion keys (None: no keys, every exclusion test dense)."""

    def __init__(self, table: Tensor, rule: KeyRule | None, partial_sums: bool, read_free: bool) -> None:
        self.table, self.rule = table, rule  # (total, B, p): every candidate's vector, detached
        self.partial_sums, self.read_free = partial_sums, read_free
        self.blocks: list[Block] = []
        self.starts: list[int] = []
        self.size = 0
        self.scores: Tensor | None = None  # (B, C) differentiable: alpha
        self.offset: Tensor | None = None  # (C,) this iteration's structural term, if any
        self.lo = self.hi = self.keyid = None
        # (B, total); preallocated rather than concatenated: inductor (torch 2.13, CPU) fails to
        # compile a concatenation of boolean masks
        self._excluded = torch.zeros(table.shape[1], table.shape[0], dtype=torch.bool, device=table.device)
        self._sums: list[tuple[Tensor, Tensor, Tensor] | None] = []

    def add(self, block: Block, keyid: Tensor) -> None:
        """Append ``block``: its vectors to the table, their key intervals (with a rule), its
        scores."""
        cat = lambda old, new: new if old is None else torch.cat([old, new], -1)  # noqa: E731
        with torch.no_grad():
            vectors = self.table[self.size:self.size + block.size]
            block.write(vectors)
            if self.rule is not None:
                lo, hi = (bound.T for bound in self.rule.of_vectors(vectors))
                self.lo, self.hi = cat(self.lo, lo), cat(self.hi, hi)
        self.blocks.append(block)
        self.starts.append(self.size)
        self._sums.append(None)
        self.size += block.size
        self.scores = cat(self.scores, block.scores)
        self.keyid = cat(self.keyid, keyid)

    @property
    def total(self) -> Tensor:
        """``(B, C)`` the scores Algorithm 2 ranks: ``alpha``, plus the structural term of
        this iteration where there is one."""
        return self.scores if self.offset is None else self.scores + self.offset

    def _block_of(self, c: Tensor) -> Tensor:
        """``(K,)`` the block of each flat candidate ``c``."""
        return torch.searchsorted(as_tensor_on(tuple(self.starts), torch.int64, c.device), c, right=True) - 1

    def exclude(self, mask: Tensor, first: int = 0) -> None:
        """Mark the candidates of ``mask (B, C')`` (from block ``first`` on) as excluded; with
        partial sums, drop those of the blocks it changes (one read tells which)."""
        start = self.starts[first]
        if self.partial_sums:
            last = as_tensor_on(tuple(end - start - 1 for end in (*self.starts[first + 1:], self.size)), torch.int64,
                              mask.device)
            # newly excluded candidates up to the end of each block
            upto = (mask & ~self.excluded[:, start:]).any(0).cumsum(0)[last].tolist()
            for i, (before, after) in enumerate(zip([0, *upto], upto)):
                if after > before:
                    self._sums[first + i] = None
        excluded = self._excluded.clone()  # the old mask may be saved for backward
        excluded[:, start:self.size] |= mask
        self._excluded = excluded

    @property
    def excluded(self) -> Tensor:
        """``(B, C)`` whether each candidate so far is excluded."""
        return self._excluded[:, :self.size]

    def looked_up(self, b: Tensor, c: Tensor, first: int = 0) -> Tensor:
        """``(K, p)`` vectors of flat candidates ``c`` (counted from block ``first``), detached."""
        return self.table[c + self.starts[first], b]

    def vectors(self, b: Tensor, c: Tensor) -> Tensor:
        """``(K, p)`` vectors of flat candidates ``c`` of samples ``b``, differentiable (the
        hard node; :meth:`looked_up` gives them detached, in one op). By default one read says
        which blocks hold them, and only those gather; ``read_free`` (traced, or a sync-free
        search), every block gathers and each row keeps its own block's vector (no read, more
        small operations, which a compiler fuses)."""
        if len(self.blocks) == 1:
            return self.blocks[0].vectors(b, c)
        where = self._block_of(c)
        out = None
        if self.read_free:
            for i, (block, start) in enumerate(zip(self.blocks, self.starts)):
                vec = block.vectors(b, (c - start).clamp(0, block.size - 1))
                out = vec if out is None else torch.where((where == i)[:, None], vec, out)
            return out
        for i in where.unique().tolist():
            sel = (where == i).nonzero()[:, 0]
            vec = self.blocks[i].vectors(b[sel], c[sel] - self.starts[i])
            out = vec.new_zeros(c.shape[0], vec.shape[-1]) if out is None else out
            out = out.index_put((sel,), vec)
        return out

    def softmax_mix(self, tau: float | Tensor, detach_values: bool) -> Tensor:
        """``(B, p)`` the ``softmax(alpha / tau)``-weighted sum of the eligible candidates;
        ``tau`` a number or a ``(B,)`` per-sample temperature; ``detach_values``: the candidate
        vectors as constants (the straight-through estimator's relaxation of the choice).

        With partial sums (``tau`` then a number): block ``i`` keeps
        ``U_i = sum_c exp(l_c - m_i) v_c``, ``Z_i = sum_c exp(l_c - m_i)`` (``l = alpha / tau``,
        excluded ``l = -inf``, ``m_i`` its max, a constant), rebuilt only when the block's
        eligibility changes; the mixture is ``sum_i exp(m_i - m) U_i / sum_i exp(m_i - m) Z_i``,
        exactly the softmax. Without (a per-sample ``tau`` changes from call to call, so no
        partial sum can be kept): one softmax over all candidates gives the weights, and each
        block mixes its share.
        """
        if not self.partial_sums:  # exclude() tracks no block's changes then: nothing cached
            logits = (self.total / (tau[:, None] if torch.is_tensor(tau) else tau)).masked_fill(
                self.excluded, -torch.inf)
            weights = torch.softmax(logits, 1)
            return sum(block.mix(weights[:, start:start + block.size], detach_values)
                       for block, start in zip(self.blocks, self.starts))
        for i, block in enumerate(self.blocks):
            if self._sums[i] is None:
                start = self.starts[i]
                logits = (block.scores / tau).masked_fill(self.excluded[:, start:start + block.size], -torch.inf)
                m = logits.detach().amax(1)
                e = torch.exp(logits - torch.where(torch.isfinite(m), m, 0.0)[:, None])
                self._sums[i] = (block.mix(e, detach_values), e.sum(1), m)
        U, Z, m = (torch.stack(t, 1) for t in zip(*self._sums))
        omega = torch.exp(m - m.amax(1, keepdim=True))
        return (omega[:, :, None] * U).sum(1) / (omega * Z).sum(1)[:, None]

    def spread(self) -> Tensor:
        """``(B,)`` :func:`cellgraph.algorithm2.score_spread` of each sample's eligible scores
        (detached)."""
        s, eligible = self.total.detach(), ~self.excluded
        n = eligible.sum(1)
        mean = s.masked_fill(~eligible, 0).sum(1) / n
        var = ((s - mean[:, None]) ** 2).masked_fill(~eligible, 0).sum(1) / n
        return var.sqrt().clamp(min=SPREAD_FLOOR)


def matching(cands: Candidates, ref: Callable[[Tensor, Tensor], Tensor], refs: tuple[Tensor, Tensor] | int,
             first: int = 0, known: Tensor | None = None) -> Tensor:
    """``(B, C', m)`` whether each candidate (from block ``first`` on) equals reference vector
    ``m`` of its sample within ``EXCLUSION_TOL`` (max-abs).

    ``refs``: the references' key intervals ``(lo, hi)`` ``(B, m)`` (:class:`KeyRule`), and
    ``ref(b, m)`` gives the ``(K, p)`` reference vectors, asked only for the rare pairs whose
    intervals overlap (one read: how many); or, for candidates without keys (a sync-free
    search), the number ``m`` of references, and every pair is compared entry by entry, with
    nothing read from the device (the same outcome: pairs whose intervals do not overlap
    differ). ``known (B,)`` optionally names, per sample, a candidate that *is* reference
    ``0``."""
    start = cands.starts[first]
    if isinstance(refs, int):
        return _dense_matches(cands.table[start:cands.size].transpose(0, 1), ref, refs, known)
    ref_lo, ref_hi = refs
    lo, hi = cands.lo[:, start:, None], cands.hi[:, start:, None]
    near = (lo <= ref_hi[:, None, :]) & (hi >= ref_lo[:, None, :])
    out = torch.zeros_like(near)
    if known is not None:
        rows = torch.arange(near.shape[0], device=near.device)
        near[rows, known, 0] = near.new_zeros(())  # values made on the device: a number would be copied
        out[rows, known, 0] = out.new_ones(())    # there from the host, a synchronising copy
    b, c, m = near.nonzero(as_tuple=True)  # the one read of the check: how many pairs (often none)
    out[b, c, m] = (cands.looked_up(b, c, first) - ref(b, m)).abs().amax(-1) <= EXCLUSION_TOL
    return out


def _dense_matches(vectors: Tensor, ref: Callable[[Tensor, Tensor], Tensor], M: int, known: Tensor | None
                   ) -> Tensor:
    """:func:`matching` of the candidates ``vectors (B, C', p)`` and all ``M`` references of
    each sample, by their max-abs distance (``torch.cdist`` with ``p = inf``: the same rounding
    as the entry-by-entry test, without a ``(B, C', M, p)`` difference)."""
    B = vectors.shape[0]
    rows = torch.arange(B, device=vectors.device)
    pairs = rows[:, None].expand(B, M).reshape(-1), torch.arange(M, device=vectors.device).expand(B, M).reshape(-1)
    refs = ref(*pairs).view(B, M, -1)
    out = torch.cdist(vectors, refs, p=float("inf")) <= EXCLUSION_TOL
    if known is not None:
        out[rows, known, 0] = out.new_ones(())  # made on the device, as in :func:`matching`
    return out


def chosen_ref_intervals(cands: Candidates, choice: Tensor, soft_node: Tensor | None, rule: KeyRule
                     ) -> tuple[Tensor, Tensor]:
    """``(B, m)`` key intervals of the references of the check after the choice: ``c_k*``
    (its own interval) and, in soft mode, the new node ``soft_node (B, p)``."""
    lo, hi = cands.lo.gather(1, choice[:, None]), cands.hi.gather(1, choice[:, None])
    if soft_node is None:
        return lo, hi
    node_lo, node_hi = rule.of_vectors(soft_node)
    return torch.cat([lo, node_lo[:, None]], 1), torch.cat([hi, node_hi[:, None]], 1)


def chosen_refs(cands: Candidates, choice: Tensor, hard: Tensor | None, soft_node: Tensor | None,
            b: Tensor, m: Tensor) -> Tensor:
    """The reference vectors of that check: ``c_k*`` (``m = 0``; ``hard`` or looked up) and
    the soft node (``m = 1``)."""
    v = cands.looked_up(b, choice[b]) if hard is None else hard.detach()[b]
    return v if soft_node is None else torch.where((m == 0)[:, None], v, soft_node[b])


@functools.lru_cache(maxsize=256)
def iteration_pairs(n: int, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The pairs ``(left, right)`` iteration ``k`` builds from ``n`` nodes: all of them at
    ``k = 1``, then those with the newest node."""
    if k == 1:
        return (tuple(i for i in range(n) for _ in range(i + 1, n)),
                tuple(j for i in range(n) for j in range(i + 1, n)))
    return tuple(range(n - 1)), (n - 1,) * (n - 1)


@dataclass(frozen=True)
class KeyCode:
    """The :func:`~cellgraph.algorithm2.candidate_key` ``(r, o, u, i, j)`` of a candidate as
    one int64 (mixed radix: ``n_o`` ops, ``n_u`` activations, ``M`` node slots), so that the
    smallest key is the first candidate in Algorithm 2's order; :meth:`decode` inverts
    :meth:`encode`."""

    n_o: int
    n_u: int
    M: int

    @staticmethod
    def of(space: SearchSpace) -> "KeyCode":
        """The code of ``space``'s candidates: ``M = n_leaves + N`` node slots."""
        return KeyCode(len(space.ops), len(space.activations), len(space.leaves) + space.n_iterations)

    def encode(self, r: Tensor, o: Tensor, u: Tensor, i: Tensor, j: Tensor) -> Tensor:
        return (((r * self.n_o + o) * self.n_u + u) * self.M + i) * self.M + j

    def decode(self, key: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """``(r, o, u, i, j)`` of ``key``."""
        M, n_u, n_o = self.M, self.n_u, self.n_o
        j, i = key % M, (key // M) % M
        u, o, r = (key // (M * M)) % n_u, (key // (M * M * n_u)) % n_o, key // (M * M * n_u * n_o)
        return r, o, u, i, j


@functools.lru_cache(maxsize=1024)
def block_keys(plan: Plan, n_r: int, code: KeyCode, left: tuple[int, ...], right: tuple[int, ...],
           device) -> Tensor:
    """``(size,)`` the :class:`KeyCode` of each candidate of a block, in the block's
    ``(u, o, r, pair)`` layout (cached: the same for every time step; read only)."""
    u = torch.tensor(plan.act_pos, device=device).view(-1, 1, 1, 1)
    o = torch.arange(len(plan.ops), device=device).view(1, -1, 1, 1)
    r = torch.arange(n_r, device=device).view(1, 1, -1, 1)
    i = torch.tensor(left, device=device).view(1, 1, 1, -1)
    j = torch.tensor(right, device=device).view(1, 1, 1, -1)
    return code.encode(r, o, u, i, j).reshape(-1)
