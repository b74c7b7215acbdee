"""A search's best cells retrained with other training seeds: is its answer its structure's, or
one training's luck? (docs/discover.md, *One training's luck*).

A planted search trains every candidate once, with its ``--seed``, and answers with the lowest
objective at full fidelity. When the teacher and a structure one matrix larger fit within a few
tens of percent of each other, one training can put either first. For each run folder (a
``cellgraph discover --teacher`` search with its SQLite study, finished or not) this takes its
``--top K`` distinct structures at full fidelity, retrains each from scratch at full fidelity
with each of ``--seeds`` through the run's own evaluator (its data, fit, parsimony and error
floor), and records per structure the search's objective, each seed's objective and ``val_mse``,
their mean, and whether it is the teacher. The run's own seed reproduces the search's objective
(the evaluator is deterministic on one thread). The record, ``DIR/refits-RUN.json`` (with the
package versions), is written and printed as a table; ``--table`` prints the records in ``DIR``
and trains nothing.

    python -m cellgraph.benchmarks.refits runs/recovery-small/minimal25-2to3-enumerate-expand-screen-s2 --records results/refits --top 2 --seeds 0 1 2 3
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from typing import Any, Sequence

from cellgraph.benchmarks import run_records
from cellgraph.benchmarks.subcells import load_search
from cellgraph.discover.cache import cell_from_json
from cellgraph.discover.evaluator import Evaluator, measure
from cellgraph.discover.planted import SIZES, planted_search
from cellgraph.discover.search import best_trials
from cellgraph.discover.space import to_cell

__all__ = ["run_evaluator", "refits", "table", "main"]


def run_evaluator(spec: dict[str, Any]) -> Evaluator:
    """The evaluator a planted search's settings (``discover.json``) trained its candidates with."""
    settings = spec["evaluator"]
    data = settings["data"]
    _, _, evaluator, _ = planted_search(data["teacher"], data["seed"], {k: data[k] for k in SIZES}, settings["fit"],
                                        backend=settings["backend"], penalty=settings["penalty"],
                                        parsimony=settings["parsimony"], weight_scale=data["weight_scale"],
                                        floor=settings.get("floor", 0.0))
    return evaluator


def refits(run_dir: Path, top: int, seeds: Sequence[int]) -> dict[str, Any]:
    """The record of the module docstring (without versions) of the search in ``run_dir``."""
    spec, _, trials = load_search(run_dir)
    evaluator, epochs = run_evaluator(spec), spec["fidelity"]["epochs"][-1]
    rows = []
    for t in best_trials(trials, top):
        root = cell_from_json(t.user_attrs["cell"])
        cell, layout = to_cell(root)
        fits = []
        for seed in seeds:
            outcome = measure(evaluator, cell, layout, epochs, seed)
            fits.append({"seed": seed, "objective": outcome.loss, "val_mse": outcome.details.get("val_mse")})
        done = [f["objective"] for f in fits if f["objective"] is not None]
        rows.append({"trial": t.number, "teacher": t.user_attrs["hash"] == spec.get("target_hash"), "form": str(root),
                     "search": t.value, "fits": fits, "mean": mean(done) if done else None})
    return {"run": run_dir.name, "teacher": spec["evaluator"]["data"]["teacher"], "search_seed": spec["seed"],
            "epochs": epochs, "rows": rows}


def table(records: list[dict[str, Any]]) -> str:
    """A row per run and structure: the search's objective, each seed's and their mean."""
    lines = []
    for record in records:
        seeds = [f["seed"] for f in record["rows"][0]["fits"]] if record["rows"] else []
        lines += [f"{record['run']} (searched with seed {record['search_seed']}, {record['epochs']} epochs)",
                  f"  {'trial':>6} {'search':>10} " + " ".join(f"{'seed ' + str(s):>10}" for s in seeds)
                  + f" {'mean':>10}  structure"]
        for row in record["rows"]:
            fits = " ".join("-".rjust(10) if f["objective"] is None else f"{f['objective']:>10.4g}" for f in row["fits"])
            mark = "teacher " if row["teacher"] else ""
            mean_ = "-" if row["mean"] is None else f"{row['mean']:.4g}"
            lines.append(f"  {row['trial']:>6} {row['search']:>10.4g} {fits} {mean_:>10}  {mark}{row['form']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = run_records.parser(__doc__, "runs/refits")
    p.add_argument("--top", type=int, default=3, metavar="K", help="best structures retrained (default 3)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], metavar="S",
                   help="training seeds (default 0 1 2 3)")
    a = p.parse_args(argv)
    folder = Path(a.records)
    if not a.table:
        run_records.runs_given(p, a.runs)
        if a.top < 1:
            p.error(f"--top must be >= 1, got {a.top}")
        for run_dir in a.runs:
            run_records.keep(p, folder, f"refits-{run_dir.name}", lambda: refits(run_dir, a.top, a.seeds))
    print(table(run_records.read(folder, "refits")))


if __name__ == "__main__":
    main()
