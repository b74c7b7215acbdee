"""The discovery recipe's levers, each alone and together, 3 seeds (docs/paper-notes.md,
*Extension: the discovery recipe*; RESULTS.md, "The discovery recipe: cells worth exporting").

Arms, for the full RRNN and RRNN-GRU on one task (``planted`` by default; ``wiki5k`` and
``wiki`` train every run with their GRU preset's batch size, learning rate and L2, the teacher's):

* ``paper``: the paper's training as the planted experiment runs it (soft mixture, alpha
  alone, value exclusion; the full RRNN's candidates normalised per sample, tau annealed in
  units of the score spread);
* ``hard``: straight-through training alone (the argmax cell forward);
* ``structure``: the structural term alone (soft training);
* ``warm``: the warm start from the teacher GRU, with what it needs (the structural term,
  exclusion by slot, no candidate normalisation, tau in the score's units), soft training;
* ``all``: straight-through, structural term and warm start together;
* ``all-noaux``: ``all`` without the TD and margin terms;
* ``slow``: ``all-noaux`` with the scoring network alpha trained at a tenth of the learning
  rate (``score_lr=0.1``);
* ``frozen``: ``all-noaux`` with alpha frozen as the warm start leaves it, at zero
  (``score_lr=0``), so that only the structural term and the tuples learn what is chosen;
* ``recipe``: ``frozen`` with the teacher's candidate holding 99% of each soft mixture
  instead of 90% (``warm_weight=0.99``): the settings of the recipe's presets;

and two GRUs: ``gru``, trained for the teacher's epochs plus the RRNN's (the teacher
continued: with a constant learning rate and the same seed its first epochs are the
teacher's), and ``gru-warm``, warm-started from its own teacher and trained for the RRNN's
epochs with a fresh optimizer, as a warm-started RRNN is (``warm_start=teacher`` of a gru run).
Warm arms train
the teacher themselves (``RUN/teacher``) and then the RRNN for ``EPOCHS``; the other RRNN arms
train for ``TEACHER_EPOCHS + EPOCHS``, the same total. Every run is a ``cellgraph train`` run folder under
``--root``: a finished run is kept, an interrupted one resumed, so the command reruns. With
``--records DIR`` each finished run's record (no checkpoints), its teacher's and its log are
copied to ``DIR``, which the table then reads: train under ``runs/``, commit ``DIR``.

    python -m cellgraph.benchmarks.recipe_ablation --root runs/recipe-planted --records results/recipe-planted --jobs 2

runs them on a slice (800 sequences of planted, 1,000 of Wiki; ``--max-train 0``: all the data; ``--arms`` some arms only;
``--teacher-epochs`` and ``--epochs`` the budget) and prints the table (hard and soft test metric, mean and sample std over seeds, identity-chain
share of the last structure log) and writes ``summary.json`` beside the runs it read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cellgraph.algorithms.shape import shape_form
from cellgraph.experiment.config import paper_settings
from cellgraph.experiment.presets import PRESETS
from cellgraph.experiment.runlog import with_reads
from cellgraph.experiment.runs import STOPPED, TEACHER, copy_record, eval_name
from cellgraph.export.jsonio import load_document
from cellgraph.targets import target
from cellgraph.experiment.reproduce import PLANTED, PLANTED_MODELS

#: task -> the settings every run shares: planted's are the planted experiment's (``cellgraph
#: reproduce``, the demo), Wiki's its GRU preset's (the teacher's); by default on a slice small
#: enough that a full-RRNN run costs minutes (``--max-train``).
_WIKI_GRU_PRESETS = {"wiki5k": "paper-wiki5k-gru", "wiki": "paper-wiki10k-gru"}
BASES: dict[str, dict[str, Any]] = {
    "planted": {**PLANTED, "max_train": 800, "max_eval": 200, "num_threads": 1},
    **{task: {**{k: PRESETS[preset][k] for k in ("batch_size", "lr", "lambda_l2")}, "max_train": 1000,
              "max_eval": 300, "num_threads": 1}
       for task, preset in _WIKI_GRU_PRESETS.items()},
}
#: task -> model -> settings on top of its base (planted's are the planted experiment's).
MODELS: dict[str, dict[str, dict[str, Any]]] = {
    "planted": PLANTED_MODELS, **{task: {"rrnn": {}, "rrnn-gru": {}, "gru": {}} for task in _WIKI_GRU_PRESETS},
}
#: Epochs of the teacher GRU and of a warm-started run by default; the other arms train for both.
TEACHER_EPOCHS, EPOCHS = 2, 2
#: What a warm start needs besides the structural term: four tuples, exclusion by slot, and a
#: score that is the structural term's (no candidate normalisation, which would change the
#: nodes' values; tau in the score's units, constant).
_WARM = {"warm_start": "teacher", "structure_term": True, "n_tuples": 4, "teacher_epochs": TEACHER_EPOCHS,
         "candidate_norm": "none", "tau_units": "score", "tau_end": 0.0}
#: Straight-through training, with tau constant in the score's units: under the spread's units
#: annealed to 0.01 (the planted full RRNN's) its gradients reach 1e7 and the losses turn
#: non-finite in the first epoch.
_HARD = {"mode": "straight-through", "tau_units": "score", "tau_end": 0.0}
#: The TD and margin terms off, and the recipe presets' TD target (not used then), as in the
#: recipe's presets.
_NO_AUX = {"lambda_td": 0.0, "lambda_margin": 0.0, "target": "gru_torch"}


def _arms(warm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every arm of one model; ``warm``: what its warm start needs besides :data:`_WARM`."""
    noaux = {**_WARM, **_HARD, **warm, **_NO_AUX}
    return {
        "paper": {},
        "hard": _HARD,
        "structure": {"structure_term": True},
        "warm": {**_WARM, **warm},
        "all": {**_WARM, **_HARD, **warm},
        "all-noaux": noaux,
        "slow": {**noaux, "score_lr": 0.1},
        "frozen": {**noaux, "score_lr": 0.0},
        "recipe": {**noaux, "score_lr": 0.0, "warm_weight": 0.99},
    }


