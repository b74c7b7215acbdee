"""The scoring of candidate blocks of the batched Algorithm 2 in torch: a run's weights and one
iteration's candidates with their scores (paper, Algorithm 2 and Sec. 3.2; docs/paper-notes.md,
*Algorithm 2: exact semantics* and *Scoring, choice modes and the margin*). The search that
builds and chooses among them is :mod:`cellgraph.backends.torch.algorithm2.search`; the table that holds
them across iterations, :mod:`cellgraph.backends.torch.algorithm2.candidates`.

Iteration ``k`` builds the block of candidates of its pairs ``(i, j)``

    v = u(z),   z = o(L_r c_i, R_r c_j) + b_r

and scores them with ``alpha(v) = w_2 . tanh(W_1 v + b_1) + b_2``. Here:

* :class:`SearchParams` (made by :func:`prepare`): the weights of a run, ``alpha`` in its
  sigmoid form, and the projection matrix that gives every node's ``L_r c``, ``R_r c`` (and
  ``W_1 L_r c``, ``W_1 R_r c``) in one matmul;
* :class:`Plan`: the static layout of a space's candidates (non-affine activations, then affine);
* :class:`Projections`: those projections, once per node;
* :func:`score_block`: one iteration's ``Z``, ``Vn`` and scores, as one autograd node
  (:mod:`cellgraph.backends.torch.algorithm2.fused`) or op by op (:func:`block_scores`, with
  :class:`_AffineScores` and :func:`_normalized`);
* :class:`Block`: those candidates, read back as vectors, written to the table or mixed.

An affine activation ``u(z) = a z + c`` (``identity``, ``one_minus``) is never materialized in
the differentiable graph: a block stores ``z`` and the non-affine ``u(z)`` only. The first layer
of ``alpha`` is linear, so ``W_1 u(z) + b_1 = a W_1 z + (c W_1 1 + b_1)`` is shared by all
affine activations of a ``(r, o, pair)`` (:class:`_AffineScores`), and for ``o = add`` ``W_1 z``
is a sum of per-node projections (no ``p x H`` product per candidate).

Candidate normalisation (``norm`` of :func:`prepare`; :data:`cellgraph.algorithm2.CANDIDATE_NORMS`):
every candidate ``u(z)`` is replaced by ``(u(z) - mean) / sqrt(var + eps)``, statistics over the
batch and the features of its slot (``batch``) or over its features (``sample``), before it is
scored. For an affine ``u(z) = a z + c`` with ``|a| = 1`` that is ``a zn`` with
``zn = (z - mean_z) / sqrt(var_z + eps)`` (``c`` cancels, ``a^2 = 1``), so the shortcut still
holds: a block stores ``zn``, and ``W_1 zn = (W_1 z - mean_z W_1 1) / sqrt(var_z + eps)`` is
again a sum of per-node projections for ``o = add``. Other affine activations are
materialised.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.compiler import is_compiling
from torch.nn import functional as F

from cellgraph.algorithm2 import CANDIDATE_NORMS, EXCLUSIONS, NORM_EPS
from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.backends.torch.runtime.device import no_autocast
from cellgraph.backends.torch.algorithm2.fused import affine_scores_backward, fusable, fused_block, unscored
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["Plan", "SearchParams", "prepare", "matvec", "as_tensor_on", "score_block", "block_scores", "Block",
           "Projections"]


@dataclass(frozen=True)
class Plan:
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
    def of(space: SearchSpace, norm: str = "none") -> "Plan":
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
        return Plan(
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
            iteration ``k`` (:mod:`cellgraph.backends.torch.algorithm2.logits`), indexed by a candidate's
            :class:`~cellgraph.backends.torch.algorithm2.candidates.KeyCode`; None: the score is ``alpha``
            alone (the paper's).
        exclusion: what ``v not in P_{k-1}`` excludes (:data:`cellgraph.algorithm2.EXCLUSIONS`).
        scored: False when ``alpha``'s output weights are zero and frozen (the discovery
            recipe's warm start with ``score_lr=0``): ``alpha(v) = b_2`` for every candidate,
            so the blocks build their candidates without running ``alpha`` (the same scores;
            ``W1``, ``b1``, ``w2`` get no gradient).
    """

    space: SearchSpace
    plan: Plan
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
    scored: bool = True

    @property
    def shortcut(self) -> bool:
        """Whether ``W1 z`` of ``o = add`` is a sum of per-node projections
        (:attr:`Plan.shortcut`), which the scores read."""
        return self.scored and self.plan.shortcut

    @property
    def fused(self) -> bool:
        """Whether the block runs as one autograd node (:func:`~cellgraph.backends.torch.algorithm2.fused.fusable`)."""
        return fusable(self.plan.ops, self.plan.additive, self.plan.nonlinear, self.norm)


