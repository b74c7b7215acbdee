"""Data-parallel training over several processes and machines: torchrun's environment, the
process group and the few collectives the trainer needs.

Distributed training
--------------------
``cellgraph train`` under ``torchrun`` trains with ``DistributedDataParallel``: on GPUs with
the NCCL backend, one process per GPU (process ``LOCAL_RANK`` of a machine trains on
``cuda:LOCAL_RANK``, so ``--nproc_per_node`` is the number of GPUs); on the CPU with gloo. The
``device`` setting decides (``auto``: the GPUs when the machine has them). One machine, N
processes::

    torchrun --standalone --nproc_per_node N -m cellgraph train --task planted --model gru --out runs/ddp

Two machines, N processes each (HOST:PORT a free port on the first machine that the second can
reach; run the same command on both, ``--node_rank 0`` on HOST and ``--node_rank 1`` on the other)::

    torchrun --nnodes 2 --node_rank 0 --nproc_per_node N --rdzv-endpoint HOST:29500 \
        -m cellgraph train ... --out RUN

``batch_size`` stays the global batch (it must be >= the number of processes): every global
batch of the one-process epoch order is split ``batch[rank::world_size]`` and each rank's loss
is scaled so that DDP's gradient average is the one-process gradient (:func:`share`); a rank
left without a sample by a short last batch adds a zero-weighted step. So the run follows the
one-process run up to float rounding, with any number of processes, also when resumed with
another number. Rank 0 alone writes the run folder (on its machine; ``world_size`` is recorded
in ``env.json`` when the run starts and in ``final.json`` when it ends); every machine needs the
data (and the ``--glove`` / ``--teacher`` files), and ``--resume`` needs the run folder readable
on every machine (a shared file system). ``candidate_norm=batch`` normalises the candidates of
each rank's share of a batch with that share's statistics (``sample`` does not depend on the
batch).

Without ``WORLD_SIZE`` (or with ``WORLD_SIZE=1``) every helper here does nothing.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch import distributed as torch_dist

from cellgraph.backends.torch.runtime.device import resolve_device
from cellgraph.errors import CellGraphError

__all__ = ["process_group_backend", "Distributed", "launched", "share"]


def process_group_backend(device: torch.device) -> str:
    """The process-group backend for processes that train on ``device``: NCCL on GPUs,
    gloo on the CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


