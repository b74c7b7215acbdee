"""Checkpoints that never lose work and can never run code.

* Writing is atomic (:func:`cellgraph.files.atomic_write`: temporary file, fsync, rename),
  and the previous checkpoint of the same name is kept as ``NAME.prev.pt``; a Ctrl-C waits
  until the checkpoint, its sidecar and the previous version are all in place.
* Every checkpoint has a sidecar ``NAME.pt.sha256``; loading verifies it, so a truncated or
  bit-flipped file is detected, reported, and the previous good one is used instead.
* Loading uses ``torch.load(weights_only=True)``: only tensors and plain containers are
  accepted, never pickled code. A file without a sidecar that torch cannot read is reported
  as damaged (or, where it holds other objects, as refused), never with torch's advice to
  load it with ``weights_only=False``.
* Loading maps every tensor to one device (``map_location``, the CPU by default), so a
  checkpoint written on a GPU loads on a machine without one, and the other way round.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path
from typing import Any

import torch

from cellgraph.errors import CellGraphError
from cellgraph.files import atomic_write, deferred_interrupt

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
    with deferred_interrupt():
        if path.exists():
            prev = path.with_suffix(".prev.pt")
            os.replace(path, prev)
            sidecar = Path(f"{path}.sha256")
            if sidecar.exists():
                os.replace(sidecar, Path(f"{prev}.sha256"))
        atomic_write(path, data)
        atomic_write(Path(f"{path}.sha256"), _digest(data).encode())


def _unreadable(path: Path, err: Exception, verified: bool) -> CheckpointError:
    """The error for a checkpoint ``torch.load`` rejected: an object other than tensors and
    plain containers (refused, as it could run code), else a damaged file (``verified``: one
    that matches its checksum, so written so). torch's own text is cut to its cause: its
    advice to retry with ``weights_only=False`` is wrong for both."""
    text = str(err)
    cause = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    reason = (cause.group(1) if cause else text).split(". ")[0].strip() or "empty or cut short"
    if cause and "global" in reason.lower():
        return CheckpointError(f"checkpoint {path} cannot be read: it holds an object other than tensors and "
                               f"plain containers ({reason}), and loading it could run code")
    what = (f"checkpoint {path} matches its checksum but is not a readable torch archive" if verified else
            f"checkpoint {path} is corrupted or truncated (it has no checksum sidecar, and it is not a "
            "readable torch archive)")
    return CheckpointError(f"{what}: {type(err).__name__}: {reason}")


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
        raise _unreadable(path, err, expected is not None) from None
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
