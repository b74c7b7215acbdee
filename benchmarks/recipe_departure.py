"""Can the discovery recipe's cell leave the GRU? RRNN-GRU and the full RRNN warm-started at a
trained GRU on planted tasks whose teacher is not the GRU, the structural logits' learning rate
``structure_lr`` at the recipe's 1 and at a departing value, 3 seeds (docs/training.md, *The
discovery recipe*).

The warm start gives the GRU's candidate at every choice the logit lead
``A = log(99 (C - 1))`` over the other ``C - 1`` (5.98 for RRNN-GRU's ``C = 5``, 9.4 to 12.3
for the full RRNN), and Adam moves a logit by about ``lr * structure_lr`` a step, so a lead
closes in no fewer than about ``A / (lr * structure_lr)`` steps: at the planted experiment's
``lr = 3e-3`` RRNN-GRU's in about 2,000 steps at ``structure_lr = 1`` and 20 at 100, the full
RRNN's in 31 to 41 at 100. A run here has ``EPOCHS`` epochs of ``MAX_TRAIN / batch_size = 25``
steps.

Runs (:func:`runs`), one process at a time, one torch thread each: per planted teacher and seed a
``gru`` run of ``TEACHER_EPOCHS`` (``teacher-T-sS``, the warm start's teacher, shared by every
model and rate), then per model and rate the recipe (``cellgraph train --model M``, no preset:
the recipe's defaults) warm-started from it (``T-M-slrV-sS``); every run on the planted
experiment's sizes (hidden size 16, batch 32, ``lr`` 3e-3, 32 logged sequences), ``MAX_TRAIN``
training and ``MAX_EVAL`` evaluation sequences. A finished run is kept, an interrupted one
resumed. With ``--records DIR`` each ended run's record (``config.json``, ``final.json``,
``structures/``, its log; never checkpoints) goes to ``DIR/NAME``, with ``leads.json``: the
structural logits' lead left at the end (:func:`lead_left`, read from the last checkpoint).

    python -m cellgraph.benchmarks.recipe_departure --root runs/recipe-departure --records results/recipe-departure
    python -m cellgraph.benchmarks.recipe_departure --records results/recipe-departure --table

The table (:func:`table`) reads the records: per run, exact recovery of the planted teacher
(``final.json``, the best checkpoint's cell on test sequences); from the last structure log
(validation sequences), whether the most frequent cell has the GRU's structure (``gru_torch``,
the warm start's) and its share, how it differs from the GRU's by shape
(:func:`~cellgraph.algorithms.celldiff.cell_diff`: new and missing nodes and the lowest change;
a change of tuple sharing alone keeps the shape), and the first epoch whose most frequent cell
is not the GRU's; the lead left (for a cell that left the GRU, its own choices' lead); the test
accuracy, or the epoch in which a run stopped on non-finite losses (``stopped.json``: no
``final.json``, the structure logs and lead of its last good epoch), beside the teacher GRU's
test accuracy (its 2 epochs, the runs' start).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cellgraph.algorithms.celldiff import cell_diff
from cellgraph.backends.torch.training.checkpoint import load_checkpoint
from cellgraph.cell.expr import Node
from cellgraph.cell.layout import Layout
from cellgraph.benchmarks.recipe_ablation import run_one, set_flags
from cellgraph.experiment.runs import STOPPED
from cellgraph.export.jsonio import load_document
from cellgraph.files import write_json
from cellgraph.targets import target

#: Planted teachers that are not the GRU (docs/paper-notes.md, *Planted teachers*).
TEACHERS = ("mgu", "mut1")
#: ``structure_lr``: the recipe's, and one at which a lead of 6 closes in 20 steps at lr 3e-3.
RATES = (1.0, 100.0)
MODELS = ("rrnn-gru", "rrnn")
SEEDS = (0, 1, 2)
TEACHER_EPOCHS, EPOCHS = 2, 4
MAX_TRAIN, MAX_EVAL = 800, 200
#: The planted experiment's sizes and learning rate (``cellgraph reproduce``), one thread.
SIZES: dict[str, Any] = {"hidden_size": 16, "batch_size": 32, "lr": 3e-3, "log_structures": 32,
                         "max_train": MAX_TRAIN, "max_eval": MAX_EVAL, "num_threads": 1}
LEADS = "leads.json"
GRU = target("gru_torch")


def runs(teachers: tuple[str, ...] = TEACHERS, models: tuple[str, ...] = MODELS, rates: tuple[float, ...] = RATES,
         seeds: tuple[int, ...] = SEEDS, root: Path = Path("runs/recipe-departure")) -> list[tuple[str, list[str]]]:
    """``(run name, cellgraph train arguments)`` of every run, each teacher gru run before the
    recipe runs that start from it (``--teacher ROOT/teacher-T-sS``)."""
    out = []
    for teacher in teachers:
        for seed in seeds:
            common = {**SIZES, "planted_teacher": teacher, "seed": seed}
            gru = f"teacher-{teacher}-s{seed}"
            out.append((gru, ["--task", "planted", "--model", "gru",
                              *set_flags({**common, "epochs": TEACHER_EPOCHS})]))
            for model in models:
                for rate in rates:
                    out.append((f"{teacher}-{model}-slr{rate:g}-s{seed}",
                                ["--task", "planted", "--model", model, "--teacher", str(root / gru),
                                 *set_flags({**common, "epochs": EPOCHS, "structure_lr": rate})]))
    return out


def lead_left(checkpoint: Path) -> float:
    """The smallest lead of a row's first structural logit over its second, over every row
    (RRNN-GRU: every choosing node) of the checkpoint's structural logits: the warm start's
    ``A`` at the start; where the cell still has the GRU's structure, how far the nearest
    choice is from leaving it."""
    state = load_checkpoint(checkpoint)["model"]
    tables = [value for name, value in state.items() if "structure_logits" in name]
    return min(float((top[:, 0] - top[:, 1]).min()) for top in (t.topk(2, dim=-1).values for t in tables))


def record_leads(root: Path, name: str, records: Path | None) -> None:
    """Write :data:`LEADS` of a recipe run that has a last checkpoint into its folder (and its
    record)."""
    checkpoint = root / name / "checkpoints" / "last.pt"
    if name.startswith("teacher-") or not checkpoint.exists():
        return
    for folder in (root / name, *([records / name] if records else [])):
        if folder.is_dir():
            write_json(folder / LEADS, {"lead_left": lead_left(checkpoint)})


def _logs(folder: Path) -> list[dict[str, Any]]:
    """A run's structure logs, epoch by epoch."""
    return [json.loads(path.read_text()) for path in sorted((folder / "structures").glob("epoch_*.json"))]


