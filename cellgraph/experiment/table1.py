"""The paper's Table 1 beside ours, from the records of ``cellgraph reproduce`` (paper,
Sec. 5, Table 1; docs/reproduce.md).

For every experiment of :data:`~cellgraph.experiment.reproduce.PROTOCOL` but planted, and every
model of it, two rows: the best configuration of the model's search (``best``) and the paper's
preset (``preset``), each over the seeds whose run finished; the seeds whose run stopped (e.g.
on a diverged loss) are listed as such, and their records hold how far they got. A row shows
the paper's val / test, what chose the checkpoint (the validation metric of the soft or the hard
search for an RRNN model: its runs' ``eval_mode``), ours under the hard search (Algorithm 2's argmax; for a GRU, its only
metric) and the soft mixture of the same checkpoint, and the mean CPU time of a finished run:
the run's own count (``final.json`` ``cpu_seconds``, user + system of all its processes,
carried across resumes) or, for a run made before runs counted it, the user + system time of
the ``cellgraph`` commands of the seed's job in ``commands.tsv``. A command killed before it
ended (e.g. with the session it ran in) left no row there, though its run resumed from its
checkpoint: the job's log (``<record>/<record>.log``) shows more commands started than
``commands.tsv`` recorded, and the time is then a lower bound, marked ``≥``. A
second table gives each search: its completed trials, CPU time, and the values it chose for
the searched keys. A third, the reading, sets each RRNN model against the GRU of its
experiment (planted included): for each model the row whose validation metric is better (the
choice a user makes without the test split), their test metrics in the search that chose the
checkpoint, the gap, and the gap in seed spreads (over the larger sample standard deviation).

Everything is read from a records folder (``results/table1``): a fresh clone prints it again
with ``cellgraph reproduce --table``.
"""

from __future__ import annotations

import csv
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping, Sequence

from cellgraph.experiment.config import load_run_config
from cellgraph.experiment.presets import SEARCH_RANGES
from cellgraph.experiment.reproduce import PROTOCOL, SEEDS, Arm, Experiment
from cellgraph.experiment.runlog import METRICS
from cellgraph.experiment.summary import format_value, summarize
from cellgraph.files import read_json

__all__ = ["PAPER", "LOWER_BOUND", "cpu_seconds", "results_table", "searches_table", "reading_table"]

#: The paper's Table 1: (experiment, model) -> (val, test). BPC on Wiki, accuracy (a fraction,
#: the paper prints percent) on SST, perplexity on PTB.
PAPER: dict[tuple[str, str], tuple[float, float]] = {
    ("wiki5k", "rrnn"): (2.58, 2.63), ("wiki5k", "gru"): (2.73, 2.68),
    ("wiki", "rrnn-gru"): (2.43, 2.42), ("wiki", "gru"): (2.58, 2.57),
    ("sst", "rrnn-gru"): (0.651, 0.687), ("sst", "gru"): (0.646, 0.653),
    ("ptb", "rrnn-gru"): (281.0, 239.0), ("ptb", "gru"): (247.0, 239.0),
}

_TITLES = {"wiki5k": "Wiki-5k, BPC ↓", "wiki": "Wiki-10k, BPC ↓", "sst": "SST, accuracy ↑",
           "ptb": "PTB, perplexity ↓"}
_MODELS = {"rrnn": "RRNN", "rrnn-gru": "RRNN-GRU", "gru": "GRU"}
_ROWS = {"best": "best of the search", "preset": "paper's preset"}
_READING_TITLES = {**_TITLES, "planted": "planted, accuracy ↑"}


#: The note under a table whose CPU times are lower bounds somewhere.
LOWER_BOUND = ("≥: a lower bound. A command of the job was killed before it ended (e.g. with the "
               "session it ran in), so its CPU time was never recorded; the run resumed from its "
               "checkpoint, and the figure counts the commands that ended.")


def cpu_seconds(commands: Path) -> dict[str, tuple[float, int]]:
    """Job -> (user + system CPU seconds of its commands, how many commands) in a
    ``commands.tsv`` (a resumed job has several rows); empty where there is no such file."""
    if not commands.is_file():
        return {}
    totals: dict[str, tuple[float, int]] = {}
    with commands.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row.get("cpu_s"):
                seconds, count = totals.get(row["job"], (0.0, 0))
                totals[row["job"]] = (seconds + float(row["cpu_s"]), count + 1)
    return totals


def _job_time(folder: Path, job: str, cpu: Mapping[str, tuple[float, int]]) -> tuple[float, bool] | None:
    """``(seconds, complete)`` of ``job`` (``exp/name``) whose record is ``folder``: its run's
    ``final.json`` ``cpu_seconds`` where there is one, else its ``commands.tsv`` rows (None
    without any), incomplete where its log, ``<record>/<record>.log``, shows more commands
    started than were recorded."""
    final = folder / "final.json"
    if final.is_file() and (seconds := read_json(final).get("cpu_seconds")) is not None:
        return seconds, True
    if job not in cpu:
        return None
    seconds, recorded = cpu[job]
    return seconds, _started(folder / f"{folder.name}.log") <= recorded


