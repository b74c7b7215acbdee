"""Data sets of the experiments (paper, Sec. 5.1 "Datasets and Settings").

A :class:`Dataset` holds three :class:`Split` s (``train``, ``val``, ``test``) of ``int64``
token ids, the vocabulary (id -> string), the task and its metric:

=========  =====================  ======================  ================  ==========
task       inputs                 targets                 metric            loaders
=========  =====================  ======================  ================  ==========
``lm``     ``(n, T)`` token ids   ``(n, T)`` next tokens  ``bpc``,          ``wiki``,
                                                          ``perplexity``    ``wiki5k``,
                                                                            ``ptb``
classify   ``(n, T)`` token ids,  ``(n,)`` class ids      ``accuracy``      ``sst``
           left-padded with 0
``tag``    ``(n, T)`` token ids   ``(n, T)`` class ids    ``accuracy``      ``planted``
=========  =====================  ======================  ================  ==========

``lm`` and ``tag`` are trained alike (per-step cross-entropy over :attr:`Dataset.n_classes`
outputs; :attr:`Dataset.per_step` is true for both); ``classify`` reads the last step.
BPC is ``nats / ln 2`` per character and perplexity ``exp`` of the mean token nats
(:meth:`Dataset.metric_from_nats`).

Splits never overlap, and every :class:`Dataset` checks it when built: for ``lm`` the
windows ``[origin, origin + T + 1)`` of the source text (:attr:`Split.origin` is the start
position in :attr:`Split.source`) are disjoint across and within splits; for the other
tasks no input sequence of one split occurs in another.

:func:`load_dataset` is the registry (``wiki``, ``wiki5k``, ``ptb``, ``sst``, ``planted``);
:func:`~cellgraph.data.datadir.resolve_data_dir` finds the data folder (:mod:`cellgraph.data.datadir`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Mapping

import numpy as np

from cellgraph.data.datadir import DATA_ENV, data_subdir, resolve_data_dir  # DATA_ENV, data_subdir: re-exported
from cellgraph.errors import CellGraphError

__all__ = [
    "Split",
    "Dataset",
    "TASKS",
    "DATA_ENV",
    "dataset_names",
    "load_dataset",
    "resolve_data_dir",
    "data_subdir",
    "sample_windows",
]

#: Task name -> metrics it may use.
TASKS: dict[str, tuple[str, ...]] = {
    "lm": ("bpc", "perplexity"),
    "classify": ("accuracy",),
    "tag": ("accuracy",),
}


@dataclass(frozen=True, eq=False)
class Split:
    """One split: ``inputs`` ``(n, T)`` int64, ``targets`` ``(n, T)`` or ``(n,)`` int64.

    ``origin[i]`` says where sequence ``i`` came from: its start position in the token
    stream of ``source`` (``lm``), its 0-based line in ``source`` (``sst``) or its index in
    generation order (``planted``).
    """

    inputs: np.ndarray
    targets: np.ndarray
    origin: np.ndarray
    source: str

    def __post_init__(self) -> None:
        for name in ("inputs", "targets", "origin"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), np.int64))
        n = len(self.inputs)
        if self.inputs.ndim != 2 or len(self.targets) != n or self.origin.shape != (n,):
            raise CellGraphError(
                f"split of {self.source}: expected inputs (n, T), targets (n, ...) and origin "
                f"(n,), got {self.inputs.shape}, {self.targets.shape}, {self.origin.shape}"
            )

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/val/test set of token-id sequences with its vocabulary, task and metric.

    Attributes:
        name: registry name (``wiki``, ``ptb``, ...).
        task: ``lm``, ``classify`` or ``tag`` (see the module table).
        metric: ``bpc``, ``perplexity`` or ``accuracy``.
        vocab: token strings by id; ``padding_idx`` (if any) is ``0``.
        train, val, test: the splits.
        classes: class names for ``classify``/``tag`` (empty for ``lm``).
        padding_idx: the id used for left padding, or ``None``.
        seed: the seed of every random choice made to build the set.
        info: JSON-serialisable facts about the sources and the cleaning.
        teacher: the hidden teacher of a generated task (:class:`cellgraph.data.planted.Teacher`).
    """

    name: str
    task: str
    metric: str
    vocab: tuple[str, ...]
    train: Split
    val: Split
    test: Split
    classes: tuple[str, ...] = ()
    padding_idx: int | None = None
    seed: int = 0
    info: Mapping[str, Any] = field(default_factory=dict)
    teacher: Any = None

    def __post_init__(self) -> None:
        if self.metric not in TASKS.get(self.task, ()):
            raise CellGraphError(
                f"dataset {self.name}: task {self.task!r} with metric {self.metric!r} is not one "
                f"of {TASKS}"
            )
        if (self.task == "lm") == bool(self.classes):
            raise CellGraphError(f"dataset {self.name}: classes are given iff the task is not lm")
        if self.padding_idx not in (None, 0):
            raise CellGraphError(f"dataset {self.name}: padding_idx must be 0 or None")
        for split_name, split in self.splits.items():
            self._check_split(split_name, split)
        self.check_disjoint()

    @property
    def splits(self) -> dict[str, Split]:
        return {"train": self.train, "val": self.val, "test": self.test}

    @property
    def per_step(self) -> bool:
        """Targets are ``(n, T)``, one per step (``lm`` and ``tag``)."""
        return self.task != "classify"

    @property
    def seq_len(self) -> int:
        return self.train.inputs.shape[1]

    @property
    def n_classes(self) -> int:
        """Output size: the vocabulary for ``lm``, the classes otherwise."""
        return len(self.vocab) if self.task == "lm" else len(self.classes)

    def metric_from_nats(self, nats: float) -> float:
        """BPC (``nats / ln 2``) or perplexity (``exp(nats)``) of a mean per-token loss; a
        perplexity beyond the float range (a diverged model, e.g. an argmax search far from
        its mixture) is ``inf``."""
        if self.metric == "bpc":
            return nats / math.log(2)
        if self.metric == "perplexity":
            try:
                return math.exp(nats)
            except OverflowError:
                return math.inf
        raise CellGraphError(f"dataset {self.name}: metric {self.metric!r} is not a function of nats")

    def _check_split(self, split_name: str, split: Split) -> None:
        where = f"dataset {self.name}, split {split_name}"
        want = split.inputs.shape if self.per_step else split.inputs.shape[:1]
        if split.targets.shape != want:
            raise CellGraphError(f"{where}: targets must have shape {want}, got {split.targets.shape}")
        if split.inputs.size and not 0 <= split.inputs.min() <= split.inputs.max() < len(self.vocab):
            raise CellGraphError(f"{where}: token ids outside 0..{len(self.vocab) - 1}")
        if split.targets.size and not 0 <= split.targets.min() <= split.targets.max() < self.n_classes:
            raise CellGraphError(f"{where}: target ids outside 0..{self.n_classes - 1}")

    def check_disjoint(self) -> None:
        """Raise :class:`CellGraphError` if two sequences overlap (see the module docstring)."""
        if self.task == "lm":
            _check_windows_disjoint(self.name, self.splits, self.seq_len + 1)
        else:
            _check_rows_disjoint(self.name, self.splits)

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable description (sizes, shapes, class frequencies, info)."""
        out: dict[str, Any] = {
            "name": self.name, "task": self.task, "metric": self.metric,
            "vocab_size": len(self.vocab), "seq_len": self.seq_len, "seed": self.seed,
            "padding_idx": self.padding_idx,
            "splits": {k: {"n": len(s), "source": s.source} for k, s in self.splits.items()},
        }
        if self.classes:
            out["classes"] = list(self.classes)
            out["class_counts"] = {
                k: np.bincount(s.targets.ravel(), minlength=len(self.classes)).tolist()
                for k, s in self.splits.items()
            }
        out["info"] = dict(self.info)
        if self.teacher is not None:
            out["teacher"] = self.teacher.to_json()
        return out

    def describe(self) -> str:
        """A few human-readable lines: task, metric, sizes, sources and cleaning facts."""
        s = self.summary()
        lines = [
            f"{self.name}: task {self.task}, metric {self.metric}, vocabulary {len(self.vocab)}, "
            f"T = {self.seq_len}, seed {self.seed}"
        ]
        for k, split in self.splits.items():
            counts = s.get("class_counts", {}).get(k)
            extra = f", classes {dict(zip(self.classes, counts))}" if counts else ""
            lines.append(f"  {k:5s}: {len(split):6d} sequences from {split.source}{extra}")
        lines += [f"  {k}: {v}" for k, v in self.info.items()]
        if self.teacher is not None:
            lines.append(f"  teacher: {self.teacher.describe()}")
        return "\n".join(lines)


def _check_windows_disjoint(name: str, splits: Mapping[str, Split], span: int) -> None:
    by_source: dict[str, list[tuple[int, str]]] = {}
    for split_name, split in splits.items():
        by_source.setdefault(split.source, []).extend((int(o), split_name) for o in split.origin)
    for source, starts in by_source.items():
        starts.sort()
        for (a, sa), (b, sb) in zip(starts, starts[1:]):
            if b - a < span:
                raise CellGraphError(
                    f"dataset {name}: sequences overlap in {source}: {sa} window at {a} and "
                    f"{sb} window at {b} are closer than {span} tokens"
                )


def _check_rows_disjoint(name: str, splits: Mapping[str, Split]) -> None:
    seen: dict[bytes, str] = {}
    for split_name, split in splits.items():
        mine = {row.tobytes() for row in split.inputs}
        for key in mine:
            other = seen.get(key)
            if other is not None:
                row = np.frombuffer(key, np.int64).tolist()
                raise CellGraphError(
                    f"dataset {name}: splits {other} and {split_name} share the sequence {row}"
                )
        seen.update(dict.fromkeys(mine, split_name))


def sample_windows(
    stream: np.ndarray, sizes: tuple[int, ...], seq_len: int, rng: np.random.Generator, what: str
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Draw ``sum(sizes)`` disjoint windows of ``seq_len + 1`` tokens from ``stream``.

    The stream is cut into consecutive blocks of ``seq_len + 1`` tokens and the windows are a
    uniform draw of distinct blocks, so no two overlap. Returns, per size, ``(inputs,
    targets, starts)``: ``inputs`` the first ``seq_len`` tokens, ``targets`` the next-token
    ids (the window shifted by one), ``starts`` the positions in ``stream``.
    """
    span = seq_len + 1
    n_blocks = len(stream) // span
    total = sum(sizes)
    if seq_len < 1 or total > n_blocks:
        raise CellGraphError(
            f"{what}: {total} disjoint windows of {span} tokens need {total * span} tokens, "
            f"the source has {len(stream)} (seq_len={seq_len})"
        )
    starts = rng.choice(n_blocks, size=total, replace=False).astype(np.int64) * span
    windows = stream[starts[:, None] + np.arange(span)]
    out, at = [], 0
    for n in sizes:
        w = windows[at:at + n]
        out.append((w[:, :-1], w[:, 1:], starts[at:at + n]))
        at += n
    return out


