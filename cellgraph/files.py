"""Atomic file writing, JSON and exclusive locks, used by run folders, exports, checkpoints and
the protocol runner.

Every whole-file write goes through :func:`atomic_write` (temporary file in the same
folder, fsync, rename, fsync of the folder), so a killed process leaves either the old or
the new file, never a torn one; Ctrl-C (SIGINT), or SIGTERM (``kill``'s default, which
:func:`cellgraph.cli.main.main` makes a stop request like Ctrl-C), waits until a write in
progress is done (:func:`deferred_interrupt`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from cellgraph.errors import CellGraphError

__all__ = ["deferred_interrupt", "atomic_write", "write_json", "read_json", "exclusive", "writable_file"]


@contextmanager
def exclusive(path: str | Path, what: str, hint: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``path`` (made if missing; it keeps the holder's
    pid) for the block. Where another process holds it, raise at once a
    :class:`~cellgraph.errors.CellGraphError` "``what`` is in use by another process (pid N):
    ``hint``". The system drops the lock when its holder exits, even when it is killed. No
    lock where ``fcntl`` is missing (Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise CellGraphError(f"{what} is in use by another process (pid {holder}): {hint}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


#: The signals that ask a command to stop: Ctrl-C, and ``kill``'s default (a command started
#: in the background ignores SIGINT, so SIGTERM is how it is stopped).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) and SIGTERM until the block is done, then deliver the first
    one caught: a write in progress finishes before ``KeyboardInterrupt`` is raised. Blocks
    nest (the outermost delivers); outside the main thread, where Python handles no signals,
    this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: caught.append((signum, frame)))
                for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signum, frame = caught[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, fsync folder); a
    Ctrl-C meanwhile takes effect once the file is complete."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {path}: folder {path.parent} does not exist")
    with deferred_interrupt():
        _write_replace(path, data)


def _write_replace(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, rename it over ``path``
    and fsync the folder; the temporary file is removed if anything fails before the rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically as indented JSON with sorted keys."""
    atomic_write(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def writable_file(text: str) -> str:
    """The argparse ``type`` of an option naming a file a command writes when its work is done
    (``--json OUT``): the file's folder must exist, so that a missing one is refused before the
    work, not after it."""
    if not Path(text).parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {Path(text).parent} does not exist")
    return text


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path``; a missing file names the path, a file that is not valid
    UTF-8 JSON raises :class:`~cellgraph.errors.CellGraphError`."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CellGraphError(f"{path}: not valid JSON ({err})") from None
