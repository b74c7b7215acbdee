"""Where a search keeps its state: an Optuna study (docs/discover.md, *Storage and workers*).

Every evaluation is a trial. ``storage`` is

* None: ``RUN_DIR/study.db`` (SQLite) when the search has a run folder, else memory;
* ``sqlite:///PATH`` or ``postgresql://...``: opened by the hyper-parameter search's
  :func:`cellgraph.experiment.hpo.open_storage` (SQLite transactions take the write lock at
  once, so that workers never read a stale state);
* ``journal:PATH``: Optuna's journal file storage (a log of operations, for file systems
  where SQLite's locks are not safe).

:func:`open_search` creates the study or joins it; its settings (space, fidelity, strategy,
budget) are the study's user attribute ``discover``, and a worker with other settings is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import optuna
from optuna.exceptions import DuplicatedStudyError
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import Study

from cellgraph.errors import CellGraphError
from cellgraph.experiment.hpo import check_name, open_storage, shown, sqlite_url

__all__ = ["SPEC_ATTR", "open_search_storage", "open_search", "differing_keys", "storage_name"]

SPEC_ATTR = "discover"
JOURNAL = "journal:"


def open_search_storage(storage: str | None, run_dir: str | Path | None = None) -> BaseStorage:
    """The Optuna storage named by ``storage`` (module docstring)."""
    if storage is None:
        if run_dir is None:
            return InMemoryStorage()
        return open_storage(sqlite_url(run_dir))
    if storage.startswith(JOURNAL):
        path = Path(storage[len(JOURNAL):])
        if not path.parent.is_dir():
            raise CellGraphError(f"journal storage {path}: folder {path.parent} does not exist")
        return JournalStorage(JournalFileBackend(str(path)))
    return open_storage(storage)


def storage_name(storage: BaseStorage) -> str:
    """A printable name (no password) of ``storage``."""
    url = getattr(storage, "url", None)
    return shown(url) if url else type(storage).__name__


def differing_keys(stored: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ between settings ``stored`` (with a search, a check or a
    record) and those ``given`` now, a key missing on one side counting as ``None``; sorted."""
    return sorted(k for k in stored.keys() | given.keys() if stored.get(k) != given.get(k))


def open_search(storage: BaseStorage, name: str, spec: dict[str, Any]) -> Study:
    """Create the study ``name`` with settings ``spec`` (JSON), or join it when its settings are
    the same; a study with other settings is refused with the first difference."""
    check_name(name)
    try:
        study = optuna.create_study(storage=storage, study_name=name, direction="minimize")
        study.set_user_attr(SPEC_ATTR, spec)
    except DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage)
    stored = study.user_attrs.get(SPEC_ATTR)
    if stored is None:  # created a moment ago by another worker, or by something else
        study.set_user_attr(SPEC_ATTR, spec)
        stored = spec
    differing = differing_keys(stored, spec)
    if differing:
        key = differing[0]
        raise CellGraphError(f"study {name} in {storage_name(storage)} was started with other settings "
                             f"({key}: {stored.get(key)!r} there, {spec.get(key)!r} here); "
                             "use the same settings or another study name")
    return study