@dataclass(frozen=True)
class Distributed:
    """Which share of the work this process does, and the collectives between the processes
    (each one a no-op in a single process). ``local_rank``: the process's index on its
    machine; ``device``: where it trains and its collectives run (set by :func:`launched`)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Distributed":
        """``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` as torchrun sets them; one process when unset."""
        values = {}
        for name, default, low in (("RANK", 0, 0), ("WORLD_SIZE", 1, 1), ("LOCAL_RANK", 0, 0)):
            text = environ.get(name, str(default))
            try:
                value: int | None = int(text)
            except ValueError:
                value = None
            if value is None or value < low:
                raise CellGraphError(f"environment variable {name}={text!r}: expected an integer >= {low}")
            values[name] = value
        if values["RANK"] >= values["WORLD_SIZE"]:
            raise CellGraphError(f"environment variables RANK={values['RANK']} and WORLD_SIZE="
                                 f"{values['WORLD_SIZE']}: the rank must be below the world size")
        return cls(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])

    @property
    def active(self) -> bool:
        """Whether there is more than one process."""
        return self.world_size > 1

    @property
    def writes(self) -> bool:
        """Whether this rank writes the run folder."""
        return self.rank == 0

    def shard(self, order: np.ndarray) -> np.ndarray:
        """This rank's part of ``order``: ``order[rank::world_size]``."""
        return order[self.rank::self.world_size]

    def barrier(self) -> None:
        if self.active:
            torch_dist.barrier()

    def sum(self, values: Sequence[float]) -> list[float]:
        """``values`` summed over the ranks (in float64)."""
        if not self.active:
            return list(values)
        total = torch.tensor(values, dtype=torch.float64, device=self.device)
        torch_dist.all_reduce(total)
        return total.tolist()

    def all(self, flag: bool | Tensor) -> bool:
        """Whether ``flag`` (a bool, or a one-element bool tensor on this rank's device) holds
        on every rank (each rank gets the same answer); a tensor is read once, after the
        reduction."""
        if not self.active:
            return bool(flag)
        if torch.is_tensor(flag):
            value = flag.reshape(1).to(torch.int32)
        else:
            value = torch.tensor([int(flag)], dtype=torch.int32, device=self.device)
        torch_dist.all_reduce(value, torch_dist.ReduceOp.MIN)
        return bool(value)

    def max(self, values: Tensor) -> Tensor:
        """The elementwise maximum of an integer tensor on this rank's device over the ranks
        (gloo reduces int32)."""
        if not self.active:
            return values
        wide = values.to(torch.int32)
        torch_dist.all_reduce(wide, torch_dist.ReduceOp.MAX)
        return wide.to(values.dtype)

    def wrap(self, module: nn.Module, find_unused: bool) -> nn.Module:
        """``module`` in ``DistributedDataParallel`` over its parameters that require gradients
        now (wrap again when that set changes). ``find_unused``: some parameter may get no
        gradient in a step on some rank (e.g. a tuple no search chose, without an L2 term over
        all parameters); then ``forward`` must compute the whole loss and return nothing else
        that depends on the parameters."""
        if not self.active:
            return module
        device = torch.device(self.device)
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(module, device_ids=ids, find_unused_parameters=find_unused)

    def sync_buffers(self, module: nn.Module) -> None:
        """Give every rank rank 0's buffers (BatchNorm running statistics)."""
        if self.active:
            for buffer in module.buffers():
                torch_dist.broadcast(buffer, 0)


def share(n_local: int, n_global: int, world_size: int) -> float:
    r"""The factor of a rank's mean loss over its ``n_local`` of the ``n_global`` samples of
    a global batch: ``n_local * world_size / n_global``.

    DDP averages the ranks' gradients, so with :math:`L_r` the mean loss of rank ``r`` and
    :math:`L_{reg}` the L2 term (the same on every rank),

    .. math::
        \frac1W \sum_r \frac{n_r W}{n} \nabla (L_r + L_{reg})
        = \nabla \frac1n \sum_{samples} l + \nabla L_{reg} \sum_r \frac{n_r}{n},

    the one-process gradient of the global batch, since :math:`\sum_r n_r = n`."""
    return n_local * world_size / n_global


@contextmanager
def launched(device: str = "auto") -> Iterator[Distributed]:
    """The :class:`Distributed` of this process, with the process group (``MASTER_ADDR``,
    ``MASTER_PORT`` from torchrun) open inside the block when there are several processes:
    for a CUDA ``device`` setting each process takes ``cuda:LOCAL_RANK`` (made its current
    GPU) and the group runs NCCL, else gloo on the CPU."""
    dist = Distributed.from_env()
    if not dist.active:
        yield dist
        return
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise CellGraphError(f"WORLD_SIZE={dist.world_size} but {' and '.join(missing)} not set: "
                             "start the processes with torchrun")
    # DistributedDataParallel imports torch._dynamo; imported after init_process_group, it holds
    # the group past destroy_process_group, and gloo's threads, still running, can then abort the
    # exiting interpreter ("terminate called without an active exception", torch 2.13)
    from torch import _dynamo  # noqa: F401

    where = resolve_device(device, dist.local_rank)
    if where.type == "cuda":
        torch.cuda.set_device(where)
    dist = replace(dist, device=str(where))
    torch_dist.init_process_group(process_group_backend(where), rank=dist.rank, world_size=dist.world_size)
    try:
        yield dist
    finally:
        torch_dist.destroy_process_group()