#: name -> (module, loader, fixed options). Loaders are imported when used.
_LOADERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "wiki": ("cellgraph.data.text", "load_lm", {"corpus": "wiki"}),
    "wiki5k": ("cellgraph.data.text", "load_lm", {"corpus": "wiki", "n_train": 5_000, "name": "wiki5k"}),
    "ptb": ("cellgraph.data.text", "load_lm", {"corpus": "ptb"}),
    "sst": ("cellgraph.data.text", "load_sst", {}),
    "planted": ("cellgraph.data.planted", "load_planted", {}),
}

#: Data sets the project generates; they need no data folder.
_GENERATED = frozenset({"planted"})


def dataset_names() -> tuple[str, ...]:
    return tuple(_LOADERS)


def load_dataset(name: str, data_dir: str | os.PathLike | None = None, **options: Any) -> Dataset:
    """Load data set ``name`` (``wiki``, ``wiki5k``, ``ptb``, ``sst``, ``planted``).

    ``options`` go to the loader (``n_train``, ``n_val``, ``n_test``, ``seq_len``, ``seed``,
    and the loader's own: see :mod:`cellgraph.data.text` and :mod:`cellgraph.data.planted`).
    ``data_dir`` is resolved by :func:`~cellgraph.data.datadir.resolve_data_dir` for the data set (not
    needed for ``planted``).
    """
    try:
        module, function, fixed = _LOADERS[name]
    except (KeyError, TypeError):
        raise CellGraphError(f"unknown dataset {name!r} (known: {', '.join(_LOADERS)})") from None
    loader = getattr(import_module(module), function)
    clash = set(fixed) & set(options)
    if clash:
        raise CellGraphError(f"dataset {name} fixes {sorted(clash)}; use another name to change it")
    if name in _GENERATED:
        return loader(**fixed, **options)
    return loader(resolve_data_dir(data_dir, name), **fixed, **options)
