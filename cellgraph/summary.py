"""Aggregate finished runs over seeds: mean and sample standard deviation of the final
validation and test metric per (task, model), with training time (RESULTS.md)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable

from cellgraph.errors import CellGraphError
from cellgraph.runlog import RunLog, require_field

__all__ = ["summarize", "markdown"]


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(run_dirs: Iterable[str | Path]) -> list[dict[str, Any]]:
    """One row per (task, model): ``n`` seeds, ``val``/``test`` (mean, std), ``seconds``."""
    groups: dict[tuple[str, str], list[tuple[RunLog, dict[str, Any]]]] = {}
    for path in run_dirs:
        log = RunLog.load(path)
        final = log.final()
        if final is None:
            raise CellGraphError(f"{path} has no final.json: the run has not finished")
        groups.setdefault((log.config["task"], log.config["model"]), []).append((log, final))
    rows = []
    for (task, model), runs in sorted(groups.items()):
        metric = runs[0][0].metric
        row: dict[str, Any] = {"task": task, "model": model, "metric": metric, "n": len(runs),
                               "seeds": sorted(log.config.get("seed") for log, _ in runs)}
        for split in ("val", "test"):
            row[split] = _mean_std([_value(log, final, f"{split}_{metric}") for log, final in runs])
        row["seconds"] = _mean_std([_value(log, final, "train_seconds", 0.0) for log, final in runs])
        row["epochs"] = _mean_std([_value(log, final, "epochs_run", 0.0) for log, final in runs])
        rows.append(row)
    return rows


def _value(log: RunLog, final: dict[str, Any], key: str, default: float | None = None) -> float:
    """The number ``final[key]`` of a run's final.json (``default`` where it is absent)."""
    if default is not None and key not in final:
        return default
    return float(require_field(final, key, float, "", log.path / "final.json"))


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(pair: tuple[float, float], metric: str) -> str:
        digits = 1 if metric == "perplexity" else 3
        return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"

    lines = ["| task | model | metric | seeds | val | test | epochs | train s/run |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['model']} | {r['metric']} | {r['n']} | {cell(r['val'], r['metric'])} | "
            f"{cell(r['test'], r['metric'])} | {r['epochs'][0]:.1f} | {r['seconds'][0]:.0f} ± {r['seconds'][1]:.0f} |"
        )
    return "\n".join(lines)