def _kind(node: Node, layout: Layout) -> str:
    """``act[op, I]`` or ``act[op, W]``: a node by its activation, op and tuple's kind."""
    return f"{node.act}[{node.op}, {'I' if node.tuple in layout.identity_indices else 'W'}]"


def against_gru(form: dict[str, Any]) -> str:
    """A logged form against the GRU's, by shape: ``same``, or its new and missing node
    counts and the lowest changed node, the GRU's and the cell's (``1 - z`` moved from the
    identity tuple to a trainable one: ``3/3: one_minus[add, I] -> one_minus[add, W]``)."""
    doc = load_document(form["cell"])
    diffs = cell_diff(doc.cell, doc.layout, GRU.cell, GRU.layout)
    new = [n for d in diffs for n in d.new]
    missing = [n for d in diffs for n in d.missing]
    if not new and not missing:
        return "same"
    lowest = " -> ".join(_kind(node, layout) for nodes, layout in ((missing, GRU.layout), (new, doc.layout))
                         for node in nodes[:1])
    return f"{len(new)}/{len(missing)}: {lowest}"


def table(records: Path) -> list[dict[str, Any]]:
    """One row per recipe run of ``records`` (module docstring), sorted by teacher, model, rate and seed."""
    rows = []
    for folder in sorted(records.iterdir()):
        ended = [folder / name for name in ("final.json", STOPPED) if (folder / name).exists()]
        if folder.name.startswith("teacher-") or not ended:
            continue
        config = json.loads((folder / "config.json").read_text())
        final = json.loads(ended[0].read_text()) if ended[0].name == "final.json" else None
        stopped = None if final else json.loads(ended[0].read_text())["epoch"]
        gru = json.loads((records / f"teacher-{config['planted_teacher']}-s{config['seed']}" / "final.json")
                         .read_text())
        logs = _logs(folder)
        log, top = logs[-1], logs[-1]["forms"][0]
        leads = folder / LEADS
        rows.append({
            "teacher": config["planted_teacher"], "model": config["model"], "structure_lr": config["structure_lr"],
            "seed": config["seed"], "exact_recovery": final and final["recovery"]["exact_recovery"],
            "top_is_gru": top["is_target"], "top_share": top["count"] / log["n_cells"], "top_vs_gru": against_gru(top),
            "left_at_epoch": next((e["epoch"] for e in logs if not e["forms"][0]["is_target"]), None),
            "lead_left": json.loads(leads.read_text())["lead_left"] if leads.exists() else None,
            "test_accuracy": final and final["test_accuracy"], "stopped_at_epoch": stopped,
            "teacher_gru_accuracy": gru["test_accuracy"],
        })
    return sorted(rows, key=lambda r: (r["teacher"], r["model"], r["structure_lr"], r["seed"]))


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| teacher | model | structure_lr | seed | exact recovery | top cell is the GRU (share) | top cell vs GRU "
             "(new/missing nodes: the lowest change) | left the GRU at epoch | lead left | test acc | teacher GRU "
             "test acc |", "|---" * 11 + "|"]
    for r in rows:
        lead = "-" if r["lead_left"] is None else f"{r['lead_left']:.2f}"
        left = "-" if r["left_at_epoch"] is None else r["left_at_epoch"]
        exact = "-" if r["exact_recovery"] is None else ("yes" if r["exact_recovery"] else "no")
        accuracy = (f"stopped in epoch {r['stopped_at_epoch']} (non-finite losses)" if r["test_accuracy"] is None
                    else f"{r['test_accuracy']:.3f}")
        lines.append(f"| {r['teacher']} | {r['model']} | {r['structure_lr']:g} | {r['seed']} | {exact} "
                     f"| {'yes' if r['top_is_gru'] else 'no'} ({r['top_share']:.2f}) | {r['top_vs_gru']} | {left} "
                     f"| {lead} | {accuracy} | {r['teacher_gru_accuracy']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="runs/recipe-departure", help="where the runs train (default %(default)s)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="keep each ended run's record (no checkpoints) and its leads.json here; the table reads "
                   "DIR (default: ROOT)")
    p.add_argument("--teachers", nargs="+", default=list(TEACHERS), help="planted teachers (default: %(default)s)")
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="seeds (default: %(default)s)")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS,
                   help="the searching models (default: %(default)s)")
    p.add_argument("--rates", nargs="+", type=float, default=list(RATES),
                   help="structure_lr values (default: %(default)s)")
    p.add_argument("--table", action="store_true", help="train nothing: print the table of the records")
    a = p.parse_args(argv)
    root, records = Path(a.root), a.records and Path(a.records)
    if not a.table:
        root.mkdir(parents=True, exist_ok=True)
        for name, args in runs(tuple(a.teachers), tuple(a.models), tuple(a.rates), tuple(a.seeds), root):  # one at a time: the teacher first
            print(run_one(root, name, args, records), flush=True)
            record_leads(root, name, records)
    print(markdown(table(records or root)))


if __name__ == "__main__":
    main()