def _started(log: Path) -> int:
    """How many commands a job's log shows started (the runner writes ``$ cellgraph ...``
    before each); 0 without a log."""
    if not log.is_file():
        return 0
    return sum(line.startswith("$ cellgraph ") for line in log.read_text(encoding="utf-8").splitlines())


def _seconds(times: Sequence[tuple[float, bool] | None]) -> str:
    """The mean of the known ``times``, ``≥``-marked if one of them is a lower bound."""
    known = [t for t in times if t is not None]
    if not known:
        return "—"
    mean = sum(s for s, _ in known) / len(known)
    return ("" if all(complete for _, complete in known) else "≥ ") + f"{mean:,.0f}"


def _paper(exp: str, model: str) -> str:
    return " / ".join(f"{v:g}" for v in PAPER[(exp, model)])


def _stopped(folders: Sequence[Path]) -> str:
    """``; stopped: 2`` for the seeds of records without final.json (a run that failed, e.g.
    its loss diverged; its metrics.jsonl says how far it got)."""
    seeds = sorted(read_json(p / "config.json").get("seed") for p in folders)
    return f"; stopped: {', '.join(map(str, seeds))}" if seeds else ""


def _records(records: Path, exp: Experiment, model: str, kind: str) -> tuple[list[Path], list[Path]]:
    """The seed records of one row (``<exp>-<kind>-<model>-s<seed>``): those started (with
    config.json) and, among them, those finished (with final.json)."""
    started = sorted(p for p in records.glob(f"{exp.name}-{kind}-{model}-s*") if (p / "config.json").is_file())
    return started, [p for p in started if (p / "final.json").is_file()]


def _row(records: Path, exp: Experiment, model: str, kind: str, cpu: Mapping[str, tuple[float, int]]
         ) -> list[str]:
    started, runs = _records(records, exp, model, kind)
    stopped = _stopped([p for p in started if p not in runs])
    head = [_MODELS[model], _ROWS[kind], _paper(exp.name, model)]
    if not runs:
        return head + ["—", "not finished" if stopped else "not run yet"] + ["—"] * 3 + [stopped[2:] or "—", "—"]
    (row,) = summarize([str(p) for p in runs], by="name")
    m = row["metric"]
    hard = [row["val_hard"] or row["val"], row["test_hard"] or row["test"]]
    per_run = _seconds([_job_time(p, f"{exp.name}/{p.name.removeprefix(exp.name + '-')}", cpu) for p in runs])
    return head + [_selected(runs)] + [format_value(v, m) for v in (*hard, row["val_soft"], row["test_soft"])] + [
        ", ".join(map(str, row["seeds"])) + stopped, per_run]


def _selected(runs: Sequence[Path]) -> str:
    """What chose the runs' checkpoints: ``val, soft`` or ``val, hard`` (the search a searching
    model's validation ran in, its ``eval_mode``), ``val`` for a model without a search."""
    finals = [read_json(p / "final.json") for p in runs]
    modes = sorted({f["eval_mode"] for f in finals if f"val_{f['metric']}_soft" in f})
    return ", ".join(["val", *modes])


def results_table(records: Path, exps: Sequence[Experiment] = PROTOCOL) -> str:
    """Table 1, the paper's numbers beside ours, as Markdown (see the module docstring)."""
    cpu = cpu_seconds(records / "commands.tsv")
    lines = ["| experiment | model | row | paper val / test | checkpoint by | val, hard | test, hard | val, soft | "
             "test, soft | seeds | CPU s / run |", "|---" * 11 + "|"]
    for exp in exps:
        if exp.name not in _TITLES:
            continue
        first = True
        for arm in exp.arms:
            for kind in _ROWS:
                cells = [_title(records, exp) if first else ""] + _row(records, exp, arm.model, kind, cpu)
                lines.append("| " + " | ".join(cells) + " |")
                first = False
    return _noted(lines)


def _title(records: Path, exp: Experiment) -> str:
    """The experiment's title; a Wiki one names the enwik8 cleaning of its records
    (``wiki_cleaning``; records older than the key read as ``paper``)."""
    title = _TITLES[exp.name]
    if exp.task not in ("wiki", "wiki5k"):
        return title
    found = sorted({load_run_config(p / "config.json").wiki_cleaning
                    for p in records.glob(f"{exp.name}-*-s*") if (p / "config.json").is_file()})
    return f"{title} ({' + '.join(found)} text)" if found else title


def _noted(lines: list[str]) -> str:
    """The table, with :data:`LOWER_BOUND` under it where a cell is a lower bound."""
    bounded = any("| ≥ " in line for line in lines)
    return "\n".join(lines + (["", LOWER_BOUND] if bounded else []))


def _chosen(best: Path, keys: Sequence[str]) -> str:
    config: dict[str, Any] = tomllib.loads(best.read_text(encoding="utf-8"))
    return ", ".join(f"{k} = {config[k]:.3g}" if isinstance(config[k], float) else f"{k} = {config[k]}"
                     for k in keys)


