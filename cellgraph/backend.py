"""Numeric backends as plugins, found by name through entry points.

A backend is any object published in the entry-point group ``cellgraph.backends``
(``pyproject.toml``: ``numpy = "cellgraph.backends.numpy.plugin:backend"``, ``torch = ...``;
a third-party package adds its own line). :func:`backend` loads one by name and caches it,
:func:`backend_names` lists the installed ones. The core never imports a backend module
directly, so it runs without torch.

What a backend provides is the :class:`Backend` protocol (evaluation of the node vectors
``u(o(L_r c_i, R_r c_j) + b_r)`` of a cell, paper Sec. 3.1); a backend that also runs
Algorithm 2 (paper, Sec. 3.2) is a :class:`SearchBackend`; one that trains models and loads
run folders (what ``cellgraph train``, ``eval``, ``search``, ``export`` and ``trees`` use, chosen
by the ``backend`` setting) is a :class:`TrainingBackend`, found by :func:`training_backend`; one
that trains the candidates of the discrete cell search (``cellgraph discover``) is a
:class:`DiscoverBackend`, found by :func:`discover_backend`.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from cellgraph.cell.expr import Expr, Leaf
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import SearchSpace
from cellgraph.errors import CellGraphError

__all__ = ["ENTRY_POINT_GROUP", "Backend", "SearchBackend", "TrainingBackend", "DiscoverBackend", "backend",
           "backend_names", "training_backend", "discover_backend"]

ENTRY_POINT_GROUP = "cellgraph.backends"


@runtime_checkable
class Backend(Protocol):
    """What every numeric backend provides.

    ``params`` is the backend's parameter set indexed by layout tuple index ``r``:
    ``(L_r (p, p), R_r (p, p), b_r (p,))``. Leaf values have shape ``(p,)`` or ``(B, p)``;
    constant leaves without a value are filled by :mod:`cellgraph.cell.constants`.
    """

    name: str

    def evaluate(self, root: Expr, leaves: Mapping[Leaf, Any], params: Any) -> dict[Expr, Any]:
        """The vector of every node of the DAG rooted at ``root``."""
        ...

    def evaluate_cell(
        self, cell: MultiCell | CellGraph, leaves: Mapping[Leaf, Any], params: Any
    ) -> dict[str, Any]:
        """State name -> value; each state made is fed to later runs as a ``current`` leaf."""
        ...


@runtime_checkable
class SearchBackend(Backend, Protocol):
    """A backend that also runs Algorithm 2 with the semantics of :mod:`cellgraph.algorithm2`."""

    def search(
        self,
        space: SearchSpace,
        params: Any,
        leaves: Mapping[Leaf, Any],
        alpha: Callable[[Any], Any],
        **options: Any,
    ) -> Any:
        """Build the cell of one run of Algorithm 2 with the scoring function ``alpha``."""
        ...


@runtime_checkable
class TrainingBackend(Backend, Protocol):
    """A backend that trains the models of :mod:`cellgraph.experiment.config` into run folders and
    loads them again (paper, Sec. 3.3 and 4)."""

    def resolve_device(self, name: str) -> str:
        """The device a ``device`` setting means on this machine; an error where it is missing."""
        ...

    def train(self, config: Any, out_dir: Any, resume: bool = False, argv: Any = None,
              log: Callable[[str], None] = print, dist: Any = None) -> dict[str, Any]:
        """Train ``config`` into the run folder ``out_dir`` (or resume it); the final record."""
        ...

    def launched(self, device: str) -> Any:
        """A context manager for one training launch: the processes of a distributed launch
        (``torchrun``) or just this one; its value has ``writes`` (this process prints)
        and is passed to :meth:`train` as ``dist``."""
        ...

    def evaluate_run(self, run_dir: Any, split: str = "test", checkpoint: str = "best",
                     mode: str | None = None, device: str | None = None) -> dict[str, Any]:
        """The metric of a run's checkpoint on ``split``, its cells searched in ``mode``."""
        ...

    def load_run(self, path: Any, checkpoint: str = "best", device: str | None = None) -> Any:
        """A trained run folder, ready to run and export its cells."""
        ...


