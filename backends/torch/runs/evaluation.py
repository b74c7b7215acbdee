"""Evaluation of a task model on a split, in a search mode (docs/paper-notes.md, *Which search
the paper's numbers measure*)."""

from __future__ import annotations

import numpy as np
import torch

from cellgraph.backends.torch.training.batches import batches, chunks, device_of, host, metric_value, task_loss
from cellgraph.backends.torch.training.distributed import Distributed
from cellgraph.backends.torch.training.task import TaskModel
from cellgraph.data.datasets import Dataset
from cellgraph.experiment.config import TrainConfig
from cellgraph.progress import progress

__all__ = ["MODES_EVALUATED", "evaluate", "both_searches", "validation"]

#: The searches a searching model's validation and final metrics are given in: Algorithm 2's
#: argmax and the softmax mixture of training (the straight-through mode searches like hard).
MODES_EVALUATED = ("hard", "soft")



@torch.no_grad()
def evaluate(model: TaskModel, dataset: Dataset, split: str, config: TrainConfig,
             dist: Distributed = Distributed()) -> dict[str, float]:
    """``{metric, nats, accuracy}`` of ``model`` on a split, searching in ``eval_mode``. With
    several processes each rank evaluates ``samples[rank::world_size]`` and the sums are
    combined, so every rank gets the same numbers."""
    data = dataset.splits[split]
    model.eval()
    nats = correct = n = 0
    mine = dist.shard(np.arange(len(data)))
    desc = f"{split}, {config.eval_mode} search" if model.structured else split
    bar = progress(len(mine), desc, dist.writes, unit="sequences")
    with model.choice_mode(config.eval_mode):
        for index, tokens, targets in batches(data, chunks(mine, config.eval_batch_size), device_of(model)):
            logits, _ = model(tokens)
            loss, count, right = task_loss(logits, targets)
            nats, correct, n = nats + loss.sum().double(), correct + right, n + count
            bar.update(len(index))
    bar.close()
    nats, correct, n = dist.sum(host([nats, correct, n]))
    mean = nats / max(n, 1)
    return {dataset.metric: metric_value(dataset, mean, correct, n), "nats": mean, "accuracy": correct / max(n, 1)}


def both_searches(model: TaskModel, dataset: Dataset, split: str, config: TrainConfig, chosen: float,
                   dist: Distributed = Distributed()) -> dict[str, float]:
    """``<split>_<metric>_hard`` and ``<split>_<metric>_soft`` of a searching model (Algorithm 2's
    argmax and the mixture; nothing for the others): ``chosen``, the ``eval_mode``'s value, is
    not computed again. A model trained straight-through ran its argmax cell in every forward
    pass; the mixture is no model it trained, so it is not evaluated (unless ``eval_mode``)."""
    if not model.structured:
        return {}
    modes = [m for m in MODES_EVALUATED if config.mode != "straight-through" or m in ("hard", config.eval_mode)]
    return {f"{split}_{dataset.metric}_{mode}": chosen if mode == config.eval_mode
            else evaluate(model, dataset, split, config.replace(eval_mode=mode), dist)[dataset.metric]
            for mode in modes}


def validation(model: TaskModel, dataset: Dataset, config: TrainConfig,
                dist: Distributed) -> dict[str, float]:
    """An epoch's validation: ``val_<metric>`` in ``eval_mode`` (what early stopping and the best
    checkpoint follow) and, for a searching model, the metric of both searches, so that the
    learning curves show both whichever one selects."""
    chosen = evaluate(model, dataset, "val", config, dist)[dataset.metric]
    return {f"val_{dataset.metric}": chosen, **both_searches(model, dataset, "val", config, chosen, dist)}
