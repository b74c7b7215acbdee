"""Batched Algorithm 2 in torch: every sample of a batch builds its own cell (paper,
Algorithm 2 and Sec. 3.2; the rules of :mod:`cellgraph.algorithm2`; docs/paper-notes.md,
*Algorithm 2: exact semantics* and *Scoring, choice modes and the margin*).

For a batch of ``B`` samples with leaf vectors ``(B, n_leaves, p)`` the search runs
``N_bar`` iterations; iteration ``k`` scores the candidates

    v = u(z),   z = o(L_r c_i, R_r c_j) + b_r,    i < j over  S_data, S_prev, S_aux, P_{k-1}

with the scoring network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` and appends
``c_k*`` to the node list. All work is batched over (sample, tuple, op, activation, pair);
the only Python loop runs over the iterations ``k``.

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
  is shared by all affine activations of a ``(r, o, pair)`` (:class:`_AffineScores`, which
  keeps ``W_1 z`` for the backward pass and recomputes the sigmoids, rather than keeping
  them), and for ``o = add`` ``W_1 z`` is a sum of per-node projections (no ``p x H``
  product per candidate);
* exclusion by value (``max |v - w| <= EXCLUSION_TOL``) is decided on a scalar key
  ``g . v`` first (computed in the working dtype, held as an interval that covers the
  tolerance and the rounding): two vectors whose intervals do not overlap cannot be equal,
  and only the rare remaining pairs are compared entry by entry, looked up in a detached
  table of every candidate's vector (written once per block: one index op per lookup,
  however many blocks the pairs come from);
* the block is one autograd node where its layout allows (:mod:`cellgraph.backends.torch.fused`).

The search and :func:`prepare` run in the *working dtype*, that of the parameters, with
autocast switched off inside them (mixed precision is not applied to the full-RRNN search):
a bfloat16 matmul would round candidate vectors by ~1e-2, far beyond ``EXCLUSION_TOL``, so
equal candidates could escape the exclusion test, and the keys' error bound
(:class:`_KeyRule`) is that of the working dtype.

The whole search of a time step can run through ``torch.compile`` as one graph
(:class:`CompiledSearch`; where compilation fails it warns once and runs eagerly). Traced, the
block is built op by op (inductor fuses it), the pairs whose key intervals overlap are listed
as an operation of data-dependent size rather than a graph break, and the soft mixture is
rebuilt whole at every iteration instead of from per-block partial sums, whose upkeep branches
on values read from the device. Compiled for a GPU, the search is *sync-free* (``sync_free`` of
:func:`search`): it compares every candidate with its references instead of listing the near
pairs, so that the graph has fixed shapes and the host never waits for the device in it.

Candidate normalisation (``norm`` of :func:`prepare`; :data:`cellgraph.algorithm2.CANDIDATE_NORMS`):
every candidate ``u(z)`` is replaced by ``(u(z) - mean) / sqrt(var + eps)``, statistics over the
batch and the features of its slot (``batch``) or over its features (``sample``), before it is
scored. For an affine ``u(z) = a z + c`` with ``|a| = 1`` that is ``a zn`` with
``zn = (z - mean_z) / sqrt(var_z + eps)`` (``c`` cancels, ``a^2 = 1``), so the shortcut still
holds: a block stores ``zn``, and ``W_1 zn = (W_1 z - mean_z W_1 1) / sqrt(var_z + eps)`` is
again a sum of per-node projections for ``o = add``. Other affine activations are
materialised.

Choice modes: ``hard`` (argmax with Algorithm 2's tie rule), ``soft`` (the node
vector is the ``softmax(alpha / tau)``-weighted sum of the eligible candidates; the
recorded structure is the argmax) and ``straight-through`` (forward hard, backward soft).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.nn import functional as F
from torch.autograd.function import once_differentiable
from torch.compiler import is_compiling

from cellgraph.algorithm2 import (CANDIDATE_NORMS, EXCLUSION_TOL, EXCLUSIONS, NORM_EPS, SPREAD_FLOOR, TIE_RTOL, check_mode,
                                  check_tau_units)
from cellgraph.backends.torch import ops as torch_ops
from cellgraph.backends.torch.compiled import Compiled
from cellgraph.backends.torch.device import no_autocast
from cellgraph.backends.torch.estimator import straight_through
from cellgraph.backends.torch.fused import affine_scores_backward, fusable, fused_block
from cellgraph.backends.torch.trace import SearchTrace
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["CompiledSearch", "KeyCode", "SearchParams", "prepare", "search"]


@dataclass(frozen=True)
class _Plan:
    """Static layout of the candidates of one search space.

    Activations are held internally as the non-affine ones first, then the affine ones
    (``u(z) = a z + c``); ``act_pos[u]`` maps an internal position to the position in
    ``space.activations``.
    """

    ops: tuple
    additive: tuple[bool, ...]
    nonlinear: tuple
    affine: tuple
    affine_a: tuple[float, ...]
    affine_c: tuple[float, ...]
    act_pos: tuple[int, ...]

    @staticmethod
    def of(space: SearchSpace, norm: str = "none") -> "_Plan":
        """The layout under candidate normalisation ``norm``: with one, an affine activation
        with ``|a| = 1`` is held as ``u(zn) = a zn`` of the normalised ``zn`` (``c = 0``), any
        other affine one as non-affine (computed and scored in full)."""
        nonlinear, affine = [], []
        for pos, name in enumerate(space.activations):
            coef = torch_ops.affine(name)
            if coef is not None and norm != "none":
                coef = (coef[0], 0.0) if abs(coef[0]) == 1.0 else None
            (nonlinear if coef is None else affine).append((pos, name, coef))
        scaled = norm != "none"
        return _Plan(
            ops=tuple(torch_ops.op(o) for o in space.ops),
            additive=tuple(torch_ops.is_additive(o) for o in space.ops),
            nonlinear=tuple(torch_ops.activation(name) for _, name, _ in nonlinear),
            affine=tuple(functools.partial(torch.mul, other=coef[0]) if scaled else torch_ops.activation(name)
                         for _, name, coef in affine),
            affine_a=tuple(coef[0] for _, _, coef in affine),
            affine_c=tuple(coef[1] for _, _, coef in affine),
            act_pos=tuple(pos for pos, _, _ in nonlinear + affine),
        )

    @property
    def shortcut(self) -> bool:
        return bool(self.affine) and any(self.additive)


@dataclass(frozen=True)
class SearchParams:
    """The weights of one run, prepared once per sequence (they do not change over time).

    The scoring network ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2`` is held in the equal form
    ``alpha(v) = w2 . sigmoid(W1 v + b1) + b2`` with ``W1 = 2 W_1``, ``b1 = 2 b_1``,
    ``w2 = 2 w_2``, ``b2 = b_2 - sum(w_2)`` (``tanh t = 2 sigmoid(2t) - 1``; sigmoid is
    several times cheaper than tanh on CPU).

    Attributes:
        space, plan: the search space (``n_r = len(space.tuples)``) and its layout.
        proj_weight: ``(p, 2 n_r p [+ 2 n_r H])``: ``node @ proj_weight`` gives ``L_r c``,
            ``R_r c`` for all ``r`` (and ``W1 L_r c``, ``W1 R_r c`` with the shortcut).
        bias: ``(n_r, 1, p)`` the ``b_r``.
        W1T, b1, w2, b2: ``(p, H)`` (``W1`` transposed), ``(H,)``, ``(H,)``, ``()``.
        W1_bias: ``(n_r, 1, H)`` ``W1 b_r``.
        affine_a, affine_c: ``(n_a,)`` the ``a``, ``c`` of the affine activations.
        scale, offset: ``(n_a, 1, 1, 1)`` the ``a`` and ``(n_a, 1, 1, H)`` the
            ``c W1 1 + b1``: the first layer of an affine activation is ``a W1 z + offset``.
        W1_sum: ``(H,)`` ``W1 1``, which centres ``W1 z`` under candidate normalisation.
        norm: the candidate normalisation (:data:`cellgraph.algorithm2.CANDIDATE_NORMS`).
        structure: ``(N, n_slots)`` the structural term ``s_k`` added to ``alpha`` at
            iteration ``k`` (:mod:`cellgraph.backends.torch.structure`), indexed by a
            candidate's :class:`KeyCode`; None: the score is ``alpha`` alone (the paper's).
        exclusion: what ``v not in P_{k-1}`` excludes (:data:`cellgraph.algorithm2.EXCLUSIONS`).
    """

    space: SearchSpace
    plan: _Plan
    proj_weight: Tensor
    bias: Tensor
    W1T: Tensor
    b1: Tensor
    w2: Tensor
    b2: Tensor
    W1_bias: Tensor
    affine_a: Tensor
    affine_c: Tensor
    scale: Tensor
    offset: Tensor
    W1_sum: Tensor
    norm: str = "none"
    structure: Tensor | None = None
    exclusion: str = "value"

    @property
    def fused(self) -> bool:
        """Whether the block runs as one autograd node (:func:`~cellgraph.backends.torch.fused.fusable`)."""
        return fusable(self.plan.ops, self.plan.additive, self.plan.nonlinear, self.norm)


@no_autocast()
def prepare(space: SearchSpace, L: Tensor, R: Tensor, b: Tensor,
            W1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, norm: str = "none",
            structure: Tensor | None = None, exclusion: str = "value") -> SearchParams:
    """Select the space's tuples from the layout-indexed ``L, R (n, p, p)``, ``b (n, p)``,
    rewrite ``alpha`` (``W1 (H, p)``, ``b1 (H,)``, ``w2 (H,)``, ``b2 ()``) in its sigmoid
    form and precompute the projection matrix of the run (all differentiable). ``norm``: the
    candidate normalisation; ``structure``: the structural term ``(N, n_slots)``
    (:attr:`SearchParams.structure`); ``exclusion``: :attr:`SearchParams.exclusion`."""
    if exclusion not in EXCLUSIONS:
        raise CellGraphError(f"unknown exclusion {exclusion!r} (known: {', '.join(EXCLUSIONS)})")
    if norm not in CANDIDATE_NORMS:
        raise CellGraphError(f"unknown candidate_norm {norm!r} (known: {', '.join(CANDIDATE_NORMS)})")
    idx = _on_device(space.tuples, torch.int64, L.device)
    Ls, Rs, bs = L[idx], R[idx], b[idx]
    p = L.shape[-1]
    plan = _Plan.of(space, norm)
    W1s, b1s, w2 = 2.0 * W1, 2.0 * b1, w2.reshape(-1)
    rows = [Ls.reshape(-1, p), Rs.reshape(-1, p)]
    if plan.shortcut:
        rows += [torch.matmul(W1s, Ls).reshape(-1, p), torch.matmul(W1s, Rs).reshape(-1, p)]
    a, c = (_on_device(v, W1.dtype, W1.device) for v in (plan.affine_a, plan.affine_c))
    W1_sum = W1s.sum(1)
    return SearchParams(
        space, plan, torch.cat(rows).T, bs[:, None], W1s.T, b1s, 2.0 * w2, b2.reshape(()) - w2.sum(),
        (bs @ W1s.T)[:, None], a, c, a.view(-1, 1, 1, 1), c.view(-1, 1, 1, 1) * W1_sum + b1s, W1_sum, norm,
        structure, exclusion,
    )


def _times(x: Tensor, v: Tensor) -> Tensor:
    """``x @ v`` for ``x (..., n)``, ``v (n,)``, as a product with a one-column matrix: traced,
    inductor fuses a matrix-vector product into the loops around it, which ran slower on the
    CPU than the matrix product's library call (docs/benchmarks-history.md, "The whole search compiled")."""
    return torch.mm(x.reshape(-1, x.shape[-1]), v[:, None]).view(x.shape[:-1])


