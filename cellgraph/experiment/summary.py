"""Aggregate finished runs over seeds: mean and sample standard deviation of the final
validation and test metric per (task, model), with training time (RESULTS.md). A group of
one run has no standard deviation (``None``; the table shows the value alone).

The final metrics are those of the run's ``eval_mode`` (hard search unless set). Where every
run of a group was also scored with the other search (``final.json`` of an RRNN run holds
``<split>_<metric>_hard`` and ``_soft``; for older runs ``cellgraph eval RUN --split val|test
--mode soft`` writes ``eval_<split>_soft.json``), the row has the hard and soft numbers too.

With ``reads``, each row also has the shares of the last structure log's cells whose ``h_t``
reads ``x_t``, ``h_{t-1}``, both, and of identity chains (:data:`cellgraph.experiment.runlog.SHARES`),
mean and deviation over the runs, where every run of the group logged structures.

Runs are grouped by task and model, or (``by="name"``) by their folder name with a trailing
seed suffix ``-s<N>`` removed, so that variants of one model are rows of their own.

Planted runs also have the two recoveries of their teacher (docs/training.md, *Recovery of a
planted teacher*): *exact recovery*, the share of a row's runs whose cell has the teacher's
structure (``final.json``'s ``recovery.exact_recovery``), and *accuracy recovery*, the share of
its runs whose test accuracy is within :data:`ACCURACY_MARGIN` of the *reference run*: the run
among those summarised that trains the teacher's structure from scratch (``model = cell``,
``recovery.teacher_structure``) on the same teacher, data, task sizes, hidden size, epochs and
seed (:data:`REFERENCE_KEYS`); a run without one has no accuracy recovery."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Callable, Iterable

from cellgraph.errors import CellGraphError
from cellgraph.experiment.runlog import SHARES, RunLog, require_field
from cellgraph.experiment.runs import eval_name
from cellgraph.files import read_json

__all__ = ["summarize", "markdown", "format_value", "ACCURACY_MARGIN", "REFERENCE_KEYS", "accuracy_recoveries"]

#: Accuracy recovery: a planted run's test accuracy is at least its reference run's minus this.
ACCURACY_MARGIN = 0.01
#: The settings a planted run shares with its reference run (module docstring).
REFERENCE_KEYS = ("planted_teacher", "data_seed", "seq_len", "max_train", "max_eval", "hidden_size", "epochs",
                  "seed")


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation; no deviation for one value, nor where a value is
    not finite (a metric that overflowed, e.g. perplexity ``inf``: the mean is then ``inf``
    or ``nan`` and says so)."""
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return statistics.fmean(values), None
    return statistics.fmean(values), statistics.stdev(values)


GROUPINGS = ("model", "name")
TERMS = ("task", "td", "margin", "l2")


def _group(log: RunLog, by: str) -> tuple[str, str]:
    if by == "name":
        return log.config["task"], log.variant
    return log.config["task"], log.config["model"]


def _finished(run_dirs: Iterable[str | Path],
              skip: Callable[[str], None] | None) -> list[tuple[RunLog, dict[str, Any]]]:
    """``(log, final.json)`` of every finished run. A path that is no run folder, a run
    without final.json or one whose files cannot be read (a corrupt final.json) is an error,
    or with ``skip`` passed to it as a one-line note."""
    found = []
    for path in run_dirs:
        if skip is not None and not (Path(path) / "config.json").is_file():
            skip(f"skipped {path}: not a run folder (no config.json)")
            continue
        try:
            log = RunLog.load(path)
            final = log.final()
            for split in ("val", "test") if final is not None else ():  # raises where a metric is missing
                _value(log, final, f"{split}_{log.metric}")
        except CellGraphError as err:
            if skip is None:
                raise
            skip(f"skipped {path}: {err}")
            continue
        if final is None:
            message = f"{path} has no final.json: the run has not finished"
            if skip is None:
                raise CellGraphError(message)
            skip(f"skipped {message}")
            continue
        found.append((log, final))
    return found