_COMPLETE = re.compile(r"(\d+) slots, (\d+) complete")


def _trials(search: Path) -> str:
    """``complete`` trials of a search's record, from the last summary line of its log."""
    found = [m for log in sorted(search.glob("*.log")) for m in _COMPLETE.finditer(log.read_text(encoding="utf-8"))]
    return found[-1].group(2) if found else "—"


def searches_table(records: Path, exps: Sequence[Experiment] = PROTOCOL) -> str:
    """Each search of the protocol: its proxy, completed trials, CPU seconds and the best
    trial's values of the searched keys (``not run yet`` where its record is missing), as
    Markdown."""
    cpu = cpu_seconds(records / "commands.tsv")
    lines = ["| experiment | model | proxy | trials | CPU s, all trials | best configuration (searched keys) |",
             "|---" * 6 + "|"]
    for exp in exps:
        if exp.name not in _TITLES:
            continue
        proxy = ", ".join(f"{k} = {v}" for k, v in exp.proxy.items())
        for arm in exp.arms:
            search = records / f"{exp.name}-search-{arm.model}"
            keys = list(SEARCH_RANGES[(arm.model, arm.ranges)]) if arm.ranges else []
            chosen = _chosen(search / "best.toml", keys) if (search / "best.toml").is_file() else "not run yet"
            seconds = _seconds([_job_time(search, f"{exp.name}/search-{arm.model}", cpu)])
            lines.append(f"| {_TITLES[exp.name]} | {_MODELS[arm.model]} | {proxy} | {_trials(search)} | "
                         f"{seconds} | {chosen} |")
    return _noted(lines)


def _kinds(arm: Arm) -> list[str]:
    """The rows the protocol makes for ``arm`` (:attr:`Arm.own_row`, then ``best`` where it is
    searched)."""
    return [kind for kind in (arm.own_row, "best" if arm.ranges is not None else None) if kind]


def _better_row(records: Path, exp: Experiment, arm: Arm) -> tuple[str, dict[str, Any]] | str:
    """``(kind, summary row)`` of ``arm``'s row with the better validation metric, or why there
    is none yet (a row whose seeds have not all finished)."""
    rows = []
    for kind in _kinds(arm):
        _, runs = _records(records, exp, arm.model, kind)
        if len(runs) < len(SEEDS):
            return f"{_MODELS[arm.model]}: {kind} row, {len(runs)} of {len(SEEDS)} seeds finished"
        (row,) = summarize([str(p) for p in runs], by="name")
        rows.append((kind, row))
    return (min if METRICS[exp.task][1] else max)(rows, key=lambda r: r[1]["val"][0])


def _spreads(gap: float, rows: Sequence[dict[str, Any]]) -> float | None:
    stds = [row["test"][1] for row in rows]
    return None if None in stds or max(stds) == 0 else gap / max(stds)


def _reading_line(exp: Experiment, gru: tuple[str, dict[str, Any]], other: tuple[str, dict[str, Any]],
                  model: str) -> str:
    (g_kind, g), (o_kind, o) = gru, other
    m = g["metric"]
    gap = abs(o["test"][0] - g["test"][0])
    spreads = _spreads(gap, [g, o])
    ahead = "GRU" if (g["test"][0] > o["test"][0]) != METRICS[exp.task][1] else _MODELS[model]
    if spreads is None:
        verdict = f"{ahead} ahead (no seed spread)"
    else:
        verdict = "tie: within a seed spread" if spreads < 1 else f"{ahead} wins"
    paper = " / ".join(f"{PAPER[(exp.name, k)][1]:g}" for k in (model, "gru")) if (exp.name, model) in PAPER else "—"
    cells = [_READING_TITLES[exp.name], f"{format_value(g['test'], m)} ({g_kind})",
             f"{_MODELS[model]} {format_value(o['test'], m)} ({o_kind})", format_value((gap, None), m),
             "—" if spreads is None else f"{spreads:.1f}", paper, verdict]
    return "| " + " | ".join(cells) + " |"


def reading_table(records: Path, exps: Sequence[Experiment] = PROTOCOL) -> str:
    """Each RRNN model against the GRU of its experiment (see the module docstring), as
    Markdown; a line says which row it waits for where a row has not finished."""
    lines = ["| experiment | GRU, test (row) | RRNN model, test (row) | gap | seed spreads | paper, test "
             "(RRNN model / GRU) | verdict |", "|---" * 7 + "|"]
    for exp in exps:
        arms = {arm.model: arm for arm in exp.arms}
        if "gru" not in arms:
            continue
        gru = _better_row(records, exp, arms["gru"])
        for model, arm in arms.items():
            if model == "gru":
                continue
            other = _better_row(records, exp, arm)
            waiting = [r for r in (gru, other) if isinstance(r, str)]
            if waiting:
                lines.append(f"| {_READING_TITLES[exp.name]} | " + " | ".join(["—"] * 5) + f" | {'; '.join(waiting)} |")
            else:
                lines.append(_reading_line(exp, gru, other, model))
    return "\n".join(lines)
