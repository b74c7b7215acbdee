"""Reading what a training run logged: metrics per epoch and discovered structures.

The trainer writes, per epoch ``e``, a line of ``metrics.jsonl`` with at least ``epoch``,
``train_<metric>``, ``val_<metric>``, the loss terms ``loss_task``, ``loss_td``,
``loss_margin``, ``loss_l2``, ``time_s`` and, for RRNN-GRU, ``n_e`` (the paper's ``N_e``:
tuple choices that changed since epoch ``e-1`` over all (sample, t, node)); and a file
``structures/epoch_EEE.json``::

    {"epoch": e, "n_cells": int, "target": "gru", "target_share": float,
     "forms": [{"canonical": str, "count": int, "depth": int, "n_internal": int,
                "balance": float, "is_target": bool, "example": {"sample": i, "t": t},
                "cell": <cellgraph.export.jsonio.dump_cell(cell, layout) of one cell with this form>},
               ...]}

with ``forms`` sorted by decreasing count (``canonical``: the exact form, tuple indices
included; ``is_target``: same structure as the target, whatever trainable tuples it uses).
The trainer also records ``loss_total``, ``phase``, ``bad_steps`` (skipped non-finite
steps) and, for searched cells, ``target_share`` per epoch. ``balance`` is the shallowest
leaf depth over the deepest (1 for a perfect tree, small for a caterpillar).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import load_run_config
from cellgraph.experiment.runs import RunDir
from cellgraph.files import read_json

__all__ = ["METRICS", "RunLog", "metric_name", "structure_summary", "require_field"]

#: task -> (metric, lower is better)
METRICS: dict[str, tuple[str, bool]] = {
    "wiki": ("bpc", True),
    "wiki5k": ("bpc", True),
    "ptb": ("perplexity", True),
    "sst": ("accuracy", False),
    "planted": ("accuracy", False),
}


def metric_name(task: str) -> str:
    return METRICS[task][0]


def is_identity_chain(cell, layout) -> bool:
    """Whether every generated node of ``cell`` (a :class:`~cellgraph.cell.graph.MultiCell`) is
    ``c_i + c_j`` through the identity tuple ``(I, I, 0)`` and the identity activation: the
    state is then a plain sum of leaves (e.g. ``h_t = h_{t-1} + k x_t``), the cell an
    untrained search builds most often rather than a discovery."""
    identity = layout.identity_indices
    return all(node.op == "add" and node.act == "identity" and node.tuple in identity
               for graph in cell for node in graph.internal_nodes())


def structure_summary(tree) -> dict[str, Any]:
    """Depth, size and balance of an unfolded :class:`~cellgraph.cell.tree.Tree`."""
    depths = tree.leaf_depths()
    return {
        "depth": max(depths),
        "n_internal": tree.n_internal(),
        "balance": min(depths) / max(depths) if max(depths) else 1.0,
    }


@dataclass
class RunLog:
    """The logged history of one run folder."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]

    @classmethod
    def load(cls, path: str | Path) -> "RunLog":
        """Read and validate a run folder: ``config.json`` must be a valid
        :class:`~cellgraph.experiment.config.TrainConfig` (and :meth:`RunDir.metrics` checks the
        records); errors name the file, the line and the field."""
        run = RunDir(path)
        if not run.file("config.json").exists():
            raise CellGraphError(f"{path} is not a run folder (no config.json)")
        return cls(Path(path), load_run_config(run.file("config.json")).to_dict(), run.metrics())

    @property
    def label(self) -> str:
        return f"{self.config.get('model')} ({self.path.name})"

    @property
    def metric(self) -> str:
        return metric_name(self.config["task"])

    @property
    def variant(self) -> str:
        """The folder's name without its seed suffix ``-s<N>``: runs of one variant over seeds."""
        return re.sub(r"-s\d+$", "", self.path.name)

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """Epochs and values of metric ``key`` where logged; a logged value must be a number."""
        source = self.path / "metrics.jsonl"
        rows = [(line, r) for line, r in enumerate(self.metrics, 1) if r.get(key) is not None]
        return ([r["epoch"] for _, r in rows],
                [float(require_field(r, key, float, f"line {line}", source)) for line, r in rows])

    def structures(self) -> list[dict[str, Any]]:
        """Per-epoch structure logs, by epoch, validated (module docstring)."""
        folder = self.path / "structures"
        files = sorted(folder.glob("epoch_*.json")) if folder.is_dir() else []
        return [_structure_log(read_json(f), f) for f in files]

    def final(self) -> dict[str, Any] | None:
        path = self.path / "final.json"
        return _object(read_json(path), "", path) if path.exists() else None


def _object(value: Any, where: str, source: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(where, f"expected a JSON object, got {type(value).__name__}", str(source))
    return value


def require_field(obj: dict[str, Any], key: str, kind: type, where: str, source: Path) -> Any:
    """``obj[key]``, which must be a ``kind`` (``float`` accepts integers; never a boolean);
    else a :class:`FormatError` naming ``source``, ``where`` and ``key``."""
    value = obj.get(key)
    kinds = (int, float) if kind is float else kind
    if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kinds):
        at = f"{where}.{key}" if where else key
        raise FormatError(at, f"expected {_KIND_NAMES[kind]}, got {value!r:.40}", str(source))
    return value


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
               list: "a list", dict: "an object"}
_LOG_FIELDS = {"epoch": int, "n_cells": int, "forms": list}
_FORM_FIELDS = {"canonical": str, "count": int, "depth": int, "n_internal": int, "balance": float}


def _structure_log(value: Any, source: Path) -> dict[str, Any]:
    """``value`` if it is a structure log as the module docstring describes."""
    log = _object(value, "", source)
    for key, kind in _LOG_FIELDS.items():
        require_field(log, key, kind, "", source)
    if "target_share" in log:
        require_field(log, "target_share", float, "", source)
    for i, form in enumerate(log["forms"]):
        where = f"forms[{i}]"
        _object(form, where, source)
        for key, kind in _FORM_FIELDS.items():
            require_field(form, key, kind, where, source)
        if form["count"] < 0:
            raise FormatError(f"{where}.count", f"expected a count >= 0, got {form['count']}", str(source))
        if "is_target" in form:
            require_field(form, "is_target", bool, where, source)
        if "cell" in form:
            require_field(form, "cell", dict, where, source)
    return log