#: model -> arm -> settings on top of the task's base and model settings (BASES, MODELS): the
#: full RRNN's warm start needs exclusion by slot, RRNN-GRU's torch's GRU tree.
ARMS: dict[str, dict[str, dict[str, Any]]] = {"rrnn": _arms({"exclusion": "slot"}),
                                              "rrnn-gru": _arms({"tree": "gru_torch"})}
SEEDS = (0, 1, 2)
#: The structure shares :func:`summarize` reads from the last structure log.
_SHARES = ("identity_chain_share", "reads_both_share", "gru_form_share")
GRU_TORCH = target("gru_torch")
#: The structure of torch's GRU, which a warm-started cell begins with.
_GRU_FORM = shape_form(GRU_TORCH.cell, GRU_TORCH.layout)


def runs(task: str, max_train: int | None = None, arms: tuple[str, ...] | None = None,
         teacher_epochs: int = TEACHER_EPOCHS, epochs: int = EPOCHS) -> list[tuple[str, list[str]]]:
    """``(run name, cellgraph train arguments)`` of every run: the ``arms`` (default all) of
    both models and the two GRUs, on ``max_train`` training sequences (0: all; default the
    task's slice), for 3 seeds."""
    base = {**BASES[task], **({} if max_train is None else {"max_train": max_train}),
            **({"max_eval": 0} if max_train == 0 else {})}
    models = MODELS[task]
    out = []
    for seed in SEEDS:
        for model, model_arms in ARMS.items():
            for arm, settings in model_arms.items():
                if arms is not None and arm not in arms:
                    continue
                warm = settings.get("warm_start") == "teacher"
                sets = {**paper_settings(model), **base, **models[model], **settings,
                        **({"teacher_epochs": teacher_epochs} if warm else {}),
                        "epochs": epochs if warm else teacher_epochs + epochs, "seed": seed}
                out.append((f"{model}-{arm}-s{seed}", ["--task", task, "--model", model, *set_flags(sets)]))
        warm = {"warm_start": "teacher", "teacher_epochs": teacher_epochs}
        for name, sets in (("gru", {"epochs": teacher_epochs + epochs}), ("gru-warm", {**warm, "epochs": epochs})):
            sets = {**base, **models["gru"], **sets, "seed": seed}
            out.append((f"{name}-s{seed}", ["--task", task, "--model", "gru", *set_flags(sets)]))
    return out


