"""Run folders: what a training run leaves on disk, written so that no work is lost.

A run folder holds::

    config.json      the resolved TrainConfig (``data_dir``: the data folder actually read)
    env.json         seed, command line, package versions, machine, sha256 of the data files read
    metrics.jsonl    one JSON object per epoch (appended, flushed and fsynced)
    final.json       final validation and test metrics (keys named after the metric)
    checkpoints/     best and last checkpoints (written by the backend, atomically)
    structures/      discovered cells per epoch (canonical forms with counts)

Every whole-file write goes through :func:`cellgraph.files.atomic_write`, so a killed
process leaves either the old or the new file, never a torn one; Ctrl-C (SIGINT) waits until
a write in progress is done (:func:`cellgraph.files.deferred_interrupt`).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, ContextManager

from cellgraph.errors import CellGraphError, FormatError
from cellgraph.files import atomic_write, deferred_interrupt, exclusive, read_json, write_json

__all__ = ["eval_name", "RunDir", "RECORD_FILES", "STOPPED", "TEACHER", "copy_record", "package_versions", "load_run"]

PACKAGES = ("cellgraph", "numpy", "torch", "sympy", "networkx", "graphviz", "matplotlib", "optuna")

#: The file of a run that stopped on non-finite losses (why, the epoch, the last good one),
#: there until the run is resumed.
STOPPED = "stopped.json"
#: The folder in a run folder where ``warm_start=teacher`` trains the run's teacher.
TEACHER = "teacher"
#: What a run's *record* keeps, with its ``eval_*.json`` and ``structures/``: never checkpoints.
RECORD_FILES = ("config.json", "env.json", "metrics.jsonl", "final.json", STOPPED)


def copy_record(run: Path, dest: Path) -> Path:
    """Copy the record of run folder ``run`` into ``dest`` (made if missing): the
    :data:`RECORD_FILES` it has, its ``eval_*.json``, its ``structures/`` folder (replaced
    whole) and, for a run warm-started from a teacher it trained (``warm_start=teacher``), the
    teacher's record in ``teacher/``; never checkpoints. A record file the run no longer has
    leaves ``dest`` too (a resumed run's ``stopped.json``). Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in RECORD_FILES:
        if (run / name).is_file():
            shutil.copy2(run / name, dest / name)
        else:
            (dest / name).unlink(missing_ok=True)
    for path in sorted(run.glob("eval_*.json")):
        shutil.copy2(path, dest / path.name)
    if (run / "structures").is_dir():
        shutil.rmtree(dest / "structures", ignore_errors=True)
        shutil.copytree(run / "structures", dest / "structures")
    if (run / TEACHER).is_dir():
        copy_record(run / TEACHER, dest / TEACHER)
    return dest


def eval_name(split: str, mode: str | None = None, checkpoint: str = "best") -> str:
    """The run-folder file of ``cellgraph eval --split SPLIT [--mode MODE] [--checkpoint
    last]``: ``eval_<split>.json`` in the run's own ``eval_mode``, else
    ``eval_<split>_<mode>.json``; ``_last`` before ``.json`` for the last checkpoint, so that
    it never overwrites the best one's."""
    stem = f"eval_{split}" if mode is None else f"eval_{split}_{mode}"
    return f"{stem}_last.json" if checkpoint == "last" else f"{stem}.json"


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunDir:
    """A run folder. ``RunDir.create`` checks at once that it can be written."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def vet(cls, path: str | Path, *, resume: bool = False) -> "RunDir":
        """The run folder ``path``, refused (writing nothing) where it is a file, cannot be
        made or written, or, for a new run, holds a run already (the error says what to do
        with that run)."""
        run = cls(path)
        if run.path.exists() and not run.path.is_dir():
            raise CellGraphError(f"run folder {run.path} exists and is not a folder")
        base = next(p for p in (run.path.absolute(), *run.path.absolute().parents) if p.exists())
        if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
            raise CellGraphError(f"run folder {run.path} cannot be written: {base} is not a writable folder")
        if not resume and (run.path / "config.json").exists():
            if run.has_checkpoint():
                raise CellGraphError(f"run folder {run.path} already holds a run; use --resume to continue "
                                     "it or choose another --out")
            resume_it = f"cellgraph train --resume {shlex.quote(str(run.path))}"
            raise CellGraphError(
                f"run folder {run.path} already holds a run that has no checkpoint yet, so nothing is lost "
                f"by deleting it; or start it over with {resume_it} (add --data DIR, --glove or --teacher "
                "to change its inputs), or choose another --out")
        return run

    @classmethod
    def create(cls, path: str | Path, *, resume: bool = False) -> "RunDir":
        """:meth:`vet`, then make the folder and check at once that it can be written."""
        run = cls.vet(path, resume=resume)
        try:
            for sub in ("", "checkpoints", "structures"):
                (run.path / sub).mkdir(parents=True, exist_ok=True)
            write_json(run.path / ".write-check", {"ok": True})
            (run.path / ".write-check").unlink()
        except OSError as err:
            raise CellGraphError(f"run folder {run.path} cannot be written: {err}") from None
        return run

    def lock(self) -> ContextManager[None]:
        """The folder's lock (``.lock``; :func:`cellgraph.files.exclusive`) for a ``with`` block:
        a second process that trains or resumes the same folder meanwhile stops at once with
        an error that names the holder, instead of interleaving its checkpoints and metrics
        with this one's."""
        return exclusive(self.path / ".lock", f"run folder {self.path}",
                         "wait for it to finish or stop it (Ctrl-C saves a checkpoint), then resume")

    def file(self, name: str) -> Path:
        return self.path / name

    def has_checkpoint(self) -> bool:
        """Whether the run reached its first checkpoint (``last.pt`` or its previous version)."""
        last = self.checkpoints / "last.pt"
        return last.exists() or last.with_suffix(".prev.pt").exists()

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def write_config(self, config: dict[str, Any], argv: list[str] | None = None, world_size: int = 1,
                     data_sha256: dict[str, str] | None = None) -> None:
        """``config.json`` and ``env.json`` (seed, command line, number of training processes,
        package versions, machine, and ``data_sha256``: path -> sha256 of each data file read)."""
        write_json(self.file("config.json"), config)
        write_json(
            self.file("env.json"),
            {
                "seed": config.get("seed"),
                "argv": list(sys.argv if argv is None else argv),
                "world_size": world_size,
                "versions": package_versions(),
                "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
                "data_sha256": dict(data_sha256 or {}),
            },
        )

    def read_config(self) -> dict[str, Any]:
        return read_json(self.file("config.json"))

    def append_metrics(self, record: dict[str, Any]) -> None:
        with deferred_interrupt(), open(self.file("metrics.jsonl"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def metrics(self) -> list[dict[str, Any]]:
        """Per-epoch records, each an object with an integer ``epoch`` >= 0; a torn last line
        (killed mid-write) is dropped."""
        path = self.file("metrics.jsonl")
        if not path.exists():
            return []
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise CellGraphError(f"{path}: not UTF-8 text ({err})") from None
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break
            epoch = record.get("epoch") if isinstance(record, dict) else None
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise FormatError(f"line {n}", "expected an object with an integer epoch >= 0", str(path))
            out.append(record)
        return out

    def truncate_metrics(self, epochs: int) -> None:
        """Keep the records of the first ``epochs`` epochs (used on resume)."""
        kept = [r for r in self.metrics() if r.get("epoch", 0) <= epochs]
        atomic_write(self.file("metrics.jsonl"), "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept).encode())

    def write_final(self, final: dict[str, Any]) -> None:
        write_json(self.file("final.json"), final)

    def read_final(self) -> dict[str, Any]:
        return read_json(self.file("final.json"))

    def write_stopped(self, stop: dict[str, Any]) -> None:
        write_json(self.file(STOPPED), stop)

    def clear_stopped(self) -> None:
        self.file(STOPPED).unlink(missing_ok=True)


def load_run(path: str | Path, checkpoint: str = "best", backend: str | None = None,
             device: str | None = None) -> Any:
    """A trained run folder loaded for use from Python, through the numeric backend
    ``backend`` (default: the run's own ``backend`` setting; found by name, imported only
    now): its model, ready for ``model(tokens)`` and searching in the run's ``eval_mode``,
    with ``config``, ``dataset`` (vocabulary and splits), ``epoch`` of the ``checkpoint``
    (``best`` or ``last``), and ``tokens``, ``encode``, ``cell``, ``vectors`` and ``document``
    to feed it and export its cells (torch: :class:`cellgraph.backends.torch.runs.run.LoadedRun`),
    on ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``; default: the run's own ``device``
    setting)."""
    from cellgraph.backend import training_backend
    from cellgraph.experiment.config import load_run_config

    if not (Path(path) / "config.json").is_file():
        raise CellGraphError(f"{path} is not a run folder (no config.json)")
    if checkpoint not in ("best", "last"):
        raise CellGraphError(f"unknown checkpoint {checkpoint!r} (best or last)")
    name = backend or load_run_config(Path(path) / "config.json").backend
    return training_backend(name).load_run(path, checkpoint, device)
