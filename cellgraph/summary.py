"""Aggregate finished runs over seeds: mean and sample standard deviation of the final
validation and test metric per (task, model), with training time (RESULTS.md).

The final metrics are those of the run's ``eval_mode`` (hard search unless set). Where every
run of a group was also scored with soft search (``cellgraph eval RUN --split val|test --mode
soft`` writes ``eval_<split>_soft.json``), the row has those numbers too."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable

from cellgraph.errors import CellGraphError
from cellgraph.runlog import RunLog, require_field
from cellgraph.runs import eval_name, read_json

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
            soft = [_soft(log, split) for log, _ in runs]
            row[f"{split}_soft"] = None if None in soft else _mean_std(soft)
        row["seconds"] = _mean_std([_value(log, final, "train_seconds", 0.0) for log, final in runs])
        row["epochs"] = _mean_std([_value(log, final, "epochs_run", 0.0) for log, final in runs])
        rows.append(row)
    return rows


def _value(log: RunLog, final: dict[str, Any], key: str, default: float | None = None) -> float:
    """The number ``final[key]`` of a run's final.json (``default`` where it is absent)."""
    if default is not None and key not in final:
        return default
    return float(require_field(final, key, float, "", log.path / "final.json"))


def _soft(log: RunLog, split: str) -> float | None:
    """The metric of ``eval_<split>_soft.json`` in the run folder, or None."""
    path = log.path / eval_name(split, "soft")
    if not path.exists():
        return None
    return float(require_field(read_json(path), f"{split}_{log.metric}", float, "", path))


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(pair: tuple[float, float] | None, metric: str) -> str:
        if pair is None:
            return "—"
        if max(abs(v) for v in pair) >= 1e5:  # a diverged run: digits would say nothing
            return f"{pair[0]:.3g} ± {pair[1]:.3g}"
        digits = 1 if metric == "perplexity" else 3
        return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"

    soft = any(r["val_soft"] or r["test_soft"] for r in rows)
    head = "| task | model | metric | seeds | val | test |" + (" val (soft) | test (soft) |" if soft else "")
    lines = [head + " epochs | train s/run |", "|---" * (8 + 2 * soft) + "|"]
    for r in rows:
        m = r["metric"]
        cells = [r["task"], r["model"], m, str(r["n"]), cell(r["val"], m), cell(r["test"], m)]
        if soft:
            cells += [cell(r["val_soft"], m), cell(r["test_soft"], m)]
        cells += [f"{r['epochs'][0]:.1f}", f"{r['seconds'][0]:.0f} ± {r['seconds'][1]:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