def set_flags(sets: dict[str, Any]) -> list[str]:
    """``--set key=value`` for each setting (booleans as ``true`` / ``false``)."""
    return [a for k, v in sets.items() for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]


def run_one(root: Path, name: str, args: list[str], records: Path | None = None) -> str:
    """Train (or resume, or keep) one run; its output goes to ``ROOT/NAME.log``; once it has
    ended (``final.json`` or ``stopped.json``), its record goes to ``records`` if given."""
    folder = root / name
    if (folder / "final.json").exists():
        line = f"{name}: done"
    else:
        resume = (folder / "checkpoints" / "last.pt").exists()
        cmd = [sys.executable, "-m", "cellgraph", "train", *(["--resume", str(folder)] if resume else
                                                              [*args, "--out", str(folder)])]
        with open(root / f"{name}.log", "a") as log:
            code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        line = f"{name}: exit {code}"
    if records is not None and _ended(folder):
        keep_record(root, name, records)
    return line


def _ended(folder: Path) -> bool:
    """Whether run folder ``folder`` finished (``final.json``) or stopped (``stopped.json``)."""
    return (folder / "final.json").exists() or (folder / STOPPED).exists()


def keep_record(root: Path, name: str, records: Path) -> None:
    """Copy run ``NAME``'s record from ``root`` to ``records``
    (:func:`~cellgraph.experiment.runs.copy_record`: with its teacher's, never checkpoints)
    and its log."""
    copy_record(root / name, records / name)
    if (root / f"{name}.log").exists():
        shutil.copy2(root / f"{name}.log", records / f"{name}.log")


def summarize(root: Path) -> dict[str, Any]:
    """Per arm, over its seeds: the hard and soft test metric (a straight-through run, which
    evaluates its argmax alone, has a soft one once ``cellgraph eval RUN --split test --mode
    soft`` has written ``eval_test_soft.json``) and, from the last structure log,
    the shares of cells that are identity chains, that read both ``x_t`` and ``h_{t-1}``, and
    that have the structure of torch's GRU (``gru_torch``, what a warm start begins with); and
    the teacher GRU's test metric (``gru-teacher``, one per seed); ``stopped``: the seeds whose
    run stopped on non-finite losses (``stopped.json``, no ``final.json``: no metric)."""
    table: dict[str, dict[str, list[float]]] = {}
    teachers: dict[str, Path] = {}
    for folder in sorted(root.iterdir()):
        arm, _, seed = folder.name.rpartition("-s")
        if (folder / "final.json").exists():
            _add(table, arm, folder)
        elif (folder / STOPPED).exists():
            _row(table, arm)["stopped"].append(int(seed))
        else:
            continue
        if (folder / TEACHER / "final.json").exists():
            teachers.setdefault(seed, folder / TEACHER)
    for folder in teachers.values():
        _add(table, "gru-teacher", folder)
    return table


def _add(table: dict[str, dict[str, list[float]]], arm: str, folder: Path) -> None:
    final = json.loads((folder / "final.json").read_text())
    metric = final["metric"]
    row = _row(table, arm)
    row["hard"].append(final.get(f"test_{metric}_hard", final[f"test_{metric}"]))
    soft = folder / eval_name("test", "soft")  # a straight-through run's mixture: `cellgraph eval RUN --mode soft`
    if f"test_{metric}_soft" in final:
        row["soft"].append(final[f"test_{metric}_soft"])
    elif soft.exists():
        row["soft"].append(json.loads(soft.read_text())[f"test_{metric}"])
    logs = sorted((folder / "structures").glob("epoch_*.json"))
    if logs:
        last = with_reads(json.loads(logs[-1].read_text()))
        for key in _SHARES[:-1]:
            row[key].append(last[key])
        row["gru_form_share"].append(sum(f["count"] for f in last["forms"] if _shape(f) == _GRU_FORM)
                                     / last["n_cells"])


