"""Pre-trained word vectors in GloVe's text format for a vocabulary (paper, Sec. 5;
learned embeddings are the default, docs/paper-notes.md, *Experiments: data protocol*).

The format is one word per line followed by ``dim`` numbers, separated by single spaces
(``the -0.038194 -0.24487 ...``). :func:`load_glove` streams the file (the full
``glove.6B.100d.txt`` is 347 MB): every line must have ``dim + 1`` fields; the numbers
are parsed for the vocabulary's words. A word is looked up as written, then lower-cased
(GloVe 6B is uncased); the first occurrence wins. Words not found get seeded random vectors
``N(0, s^2)``, ``s`` the standard deviation of the vectors found (``1/sqrt(dim)`` if none);
the padding row is zero.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from cellgraph.data.datadir import data_subdir, fetch_command
from cellgraph.errors import CellGraphError, FormatError

__all__ = ["Embeddings", "find_glove", "load_glove"]


@dataclass(frozen=True, eq=False)
class Embeddings:
    """``vectors`` ``(V, dim)`` float64 by token id; ``found[i]`` is true where row ``i`` came
    from the file. ``coverage`` counts the non-padding words."""

    vectors: np.ndarray
    found: np.ndarray
    source: str
    padding_idx: int | None = None

    @property
    def coverage(self) -> float:
        words = np.ones(len(self.found), bool)
        if self.padding_idx is not None:
            words[self.padding_idx] = False
        return float(self.found[words].mean()) if words.any() else 0.0

    def describe(self) -> str:
        n_words = len(self.found) - (self.padding_idx is not None)
        return (
            f"{self.vectors.shape[1]}-d vectors from {self.source}: {int(self.found.sum())} of "
            f"{n_words} words found ({self.coverage:.1%}), the rest random"
        )


def find_glove(data_dir: str | os.PathLike, dim: int = 100) -> Path:
    """``data_dir`` if a file, else the ``glove*{dim}d*.txt`` (or only ``glove*.txt``) file in
    ``data_dir`` or ``data_dir/glove``."""
    base = data_subdir(data_dir, "glove")
    if base.is_file():
        return base
    files = sorted(base.glob(f"glove*{dim}d*.txt")) or sorted(base.glob("glove*.txt"))
    if not files:
        raise CellGraphError(f"glove: no glove*.txt file in {base} (expected GloVe's text format; "
                             f"`{fetch_command('glove')}` downloads 100-d vectors)")
    return files[0]


def load_glove(
    path: str | os.PathLike,
    vocab: Sequence[str],
    dim: int = 100,
    seed: int = 0,
    padding_idx: int | None = None,
) -> Embeddings:
    """Vectors for ``vocab`` (token strings by id) from the GloVe file at ``path`` (a file,
    or a folder searched by :func:`find_glove`); see the module docstring."""
    file = find_glove(path, dim)
    wanted = set(vocab) | {w.lower() for w in vocab}
    table: dict[str, np.ndarray] = {}
    with open(file, encoding="utf-8") as stream:
        try:
            n_lines = _read_vectors(stream, wanted, dim, str(file), table)
        except UnicodeDecodeError as err:
            raise FormatError("", f"expected UTF-8 text ({err.reason})", str(file)) from None
    if n_lines == 0:
        raise FormatError("", f"expected lines of a word and {dim} numbers, the file is empty", str(file))
    rows = [table.get(w, table.get(w.lower())) for w in vocab]
    found = np.array([r is not None for r in rows], bool)
    if padding_idx is not None:
        found[padding_idx] = False
    scale = float(np.std([r for r in rows if r is not None])) if found.any() else dim ** -0.5
    vectors = np.random.default_rng(seed).standard_normal((len(vocab), dim)) * scale
    for i in np.flatnonzero(found):
        vectors[i] = rows[i]
    if padding_idx is not None:
        vectors[padding_idx] = 0.0
    return Embeddings(vectors, found, str(file), padding_idx)


def _read_vectors(stream, wanted: set[str], dim: int, source: str, table: dict[str, np.ndarray]) -> int:
    """Fill ``table`` with the vectors of ``wanted`` words; return the number of lines."""
    n = 0
    for n, line in enumerate(stream, 1):
        fields = line.rstrip("\n").split(" ")
        if len(fields) != dim + 1 or not fields[0]:
            raise FormatError(
                f"line {n}", f"expected a word and {dim} numbers separated by single spaces, "
                f"found {len(fields)} fields", source,
            )
        word = fields[0]
        if word in wanted and word not in table:
            try:
                vector = np.array(fields[1:], dtype=np.float64)
            except ValueError:
                vector = None
            if vector is None or not np.isfinite(vector).all():
                bad = next(f for f in fields[1:] if not _is_finite_number(f))
                raise FormatError(f"line {n}", f"expected a number, found {bad!r} (finite numbers only)", source)
            table[word] = vector
    return n


def _is_finite_number(text: str) -> bool:
    try:
        return np.isfinite(float(text))
    except ValueError:
        return False
