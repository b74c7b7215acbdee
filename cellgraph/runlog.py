"""Reading what a training run logged: metrics per epoch and discovered structures.

The trainer writes, per epoch ``e``, a line of ``metrics.jsonl`` with at least ``epoch``,
``train_<metric>``, ``val_<metric>``, the loss terms ``loss_task``, ``loss_td``,
``loss_margin``, ``loss_l2``, ``time_s`` and, for RRNN-GRU, ``n_e`` (the paper's ``N_e``:
tuple choices that changed since epoch ``e-1`` over all (sample, t, node)); and a file
``structures/epoch_EEE.json``::

    {"epoch": e, "n_cells": int, "target": "gru", "target_share": float,
     "forms": [{"canonical": str, "count": int, "depth": int, "n_internal": int,
                "balance": float, "is_target": bool, "example": {"sample": i, "t": t},
                "cell": <cellgraph.jsonio.dump_cell(cell, layout) of one cell with this form>},
               ...]}

with ``forms`` sorted by decreasing count (``canonical``: the exact form, tuple indices
included; ``is_target``: same structure as the target, whatever trainable tuples it uses).
The trainer also records ``loss_total``, ``phase``, ``bad_steps`` (skipped non-finite
steps) and, for searched cells, ``target_share`` per epoch. ``balance`` is the shallowest
leaf depth over the deepest (1 for a perfect tree, small for a caterpillar).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellgraph.errors import CellGraphError
from cellgraph.runs import RunDir, read_json

__all__ = ["METRICS", "RunLog", "metric_name", "structure_summary"]

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


def structure_summary(tree) -> dict[str, Any]:
    """Depth, size and balance of an unfolded :class:`~cellgraph.tree.Tree`."""
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
        run = RunDir(path)
        if not run.file("config.json").exists():
            raise CellGraphError(f"{path} is not a run folder (no config.json)")
        return cls(Path(path), run.read_config(), run.metrics())

    @property
    def label(self) -> str:
        return f"{self.config.get('model')} ({self.path.name})"

    @property
    def metric(self) -> str:
        return metric_name(self.config["task"])

    def series(self, key: str) -> tuple[list[int], list[float]]:
        rows = [r for r in self.metrics if r.get(key) is not None]
        return [r["epoch"] for r in rows], [float(r[key]) for r in rows]

    def structures(self) -> list[dict[str, Any]]:
        """Per-epoch structure logs, by epoch."""
        folder = self.path / "structures"
        files = sorted(folder.glob("epoch_*.json")) if folder.is_dir() else []
        return [read_json(f) for f in files]

    def final(self) -> dict[str, Any] | None:
        path = self.path / "final.json"
        return json.loads(path.read_text()) if path.exists() else None
