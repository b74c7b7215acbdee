"""Batches of a split on a device, and the sums an epoch or an evaluation reads back
(shared by the epoch loop, :mod:`~cellgraph.backends.torch.runs.evaluation` and
:mod:`~cellgraph.backends.torch.runs.structure_log`)."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from cellgraph.data.datasets import Dataset, Split

__all__ = ["task_loss", "metric_value", "chunks", "batches", "device_of", "host"]


def task_loss(logits: Tensor, targets: Tensor) -> tuple[Tensor, int, Tensor]:
    """``(B,)`` each sample's cross-entropy in nats summed over its predictions (Eq. 5's task
    term), the number of predictions, the number correct (a 0-d tensor on the logits' device:
    it is read once per epoch, not per step)."""
    flat, gold = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    correct = (flat.detach().argmax(-1) == gold).sum()
    per_sample = F.cross_entropy(flat, gold, reduction="none").view(targets.shape[0], -1).sum(1)
    return per_sample, gold.numel(), correct


def metric_value(dataset: Dataset, nats: float, correct: int, n: int) -> float:
    """The task's metric from summed nats (per prediction) or the count of correct ones."""
    return correct / max(n, 1) if dataset.metric == "accuracy" else dataset.metric_from_nats(nats)


def chunks(order: np.ndarray, size: int) -> Iterator[np.ndarray]:
    return (order[at:at + size] for at in range(0, len(order), size))


def batches(split: Split, parts: Iterable[np.ndarray], device: torch.device | str = "cpu"):
    """``(sample indices, tokens, targets)`` of each part (an array of sample indices), on
    ``device``: the rows of all parts are copied there at once, not batch by batch."""
    parts = list(parts)
    if not parts:
        return
    rows, sizes = torch.from_numpy(np.concatenate(parts)), [len(part) for part in parts]
    inputs, targets = (torch.from_numpy(a)[rows].to(device).split(sizes) for a in (split.inputs, split.targets))
    yield from zip(rows.to(device).split(sizes), inputs, targets)


def device_of(model: nn.Module) -> torch.device:
    """Where ``model`` computes (its parameters' device)."""
    return next(model.parameters()).device


def host(values: list[float | Tensor]) -> list[float]:
    """``values`` as floats; the tensors among them (on one device) are read in one transfer."""
    tensors = [v.detach().double().reshape(()) for v in values if torch.is_tensor(v)]
    read = iter(torch.stack(tensors).tolist() if tensors else [])
    return [next(read) if torch.is_tensor(v) else float(v) for v in values]
