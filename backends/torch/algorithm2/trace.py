"""What one batched run of Algorithm 2 leaves behind at one time step (torch backend).

A :class:`SearchTrace` is the interface between the search (``torch_search``), the loss
terms of Eq. 5 (``torch_loss``) and the exports: from it the margin term reads the best and
second-best scores, the TD term reads the node vectors and the chosen children, and
:meth:`SearchTrace.graph` turns the structure of one sample into a core
:class:`~cellgraph.cell.graph.CellGraph`.

Node list of one sample (docs/paper-notes.md, *Algorithm 2: exact semantics*): the leaves in
``space.leaves`` order (``S_data``, ``S_prev``, ``S_aux``), then the generated nodes
``c_1*, ..., c_N*``; the output ``h_t`` is the last one, index ``n_leaves + N - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from cellgraph.cell.expr import Expr, Node
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import SearchSpace

__all__ = ["SearchTrace"]


@dataclass
class SearchTrace:
    """One run of Algorithm 2 for a batch of ``B`` samples at one time step.

    Attributes:
        space: the search space of the run.
        state: the name of the state this run makes (``"h"``, or ``"c"`` then ``"h"``).
        vectors: ``(B, n_leaves + N, p)`` node vectors; in ``soft`` mode the generated ones
            are the softmax mixtures actually propagated.
        left, right: ``(B, N)`` int64 indices into the node list of each generated node's
            children (``left < right``; ``left`` took ``L_r``).
        tuple_pos, op_pos, act_pos: ``(B, N)`` int64 positions of the chosen ``r``, ``o``,
            ``u`` in ``space.tuples``, ``space.ops``, ``space.activations``.
        best_score: ``(B, N)`` ``alpha(c_k*)`` (differentiable w.r.t. the scoring network).
        second_score: ``(B, N)`` ``alpha(c_k**)``, ``-inf`` where no second candidate exists.
    """

    space: SearchSpace
    state: str
    vectors: Tensor
    left: Tensor
    right: Tensor
    tuple_pos: Tensor
    op_pos: Tensor
    act_pos: Tensor
    best_score: Tensor
    second_score: Tensor

    @property
    def n_leaves(self) -> int:
        return len(self.space.leaves)

    @property
    def n_iterations(self) -> int:
        return self.left.shape[1]

    @property
    def batch_size(self) -> int:
        return self.left.shape[0]

    @property
    def root_index(self) -> int:
        return self.n_leaves + self.n_iterations - 1

    def nodes(self, b: int) -> list[Expr]:
        """The node list of sample ``b`` as core expressions (leaves, then ``c_1*..c_N*``)."""
        space = self.space
        nodes: list[Expr] = list(space.leaves)
        rows = [t[b].tolist() for t in (self.left, self.right, self.tuple_pos, self.op_pos, self.act_pos)]
        for i, j, r, o, u in zip(*rows):
            nodes.append(Node(space.ops[o], space.activations[u], space.tuples[r], nodes[i], nodes[j]))
        return nodes

    def graph(self, b: int) -> CellGraph:
        """The cell DAG sample ``b`` built at this step, rooted at ``c_N*``."""
        return CellGraph(self.nodes(b)[-1], self.state)

    def detach(self) -> "SearchTrace":
        return SearchTrace(
            self.space, self.state, self.vectors.detach(), self.left, self.right,
            self.tuple_pos, self.op_pos, self.act_pos,
            self.best_score.detach(), self.second_score.detach(),
        )

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> "SearchTrace":
        """The trace on ``device`` (e.g. the CPU, to read many cells without a device sync
        each) with its vectors and scores in ``dtype`` (the index tensors keep theirs);
        differentiable."""
        def moved(t: Tensor, floating: bool) -> Tensor:
            return t.to(device=device, dtype=dtype if floating else None)

        return SearchTrace(
            self.space, self.state, moved(self.vectors, True),
            *(moved(t, False) for t in (self.left, self.right, self.tuple_pos, self.op_pos, self.act_pos)),
            moved(self.best_score, True), moved(self.second_score, True),
        )

    def reachable(self) -> Tensor:
        """``(B, n_leaves + N)`` number of positions each node occupies in the unfolded tree
        rooted at ``c_N*`` (0 for nodes the tree does not use; the multiplicity of TD)."""
        B, N, L = self.batch_size, self.n_iterations, self.n_leaves
        count = torch.zeros(B, L + N, dtype=torch.int64, device=self.left.device)
        count[:, L + N - 1] = 1
        rows = torch.arange(B, device=self.left.device)
        for k in range(N - 1, -1, -1):
            mult = count[:, L + k]
            count[rows, self.left[:, k]] += mult
            count[rows, self.right[:, k]] += mult
        return count