@runtime_checkable
class DiscoverBackend(Backend, Protocol):
    """A backend that trains the candidates of the discrete cell search (docs/discover.md)."""

    def planted_evaluator(self, data: Any, parsimony: float | None = None, num_threads: int | None = None,
                          penalty: str = "relative", *, floor: float, **fit: Any) -> Any:
        """An evaluator (:class:`cellgraph.discover.evaluator.Evaluator`) of candidates on the
        planted regression data ``data`` (:class:`~cellgraph.data.planted_values.PlantedValues`):
        validation error penalised by the candidate's complexity
        (:func:`cellgraph.discover.evaluator.penalised`: ``penalty`` and its weight ``parsimony``,
        None for the penalty's default; errors below ``floor`` count as equal, the planted task's
        default :data:`cellgraph.discover.evaluator.ERROR_FLOOR`); ``fit`` the
        training settings (``restarts``, ``lr``, ``batch_size``, ``clip``)."""
        ...

    def task_evaluator(self, task: str, settings: Mapping[str, Any], folder: Any, parsimony: float | None = None,
                       penalty: str = "relative") -> Any:
        """An evaluator of candidates on the training task ``task`` (``wiki``, ``wiki5k``,
        ``ptb``): each trained from scratch as ``cellgraph train --model cell`` trains a cell, in
        a run folder under ``folder``, with ``settings`` (``cellgraph train``'s keys, over the
        backend's cheap proxy defaults); its validation metric penalised as above (``parsimony``
        None: :data:`cellgraph.discover.evaluator.TASK_PENALTIES`)."""
        ...


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def backend_names() -> tuple[str, ...]:
    """Names of the installed backends, sorted."""
    return tuple(sorted(_entry_points()))


@cache
def backend(name: str) -> Backend:
    """The backend plugin ``name`` (loaded once, then cached).

    Raises :class:`~cellgraph.errors.CellGraphError` for an unknown name (listing the
    installed ones), a plugin that fails to import (naming the plugin and the cause) or an
    object that does not follow :class:`Backend`.
    """
    points = _entry_points()
    if name not in points:
        raise CellGraphError(
            f"unknown backend {name!r} (installed: {', '.join(sorted(points)) or 'none'}; "
            f"backends are entry points of group {ENTRY_POINT_GROUP!r})"
        )
    ep = points[name]
    try:
        loaded = ep.load()
    except Exception as err:
        if isinstance(err, ModuleNotFoundError) and (err.name or "").partition(".")[0] == "torch":
            raise  # a missing torch: the CLI names the install command
        raise CellGraphError(
            f"backend plugin {name!r} ({ep.value}) failed to load: {type(err).__name__}: {err}"
        ) from err
    if not isinstance(loaded, Backend):
        raise CellGraphError(
            f"backend plugin {name!r} ({ep.value}) is a {type(loaded).__name__} without the "
            f"Backend protocol's name, evaluate and evaluate_cell"
        )
    return loaded


def training_backend(name: str) -> TrainingBackend:
    """The backend plugin ``name`` (:func:`backend`), which must also train
    (:class:`TrainingBackend`); an error naming the installed ones that do otherwise."""
    return _able(name, TrainingBackend, "cannot train or load runs", "training")


def discover_backend(name: str) -> DiscoverBackend:
    """The backend plugin ``name`` (:func:`backend`), which must also train search candidates
    (:class:`DiscoverBackend`); an error naming the installed ones that do otherwise."""
    return _able(name, DiscoverBackend, "cannot train the candidates of cellgraph discover", "discover")


def _able(name: str, protocol: type, cannot: str, kind: str) -> Any:
    """The backend ``name`` when it follows ``protocol``, else an error saying it ``cannot``
    and listing the installed ``kind`` backends that can."""
    found = backend(name)
    if not isinstance(found, protocol):
        able = [n for n in backend_names() if n != name and _follows(n, protocol)]
        raise CellGraphError(
            f"backend {name!r} evaluates cells but {cannot} "
            f"({kind} backends installed: {', '.join(able) or 'none'})"
            + (f"; set backend={able[0]}" if able else "")
        )
    return found


def _follows(name: str, protocol: type) -> bool:
    try:
        return isinstance(backend(name), protocol)
    except (CellGraphError, ImportError):
        return False
