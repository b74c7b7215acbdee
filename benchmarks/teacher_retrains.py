"""The sanity line of the planted recovery metric: each planted teacher's own structure trained
from scratch, with torch's GRU beside it (docs/training.md, *Recovery of a planted teacher*).

For every teacher (default the recovery suite's targets: ``gru``, ``mgu``, ``mut1``, ``mut2``,
``mut3``, ``random:0`` to ``random:4``; ``--teachers``) and seed (``--seeds``, default 0 1 2),
two ``cellgraph train`` runs on the planted task labelled by that teacher, at the task's default
sizes and epochs (10, patience 5; 4 to 32 s of training a run on one thread, the 60 runs 22
minutes of wall time on a shared two-core machine, ``results/teacher-retrains``):

* ``cell``: ``--model cell --set cell=TEACHER``, the teacher's structure with fresh weights;
* ``gru``: ``--model gru``, ``nn.GRU`` (the GRU baseline).

The ``cell`` run is exactly and accuracy-recovered by construction: its cell *is* the teacher's
structure (``final.json``'s ``recovery.exact_recovery``), and it is the reference run of the
accuracy criterion (``recovery.teacher_structure``; a run recovers the accuracy when its test
accuracy is within 0.01 of its reference's, and the reference is within 0 of itself). Its rows
say only that the metric reads right (3/3 and 3/3) and how well the teacher's structure learns
its own data from scratch; the ``gru`` rows, scored against them, are the informative
comparison: whether a model that does not have the teacher's structure reaches its accuracy.

Every run is a run folder ``ROOT/TEACHER-MODEL-sSEED`` (``random:0`` written ``random0``), its
output in ``ROOT/NAME.log``, trained one at a time with one torch thread; a run with
``final.json`` is kept, an interrupted one resumed, so the command reruns. ``--set KEY=VALUE``
goes to every run (smaller sizes or fewer epochs). With ``--records DIR`` each finished run's
record (``config.json``, ``env.json``, ``metrics.jsonl``, ``final.json``; never checkpoints) and
its log are copied to ``DIR``, which the table then reads; ``--table`` trains nothing.

    python -m cellgraph.benchmarks.teacher_retrains --root runs/teacher-retrains --records results/teacher-retrains
    python -m cellgraph.benchmarks.teacher_retrains --table --records results/teacher-retrains

The table, one row per teacher and model: the seeds, the epochs trained (``epochs``: the
setting; patience may stop a run sooner), exact recoveries and accuracy recoveries over the
seeds (``k/n``; accuracy over the seeds that have a reference run, ``-`` for none) and the
test accuracy, mean ± sample standard deviation over the seeds.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from cellgraph.benchmarks.recipe_ablation import run_one
from cellgraph.benchmarks.recovery import TARGETS
from cellgraph.data.planted import teacher_folder
from cellgraph.experiment.runlog import RunLog
from cellgraph.experiment.summary import accuracy_recoveries

__all__ = ["TEACHERS", "MODELS", "SEEDS", "run_name", "runs", "summarize", "table", "main"]

TEACHERS = TARGETS
#: ``cell``: the teacher's own structure (``--set cell=TEACHER``); ``gru``: torch's GRU.
MODELS = ("cell", "gru")
SEEDS = (0, 1, 2)


def run_name(teacher: str, model: str, seed: int) -> str:
    """``TEACHER-MODEL-sSEED``, the teacher as :func:`~cellgraph.data.planted.teacher_folder`
    writes it (``random:0`` ``random0``, ``random:4:4-7`` ``random4-4to7``)."""
    return f"{teacher_folder(teacher)}-{model}-s{seed}"


def runs(teachers: tuple[str, ...] = TEACHERS, seeds: tuple[int, ...] = SEEDS,
         sets: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """``(run name, cellgraph train arguments)`` of every run; ``sets``: ``KEY=VALUE`` settings
    added to each."""
    out = []
    for teacher in teachers:
        for model in MODELS:
            own = ["--set", f"cell={teacher}"] if model == "cell" else []
            for seed in seeds:
                out.append((run_name(teacher, model, seed),
                            ["--task", "planted", "--model", model, "--set", f"planted_teacher={teacher}", *own,
                             "--set", f"seed={seed}", "--set", "num_threads=1",
                             *(a for s in sets for a in ("--set", s))]))
    return out


def summarize(folder: Path) -> list[dict[str, Any]]:
    """One row per (teacher, model) of the finished planted runs in ``folder`` (module docstring), the
    :data:`TEACHERS` and :data:`MODELS` first in their order: ``teacher``, ``model``, ``seeds``,
    ``epochs`` (the settings, sorted), ``exact`` (recoveries), ``accuracy`` (recoveries),
    ``references`` (runs with a reference run) and ``test`` (the test accuracies, by seed)."""
    logs = [RunLog.load(path.parent) for path in sorted(folder.glob("*/final.json"))]
    finished = [(log, log.final()) for log in logs if log.config.get("task") == "planted"]
    recovered = accuracy_recoveries(finished)
    groups: dict[tuple[str, str], list[tuple[RunLog, dict[str, Any]]]] = {}
    for log, final in sorted(finished, key=lambda run: run[0].config["seed"]):
        groups.setdefault((log.config["planted_teacher"], log.config["model"]), []).append((log, final))
    order = {name: k for k, name in enumerate(TEACHERS)}
    rows = []
    for (teacher, model), found in sorted(groups.items(), key=lambda item: (order.get(item[0][0], len(order)),
                                                                            item[0][0], item[0][1] != "cell")):
        matched = [recovered[id(log)] for log, _ in found if recovered[id(log)] is not None]
        rows.append({"teacher": teacher, "model": model, "seeds": [log.config["seed"] for log, _ in found],
                     "epochs": sorted({log.config["epochs"] for log, _ in found}),
                     "exact": sum(bool(final["recovery"]["exact_recovery"]) for _, final in found),
                     "accuracy": sum(matched), "references": len(matched),
                     "test": [final["test_accuracy"] for _, final in found]})
    return rows


def _spread(values: list[float]) -> str:
    """``mean ± sample std``; the value alone for one."""
    if len(values) < 2:
        return f"{values[0]:.4f}"
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"


def table(folder: Path) -> str:
    """The table of :func:`summarize`."""
    lines = [f"{'teacher':<10} {'model':<6} {'seeds':<8} {'epochs':<7} {'exact':>6} {'accuracy':>9}  test accuracy"]
    for row in summarize(folder):
        exact = f"{row['exact']}/{len(row['seeds'])}"
        accuracy = f"{row['accuracy']}/{row['references']}" if row["references"] else "-"
        lines.append(f"{row['teacher']:<10} {row['model']:<6} {','.join(map(str, row['seeds'])):<8} "
                     f"{','.join(map(str, row['epochs'])):<7} {exact:>6} {accuracy:>9}  {_spread(row['test'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="runs/teacher-retrains", help="where the runs train (default %(default)s)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="copy each finished run's record (no checkpoints) and its log here; the table reads DIR "
                   "(default: ROOT)")
    p.add_argument("--teachers", nargs="+", default=list(TEACHERS), metavar="NAME", help="default: %(default)s")
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), metavar="S", help="default: %(default)s")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="a setting of every run (repeatable), e.g. --set epochs=5")
    p.add_argument("--table", action="store_true", help="train nothing: print the table")
    a = p.parse_args(argv)
    root, records = Path(a.root), a.records and Path(a.records)
    if not a.table:
        root.mkdir(parents=True, exist_ok=True)
        for name, args in runs(tuple(a.teachers), tuple(a.seeds), tuple(a.sets)):
            print(run_one(root, name, args, records), flush=True)
    print(table(records or root))


if __name__ == "__main__":
    main()
