"""What training carries from epoch to epoch and saves in ``checkpoints/last.pt``: the
early-stopping state and CPU seconds (:class:`TrainState`), the RNG states, and the checkpoint
a killed run resumes from (:func:`last_checkpoint`, :func:`restore`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from cellgraph.backends.torch.training.batches import device_of
from cellgraph.backends.torch.training.task import TaskModel

__all__ = ["TrainState", "rng_state", "set_rng_state", "seed_everything", "last_checkpoint", "restore"]


@dataclass
class TrainState:
    """What :func:`train` carries from epoch to epoch (and in ``last.pt``).

    ``cpu_before``: the CPU seconds (user + system, all threads) of the run's earlier
    processes, up to the checkpoint this one resumed from (None where that checkpoint predates
    the count); ``cpu_start``: :func:`time.process_time` when this process began the run."""

    epoch: int = 0
    best: float | None = None
    best_epoch: int = 0
    bad_epochs: int = 0
    bad_steps: int = 0
    choices: Tensor | None = None
    cpu_before: float | None = 0.0
    cpu_start: float = field(default_factory=time.process_time)

    def cpu_seconds(self) -> float | None:
        """The run's CPU seconds so far, over all its processes (None: not known)."""
        return None if self.cpu_before is None else self.cpu_before + time.process_time() - self.cpu_start

    def early(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "bad_epochs": self.bad_epochs,
                "bad_steps": self.bad_steps}


def rng_state(device: torch.device) -> dict[str, Any]:
    """Python's, numpy's and torch's CPU generator states, and the GPU's when training on one."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore :func:`rng_state` (loaded onto any device); a GPU state only on a GPU."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def last_checkpoint(model: TaskModel, optimizer: torch.optim.Optimizer, state: TrainState,
                epoch: dict[str, Any] | None = None) -> dict[str, Any]:
    """``last.pt``: after ``state.epoch`` finished epochs and, within the next one, the
    :meth:`EpochProgress.saved` state ``epoch`` (None at an epoch's end)."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": state.epoch,
            "rng": rng_state(device_of(model)), "early": state.early(), "choices": state.choices,
            "within_epoch": epoch, "cpu_seconds": state.cpu_seconds()}


def restore(model: TaskModel, optimizer: torch.optim.Optimizer, ckpt: dict[str, Any], cpu_start: float) -> TrainState:
    """Continue from ``ckpt``, loaded onto the CPU whatever device wrote it: ``load_state_dict``
    moves the model's and the optimizer's state to the parameters' device but leaves Adam's
    step counters where they were loaded; on the CPU, as a new Adam keeps them, not on a GPU,
    where reading them would cost a device sync per step."""
    device = device_of(model)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    set_rng_state(ckpt["rng"], device)
    early, choices = ckpt["early"], ckpt["choices"]
    return TrainState(ckpt["epoch"], early["best"], early["best_epoch"], early["bad_epochs"],
                  early["bad_steps"], None if choices is None else choices.to(device),
                  ckpt.get("cpu_seconds"), cpu_start)
