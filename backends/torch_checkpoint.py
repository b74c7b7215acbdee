"""Checkpoints that never lose work and can never run code.

* Writing is atomic (:func:`cellgraph.runs.atomic_write`: temporary file, fsync, rename),
  and the previous checkpoint of the same name is kept as ``NAME.prev.pt``.
* Every checkpoint has a sidecar ``NAME.pt.sha256``; loading verifies it, so a truncated or
  bit-flipped file is detected, reported, and the previous good one is used instead.
* Loading uses ``torch.load(weights_only=True)``: only tensors and plain containers are
  accepted, never pickled code.
* Loading maps every tensor to one device (``map_location``, the CPU by default), so a
  checkpoint written on a GPU loads on a machine without one, and the other way round.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

import torch

from cellgraph.errors import CellGraphError
from cellgraph.runs import atomic_write

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "load_latest"]


class CheckpointError(CellGraphError):
    """A checkpoint file that is missing, truncated, corrupted or not a checkpoint."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically, keeping the previous file as ``*.prev.pt``."""
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    if path.exists():
        prev = path.with_suffix(".prev.pt")
        os.replace(path, prev)
        sidecar = Path(f"{path}.sha256")
        if sidecar.exists():
            os.replace(sidecar, Path(f"{prev}.sha256"))
    atomic_write(path, data)
    atomic_write(Path(f"{path}.sha256"), _digest(data).encode())


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and verify one checkpoint, its tensors on ``map_location``; raise
    :class:`CheckpointError` naming the problem."""
    path = Path(path)
    sidecar = Path(f"{path}.sha256")
    try:
        data = path.read_bytes()
        expected = sidecar.read_bytes().strip() if sidecar.exists() else None
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except OSError as err:
        raise CheckpointError(f"checkpoint {path} cannot be read: {err}") from None
    if expected is not None and expected != _digest(data).encode():
        raise CheckpointError(f"checkpoint {path} is corrupted or truncated (sha256 mismatch)")
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises many types for a damaged archive
        raise CheckpointError(f"checkpoint {path} cannot be read: {type(err).__name__}: {err}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} does not hold a state dictionary")
    return state


def load_latest(path: str | Path, log=print, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load ``path``, or, if it is damaged, its previous version ``*.prev.pt`` (saying so),
    its tensors on ``map_location``."""
    path = Path(path)
    try:
        return load_checkpoint(path, map_location)
    except CheckpointError as err:
        prev = path.with_suffix(".prev.pt")
        if not prev.exists():
            raise
        log(f"warning: {err}; falling back to the previous checkpoint {prev}")
        return load_checkpoint(prev, map_location)