@no_autocast()
def prepare(space: SearchSpace, L: Tensor, R: Tensor, b: Tensor,
            W1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, norm: str = "none",
            structure: Tensor | None = None, exclusion: str = "value", scored: bool = True) -> SearchParams:
    """Select the space's tuples from the layout-indexed ``L, R (n, p, p)``, ``b (n, p)``,
    rewrite ``alpha`` (``W1 (H, p)``, ``b1 (H,)``, ``w2 (H,)``, ``b2 ()``) in its sigmoid
    form and precompute the projection matrix of the run (all differentiable). ``norm``: the
    candidate normalisation; ``structure``: the structural term ``(N, n_slots)``
    (:attr:`SearchParams.structure`); ``exclusion``, ``scored``: :attr:`SearchParams.exclusion`,
    :attr:`SearchParams.scored`."""
    if exclusion not in EXCLUSIONS:
        raise CellGraphError(f"unknown exclusion {exclusion!r} (known: {', '.join(EXCLUSIONS)})")
    if norm not in CANDIDATE_NORMS:
        raise CellGraphError(f"unknown candidate_norm {norm!r} (known: {', '.join(CANDIDATE_NORMS)})")
    idx = as_tensor_on(space.tuples, torch.int64, L.device)
    Ls, Rs, bs = L[idx], R[idx], b[idx]
    p = L.shape[-1]
    plan = Plan.of(space, norm)
    W1s, b1s, w2 = 2.0 * W1, 2.0 * b1, w2.reshape(-1)
    rows = [Ls.reshape(-1, p), Rs.reshape(-1, p)]
    if scored and plan.shortcut:
        rows += [torch.matmul(W1s, Ls).reshape(-1, p), torch.matmul(W1s, Rs).reshape(-1, p)]
    a, c = (as_tensor_on(v, W1.dtype, W1.device) for v in (plan.affine_a, plan.affine_c))
    W1_sum = W1s.sum(1)
    return SearchParams(
        space, plan, torch.cat(rows).T, bs[:, None], W1s.T, b1s, 2.0 * w2, b2.reshape(()) - w2.sum(),
        (bs @ W1s.T)[:, None], a, c, a.view(-1, 1, 1, 1), c.view(-1, 1, 1, 1) * W1_sum + b1s, W1_sum, norm,
        structure, exclusion, scored,
    )


def matvec(x: Tensor, v: Tensor) -> Tensor:
    """``x @ v`` for ``x (..., n)``, ``v (n,)``, as a product with a one-column matrix: traced,
    inductor fuses a matrix-vector product into the loops around it, which ran slower on the
    CPU than the matrix product's library call (docs/benchmarks-history.md, *The whole search compiled*)."""
    return torch.mm(x.reshape(-1, x.shape[-1]), v[:, None]).view(x.shape[:-1])


