r"""Warm start: an RRNN or RRNN-GRU that computes a trained GRU exactly at step 0
(docs/paper-notes.md, *Extension: the discovery recipe*).

Theorem GRU says Algorithm 2 can build the GRU; :func:`warm_start` makes a model do so with
a trained GRU's own weights, so that the search starts from a cell that works and training
departs from it only where the task loss gains:

* the embedding and the output layer are the teacher's;
* the weight tuples are the teacher's ``nn.GRU`` weights laid on the ``gru_torch`` tree
  (:func:`cellgraph.targets.torch_tuples`): ``(W_ir, W_hr, b_ir + b_hr)``,
  ``(W_iz, W_hz, b_iz + b_hz)``, ``(W_hn, 0, b_hn)``, ``(W_in, I, b_in)`` and the identity;
* the scoring network's output layer is zero, so ``alpha`` is 0 for every candidate, and the
  structural term (:mod:`~cellgraph.backends.torch.algorithm2.logits`) alone ranks them: at every
  choice the teacher's candidate gets the logit ``A = log(w / (1 - w) (C - 1))`` and every
  other slot 0, where ``C`` is the number of candidates of that choice and ``w``
  (``warm_weight``) the share of the soft mixture the teacher's candidate then holds. The
  argmax is the teacher's cell whatever ``w``; ``w`` sets how much gradient reaches the
  other candidates through the straight-through estimator (``1 - w`` of the mixture).

The full RRNN builds ``gru_torch``'s 9 nodes in its node order (``n_iterations = 9``, at
least 4 trainable tuples, ``x``, ``h`` and the zero constant as leaves); RRNN-GRU must use
the ``gru_torch`` tree (``tree = "gru_torch"``) with the flexible placement.
"""

from __future__ import annotations

import math

import torch

from cellgraph.backends.torch.models.rrnn import RRNNCell
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRUCell
from cellgraph.backends.torch.algorithm2.logits import slot
from cellgraph.cell.expr import Expr
from cellgraph.errors import CellGraphError
from cellgraph.targets import Target, target, torch_tuples

__all__ = ["warm_start", "teacher_logit", "TEACHER_TREE"]

#: The target whose form ``torch.nn.GRU`` computes.
TEACHER_TREE = "gru_torch"


def teacher_logit(weight: float, n_candidates: int) -> float:
    """``A`` such that ``e^A / (e^A + C - 1) = weight`` for ``C = n_candidates`` (0 when there
    is no other candidate)."""
    if not 0.0 < weight < 1.0:
        raise CellGraphError(f"warm_weight must lie strictly between 0 and 1, got {weight}")
    return math.log(weight / (1.0 - weight) * (n_candidates - 1)) if n_candidates > 1 else 0.0


@torch.no_grad()
def warm_start(model, teacher, weight: float = 0.9) -> None:
    """Make ``model`` (a :class:`~cellgraph.backends.torch.training.task.TaskModel` of ``rrnn`` or
    ``rrnn-gru`` with the structural term, or of ``gru``) compute ``teacher`` (a ``gru``
    TaskModel on the same vocabulary and hidden size) exactly, in place (module docstring). A
    ``gru`` model takes the teacher's weights: the teacher continued with a fresh optimizer, the
    control of a warm-started search."""
    if teacher.model_name != "gru":
        raise CellGraphError(f"warm start: the teacher must be a gru model, got {teacher.model_name!r}")
    if model.model_name == "gru":
        model.load_state_dict(teacher.state_dict())
        return
    cell = model.core.cell
    if getattr(cell, "structure_logits", None) is None:
        raise CellGraphError("warm start needs the structural term (structure_term=true): without it "
                             "the scoring network alone cannot be set to build the GRU")
    for name in ("embedding", "output"):
        mine, theirs = getattr(model, name), getattr(teacher, name)
        if mine.weight.shape != theirs.weight.shape:
            raise CellGraphError(f"warm start: the teacher's {name} has shape {tuple(theirs.weight.shape)}, "
                                 f"this model's {tuple(mine.weight.shape)}")
        mine.load_state_dict(theirs.state_dict())
    goal = target(TEACHER_TREE)
    _set_tuples(cell, goal, teacher.core.rnn)
    for net in (cell.scoring if isinstance(cell, RRNNCell) else [cell.scoring]):
        net[-1].weight.zero_()
        net[-1].bias.zero_()
    if isinstance(cell, RRNNCell):
        _rrnn_logits(cell, goal, weight)
    elif isinstance(cell, RRNNGRUCell):
        _rrnn_gru_logits(cell, goal, weight)
    else:
        raise CellGraphError(f"warm start: no warm start for {type(cell).__name__}")


