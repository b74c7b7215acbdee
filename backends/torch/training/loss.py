r"""The loss of Eq. 5 in torch: batched tree distance over per-sample cells, score margin, L2
(paper, Eq. 5, Sec. 3.3 and Appendix "Extensions of RRNN model"; docs/paper-notes.md,
*Eq. 5's reduction* and *Tree distances: VD, TD and Iso*).

.. math::
    L(\Phi) = E_{(X, Y)} \sum_t \Big\{ \lambda_{task} l(y_t, q_t)
        + \lambda_{td} \sum_i \min_{\bar T \in Iso(T^{tgt}_{t,i})} TD(T^{pd}_{t,i}, \bar T)
        + \lambda_{margin} \sum_i \sum_k m(N^t_{k,i}) \Big\} + \lambda_{l2} \sum_\phi \|\phi\|^2

Every per-step term, the task loss included, is summed over the steps of a sample; the
expectation is the batch mean of those sums; the L2 penalty is added once. (Eq. 5 names the
weights ``lambda_1..lambda_4`` in the order task, TD, margin, L2; they are named here by what
they weigh, since the paper's Appendix lists its values in another order:
docs/paper-notes.md, *Loss weights*.)

Tree distance, batched. Every sample ``b`` has its own predicted DAG (a
:class:`~cellgraph.backends.torch.algorithm2.trace.SearchTrace` row: children ``left/right (B, N)``,
node vectors ``(B, n_leaves + N, p)``, multiplicities in the unfolded tree). The target is
one fixed structure (:class:`TargetTree`) whose ``m`` internal positions carry per-sample
vectors ``(B, m, p)``; its isomorphs only permute children, so they share those vectors
and differ in two index tensors ``first, second (K, m)`` (``K`` distinct orientations). With ``q = m`` standing
for any target leaf, dynamic programming over the generated nodes ``a`` (children first)
fills ``VD(a, q)`` for every sample, isomorph and target position at once:

    VD(a, q) = ||v_a - v_q||^2 + VD(a.left, first_j(q)) + VD(a.right, second_j(q)),
    VD(leaf, q) = mass(q),    VD(a, leaf) = mass(a)

(``mass`` = sum of ``||v||^2`` over a subtree's internal positions), and

    TD_j = sum_a mult(a) min_q VD(a, q),    td_loss = min_j TD_j

which is :func:`cellgraph.algorithms.distance.td_dag` (and ``td_iso``) on every sample. The
only Python loop runs over the ``N`` generated nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from cellgraph.algorithms.distance import check_match
from cellgraph.algorithms.isomorphism import DEFAULT_MAX_SIZE, iso_swaps
from cellgraph.backends.torch.algorithm2.trace import SearchTrace
from cellgraph.cell.expr import Expr, Node
from cellgraph.cell.tree import Tree
from cellgraph.errors import CellGraphError

__all__ = ["TargetTree", "LossTerms", "RRNNLoss", "TERMS", "WEIGHT_KEYS", "td_loss", "margin_loss", "l2_loss"]

Predicted = SearchTrace | tuple[Tensor, Tensor, Tensor, Tensor]


class TargetTree:
    """A target tree prepared once for :func:`td_loss`: its internal positions in a fixed
    order and every member of ``Iso(T)`` as children indices over those positions.

    Positions are the internal positions of ``tree`` in :meth:`Tree.positions` order
    (breadth first by heap label; position 0 is the root). Index ``m`` (= number of
    positions) stands for a leaf.

    Attributes:
        tree: the unfolded target tree (a core :class:`~cellgraph.cell.tree.Tree`).
        exprs: ``(m,)`` the DAG node computed at each position.
        labels: ``(m,)`` heap labels of the positions in ``tree``.
        n_isomorphs: ``|Iso(tree)|``.
        first, second: ``(K, m)`` int64, the first and second child position of every
            position in each isomorph; row 0 is ``tree`` itself. Isomorphs that differ only
            in the order of two leaves have the same rows and the same TD (a leaf carries no
            vector), so only the ``K <= |Iso(tree)|`` distinct rows are kept (``gru``: 64 of 512).
        subtree: ``(m, m)`` 0/1, ``subtree[q, s] = 1`` when position ``s`` lies in the
            subtree rooted at ``q`` (itself included); gives the masses ``VD(leaf, q)``.
    """

    def __init__(self, tree: Tree, max_size: int = DEFAULT_MAX_SIZE) -> None:
        positions = list(tree.positions())
        m = len(positions)
        index = {label: q for q, (label, _) in enumerate(positions)}
        self.tree = tree
        self.exprs: tuple[Node, ...] = tuple(t.expr for _, t in positions)  # type: ignore[misc]
        self.labels = tuple(label for label, _ in positions)
        first = torch.tensor([index.get(2 * label, m) for label in self.labels], dtype=torch.int64)
        second = torch.tensor([index.get(2 * label + 1, m) for label in self.labels], dtype=torch.int64)
        swaps = iso_swaps(tree, max_size)
        self.n_isomorphs = len(swaps)
        swapped = torch.tensor([[label in s for label in self.labels] for s in swaps], dtype=torch.bool)
        swapped = swapped.reshape(len(swaps), m)
        orientations = torch.cat([torch.where(swapped, second, first), torch.where(swapped, first, second)], 1)
        distinct = dict.fromkeys(tuple(row) for row in orientations.tolist())  # first occurrence order
        orientations = torch.tensor(list(distinct), dtype=torch.int64).reshape(len(distinct), 2 * m)
        self.first, self.second = orientations[:, :m], orientations[:, m:]
        subtree = torch.eye(m + 1, dtype=torch.float64)
        for q in range(m - 1, -1, -1):  # breadth first: children after parents
            subtree[q] += subtree[first[q]] + subtree[second[q]]
        self.subtree = subtree[:m, :m]
        self._placed: dict[tuple[torch.device, torch.dtype, bool], tuple[Tensor, Tensor, Tensor]] = {}

    def placed(self, device: torch.device, dtype: torch.dtype, iso: bool = True) -> tuple[Tensor, Tensor, Tensor]:
        """``first``, ``second`` (all rows, or row 0 without ``iso``) and ``subtree`` (in
        ``dtype``) on ``device``, copied there once (not at every step of a training run)."""
        key = (device, dtype, iso)
        if key not in self._placed:
            rows = slice(None) if iso else slice(0, 1)
            self._placed[key] = (self.first[rows].to(device), self.second[rows].to(device),
                                 self.subtree.to(device, dtype))
        return self._placed[key]

    @property
    def n_positions(self) -> int:
        return len(self.exprs)

    @property
    def n_orientations(self) -> int:
        return self.first.shape[0]

    def lay(self, values: Mapping[Expr, Tensor]) -> Tensor:
        """``(B, m, p)``: the vector of each position's DAG node from ``values`` (node ->
        ``(B, p)`` or ``(p,)``, broadcast over the batch)."""
        missing = [str(e) for e in self.exprs if e not in values]
        if missing:
            raise CellGraphError(f"TargetTree.lay: no vector for target node(s) {missing}")
        return torch.stack(torch.broadcast_tensors(*(values[e] for e in self.exprs)), -2)

    def __repr__(self) -> str:
        return (f"TargetTree({self.n_positions} positions, {self.n_isomorphs} isomorphs "
                f"({self.n_orientations} distinct for TD), root {self.tree.expr})")


def _predicted(pred: Predicted) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    if isinstance(pred, SearchTrace):
        return pred.vectors, pred.left, pred.right, pred.reachable()
    vectors, left, right, mult = pred
    B, N = left.shape
    if vectors.dim() != 3 or vectors.shape[0] != B or vectors.shape[1] <= N or right.shape != left.shape \
            or mult.shape != vectors.shape[:2]:
        raise CellGraphError(
            f"td_loss: expected vectors (B, n_leaves + N, p), left/right (B, N), mult (B, n_leaves + N); "
            f"got {tuple(vectors.shape)}, {tuple(left.shape)}, {tuple(right.shape)}, {tuple(mult.shape)}"
        )
    return vectors, left, right, mult


def td_loss(pred: Predicted, target_vectors: Tensor, target: TargetTree, iso: bool = True,
            match: str = "any") -> Tensor:
    """``TD(T_pred, T_tgt)`` of every sample, minimised over ``Iso(T_tgt)`` when ``iso``;
    ``match`` says which target positions a predicted subtree may match
    (:data:`cellgraph.algorithms.distance.MATCHES`: ``any``, the paper's; ``internal``;
    ``root``, VD of the whole trees).

    Args:
        pred: a :class:`SearchTrace`, or ``(vectors (B, n_leaves + N, p), left (B, N),
            right (B, N), mult (B, n_leaves + N))`` in its conventions (``mult``: positions
            of each node in the unfolded tree, :meth:`SearchTrace.reachable`).
        target_vectors: ``(B, m, p)`` vectors on the target's positions (``target.exprs``
            order), e.g. from a provider of :mod:`cellgraph.backends.torch.training.td_targets`.
        target: the prepared target structure.
        iso: minimise over all isomorphs (Eq. 5) or use ``target.tree`` as it is.

    Returns:
        ``(B,)`` tree distances, differentiable w.r.t. both sets of vectors.
    """
    check_match(match)
    vectors, left, right, mult = _predicted(pred)
    B, N = left.shape
    n_leaves = vectors.shape[1] - N
    m = target.n_positions
    if target_vectors.shape != (B, m, vectors.shape[2]):
        raise CellGraphError(
            f"td_loss: target vectors of shape {tuple(target_vectors.shape)}, expected "
            f"(B, m, p) = ({B}, {m}, {vectors.shape[2]}) for target {target}"
        )
    device, dtype = vectors.device, vectors.dtype
    first, second, subtree = target.placed(device, dtype, iso)
    K = first.shape[0]
    first, second = first.expand(B, K, m), second.expand(B, K, m)
    weights = mult[:, n_leaves:].to(dtype)
    # node index -> row: every leaf shares row 0, generated node k is row k + 1
    left_row = (left - n_leaves + 1).clamp(min=0)
    right_row = (right - n_leaves + 1).clamp(min=0)
    t_mass = (target_vectors * target_vectors).sum(-1) @ subtree.T
    rows = [torch.cat([t_mass, t_mass.new_zeros(B, 1)], 1)[:, None].expand(B, K, m + 1)]
    masses = [vectors.new_zeros(B)]
    batch = torch.arange(B, device=device)
    total = vectors.new_zeros(B, K)
    for k in range(N):
        v = vectors[:, n_leaves + k]
        table, mass = torch.stack(rows, 1), torch.stack(masses, 1)
        li, ri = left_row[:, k], right_row[:, k]
        masses.append((v * v).sum(-1) + mass[batch, li] + mass[batch, ri])
        diff = target_vectors - v[:, None]
        vd = ((diff * diff).sum(-1)[:, None]
              + table[batch, li].gather(2, first) + table[batch, ri].gather(2, second))
        rows.append(torch.cat([vd, masses[-1][:, None, None].expand(B, K, 1)], 2))
        if match != "root":
            total = total + weights[:, k, None] * rows[-1][..., :m if match == "internal" else m + 1].min(2).values
    if match == "root":  # the predicted root (the last node) against the target root (position 0)
        total = rows[-1][:, :, 0]
    return total.min(1).values


def margin_loss(trace: SearchTrace, M: float) -> Tensor:
    """``(B,)`` ``sum_k m(N_k)`` with ``m = -(1/M) min(M, alpha(c_k*) - alpha(c_k**))``
    (paper, Sec. 3.3); an iteration without a second candidate contributes 0."""
    if M <= 0:
        raise CellGraphError(f"margin_loss: the margin M must be positive, got {M}")
    best = trace.best_score
    second = torch.where(torch.isfinite(trace.second_score), trace.second_score, best)
    return -(best - second).clamp(max=M).sum(1) / M


def l2_loss(parameters: Iterable[Tensor]) -> Tensor:
    """``sum_phi ||phi||^2`` over ``parameters`` (the L2 term of Eq. 5, weight ``lambda_l2``)."""
    terms = [(p * p).sum() for p in parameters]
    if not terms:
        raise CellGraphError("l2_loss: no parameters given")
    return sum(terms[1:], terms[0])


@dataclass(frozen=True)
class LossTerms:
    """The value of Eq. 5 and its weighted terms (detached 0-d tensors on the loss's device
    that add up to ``total``, so that a training step need not wait for them; ``None`` when
    the term is switched off): ``task``, ``td``, ``margin`` are batch means of per-sample sums
    over the steps, ``l2`` the penalty."""

    total: Tensor
    task: Tensor | None
    td: Tensor | None
    margin: Tensor | None
    l2: Tensor | None


#: The terms of Eq. 5, in :class:`LossTerms` order, and the config key of each weight.
TERMS = ("task", "td", "margin", "l2")
WEIGHT_KEYS = {"task": "lambda_task", "td": "lambda_td", "margin": "lambda_margin", "l2": "lambda_l2"}


class RRNNLoss(nn.Module):
    r"""Eq. 5 and its multi-state form (Appendix "Extensions"): per sample ``b``, the sum over
    steps ``t`` (and runs ``i``) of the task, TD and margin terms; the batch mean of those
    sums; plus the L2 penalty once.

    .. math::
        \frac1B \sum_b \Big( \lambda_{task} \sum_t l_{b,t} + \lambda_{td} \sum_{t,i} \min_{Iso} TD_{b,t,i}
        + \lambda_{margin} \sum_{t,i,k} m(N^t_{k,i})_b \Big) + \lambda_{l2} \sum \|\phi\|^2

    A term with weight 0 is not computed (its inputs may be omitted).

    Args:
        lambda_task, lambda_td, lambda_margin, lambda_l2: the weights of the four terms.
        margin: ``M`` of the margin function.
        iso: minimise TD over ``Iso(T_tgt)`` (else the target tree as given).
        td_match: the target positions a predicted subtree may match in TD (:func:`td_loss`).

    Call: ``loss(task, traces, target_vectors, targets, parameters)``

        - task: ``(B,)`` each sample's task loss summed over its steps (one term per
          sequence for a classification task).
        - traces: ``traces[t][i]``, the :class:`SearchTrace` of run ``i`` at step ``t``.
        - target_vectors: ``target_vectors[t][i]`` ``(B, m_i, p)``.
        - targets: one :class:`TargetTree` per run.
        - parameters: the tensors of the L2 penalty.

        Returns :class:`LossTerms`.
    """

    def __init__(self, lambda_task: float = 1.0, lambda_td: float = 1e-3, lambda_margin: float = 1e-3,
                 lambda_l2: float = 1e-5, margin: float = 1.0, iso: bool = True,
                 td_match: str = "any") -> None:
        super().__init__()
        if margin <= 0:
            raise CellGraphError(f"RRNNLoss: the margin M must be positive, got {margin}")
        check_match(td_match)
        self.weights = {"task": lambda_task, "td": lambda_td, "margin": lambda_margin, "l2": lambda_l2}
        self.margin, self.iso, self.td_match = margin, iso, td_match

    def forward(self, task: Tensor | None = None,
                traces: Sequence[Sequence[SearchTrace]] = (),
                target_vectors: Sequence[Sequence[Tensor]] | None = None,
                targets: Sequence[TargetTree] = (),
                parameters: Iterable[Tensor] = ()) -> LossTerms:
        w = self.weights
        per_sample: dict[str, Tensor] = {}
        if w["task"]:
            if task is None or task.dim() != 1:
                raise CellGraphError("RRNNLoss: lambda_task != 0 needs the (B,) per-sample task loss")
            per_sample["task"] = task
        if w["td"]:
            per_sample["td"] = self._td(traces, target_vectors, targets)
        if w["margin"]:
            per_sample["margin"] = self._summed(
                [margin_loss(trace, self.margin) for step in traces for trace in step], "margin")
        terms = {k: w[k] * v.mean() for k, v in per_sample.items()}
        if w["l2"]:
            terms["l2"] = w["l2"] * l2_loss(parameters)
        if not terms:
            raise CellGraphError("RRNNLoss: every term is switched off (all weights are 0)")
        used = list(terms.values())
        total = sum(used[1:], used[0])
        return LossTerms(total, *(terms[k].detach() if k in terms else None for k in TERMS))

    def _td(self, traces: Sequence[Sequence[SearchTrace]],
            target_vectors: Sequence[Sequence[Tensor]] | None, targets: Sequence[TargetTree]) -> Tensor:
        if target_vectors is None or len(target_vectors) != len(traces):
            raise CellGraphError("RRNNLoss: lambda_td != 0 needs target vectors for every step of the traces")
        values = []
        for t, (step, tv) in enumerate(zip(traces, target_vectors)):
            if not len(step) == len(tv) == len(targets):
                raise CellGraphError(
                    f"RRNNLoss: step {t} has {len(step)} runs, {len(tv)} target vector sets and "
                    f"{len(targets)} target trees; one of each per run is needed"
                )
            values += [td_loss(trace, v, tree, self.iso, self.td_match)
                       for trace, v, tree in zip(step, tv, targets)]
        return self._summed(values, "TD")

    @staticmethod
    def _summed(values: list[Tensor], what: str) -> Tensor:
        """``(B,)`` the per-sample sum of ``values`` (each ``(B,)``)."""
        if not values:
            raise CellGraphError(f"RRNNLoss: the {what} term needs at least one search trace")
        return torch.stack(values).sum(0)