@functools.lru_cache(maxsize=1024)
def _on_device(values: tuple, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``torch.tensor(values)`` on ``device``, copied there once per distinct ``values``
    (the search needs the same few index and coefficient tensors at every step). Shared:
    read only."""
    return torch.tensor(values, dtype=dtype, device=device)


@dataclass(frozen=True)
class _KeyRule:
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
    def of(p: int, dtype: torch.dtype, device: torch.device) -> "_KeyRule":
        """The rule of vectors of size ``p`` in the working ``dtype`` on ``device`` (made once:
        ``g_sum`` is read back from the device)."""
        g = torch.linspace(1.0, 2.0, p, dtype=dtype, device=device)
        return _KeyRule(g, float(g.double().sum()), 4.0 * (p + 2) * torch.finfo(dtype).eps)

    def interval(self, key: Tensor, mag: Tensor) -> tuple[Tensor, Tensor]:
        """``(lo, hi)`` of keys ``key`` with magnitude bounds ``mag``."""
        radius = mag * self.rel + self.g_sum * EXCLUSION_TOL / 2
        return key - radius, key + radius

    def of_vectors(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """``(lo, hi)`` of the vectors ``v (..., p)``."""
        return self.interval(_times(v, self.g), _times(v.abs(), self.g))


class _AffineScores(torch.autograd.Function):
    """``scores[:, u] = w2 . sigmoid(a_u t + offset_u)``: the scores of the affine activations
    from ``t = W1 z (B, n_r, P, H)`` (``offset (n_a, 1, 1, H)``, ``scale (n_a, 1, 1, 1)`` the
    constants ``a``).

    Saves ``t`` rather than the sigmoids (half the memory: the sigmoid outputs are what soft
    mode keeps most of) and recomputes them in the backward pass
    (:func:`~cellgraph.backends.torch.fused.affine_scores_backward`, shared with the fused
    block)."""

    @staticmethod
    def forward(ctx, t: Tensor, offset: Tensor, w2: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(t, offset, w2, scale)
        scores = []
        for u in range(scale.shape[0]):  # a loop, not a comprehension, for dynamo
            scores.append(_times(torch.addcmul(offset[u], t, scale[u]).sigmoid_(), w2))
        return torch.stack(scores, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        t, offset, w2, scale = ctx.saved_tensors
        grad_t, grad_offset, grad_w2 = affine_scores_backward(lambda u: torch.addcmul(offset[u], t, scale[u]),
                                                              grad, w2, scale)
        return grad_t, torch.stack(grad_offset).view_as(offset), grad_w2, None


def _block(w: SearchParams, Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None
           ) -> tuple[Tensor, Tensor | None, Tensor]:
    """The candidates of one iteration and their scores.

    Args:
        w: the run's weights.
        Lc, Rc: ``(B, n_r, P, p)`` ``L_r c_i`` and ``R_r c_j`` of the ``P`` pairs
            (``Rc`` may broadcast over ``P``).
        GL, GR: ``W1 L_r c_i``, ``W1 R_r c_j`` ``(B, n_r, P, H)`` with the shortcut, else None.

    Returns:
        ``Z (B, n_o, n_r, P, p)`` the ``z`` (``zn`` under a candidate normalisation);
        ``Vn (B, n_nl, n_o, n_r, P, p)`` the non-affine ``u(z)`` (None without any);
        ``scores (B, size)`` in the block's flat order (activation, op, tuple, pair),
        ``size = (n_nl + n_a) n_o n_r P``.

    Eagerly, a layout :func:`~cellgraph.backends.torch.fused.fusable` covers is built by
    :func:`~cellgraph.backends.torch.fused.fused_block` (one autograd node); traced by
    ``torch.compile`` (:class:`CompiledSearch`), or for any other layout, op by op.
    """
    if w.fused and not is_compiling():
        Z, Vn, scores = fused_block(Lc, Rc, GL, GR, w.bias, w.W1_bias, w.W1T, w.b1, w.w2, w.offset, w.scale,
                                    w.W1_sum, w.plan.nonlinear, w.plan.additive, w.norm)
    else:
        Z, Vn, scores = _scored(w, Lc, Rc, GL, GR)
    return Z, Vn, scores + w.b2


def _scored(w: SearchParams, Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None
            ) -> tuple[Tensor, Tensor | None, Tensor]:
    """``(Z, Vn, scores)`` of :func:`_block` (scores without ``b2``), op by op (a pure tensor
    function, so that ``torch.compile`` can take it)."""
    plan, normed = w.plan, w.norm != "none"
    # o = +: b_r joins the smaller operand first (Rc is one node's for every pair at k >= 2)
    zs = [Lc + (Rc + w.bias) if additive else o(Lc, Rc) + w.bias for o, additive in zip(plan.ops, plan.additive)]
    Z = torch.stack(zs, 1)
    B, p = Z.shape[0], Z.shape[-1]
    scores, Vn = [], None
    if plan.nonlinear:
        Vn = torch.stack([u(Z) for u in plan.nonlinear], 1)
        if w.norm == "sample":  # over each candidate's features: one fused op and backward
            Vn = F.layer_norm(Vn, (p,), eps=NORM_EPS)
        elif normed:  # (B, n_nl, n_o, n_r, P, p): statistics per candidate slot
            Vn = _normalized(Vn, w.norm)[0]
        h1 = torch.addmm(w.b1, Vn.view(-1, p), w.W1T).sigmoid_()
        scores.append(_times(h1, w.w2).view(B, -1))
    if plan.affine:
        if normed:  # the affine candidates are a zn: the block keeps zn (statistics per slot)
            Z, mean, rstd = _normalized(Z, w.norm)
        per_op = []
        for o, additive in enumerate(plan.additive):  # t = W1 z (B, n_r, P, H), of zn if normed
            if additive:
                t = GL + (GR + w.W1_bias)
                if normed:
                    t = (t - mean[:, o] * w.W1_sum) * rstd[:, o]
            else:
                z = Z[:, o] if normed else zs[o]
                t = torch.matmul(z.reshape(-1, p), w.W1T).view(*z.shape[:-1], -1)
            per_op.append(_AffineScores.apply(t, w.offset, w.w2, w.scale))  # (B, n_a, n_r, P)
        scores.append(torch.stack(per_op, 2).view(B, -1))
    return Z, Vn, torch.cat(scores, 1)


def _normalized(v: Tensor, norm: str) -> tuple[Tensor, Tensor, Tensor]:
    """``((v - mean) * rstd, mean, rstd)`` with ``rstd = 1 / sqrt(var + NORM_EPS)``, the
    statistics of each candidate slot ``v (B, ..., p)``: over the batch and the features
    (``batch``) or over the features (``sample``)."""
    dims = (0, -1) if norm == "batch" else (-1,)
    mean = v.mean(dims, keepdim=True)
    centred = v - mean  # two passes, as exact as torch.var_mean and 5-15x faster here (docs/benchmarks-history.md, runs C and D)
    rstd = torch.rsqrt(centred.square().mean(dims, keepdim=True) + NORM_EPS)
    return centred * rstd, mean, rstd


class CompiledSearch(Compiled):
    """:func:`search` through ``torch.compile`` for one model (:class:`Compiled`: eager after
    one warning where compilation fails, for this model only). Dynamo captures the operations
    of data-dependent output size (``nonzero``) and the scalars read from tensors, so that a
    time step's search is one graph but for the final check that every sample had a
    candidate."""

    def __init__(self, mode: str = "default") -> None:
        super().__init__(search, "the cell search", dynamic=None, duration="minutes", mode=mode,
                         dynamo_config={"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True})


class _Block:
    """The candidates of one iteration: ``Z``, ``Vn`` and ``scores`` of :func:`_block`.

    Flat candidate index of a sample: ``u * X + (o * n_r + r) * P + q`` with ``u`` the
    internal activation position and ``X = n_o n_r P``; the affine candidates
    (``u >= n_nl``) are ``a_u z + c_u``, computed from ``Z`` when needed.
    """

    def __init__(self, params: SearchParams, Z: Tensor, Vn: Tensor | None, scores: Tensor) -> None:
        self.params, self.plan, self.Z, self.Vn, self.scores = params, params.plan, Z, Vn, scores
        self.X = Z[0].numel() // Z.shape[-1]
        self.n_nl = len(self.plan.nonlinear)
        self.size = scores.shape[1]

    def vectors(self, b: Tensor, c: Tensor) -> Tensor:
        """``(K, p)`` vectors of candidates ``c`` (flat) of samples ``b`` (differentiable)."""
        p, X, n_nl = self.Z.shape[-1], self.X, self.n_nl
        out = None
        if n_nl:
            out = self.Vn.view(-1, p)[b * (n_nl * X) + c.clamp(max=n_nl * X - 1)]
        if self.plan.affine:
            z = self.Z.view(-1, p)[b * X + c % X]
            u = (c // X)[:, None]
            for k, act in enumerate(self.plan.affine):
                v = act(z)
                out = v if out is None else torch.where(u == n_nl + k, v, out)
        return out

    def write(self, out: Tensor) -> None:
        """Write the vectors of all candidates, detached, into ``out (size, B, p)`` (flat
        order first)."""
        B, p, X, n_nl = out.shape[1], self.Z.shape[-1], self.X, self.n_nl
        if n_nl:
            out[:n_nl * X].copy_(self.Vn.detach().view(B, n_nl * X, p).transpose(0, 1))
        z = self.Z.detach().view(B, X, p).transpose(0, 1)
        for k, (a, c) in enumerate(zip(self.plan.affine_a, self.plan.affine_c)):
            seg = out[(n_nl + k) * X:(n_nl + k + 1) * X]
            torch.mul(z, a, out=seg)
            if c:
                seg.add_(c)

    def mix(self, w: Tensor, detach: bool = False) -> Tensor:
        """``(B, p)`` sum of the candidate vectors weighted by ``w (B, size)``; ``detach``: the
        vectors as constants (the gradient reaches the weights only)."""
        B, p, X, n_nl = w.shape[0], self.Z.shape[-1], self.X, self.n_nl
        Vn, Z = (self.Vn.detach() if n_nl else None, self.Z.detach()) if detach else (self.Vn, self.Z)
        out = 0
        if n_nl:
            out = torch.bmm(w[:, None, :n_nl * X], Vn.view(B, n_nl * X, p))[:, 0]
        if self.plan.affine:
            wa = w[:, n_nl * X:].view(B, -1, X)
            a, c = self.params.affine_a, self.params.affine_c
            out = out + torch.bmm(torch.matmul(a, wa)[:, None], Z.view(B, X, p))[:, 0]
            out = out + (wa.sum(2) @ c)[:, None]
        return out


class _Candidates:
    """All blocks of a cell so far, with their flat scalar data concatenated, a detached table
    of every candidate's vector and the exclusion mask (both preallocated for the whole search,
    filled block by block), and the per-block partial sums of the soft mixture (recomputed
    only when a block's eligibility changes). ``partial_sums``: whether those sums are kept (a
    soft mixture with one temperature for all samples); only then does an exclusion read
    which blocks it changed. ``read_free``: :meth:`vectors` reads nothing from the device.
    ``rule``: the candidates' exclusion keys (None: no keys, every exclusion test dense)."""

    def __init__(self, table: Tensor, rule: _KeyRule | None, partial_sums: bool, read_free: bool) -> None:
        self.table, self.rule = table, rule  # (total, B, p): every candidate's vector, detached
        self.partial_sums, self.read_free = partial_sums, read_free
        self.blocks: list[_Block] = []
        self.starts: list[int] = []
        self.size = 0
        self.scores: Tensor | None = None  # (B, C) differentiable: alpha
        self.offset: Tensor | None = None  # (C,) this iteration's structural term, if any
        self.lo = self.hi = self.keyid = None
        # (B, total); preallocated rather than concatenated: inductor (torch 2.13, CPU) fails to
        # compile a concatenation of boolean masks
        self._excluded = torch.zeros(table.shape[1], table.shape[0], dtype=torch.bool, device=table.device)
        self._sums: list[tuple[Tensor, Tensor, Tensor] | None] = []

    def add(self, block: _Block, keyid: Tensor) -> None:
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

    def _block_of(self, c: Tensor, first: int = 0) -> Tensor:
        starts = _on_device(tuple(self.starts[first:]), torch.int64, c.device) - self.starts[first]
        return torch.searchsorted(starts, c, right=True) - 1

    def exclude(self, mask: Tensor, first: int = 0) -> None:
        """Mark the candidates of ``mask (B, C')`` (from block ``first`` on) as excluded; with
        partial sums, drop those of the blocks it changes (one read tells which)."""
        start = self.starts[first]
        if self.partial_sums:
            last = _on_device(tuple(end - start - 1 for end in (*self.starts[first + 1:], self.size)), torch.int64,
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

    def softmax_mix(self, tau: float | Tensor, detach_values: bool = False) -> Tensor:
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


def _matches(cands: _Candidates, ref: Callable[[Tensor, Tensor], Tensor], refs: tuple[Tensor, Tensor] | int,
             first: int = 0, known: Tensor | None = None) -> Tensor:
    """``(B, C', m)`` whether each candidate (from block ``first`` on) equals reference vector
    ``m`` of its sample within ``EXCLUSION_TOL`` (max-abs).

    ``refs``: the references' key intervals ``(lo, hi)`` ``(B, m)`` (:class:`_KeyRule`), and
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
        near[rows, known, 0] = False
        out[rows, known, 0] = True
    b, c, m = near.nonzero(as_tuple=True)  # the one read of the check: how many pairs (often none)
    out[b, c, m] = (cands.looked_up(b, c, first) - ref(b, m)).abs().amax(-1) <= EXCLUSION_TOL
    return out


def _dense_matches(vectors: Tensor, ref: Callable[[Tensor, Tensor], Tensor], M: int, known: Tensor | None
                   ) -> Tensor:
    """:func:`_matches` of the candidates ``vectors (B, C', p)`` and all ``M`` references of
    each sample, by their max-abs distance (``torch.cdist`` with ``p = inf``: the same rounding
    as the entry-by-entry test, without a ``(B, C', M, p)`` difference)."""
    B = vectors.shape[0]
    rows = torch.arange(B, device=vectors.device)
    pairs = rows[:, None].expand(B, M).reshape(-1), torch.arange(M, device=vectors.device).expand(B, M).reshape(-1)
    refs = ref(*pairs).view(B, M, -1)
    out = torch.cdist(vectors, refs, p=float("inf")) <= EXCLUSION_TOL
    if known is not None:
        out[rows, known, 0] = True
    return out


def _chosen_interval(cands: _Candidates, choice: Tensor, soft_node: Tensor | None, rule: _KeyRule
                     ) -> tuple[Tensor, Tensor]:
    """``(B, m)`` key intervals of the references of the check after the choice: ``c_k*``
    (its own interval) and, in soft mode, the new node ``soft_node (B, p)``."""
    lo, hi = cands.lo.gather(1, choice[:, None]), cands.hi.gather(1, choice[:, None])
    if soft_node is None:
        return lo, hi
    node_lo, node_hi = rule.of_vectors(soft_node)
    return torch.cat([lo, node_lo[:, None]], 1), torch.cat([hi, node_hi[:, None]], 1)


def _chosen(cands: _Candidates, choice: Tensor, hard: Tensor | None, soft_node: Tensor | None,
            b: Tensor, m: Tensor) -> Tensor:
    """The reference vectors of that check: ``c_k*`` (``m = 0``; ``hard`` or looked up) and
    the soft node (``m = 1``)."""
    v = cands.looked_up(b, choice[b]) if hard is None else hard.detach()[b]
    return v if soft_node is None else torch.where((m == 0)[:, None], v, soft_node[b])


@functools.lru_cache(maxsize=256)
def _pairs(n: int, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
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
def _keyid(plan: _Plan, n_r: int, code: KeyCode, left: tuple[int, ...], right: tuple[int, ...],
           device) -> Tensor:
    """``(size,)`` the :class:`KeyCode` of each candidate of a block, in the block's
    ``(u, o, r, pair)`` layout (cached: the same for every time step; read only)."""
    u = torch.tensor(plan.act_pos, device=device).view(-1, 1, 1, 1)
    o = torch.arange(len(plan.ops), device=device).view(1, -1, 1, 1)
    r = torch.arange(n_r, device=device).view(1, 1, -1, 1)
    i = torch.tensor(left, device=device).view(1, 1, 1, -1)
    j = torch.tensor(right, device=device).view(1, 1, 1, -1)
    return code.encode(r, o, u, i, j).reshape(-1)


class _Projections:
    """Per-node ``L_r c``, ``R_r c`` ``(B, n_r, p)`` (and ``W1 L_r c``, ``W1 R_r c``
    ``(B, n_r, H)`` with the shortcut), one matmul per batch of new nodes."""

    def __init__(self, params: SearchParams) -> None:
        n_r, p, H = len(params.space.tuples), params.bias.shape[-1], params.W1T.shape[1]
        self.weight, self.n_r = params.proj_weight, n_r
        self.names = ("L", "R", "GL", "GR") if params.plan.shortcut else ("L", "R")
        self.sizes = [n_r * p, n_r * p, n_r * H, n_r * H][:len(self.names)]
        self.parts: dict[str, list[Tensor]] = {name: [] for name in self.names}

    def add(self, nodes: Tensor) -> None:
        """Project ``nodes (B, m, p)``."""
        B = nodes.shape[0]
        for name, part in zip(self.names, (nodes @ self.weight).split(self.sizes, -1)):
            self.parts[name].extend(part.view(B, -1, self.n_r, part.shape[-1] // self.n_r).unbind(1))

    def gather(self, name: str, idx: tuple[int, ...]) -> Tensor | None:
        """``(B, n_r, P, .)`` the projections of nodes ``idx`` (P = 1 when all are one node)."""
        if name not in self.parts:
            return None
        part = self.parts[name]
        if len(set(idx)) == 1:
            return part[idx[0]].unsqueeze(2)
        return torch.stack([part[i] for i in idx], 2)


@no_autocast()
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
            and arithmetic (BENCHMARKS.md, "On a GPU"), the same results. Otherwise they read
            how many pairs' key intervals overlap, which blocks an exclusion changed and which
            blocks hold the chosen candidates.

    Returns:
        a :class:`SearchTrace` with ``vectors (B, n_leaves + N, p)``; its generated vectors
        are the propagated ones (soft mixtures in ``soft`` mode).
    """
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
    rule = None if sync_free else _KeyRule.of(p, leaves.dtype, device)  # sync-free: no keys, dense tests
    soft = mode == "soft" or (mode == "straight-through" and torch.is_grad_enabled())

    proj = _Projections(params)
    proj.add(leaves)
    nodes = list(leaves.unbind(1))
    made_keys: tuple[list[Tensor], list[Tensor]] = ([], [])  # the key intervals of P_{k-1} (with a rule)
    total = len(space.activations) * len(space.ops) * n_r * sum(
        len(_pairs(n_leaves + k - 1, k)[0]) for k in range(1, N + 1))
    read_free = sync_free or is_compiling()
    structure, by_value = params.structure, params.exclusion == "value"
    partial_sums = soft and tau_units == "score" and not read_free and structure is None  # s_k changes with k
    cands = _Candidates(leaves.new_empty(total, B, p), rule, partial_sums, read_free)
    rows = torch.arange(B, device=device)
    chosen_keys, best_scores, second_scores, no_choice = [], [], [], []
    for k in range(1, N + 1):
        left, right = _pairs(len(nodes), k)
        Z, Vn, scores = _block(
            params, proj.gather("L", left), proj.gather("R", right), proj.gather("GL", left), proj.gather("GR", right),
        )
        cands.add(_Block(params, Z, Vn, scores), _keyid(plan, n_r, code, left, right, device))
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
            refs = 1 + (soft_node is not None) if rule is None else _chosen_interval(cands, choice, soft_node, rule)
            same = _matches(cands, functools.partial(_chosen, cands, choice, hard, soft_node), refs, known=choice)
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


@torch.no_grad()
def _exclude_made(cands: _Candidates, made: list[Tensor], made_keys: tuple[list[Tensor], list[Tensor]]) -> None:
    """Exclude the candidates of the newest block whose vectors are already in ``P_{k-1}``
    (``made``: its ``(B, p)`` vectors, stacked only for the rare pairs whose key intervals
    ``made_keys`` (lo, hi) overlap; for all pairs where the candidates have no keys:
    :func:`_matches`)."""
    last = len(cands.blocks) - 1
    refs = len(made) if cands.rule is None else tuple(torch.stack(keys, 1) for keys in made_keys)
    matches = _matches(cands, lambda b, m: torch.stack(made, 1).detach()[b, m], refs, first=last)
    cands.exclude(matches.any(-1), first=last)


@torch.no_grad()
def _choose(cands: _Candidates) -> tuple[Tensor, Tensor, Tensor]:
    """``(choice (B,), eligible (B, C), none (B,))``: ``c_k*``, the eligible candidate of
    highest score, ties (within :data:`~cellgraph.algorithm2.TIE_RTOL`) to the smallest key;
    ``none`` marks the samples without an eligible candidate (their choice is meaningless:
    :func:`_check_eligible` makes them an error once the search ends, so that no iteration
    waits for the device to say so)."""
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


def _second_score(cands: _Candidates, others: Tensor) -> Tensor:
    """``(B,)`` the score of ``c_k**``, the best of ``others`` (eligible candidates whose
    vectors differ from ``c_k*``'s), with its gradient; ``-inf`` where there is none."""
    total = cands.total
    value, index = total.detach().masked_fill(~others, -torch.inf).max(1)
    return torch.where(torch.isneginf(value), value, total.gather(1, index[:, None])[:, 0])