def summarize(run_dirs: Iterable[str | Path], by: str = "model",
              skip: Callable[[str], None] | None = None, reads: bool = False) -> list[dict[str, Any]]:
    """One row per (task, model) or (task, run name): ``n`` seeds, ``val``/``test`` (mean,
    std) in the runs' evaluation mode, ``val_hard``/``val_soft``/... where every run has
    them, ``recovery`` (the share of test cells with the planted teacher's shape) where every
    run has it, ``seconds``, ``epochs`` and ``terms`` (the weighted loss terms of the last epoch);
    with ``reads``, ``reads``: :data:`~cellgraph.experiment.runlog.SHARES` key -> (mean, std)
    or None (module docstring). ``skip`` receives a note for each folder left out
    (:func:`_finished`); without it such a folder is an error, and so is finding no finished
    run."""
    if by not in GROUPINGS:
        raise CellGraphError(f"unknown grouping {by!r} (one of {', '.join(GROUPINGS)})")
    run_dirs = list(run_dirs)
    groups: dict[tuple[str, str], list[tuple[RunLog, dict[str, Any]]]] = {}
    for log, final in _finished(run_dirs, skip):
        groups.setdefault(_group(log, by), []).append((log, final))
    if not groups:
        raise CellGraphError(f"no finished run (a folder with final.json) among the {len(run_dirs)} given")
    accuracy = accuracy_recoveries([run for runs in groups.values() for run in runs])
    rows = []
    for (task, name), runs in sorted(groups.items()):
        metric = runs[0][0].metric
        row: dict[str, Any] = {"task": task, "model": name, "metric": metric, "n": len(runs),
                               "seeds": sorted(log.config.get("seed") for log, _ in runs)}
        for split in ("val", "test"):
            row[split] = _mean_std([_value(log, final, f"{split}_{metric}") for log, final in runs])
            for mode in ("hard", "soft"):
                values = [_other(log, final, split, mode) for log, final in runs]
                row[f"{split}_{mode}"] = None if None in values else _mean_std(values)
        last = [log.metrics[-1] if log.metrics else {} for log, _ in runs]
        row["terms"] = {k: statistics.fmean(r.get(f"loss_{k}") or 0.0 for r in last) for k in TERMS}
        recovery = [final.get("recovery", {}).get("structure_recovery") for _, final in runs]
        row["recovery"] = None if None in recovery else _mean_std([float(v) for v in recovery])
        exact = [final.get("recovery", {}).get("exact_recovery") for _, final in runs]
        row["exact_recovery"] = None if None in exact else _mean_std([float(v) for v in exact])
        matched = [accuracy[id(log)] for log, _ in runs if accuracy.get(id(log)) is not None]
        row["accuracy_recovery"] = _mean_std([float(v) for v in matched]) if matched else None
        row["accuracy_references"] = len(matched)
        if reads:
            row["reads"] = _read_shares([log for log, _ in runs])
        row["seconds"] = _mean_std([_value(log, final, "train_seconds", 0.0) for log, final in runs])
        row["epochs"] = _mean_std([_value(log, final, "epochs_run", 0.0) for log, final in runs])
        rows.append(row)
    return rows


def accuracy_recoveries(runs: list[tuple[RunLog, dict[str, Any]]]) -> dict[int, bool | None]:
    """``id(log)`` -> whether the planted run recovers its reference run's test accuracy
    within :data:`ACCURACY_MARGIN`, None where ``runs`` hold no reference run for it (module
    docstring; of several, the best). Runs of other tasks are left out."""
    planted = [(log, final) for log, final in runs if log.config.get("task") == "planted"]
    key = lambda log: tuple(log.config.get(k) for k in REFERENCE_KEYS)  # noqa: E731
    best: dict[tuple, float] = {}
    for log, final in planted:
        if final.get("recovery", {}).get("teacher_structure"):
            value = _value(log, final, f"test_{log.metric}")
            best[key(log)] = max(value, best.get(key(log), value))
    return {id(log): (None if key(log) not in best
                      else _value(log, final, f"test_{log.metric}") >= best[key(log)] - ACCURACY_MARGIN)
            for log, final in planted}


def _read_shares(logs: list[RunLog]) -> dict[str, tuple[float, float | None] | None]:
    """Per :data:`SHARES` key, its (mean, std) over the last structure logs of ``logs``; None
    where a run has no structure log or the log does not know the share."""
    last = [log.structure_log() if log.has_structures else {} for log in logs]
    return {key: _mean_std([s[key] for s in last]) if all(key in s for s in last) else None
            for key in SHARES}