def _row(table: dict[str, dict[str, list[float]]], arm: str) -> dict[str, list[float]]:
    return table.setdefault(arm, {key: [] for key in ("hard", "soft", *_SHARES, "stopped")})


def _shape(form: dict[str, Any]) -> str:
    doc = load_document(form["cell"])
    return shape_form(doc.cell, doc.layout)


def _cell(values: list[float]) -> str:
    """``mean ± sample std (count)``; past 1e4 (a cell whose state blew up) each value alone,
    in two significant digits."""
    if not values:
        return "-"
    if max(abs(v) for v in values) >= 1e4:
        return ", ".join(f"{v:.2g}" for v in values)
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return f"{statistics.mean(values):.3f} ± {sd:.3f} ({len(values)})"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="runs/recipe-planted", help="where the runs train (default %(default)s)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="copy each finished run's record (no checkpoints), its teacher's and its log here; the table "
                   "reads DIR (default: the table reads ROOT)")
    p.add_argument("--task", default="planted", choices=sorted(BASES))
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (each one torch thread)")
    p.add_argument("--only", nargs="+", default=[""], metavar="PREFIX",
                   help="run only the runs whose name starts with one of these")
    p.add_argument("--arms", nargs="+", choices=sorted({a for arms in ARMS.values() for a in arms}),
                   help="run these arms only (default: all), and the GRU")
    p.add_argument("--max-train", type=int, default=None,
                   help="training sequences (default: the task's slice, 800 of planted and 1,000 of Wiki; 0: all, "
                   "and all the evaluation data)")
    p.add_argument("--teacher-epochs", type=int, default=TEACHER_EPOCHS,
                   help=f"the teacher's epochs (default {TEACHER_EPOCHS})")
    p.add_argument("--epochs", type=int, default=EPOCHS,
                   help=f"a warm-started run's epochs after its teacher's (default {EPOCHS})")
    p.add_argument("--summary", action="store_true",
                   help="train nothing: copy the ended runs' records to --records if given, print the table and "
                   "refresh its summary.json (which keeps the flags the runs were made with)")
    a = p.parse_args(argv)
    root, records = Path(a.root), a.records and Path(a.records)
    table_dir = records or root
    table_dir.mkdir(parents=True, exist_ok=True)
    flags = {"task": a.task, "max_train": a.max_train, "teacher_epochs": a.teacher_epochs, "epochs": a.epochs}
    if a.summary:
        for folder in sorted(root.iterdir()) if records and root.is_dir() else ():
            if _ended(folder):
                keep_record(root, folder.name, records)
        for made in (table_dir / "summary.json", root / "summary.json"):
            if made.exists():
                flags = {key: json.loads(made.read_text()).get(key, value) for key, value in flags.items()}
                break
    else:
        root.mkdir(parents=True, exist_ok=True)
        todo = [(n, args) for n, args in runs(a.task, a.max_train, a.arms and tuple(a.arms), a.teacher_epochs,
                                             a.epochs) if n.startswith(tuple(a.only))]
        with ThreadPoolExecutor(a.jobs) as pool:
            for line in pool.map(lambda job: run_one(root, *job, records), todo):
                print(line, flush=True)
    table = summarize(table_dir)
    (table_dir / "summary.json").write_text(json.dumps({**flags, "arms": ARMS, "table": table}, indent=1))
    print(f"{'arm':<20} {'test, argmax (hard)':<24} {'test, mixture (soft)':<24} {'identity chains':<24} "
          f"{'reads x_t and h_t-1':<24} {'GRU form':<24} stopped (seeds)")
    for arm, row in sorted(table.items()):
        print(f"{arm:<20} " + " ".join(f"{_cell(row[key]):<24}" for key in ("hard", "soft", *_SHARES))
              + f" {' '.join(map(str, row['stopped'])) or '-'}")


if __name__ == "__main__":
    main()