@functools.lru_cache(maxsize=1024)
def as_tensor_on(values: tuple, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``torch.tensor(values)`` on ``device``, copied there once per distinct ``values``
    (the search needs the same few index and coefficient tensors at every step). Shared:
    read only."""
    return torch.tensor(values, dtype=dtype, device=device)


class _AffineScores(torch.autograd.Function):
    """``scores[:, u] = w2 . sigmoid(a_u t + offset_u)``: the scores of the affine activations
    from ``t = W1 z (B, n_r, P, H)`` (``offset (n_a, 1, 1, H)``, ``scale (n_a, 1, 1, 1)`` the
    constants ``a``).

    Saves ``t`` rather than the sigmoids (half the memory: the sigmoid outputs are what soft
    mode keeps most of) and recomputes them in the backward pass
    (:func:`~cellgraph.backends.torch.algorithm2.fused.affine_scores_backward`, shared with the fused
    block)."""

    @staticmethod
    def forward(ctx, t: Tensor, offset: Tensor, w2: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(t, offset, w2, scale)
        scores = []
        for u in range(scale.shape[0]):  # a loop, not a comprehension, for dynamo
            scores.append(matvec(torch.addcmul(offset[u], t, scale[u]).sigmoid_(), w2))
        return torch.stack(scores, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        t, offset, w2, scale = ctx.saved_tensors
        grad_t, grad_offset, grad_w2 = affine_scores_backward(lambda u: torch.addcmul(offset[u], t, scale[u]),
                                                              grad, w2, scale)
        return grad_t, torch.stack(grad_offset).view_as(offset), grad_w2, None


def score_block(w: SearchParams, Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None
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

    Eagerly, a layout :func:`~cellgraph.backends.torch.algorithm2.fused.fusable` covers is built by
    :func:`~cellgraph.backends.torch.algorithm2.fused.fused_block` (one autograd node); traced by
    ``torch.compile`` (:class:`~cellgraph.backends.torch.algorithm2.search.CompiledSearch`), or for any
    other layout, op by op.
    """
    if w.fused and not is_compiling():
        Z, Vn, scores = fused_block(Lc, Rc, GL, GR, w.bias, w.W1_bias, w.W1T, w.b1, w.w2, w.offset, w.scale,
                                    w.W1_sum, w.plan.nonlinear, w.plan.additive, w.norm, w.scored)
    else:
        Z, Vn, scores = block_scores(w, Lc, Rc, GL, GR)
    return Z, Vn, scores + w.b2


def block_scores(w: SearchParams, Lc: Tensor, Rc: Tensor, GL: Tensor | None, GR: Tensor | None
            ) -> tuple[Tensor, Tensor | None, Tensor]:
    """``(Z, Vn, scores)`` of :func:`score_block` (scores without ``b2``), op by op (a pure tensor
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
        if w.scored:
            h1 = torch.addmm(w.b1, Vn.view(-1, p), w.W1T).sigmoid_()
            scores.append(matvec(h1, w.w2).view(B, -1))
    if plan.affine:
        mean = rstd = None
        if normed:  # the affine candidates are a zn: the block keeps zn (statistics per slot)
            Z, mean, rstd = _normalized(Z, w.norm)
        if w.scored:
            scores.append(_affine_scores(w, Z if normed else None, zs, GL, GR, mean, rstd).view(B, -1))
    if not w.scored:
        return Z, Vn, unscored(Z, len(plan.nonlinear) + len(plan.affine))
    return Z, Vn, torch.cat(scores, 1)


def _affine_scores(w: SearchParams, Zn: Tensor | None, zs: list[Tensor], GL: Tensor | None, GR: Tensor | None,
                   mean: Tensor | None, rstd: Tensor | None) -> Tensor:
    """The scores ``(B, n_a, n_o, n_r, P)`` of the affine activations from ``t = W1 z``
    ``(B, n_r, P, H)`` per operation (of ``zn``, ``Zn``, under a normalisation, whose ``mean``
    and ``rstd`` centre the per-node sums of ``o = add``)."""
    p = zs[0].shape[-1]
    per_op = []
    for o, additive in enumerate(w.plan.additive):
        if additive:
            t = GL + (GR + w.W1_bias)
            if Zn is not None:
                t = (t - mean[:, o] * w.W1_sum) * rstd[:, o]
        else:
            z = Zn[:, o] if Zn is not None else zs[o]
            t = torch.matmul(z.reshape(-1, p), w.W1T).view(*z.shape[:-1], -1)
        per_op.append(_AffineScores.apply(t, w.offset, w.w2, w.scale))  # (B, n_a, n_r, P)
    return torch.stack(per_op, 2)


def _normalized(v: Tensor, norm: str) -> tuple[Tensor, Tensor, Tensor]:
    """``((v - mean) * rstd, mean, rstd)`` with ``rstd = 1 / sqrt(var + NORM_EPS)``, the
    statistics of each candidate slot ``v (B, ..., p)``: over the batch and the features
    (``batch``) or over the features (``sample``)."""
    dims = (0, -1) if norm == "batch" else (-1,)
    mean = v.mean(dims, keepdim=True)
    # two passes, as exact as torch.var_mean and 5-15x faster here (docs/benchmarks-history.md,
    # *Runs C and D: 2026-11-24, commit `31b1276`*)
    centred = v - mean
    rstd = torch.rsqrt(centred.square().mean(dims, keepdim=True) + NORM_EPS)
    return centred * rstd, mean, rstd


class Block:
    """The candidates of one iteration: ``Z``, ``Vn`` and ``scores`` of :func:`score_block`.

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


class Projections:
    """Per-node ``L_r c``, ``R_r c`` ``(B, n_r, p)`` (and ``W1 L_r c``, ``W1 R_r c``
    ``(B, n_r, H)`` with the shortcut), one matmul per batch of new nodes."""

    def __init__(self, params: SearchParams) -> None:
        n_r, p, H = len(params.space.tuples), params.bias.shape[-1], params.W1T.shape[1]
        self.weight, self.n_r = params.proj_weight, n_r
        self.names = ("L", "R", "GL", "GR") if params.shortcut else ("L", "R")
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
