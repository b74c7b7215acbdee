"""Where the data files are: the data folder, the files each data set reads, their checksums.

The data folder of a data set is, in this order:

1. ``--data DIR`` (``data_dir``), as given;
2. ``$CELLGRAPH_DATA``, as given (it is also where ``cellgraph data fetch`` stores files);
3. the cache folder ``~/.cache/cellgraph``, where ``cellgraph data fetch`` stores files, if it
   holds the data set;
4. ``../shared/data`` relative to the *current working directory*, if it holds the data set:
   a fallback for development in a checkout laid out as ``work/<repo>`` beside
   ``work/shared/data``. It is never derived from where the package is installed.

A folder *holds* a data set when the data set's loader finds its files there
(:func:`data_files`). A data folder holds one subfolder per data set (``enwik8/``, ``ptb/``,
``sst/``, ``glove/``); a loader also accepts the data set's own folder (:func:`data_subdir`).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import import_module
from pathlib import Path
from typing import Callable

from cellgraph.errors import CellGraphError

__all__ = [
    "DATA_ENV",
    "DATA_DIR_HELP",
    "FETCH_NAMES",
    "cache_dir",
    "fetch_command",
    "candidates",
    "locate",
    "resolve_data_dir",
    "data_subdir",
    "data_files",
    "run_data_dir",
    "sha256_file",
    "data_sha256",
]

#: Environment variable naming the data folder.
DATA_ENV = "CELLGRAPH_DATA"

#: The ``--data`` help of the commands that read data.
DATA_DIR_HELP = ("data folder (default: $CELLGRAPH_DATA if set, else ~/.cache/cellgraph, where "
                 "`cellgraph data fetch` stores the data sets)")

#: Data set (task or ``glove``) -> the ``cellgraph data fetch`` name of its files.
FETCH_NAMES: dict[str, str] = {"wiki": "wiki", "wiki5k": "wiki", "ptb": "ptb", "sst": "sst", "glove": "glove"}

#: Data set -> (module, function) that returns the paths of its files in a data folder, or
#: raises :class:`CellGraphError`. Data sets not listed (``planted``) read no files.
_FINDERS: dict[str, tuple[str, str]] = {
    "wiki": ("cellgraph.data.text", "find_enwik8"),
    "wiki5k": ("cellgraph.data.text", "find_enwik8"),
    "ptb": ("cellgraph.data.text", "find_ptb"),
    "sst": ("cellgraph.data.text", "find_sst"),
    "glove": ("cellgraph.data.glove", "find_glove"),
}

_CHUNK = 1 << 20


def cache_dir() -> Path:
    """Where ``cellgraph data fetch`` stores files: ``$CELLGRAPH_DATA``, else ``~/.cache/cellgraph``."""
    return Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else Path.home() / ".cache" / "cellgraph"


def fetch_command(dataset: str) -> str:
    """The command that downloads ``dataset``'s files, e.g. ``cellgraph data fetch wiki``."""
    return f"cellgraph data fetch {FETCH_NAMES.get(dataset, dataset)}"


def candidates() -> list[tuple[Path, str]]:
    """The folders searched when neither ``--data`` nor ``$CELLGRAPH_DATA`` is given, with
    what each one is (steps 3 and 4 of the module docstring)."""
    return [(cache_dir(), "cache"),
            (Path.cwd().parent / "shared" / "data", "../shared/data, development fallback")]


def locate(dataset: str | None = None, data_dir: str | os.PathLike | None = None) -> tuple[Path, str]:
    """:func:`resolve_data_dir` with how the folder was chosen: ``given``, ``from $CELLGRAPH_DATA``,
    ``cache`` or ``../shared/data, development fallback``."""
    if data_dir is not None and str(data_dir):
        chosen, how = Path(data_dir), "given"
    elif os.environ.get(DATA_ENV):
        chosen, how = Path(os.environ[DATA_ENV]), f"from ${DATA_ENV}"
    else:
        for folder, what in candidates():
            if folder.is_dir() and (dataset is None or _holds(folder, dataset)):
                return folder, what
        what = f"{dataset} data" if dataset else "data folder"
        fix = f"run `{fetch_command(dataset)}`" if dataset in FETCH_NAMES else "run `cellgraph data fetch NAME`"
        raise CellGraphError(f"no {what} in {cache_dir()}: {fix}, or pass --data DIR or set ${DATA_ENV}")
    if not chosen.is_dir():
        fix = f"; `{fetch_command(dataset)}` downloads it" if dataset in FETCH_NAMES else ""
        raise CellGraphError(f"data folder {chosen} ({how}) does not exist{fix}")
    return chosen, how


def resolve_data_dir(data_dir: str | os.PathLike | None = None, dataset: str | None = None) -> Path:
    """The data folder of ``dataset`` (module docstring). Without ``dataset``, the first
    searched folder that exists. Raises :class:`CellGraphError` naming ``cellgraph data fetch``
    when no folder holds the data set."""
    return locate(dataset, data_dir)[0]


def data_subdir(data_dir: str | os.PathLike, name: str) -> Path:
    """``data_dir/name`` when that folder exists (``data_dir`` is the data root), else
    ``data_dir`` itself (it already is the data set's folder, or a file)."""
    base = Path(data_dir)
    return base / name if (base / name).is_dir() else base


def data_files(dataset: str, data_dir: str | os.PathLike) -> tuple[Path, ...]:
    """The files data set ``dataset`` reads in ``data_dir`` (none for a generated one); raises
    :class:`CellGraphError` naming the fetch command when they are missing."""
    if dataset not in _FINDERS:
        return ()
    found = _finder(dataset)(data_dir)
    return tuple(found.values()) if isinstance(found, dict) else (found,)


def _finder(dataset: str) -> Callable[..., Path | dict[str, Path]]:
    """The function of :data:`_FINDERS` that finds ``dataset``'s files, imported by name (the
    loaders import this module, so it imports none of them)."""
    module, function = _FINDERS[dataset]
    return getattr(import_module(module), function)


def _holds(folder: Path, dataset: str) -> bool:
    try:
        data_files(dataset, folder)
    except CellGraphError:
        return False
    return True


def run_data_dir(task: str, data_dir: str) -> str:
    """The data folder a run of ``task`` reads, as its ``config.json`` records it: resolved and
    absolute, or ``data_dir`` unchanged for a generated task."""
    if task not in _FINDERS:
        return data_dir
    return os.path.abspath(resolve_data_dir(data_dir or None, task))


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file (hex), computed once per (path, size, modification time)."""
    st = os.stat(path)
    return _sha256(os.path.abspath(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def data_sha256(task: str, data_dir: str, glove: str = "", dim: int = 100) -> dict[str, str]:
    """Absolute path -> sha256 of every data file a run reads: the task's files in
    ``data_dir`` and the GloVe file found at ``glove`` for ``dim``-d vectors (if given)."""
    files = list(data_files(task, data_dir))
    if glove:
        files.append(_finder("glove")(glove, dim))
    return {os.path.abspath(path): sha256_file(path) for path in files}