def _value(log: RunLog, final: dict[str, Any], key: str, default: float | None = None) -> float:
    """The number ``final[key]`` of a run's final.json (``default`` where it is absent)."""
    if default is not None and key not in final:
        return default
    return float(require_field(final, key, float, "", log.path / "final.json"))


def _other(log: RunLog, final: dict[str, Any], split: str, mode: str) -> float | None:
    """The metric of ``split`` under search ``mode``: from final.json, else from
    ``eval_<split>_<mode>.json`` in the run folder, else None."""
    key = f"{split}_{log.metric}"
    if f"{key}_{mode}" in final:
        return _value(log, final, f"{key}_{mode}")
    path = log.path / eval_name(split, mode)
    if not path.exists():
        return None
    return float(require_field(read_json(path), key, float, "", path))


def format_value(pair: tuple[float, float | None] | None, metric: str) -> str:
    """``mean ± std``, the value alone for one run (std None), ``—`` for no value."""
    if pair is None:
        return "—"
    numbers = [v for v in pair if v is not None]
    if max(abs(v) for v in numbers) >= 1e5:  # a diverged run: digits would say nothing
        form = ".3g"
    else:
        form = ".1f" if metric == "perplexity" else ".3f"
    return " ± ".join(format(v, form) for v in numbers)


#: Column heading of each read share (``markdown(reads=True)``), in column order.
READ_COLUMNS = {"reads_input_share": "h_t reads x_t", "reads_state_share": "reads h_{t-1}",
                "reads_both_share": "reads both", "identity_chain_share": "identity chains"}


def markdown(rows: list[dict[str, Any]], terms: bool = False, recovery: bool = False,
             reads: bool = False, recoveries: bool = False) -> str:
    """The rows as a Markdown table; with both searches where any row has them, with
    ``recovery`` the planted structure recovery (the share of searched cells with the
    teacher's structure), with ``recoveries`` the exact and the accuracy recovery (module
    docstring; ``no reference run`` where no run of the row has one), with ``reads`` the shares of the last
    structure log (rows made by ``summarize(reads=True)``), and with ``terms`` the last
    epoch's weighted loss terms (task / TD / margin / L2); a line under it where a row has
    one seed."""
    modes = any(r["val_soft"] or r["test_soft"] for r in rows)
    head = "| task | model | metric | seeds | val | test |"
    if modes:
        head += " val (hard) | test (hard) | val (soft) | test (soft) |"
    head += " recovery |" if recovery else ""
    head += f" exact recovery | accuracy recovery (within {ACCURACY_MARGIN:g}) |" if recoveries else ""
    head += "".join(f" {h} |" for h in READ_COLUMNS.values()) if reads else ""
    head += " epochs | train s/run |" + (" loss terms, last epoch: task / TD / margin / L2 |" if terms else "")
    lines = [head, "|---" * (8 + 4 * modes + recovery + 2 * recoveries + len(READ_COLUMNS) * reads + terms) + "|"]
    for r in rows:
        m = r["metric"]
        cells = [r["task"], r["model"], m, str(r["n"]), format_value(r["val"], m), format_value(r["test"], m)]
        if modes:
            cells += [format_value(r[k], m) for k in ("val_hard", "test_hard", "val_soft", "test_soft")]
        if recovery:
            cells.append(format_value(r["recovery"], "share"))
        if recoveries:
            cells.append(format_value(r["exact_recovery"], "share"))
            cells.append(format_value(r["accuracy_recovery"], "share") if r["accuracy_recovery"]
                         else "no reference run" if r["task"] == "planted" else "—")
        if reads:
            cells += [format_value(r["reads"][key], "share") for key in READ_COLUMNS]
        cells += [f"{r['epochs'][0]:.1f}", " ± ".join(f"{v:.0f}" for v in r["seconds"] if v is not None)]
        if terms:
            cells.append(" / ".join(f"{r['terms'][k]:.3g}" for k in TERMS))
        lines.append("| " + " | ".join(cells) + " |")
    if any(r["n"] == 1 for r in rows):
        lines += ["", "Rows with seeds = 1 (n=1) hold one run's values: no ± standard deviation."]
    return "\n".join(lines)
