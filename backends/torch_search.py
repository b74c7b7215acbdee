"""Batched Algorithm 2 in torch: every sample of a batch builds its own cell (paper,
Algorithm 2 and Sec. 3.2; SPEC §2-§3; the rules of :mod:`cellgraph.algorithm2`).

For a batch of ``B`` samples with leaf vectors ``(B, n_leaves, p)`` the search runs
``N_bar`` iterations; iteration ``k`` scores the candidates

    v = u(o(L_r c_i, R_r c_j) + b_r),    i < j over  S_data, S_prev, S_aux, P_{k-1}

with the scoring network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` and appends
``c_k*`` to the node list. All work is batched over (sample, tuple, op, activation, pair);
the only Python loop runs over the iterations ``k``.

Work saved, results unchanged:

* incremental candidates (SPEC §2): iteration ``k >= 2`` builds only the pairs
  ``(i, c_{k-1}*)``; the scores of older candidates are kept, and so are their vectors
  (one *block* per iteration, stored once, never re-concatenated);
* every node is projected once: one matmul gives ``L_r c`` and ``R_r c`` for all ``r``
  (and ``W_1 L_r c``, ``W_1 R_r c`` when the shortcut below applies);
* the first layer of ``alpha`` is linear, so for an affine activation ``u(z) = a z + c``
  (``identity``, ``one_minus``) ``W_1 u(z) = a W_1 z + c W_1 1`` is shared by all affine
  activations of a ``(r, o, pair)``, and for ``o = add`` ``W_1 z`` is a sum of per-node
  projections (no ``p x H`` product per candidate);
* exclusion by value (``max |v - w| <= EXCLUSION_TOL``) is decided on a scalar key
  ``g . v`` first: a pair whose keys differ by more than a rigorous bound (tolerance plus
  floating-point rounding) cannot be equal, and only the rare remaining pairs are
  compared entry by entry.

Choice modes (SPEC §3): ``hard`` (argmax with Algorithm 2's tie rule), ``soft`` (the node
vector is the ``softmax(alpha / tau)``-weighted sum of the eligible candidates; the
recorded structure is the argmax) and ``straight-through`` (forward hard, backward soft).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from cellgraph.algorithm2 import EXCLUSION_TOL, TIE_RTOL
from cellgraph.backends import torch_ops
from cellgraph.backends.torch_trace import SearchTrace
from cellgraph.errors import CellGraphError
from cellgraph.layout import SearchSpace

__all__ = ["MODES", "SearchParams", "prepare", "search"]

MODES = ("hard", "soft", "straight-through")


@dataclass(frozen=True)
class _Plan:
    """Static layout of the candidates of one search space.

    Activations are held internally as the non-affine ones first, then the affine ones
    (``u(z) = a z + c``); ``act_pos[u]`` maps an internal position to the position in
    ``space.activations``.
    """

    ops: tuple
    additive: tuple[bool, ...]
    activations: tuple
    n_nonlinear: int
    affine_a: tuple[float, ...]
    affine_c: tuple[float, ...]
    act_pos: tuple[int, ...]

    @staticmethod
    def of(space: SearchSpace) -> "_Plan":
        nonlinear, affine = [], []
        for pos, name in enumerate(space.activations):
            coef = torch_ops.affine(name)
            (nonlinear if coef is None else affine).append((pos, name, coef))
        ordered = nonlinear + affine
        return _Plan(
            ops=tuple(torch_ops.op(o) for o in space.ops),
            additive=tuple(torch_ops.is_additive(o) for o in space.ops),
            activations=tuple(torch_ops.activation(name) for _, name, _ in ordered),
            n_nonlinear=len(nonlinear),
            affine_a=tuple(coef[0] for _, _, coef in affine),
            affine_c=tuple(coef[1] for _, _, coef in affine),
            act_pos=tuple(pos for pos, _, _ in ordered),
        )

    @property
    def shortcut(self) -> bool:
        return bool(self.affine_a) and any(self.additive)


@dataclass(frozen=True)
class SearchParams:
    """The weights of one run, prepared once per sequence (they do not change over time).

    The scoring network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` is held in the equal form
    ``alpha(v) = w2 . sigmoid(W1 v + b1) + b2`` with ``W1 = 2 W_1``, ``b1 = 2 b_1``,
    ``w2 = 2 w_2``, ``b2 = b_2 - sum(w_2)`` (``tanh t = 2 sigmoid(2t) - 1``; sigmoid is
    several times cheaper than tanh on CPU).

    Attributes:
        space: the search space; ``n_r = len(space.tuples)``.
        proj_weight: ``(p, 2 n_r p [+ 2 n_r H])``: ``node @ proj_weight`` gives ``L_r c``,
            ``R_r c`` for all ``r`` (and ``W1 L_r c``, ``W1 R_r c`` with the shortcut).
        bias: ``(n_r, p)`` the ``b_r``.
        W1, b1, w2, b2: ``(H, p)``, ``(H,)``, ``(H,)``, ``()`` in the sigmoid form.
        W1_bias: ``(n_r, H)`` ``W1 b_r``; W1_ones: ``(H,)`` ``W1 1``.
    """

    space: SearchSpace
    plan: _Plan
    proj_weight: Tensor
    bias: Tensor
    W1: Tensor
    b1: Tensor
    w2: Tensor
    b2: Tensor
    W1_bias: Tensor
    W1_ones: Tensor


def prepare(space: SearchSpace, L: Tensor, R: Tensor, b: Tensor,
            W1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> SearchParams:
    """Select the space's tuples from the layout-indexed ``L, R (n, p, p)``, ``b (n, p)``,
    rewrite ``alpha`` (``W1 (H, p)``, ``b1 (H,)``, ``w2 (H,)``, ``b2 ()``) in its sigmoid
    form and precompute the projection matrix of the run (all differentiable)."""
    idx = torch.tensor(space.tuples, device=L.device)
    Ls, Rs, bs = L[idx], R[idx], b[idx]
    p = L.shape[-1]
    plan = _Plan.of(space)
    W1s, w2 = 2.0 * W1, w2.reshape(-1)
    rows = [Ls.reshape(-1, p), Rs.reshape(-1, p)]
    if plan.shortcut:
        rows += [torch.matmul(W1s, Ls).reshape(-1, p), torch.matmul(W1s, Rs).reshape(-1, p)]
    return SearchParams(
        space, plan, torch.cat(rows).T, bs, W1s, 2.0 * b1, 2.0 * w2, b2.reshape(()) - w2.sum(),
        bs @ W1s.T, W1s.sum(1),
    )


class _Block:
    """The candidates of one iteration: pairs ``(left[q], right[q])`` for all ``(r, o, u)``.

    ``V (n_u, B, n_r, n_o, P, p)`` holds the candidate vectors with the activations in the
    plan's internal order (non-affine first, so ``V[:n_nonlinear]`` is one contiguous
    matrix for the scoring matmul). Flat candidate index of a sample:
    ``((u * n_r + r) * n_o + o) * P + q``. ``scores (B, size)`` are differentiable.
    """

    def __init__(self, V: Tensor, scores: Tensor) -> None:
        self.V, self.scores = V, scores
        self.per_act = V[0, 0].numel() // V.shape[-1]
        self.size = V.shape[0] * self.per_act

    def vectors(self, b: Tensor, c: Tensor) -> Tensor:
        """``(K, p)`` vectors of candidates ``c`` (flat) of samples ``b`` (differentiable)."""
        X = self.per_act
        rows = (c // X * self.V.shape[1] + b) * X + c % X
        return self.V.view(-1, self.V.shape[-1])[rows]

    def mix(self, w: Tensor) -> Tensor:
        """``(B, p)`` sum of the candidate vectors weighted by ``w (B, size)``."""
        n_u, B = self.V.shape[:2]
        w = w.view(B, n_u, 1, self.per_act)
        out = 0
        for u in range(n_u):
            out = out + torch.bmm(w[:, u], self.V[u].view(B, self.per_act, -1))[:, 0]
        return out


class _Candidates:
    """All blocks of a cell so far, with their flat scalar data concatenated, and the
    per-block partial sums of the soft mixture (recomputed only when a block's eligibility
    changes)."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self.starts: list[int] = []
        self.size = 0
        self.scores: Tensor | None = None  # (B, C) differentiable
        self.keys = self.mags = self.excluded = self.keyid = None
        self._sums: list[tuple[Tensor, Tensor, Tensor] | None] = []

    def add(self, block: _Block, keys: Tensor, mags: Tensor, keyid: Tensor) -> None:
        self.blocks.append(block)
        self.starts.append(self.size)
        self._sums.append(None)
        self.size += block.size
        excluded = torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
        cat = lambda old, new: new if old is None else torch.cat([old, new], -1)  # noqa: E731
        self.scores = cat(self.scores, block.scores)
        self.keys = cat(self.keys, keys)
        self.mags = cat(self.mags, mags)
        self.keyid = cat(self.keyid, keyid)
        self.excluded = cat(self.excluded, excluded)

    def _block_of(self, c: Tensor, first: int = 0) -> Tensor:
        starts = torch.tensor(self.starts[first:], device=c.device) - self.starts[first]
        return torch.searchsorted(starts, c, right=True) - 1

    def exclude(self, mask: Tensor, first: int = 0) -> None:
        """Mark the candidates of ``mask (B, C')`` (from block ``first`` on) as excluded."""
        start = self.starts[first]
        changed = (mask & ~self.excluded[:, start:]).any(0).nonzero()[:, 0]
        if changed.numel():
            excluded = self.excluded.clone()  # the old mask may be saved for backward
            excluded[:, start:] |= mask
            self.excluded = excluded
            for i in self._block_of(changed, first).unique().tolist():
                self._sums[first + i] = None

    def vectors(self, b: Tensor, c: Tensor, first: int = 0) -> Tensor:
        """``(K, p)`` vectors of flat candidates ``c`` (counted from block ``first``)."""
        if first == len(self.blocks) - 1:
            return self.blocks[first].vectors(b, c)
        where = self._block_of(c, first)
        base = self.starts[first]
        out = None
        for i in where.unique().tolist():
            sel = (where == i).nonzero()[:, 0]
            vec = self.blocks[first + i].vectors(b[sel], c[sel] - (self.starts[first + i] - base))
            out = vec.new_zeros(c.shape[0], vec.shape[-1]) if out is None else out
            out = out.index_put((sel,), vec)
        return out

    def softmax_mix(self, tau: float) -> Tensor:
        """``(B, p)`` the ``softmax(alpha / tau)``-weighted sum of the eligible candidates.

        Block ``i`` keeps ``U_i = sum_c exp(l_c - m_i) v_c``, ``Z_i = sum_c exp(l_c - m_i)``
        (``l = alpha / tau``, excluded ``l = -inf``, ``m_i`` its max, a constant); the mixture
        is ``sum_i exp(m_i - m) U_i / sum_i exp(m_i - m) Z_i``, exactly the softmax.
        """
        for i, block in enumerate(self.blocks):
            if self._sums[i] is None:
                start = self.starts[i]
                logits = (block.scores / tau).masked_fill(self.excluded[:, start:start + block.size], -torch.inf)
                m = logits.detach().amax(1)
                e = torch.exp(logits - torch.where(torch.isfinite(m), m, 0.0)[:, None])
                self._sums[i] = (block.mix(e), e.sum(1), m)
        U, Z, m = (torch.stack(t, 1) for t in zip(*self._sums))
        omega = torch.exp(m - m.amax(1, keepdim=True))
        return (omega[:, :, None] * U).sum(1) / (omega * Z).sum(1)[:, None]


def _key_weights(p: int, device) -> tuple[Tensor, float, float]:
    """The exclusion key ``g . v`` (computed in float64) with ``g = linspace(1, 2, p)``,
    ``sum(g)`` and the rounding factor ``rel``: two vectors within ``EXCLUSION_TOL`` have keys
    within ``sum(g) EXCLUSION_TOL + rel (g.|v| + g.|w|)`` (float64 dot-product error)."""
    g = torch.linspace(1.0, 2.0, p, dtype=torch.float64, device=device)
    return g, float(g.sum()), 2.0 * (p + 2) * torch.finfo(torch.float64).eps


def _matches(cands: _Candidates, ref: Tensor, ref_key: Tensor, ref_mag: Tensor,
             g_sum: float, rel: float, first: int = 0, known: Tensor | None = None) -> Tensor:
    """``(B, C')`` whether each candidate (from block ``first`` on) equals one of the
    reference vectors ``ref (B, m, p)`` within ``EXCLUSION_TOL`` (max-abs). ``known (B,)``
    optionally names, per sample, a candidate that *is* the (single) reference vector."""
    start = cands.starts[first]
    keys, mags = cands.keys[:, start:], cands.mags[:, start:]
    slack = g_sum * EXCLUSION_TOL + rel * (mags[:, :, None] + ref_mag[:, None, :])
    near = (keys[:, :, None] - ref_key[:, None, :]).abs_() <= slack
    out = torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
    if known is not None:
        rows = torch.arange(keys.shape[0], device=keys.device)
        near[rows, known, 0] = False
        out[rows, known] = True
    b, c, m = near.nonzero(as_tuple=True)
    if b.numel():
        equal = (cands.vectors(b, c, first) - ref[b, m]).abs().amax(-1) <= EXCLUSION_TOL
        out[b[equal], c[equal]] = True
    return out


def search(params: SearchParams, leaves: Tensor, mode: str = "hard", tau: float = 1.0,
           state: str = "h") -> SearchTrace:
    """Run Algorithm 2 for every sample of a batch.

    Args:
        params: the run's weights from :func:`prepare`.
        leaves: ``(B, n_leaves, p)`` leaf vectors in ``space.leaves`` order.
        mode: ``hard``, ``soft`` or ``straight-through``.
        tau: softmax temperature of the soft modes.
        state: the name of the state the run makes.

    Returns:
        a :class:`SearchTrace` with ``vectors (B, n_leaves + N, p)``; its generated vectors
        are the propagated ones (soft mixtures in ``soft`` mode).
    """
    if mode not in MODES:
        raise CellGraphError(f"unknown choice mode {mode!r} (known: {', '.join(MODES)})")
    space, plan = params.space, params.plan
    B, n_leaves, p = leaves.shape
    if n_leaves != len(space.leaves):
        raise CellGraphError(
            f"search: got {n_leaves} leaf vectors for the {len(space.leaves)} leaves "
            f"{[str(l) for l in space.leaves]}"
        )
    if n_leaves < 2:
        raise CellGraphError(f"search: Algorithm 2 needs at least two leaves, got {n_leaves}")
    dtype, device = leaves.dtype, leaves.device
    N, n_r, n_o, n_u = space.n_iterations, len(space.tuples), len(space.ops), len(space.activations)
    H = params.W1.shape[0]
    M = n_leaves + N
    g, g_sum, rel = _key_weights(p, device)
    a = torch.tensor(plan.affine_a, dtype=dtype, device=device).view(-1, 1, 1, 1, 1, 1)
    c = torch.tensor(plan.affine_c, dtype=dtype, device=device).view(-1, 1, 1, 1, 1, 1)
    affine_bias = c * params.W1_ones + params.b1  # (n_a, 1, 1, 1, 1, H)
    n_nonlinear = plan.n_nonlinear
    act_pos = torch.tensor(plan.act_pos, device=device)
    bias = params.bias[:, None, None, :]
    soft = mode == "soft" or (mode == "straight-through" and torch.is_grad_enabled())
    W1T = params.W1.T

    # per-node projections: L_r c, R_r c (B, n_r, p) and W1 L_r c, W1 R_r c (B, n_r, H)
    proj: dict[str, list[Tensor]] = {"L": [], "R": [], "GL": [], "GR": []}
    sizes = {"L": n_r * p, "R": n_r * p}
    if plan.shortcut:
        sizes.update(GL=n_r * H, GR=n_r * H)

    def project(nodes: Tensor) -> None:  # nodes (B, m, p)
        parts = (nodes @ params.proj_weight).split(list(sizes.values()), -1)
        for name, part in zip(sizes, parts):
            proj[name].extend(part[:, m].reshape(B, n_r, -1) for m in range(nodes.shape[1]))

    def gather(name: str, idx: list[int]) -> Tensor:  # (B, n_r, P, .)
        if len(set(idx)) == 1:
            return proj[name][idx[0]].unsqueeze(2)
        return torch.stack([proj[name][i] for i in idx], 2)

    def score(h1: Tensor) -> Tensor:
        return torch.sigmoid(h1) @ params.w2 + params.b2

    def build(left: list[int], right: list[int]) -> tuple[_Block, Tensor, Tensor, Tensor]:
        Lc, Rc = gather("L", left), gather("R", right)
        z = torch.stack([o(Lc, Rc) for o in plan.ops], 2) + bias  # (B, n_r, n_o, P, p)
        V = torch.stack([u(z) for u in plan.activations], 0)  # (n_u, B, n_r, n_o, P, p)
        scores = []
        if n_nonlinear:
            h1 = torch.addmm(params.b1, V[:n_nonlinear].view(-1, p), W1T)
            scores.append(score(h1).view(n_nonlinear, *z.shape[:-1]))
        if n_nonlinear < n_u:
            Wz = torch.stack([
                gather("GL", left) + gather("GR", right) + params.W1_bias[:, None]
                if plan.additive[o_pos] else z[:, :, o_pos] @ W1T
                for o_pos in range(n_o)
            ], 2)  # (B, n_r, n_o, P, H) = W1 z
            scores.append(score(Wz * a + affine_bias))
        scores = torch.cat(scores, 0).transpose(0, 1).reshape(B, -1)
        with torch.no_grad():
            V64 = V.double()
            keys = (V64 @ g).transpose(0, 1).reshape(B, -1)
            mags = (V64.abs() @ g).transpose(0, 1).reshape(B, -1)
        u_i = act_pos.view(-1, 1, 1, 1)
        r_i = torch.arange(n_r, device=device).view(1, -1, 1, 1)
        o_i = torch.arange(n_o, device=device).view(1, 1, -1, 1)
        i_t = torch.tensor(left, device=device).view(1, 1, 1, -1)
        j_t = torch.tensor(right, device=device).view(1, 1, 1, -1)
        keyid = ((((r_i * n_o + o_i) * n_u + u_i) * M + i_t) * M + j_t).reshape(-1)
        return _Block(V, scores), keys, mags, keyid

    project(leaves)
    nodes = [leaves[:, m] for m in range(n_leaves)]
    node_keys: list[Tensor] = []
    node_mags: list[Tensor] = []
    cands = _Candidates()
    rows = torch.arange(B, device=device)
    chosen_keys, best_scores, second_scores = [], [], []
    big = torch.iinfo(torch.int64).max
    for k in range(1, N + 1):
        n = len(nodes)
        if k == 1:
            left = [i for i in range(n) for _ in range(i + 1, n)]
            right = [j for i in range(n) for j in range(i + 1, n)]
        else:
            left, right = list(range(n - 1)), [n - 1] * (n - 1)
        cands.add(*build(left, right))
        if node_keys:  # the new block against P_{k-1}
            with torch.no_grad():
                last = len(cands.blocks) - 1
                cands.exclude(_matches(
                    cands, torch.stack(nodes[n_leaves:], 1).detach(), torch.stack(node_keys, 1),
                    torch.stack(node_mags, 1), g_sum, rel, first=last,
                ), first=last)
        s = cands.scores.detach()
        eligible = ~cands.excluded
        best = s.masked_fill(~eligible, -torch.inf).max(1).values
        if torch.isneginf(best).any():
            b = int(torch.isneginf(best).nonzero()[0, 0])
            raise CellGraphError(
                f"Algorithm 2, iteration {k}: sample {b} has no eligible candidate "
                f"(every candidate vector is already in P_{k - 1})"
            )
        tied = eligible & (s >= (best - TIE_RTOL * best.abs().clamp(min=1.0))[:, None])
        choice = torch.where(tied, cands.keyid, big).argmin(1)
        chosen_keys.append(cands.keyid[choice])
        best_scores.append(cands.scores.gather(1, choice[:, None])[:, 0])
        hard = cands.vectors(rows, choice)
        with torch.no_grad():
            hard_d = hard.detach()
            hard64 = hard_d.double()
            same = _matches(cands, hard_d[:, None], (hard64 @ g)[:, None],
                            (hard64.abs() @ g)[:, None], g_sum, rel, known=choice)
        second_val, second_idx = s.masked_fill(~eligible | same, -torch.inf).max(1)
        second_scores.append(torch.where(
            torch.isneginf(second_val), second_val, cands.scores.gather(1, second_idx[:, None])[:, 0],
        ))
        if soft:
            mixed = cands.softmax_mix(tau)
            node = mixed if mode == "soft" else hard + (mixed - mixed.detach())
        else:
            node = hard
        nodes.append(node)
        if k == N:
            break
        with torch.no_grad():
            node_d = node.detach()
            node64 = node_d.double()
            key, mag = node64 @ g, node64.abs() @ g
            node_keys.append(key)
            node_mags.append(mag)
            if mode == "soft":
                same = _matches(cands, node_d[:, None], key[:, None], mag[:, None], g_sum, rel)
            cands.exclude(same)
        project(node[:, None])

    key = torch.stack(chosen_keys, 1)
    j, i = key % M, (key // M) % M
    u, o, r = (key // (M * M)) % n_u, (key // (M * M * n_u)) % n_o, key // (M * M * n_u * n_o)
    return SearchTrace(
        space, state, torch.stack(nodes, 1), i, j, r, o, u,
        torch.stack(best_scores, 1), torch.stack(second_scores, 1),
    )