def _model_tuple(cell, goal: Target, r: int) -> int:
    """The layout index in ``cell`` of ``goal``'s tuple ``r``: the same index for a trainable
    tuple, the cell's identity tuple for the identity."""
    n_trainable = len(goal.layout.trainable_indices)
    return r if r < n_trainable else len(cell.layout) - 1


def _set_tuples(cell, goal: Target, gru: torch.nn.GRU) -> None:
    """Copy the teacher's weights, laid on ``goal``'s tuples, into the cell's tuples."""
    need = len(goal.layout.trainable_indices)
    have = len(cell.layout.trainable_indices) - (1 if getattr(cell, "identity_trainable", False) else 0)
    if have < need:
        raise CellGraphError(f"warm start: {TEACHER_TREE} needs {need} trainable tuples (n_tuples={need}), "
                             f"this model has {have}")
    weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    tuples = torch_tuples(TEACHER_TREE, *(w.detach().cpu().double().numpy() for w in weights))
    trainable = cell.layout.trainable_indices
    for r, (L, R, b) in enumerate(tuples):
        index = _model_tuple(cell, goal, r)
        if index not in trainable:
            continue  # the fixed identity tuple is (I, I, 0) already
        pos = trainable.index(index)
        for param, value in zip((cell.weight_L, cell.weight_R, cell.bias), (L, R, b)):
            param[pos] = torch.as_tensor(value, dtype=param.dtype)


def _rrnn_logits(cell: RRNNCell, goal: Target, weight: float) -> None:
    """The full RRNN's structural logits: iteration ``k`` prefers ``goal``'s ``k``-th node."""
    (space,) = goal.spaces
    if len(cell.spaces) != 1:
        raise CellGraphError(f"warm start: the full RRNN must make one state (h) to be a GRU, it makes "
                             f"{cell.states}")
    mine = cell.spaces[0]
    if mine.leaves != space.leaves or mine.n_iterations != space.n_iterations:
        raise CellGraphError(
            f"warm start: the full RRNN must search over the leaves {[str(l) for l in space.leaves]} with "
            f"n_iterations={space.n_iterations} to build {TEACHER_TREE}; it has "
            f"{[str(l) for l in mine.leaves]} and n_iterations={mine.n_iterations}")
    position: dict[Expr, int] = {leaf: i for i, leaf in enumerate(space.leaves)}
    per_pair = len(mine.tuples) * len(mine.ops) * len(mine.activations)
    logits = cell.structure_logits[0]
    logits.zero_()
    n_candidates = 0
    for k, node in enumerate(goal.graph.internal_nodes()):
        i, j = position[node.left], position[node.right]
        n_nodes = len(position)
        n_candidates += per_pair * (n_nodes * (n_nodes - 1) // 2 if k == 0 else n_nodes - 1)
        logits[k, slot(mine, _model_tuple(cell, goal, node.tuple), node.op, node.act, i, j)] = \
            teacher_logit(weight, n_candidates)
        position[node] = n_nodes


def _rrnn_gru_logits(cell: RRNNGRUCell, goal: Target, weight: float) -> None:
    """RRNN-GRU's structural logits: each choosing node prefers ``goal``'s tuple."""
    if cell.tree != TEACHER_TREE or cell.placement != "flexible":
        raise CellGraphError(f"warm start: RRNN-GRU must use tree={TEACHER_TREE} with placement=flexible to "
                             f"compute the teacher's GRU; it has tree={cell.tree}, placement={cell.placement}")
    nodes = goal.graph.internal_nodes()
    logits = cell.structure_logits
    logits.zero_()
    for row, k in enumerate(cell.choosing_nodes):
        allowed = cell.allowed[k]
        logits[row, allowed.index(_model_tuple(cell, goal, nodes[k].tuple))] = teacher_logit(weight, len(allowed))
