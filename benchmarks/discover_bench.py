"""The cell search's throughput: cells evaluated at full fidelity per CPU-hour (docs/discover.md,
*Speed of the search*; BENCHMARKS.md, *The cell search's throughput*).

Two parts, printed as tables and written as JSON (``--json``):

1. **One evaluation** (:func:`fit_throughput`): the planted-values fit of ``cellgraph discover``
   (defaults: 1,000 sequences of 10 steps, ``p = 8``, 20 epochs, 4 restarts) of a few cells, with
   its restarts batched under ``vmap`` (what the search runs) and one at a time (the same
   restarts, each a fit of its own): CPU seconds per evaluation and evaluations per CPU-hour,
   best of ``--repeat`` rounds taken in turn.
2. **The search** (:func:`search_throughput`): ``cellgraph discover --strategy random`` with
   ``--budget`` evaluations at full fidelity (no successive halving), one worker, then two
   workers (two processes) sharing one SQLite study with twice the budget: evaluations per
   wall-clock hour (on a machine with a core for each worker, two workers should give twice
   one's).

    python -m cellgraph.benchmarks.discover_bench --json results/bench-discover-1t.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from cellgraph.backends.torch.discover.fit import FitSettings, fit_cell
from cellgraph.backends.torch.runtime.device import resolve_device
from cellgraph.benchmarks.cell_bench import large_cell
from cellgraph.benchmarks.measure import best_time, machine
from cellgraph.data.planted_values import load_planted_values
from cellgraph.files import writable_file, write_json
from cellgraph.targets import target

__all__ = ["fit_throughput", "search_throughput", "main"]

HOUR = 3600.0


def _best_seconds(run: Callable[[], object], repeat: int, device: torch.device) -> float:
    """The best of ``repeat`` calls of ``run()``: process CPU seconds on the CPU, wall seconds on a
    GPU (:func:`~cellgraph.benchmarks.measure.best_time`, the device synchronised)."""
    if device.type != "cpu":
        return best_time(run, repeat, warmup=0, device=device)
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def fit_throughput(settings: FitSettings, repeat: int = 2, device: str = "cpu",
                   looped: bool = True) -> dict[str, Any]:
    """Seconds of one full-fidelity evaluation of each cell (CPU seconds on the CPU, wall seconds
    on a GPU), restarts batched and, with ``looped``, one at a time (None where not run)."""
    where = torch.device(device)
    data = load_planted_values("mgu")
    cells = {"mgu": target("mgu"), "gru": target("gru"), "random 14-node": large_cell()}
    single = FitSettings(settings.epochs, 1, settings.lr, settings.batch_size, settings.clip)
    rows = {}
    for name, t in cells.items():
        def batched() -> None:
            fit_cell(t.cell, t.layout, data, settings, device=where)

        def one_at_a_time() -> None:
            for k in range(settings.restarts):
                fit_cell(t.cell, t.layout, data, single, seed=k, device=where)

        ways = (("batched", batched), ("looped", one_at_a_time))[:1 + looped]
        row: dict[str, float | None] = {"looped_s": None, "looped_per_hour": None}
        for way, run in ways:
            best = _best_seconds(run, repeat, where)
            row |= {f"{way}_s": best, f"{way}_per_hour": HOUR / best}
        rows[name] = row
    return {"settings": vars(settings), "device": str(where), "data": data.info(), "cells": rows}


def _discover(run_dir: Path, budget: int, worker: int, extra: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "cellgraph", "discover", "--teacher", "mgu", "--strategy", "random",
               "--budget", str(budget), "--dir", str(run_dir), "--worker", str(worker), "--num-threads", "1", *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def search_throughput(budget: int, extra: list[str]) -> dict[str, Any]:
    """Wall-clock and CPU throughput of ``cellgraph discover`` with one worker, then two."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2):
            run_dir = Path(tmp) / f"workers{workers}"
            start = time.perf_counter()
            # the first worker creates the study; the second joins it once it exists
            procs = [_discover(run_dir, budget * workers, 0, extra)]
            if workers == 2:
                while not (run_dir / "study.db").exists():
                    time.sleep(0.2)
                procs.append(_discover(run_dir, budget * workers, 1, extra))
            codes = [p.wait() for p in procs]
            wall = time.perf_counter() - start
            if any(codes):
                raise SystemExit(f"discover_bench: cellgraph discover exited {codes} ({workers} workers)")
            found = json.loads((run_dir / "discovery.json").read_text())["result"]
            evaluations = found["evaluations"]
            out[f"{workers} worker{'s' * (workers > 1)}"] = {
                "evaluations": evaluations, "trained": found["trained"], "duplicates": found["duplicates"],
                "wall_s": wall, "per_wall_hour": evaluations * HOUR / wall}
    return {"budget_per_worker": budget, "flags": extra, "runs": out}


def _tables(result: dict[str, Any]) -> str:
    fit = result["fit"]
    s = fit["settings"]
    device = fit.get("device", "cpu")
    unit, hour = ("CPU s", "CPU-hour") if device == "cpu" else (f"wall s on {device}", "GPU-hour")
    lines = [f"(1) one full-fidelity evaluation ({fit['data']['n_train']} sequences x {fit['data']['seq_len']} steps, "
             f"p={fit['data']['p']}, {s['epochs']} epochs, {s['restarts']} restarts; {unit}, best of the rounds)",
             f"| cell | restarts batched (s) | one at a time (s) | evaluations / {hour}, batched | one at a time |",
             "|---|---|---|---|---|"]
    for name, row in fit["cells"].items():
        looped = (f"{row['looped_s']:.2f}", f"{row['looped_per_hour']:.0f}") if row["looped_s"] is not None else ("-", "-")
        lines.append(f"| {name} | {row['batched_s']:.2f} | {looped[0]} | {row['batched_per_hour']:.0f} | {looped[1]} |")
    if "search" in result:
        search = result["search"]
        lines += ["", f"(2) cellgraph discover --strategy random, {search['budget_per_worker']} evaluations a worker "
                  f"({' '.join(search['flags']) or 'default flags'})",
                  "| workers | evaluations | cells trained | duplicates | wall (s) | evaluations / wall-hour |",
                  "|---|---|---|---|---|---|"]
        for name, row in search["runs"].items():
            lines.append(f"| {name} | {row['evaluations']:g} | {row['trained']} | {row['duplicates']} | "
                         f"{row['wall_s']:.0f} | {row['per_wall_hour']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cellgraph.benchmarks.discover_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--restarts", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2, help="rounds of part 1 (the best counts)")
    p.add_argument("--budget", type=int, default=10, help="evaluations a worker in part 2 (0: skip part 2)")
    p.add_argument("--json", metavar="FILE", type=writable_file, help="write the result here")
    p.add_argument("--batched-only", action="store_true", help="part 1 without the restarts one at a time")
    p.add_argument("--device", default="cpu", help="where part 1 trains (cpu, cuda, cuda:N; part 2 stays on the CPU)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    settings = FitSettings(epochs=a.epochs, restarts=a.restarts)
    device = resolve_device(a.device)
    result: dict[str, Any] = {"machine": machine(device), "fit": fit_throughput(settings, a.repeat, str(device),
                                                                                  not a.batched_only)}
    if a.budget:
        result["search"] = search_throughput(a.budget, ["--epochs", str(a.epochs), "--restarts", str(a.restarts)])
    print(_tables(result))
    if a.json:
        write_json(a.json, result)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
