"""Where the torch backend computes, and in which precision.

* :func:`resolve_device`: the ``device`` setting (``auto``, ``cpu``, ``cuda``, ``cuda:N``;
  checked for its form by :func:`cellgraph.experiment.config.valid_device`) against this machine:
  ``auto`` is the first CUDA GPU when there is one, else the CPU; asking for CUDA where
  there is none, or for a GPU index the machine lacks, is a :class:`CellGraphError`. Under
  ``torchrun`` every process takes the GPU of its ``LOCAL_RANK`` (one process per GPU).
* :func:`autocast`: the ``amp`` setting as a context for the forward pass (``bf16``:
  ``torch.autocast`` with bfloat16; ``none``: nothing); :func:`no_autocast`: a region that
  keeps its own dtype inside an autocast one.
* :func:`synchronize`: wait for the device's queued work (for timing).
"""

from __future__ import annotations

import contextlib
from typing import ContextManager, Iterator

import torch

from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import DEVICE_FORMS, valid_device

__all__ = ["resolve_device", "autocast", "no_autocast", "synchronize", "describe"]


def _no_cuda_reason() -> str:
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    return "no CUDA GPU is visible on this machine"


def _cuda_index(name: str, local_rank: int | None) -> int:
    """The GPU index that ``name`` (``auto``/``cuda``/``cuda:N``) asks for on this process."""
    if name in ("auto", "cuda"):
        return local_rank or 0
    if local_rank is not None:
        raise CellGraphError(f"device {name!r}: under torchrun each process uses the GPU of its "
                             "LOCAL_RANK; set device=cuda (or auto), not one GPU for all")
    return int(name.split(":", 1)[1])


def resolve_device(name: str, local_rank: int | None = None) -> torch.device:
    """The :class:`torch.device` of the ``device`` setting ``name`` on this machine.

    ``local_rank``: this process's ``LOCAL_RANK`` when several processes train together
    (``torchrun``); a CUDA device is then ``cuda:LOCAL_RANK``."""
    if not valid_device(name):
        raise CellGraphError(f"unknown device {name!r} (one of {', '.join(DEVICE_FORMS)})")
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise CellGraphError(f"device {name!r} asks for a CUDA GPU, but no GPU is available: "
                             f"{_no_cuda_reason()}; use device=cpu (or auto)")
    index, count = _cuda_index(name, local_rank), torch.cuda.device_count()
    if index >= count:
        raise CellGraphError(f"device {name!r}{'' if local_rank is None else f' (LOCAL_RANK {local_rank})'}: "
                             f"this machine has {count} CUDA GPU(s), cuda:0..cuda:{count - 1}")
    return torch.device("cuda", index)


def autocast(device: torch.device, amp: str) -> ContextManager:
    """The ``amp`` setting for a forward pass on ``device``: ``torch.autocast`` with
    bfloat16 for ``bf16``, no context for ``none``."""
    if amp == "none":
        return contextlib.nullcontext()
    if amp != "bf16":
        raise CellGraphError(f"unknown amp {amp!r} (none or bf16)")
    return torch.autocast(device.type, dtype=torch.bfloat16)


@contextlib.contextmanager
def no_autocast() -> Iterator[None]:
    """Inside: no autocast on any device type (usable as a decorator)."""
    with contextlib.ExitStack() as stack:
        for kind in ("cpu", "cuda"):
            if torch.is_autocast_enabled(kind):
                stack.enter_context(torch.autocast(kind, enabled=False))
        yield


def synchronize(device: torch.device) -> None:
    """Wait until the work queued on ``device`` has run (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device) -> str:
    """``cpu``, or ``cuda:N (GPU name)``."""
    if device.type != "cuda":
        return str(device)
    return f"{device} ({torch.cuda.get_device_name(device)})"
