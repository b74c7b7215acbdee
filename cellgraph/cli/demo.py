"""``cellgraph demo``: the whole project in a few minutes on a laptop, with no data files.

1. Checks that Algorithm 2, with the scoring function of the corrected Lemma 1, rebuilds the
   GRU and the LSTM (the checks of ``cellgraph.proofs``, passed in by the command).
2. Trains, on the generated ``planted`` task (labelled through a hidden GRU cell), a GRU, then
   RRNN and RRNN-GRU with cellgraph's discovery recipe (docs/paper-notes.md, *Extension: the
   discovery recipe*): each starts as that GRU, exactly, and trains as many epochs again; the
   GRU continued for as many epochs is the baseline.
3. Prints a comparison table (validation/test accuracy of the argmax cells, epochs, time,
   structure) and says whether the search beat the GRU.
4. Writes the plots (learning curves, N_e, tree shapes).
5. Shows the most frequent discovered RRNN cell that reads both ``x_t`` and ``h_{t-1}``: its
   drawing (SVG), its sympy equations, and how it departs from the GRU.
6. A discovery (:mod:`cellgraph.cli.demo_discovery`): on planted values whose teacher is MGU,
   local search with the motif moves from the tanh RNN finds the teacher; random search spends
   the same budget.

Training goes through the backend found by name (``cellgraph.backend.training_backend``), so the core
still never imports torch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from cellgraph.backend import training_backend
from cellgraph.cli.demo_discovery import run_discovery
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import resolve_config
from cellgraph.experiment.presets import RECIPES
from cellgraph.experiment.reproduce import PLANTED, PLANTED_MODELS
from cellgraph.experiment.runlog import reads_summary

__all__ = ["DEMO_MODELS", "run_demo"]

#: model -> settings on top of :data:`SHARED`: the planted experiment's learning rate and
#: scoring width (docs/reproduce.md) under the discovery recipe (:data:`RECIPES`)
DEMO_MODELS: dict[str, dict[str, Any]] = {
    model: {"lr": PLANTED_MODELS[model]["lr"], "scoring_hidden": PLANTED_MODELS[model]["scoring_hidden"],
            **RECIPES[model]}
    for model in RECIPES
}

# One torch thread: the demo's tensors are small, and on a busy 2-core machine two
# OpenMP threads per process spin against each other (measured: 20x slower).
SHARED = {"task": "planted", **PLANTED, "epochs": 4, "patience": 4, "max_train": 384, "max_eval": 128,
          "num_threads": 1}


#: The demo's steps (module docstring).
STEPS = 6


def _step(log: Callable[[str], None], number: int, text: str) -> None:
    log(f"\n[{number}/{STEPS}] {text}")


def _expressibility(checks: Sequence[Callable[..., Any]], seed: int, quick: bool,
                    log: Callable[[str], None]) -> None:
    draws = 2 if quick else 8
    for result in (check(seed, n_draws=draws) for check in checks):
        outcome = result.corrected or result.literal
        if not outcome.holds:
            raise CellGraphError(f"demo: {result.title} failed: {outcome.summary}")
        log(f"  {result.title}: {outcome.summary}")


def _table(rows: list[dict[str, Any]]) -> str:
    """The comparison: accuracy of Algorithm 2's argmax cells (the models as trained and
    exported), epochs in all (a warm-started model's include its teacher's)."""
    head = f"{'model':<10}{'val acc':>9}{'test acc':>10}{'epochs':>8}{'seconds':>9}  structure"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:<10}{r['val']:>9.3f}{r['test']:>10.3f}{r['epochs']:>8}"
                     f"{r['seconds']:>9.1f}  {r['structure']}")
    lines.append("(accuracy of the argmax cells; epochs: the GRU's first ones are the teacher the other models "
                 "start from)")
    return "\n".join(lines)


def _structure_note(final: dict[str, Any], last_log: dict[str, Any] | None) -> str:
    if last_log is None:
        return "-"
    notes = [f"GRU's form in {last_log['target_share']:.0%} of cells"]
    recovery = final.get("recovery")
    if recovery:
        notes.append(f"planted teacher's in {recovery['structure_recovery']:.0%}")
    return ", ".join(notes)


def _verdict(rows: list[dict[str, Any]]) -> str:
    """Whether the searched models beat the GRU trained as many epochs (one seed)."""
    gru = next(r for r in rows if r["model"] == "gru")
    searched = [r for r in rows if r["model"] != "gru"]
    best = max(searched, key=lambda r: r["test"])
    scores = ", ".join(f"{r['model']} {r['test']:.3f}" for r in searched)
    if best["test"] > gru["test"]:
        return (f"  {best['model']} beats the GRU trained as long on this seed ({scores} against "
                f"{gru['test']:.3f}); one seed is an anecdote: RESULTS.md has three")
    return (f"  the search does not beat the GRU trained as long ({scores} against {gru['test']:.3f}); "
            f"RESULTS.md, 'The discovery recipe', measures it over three seeds")


def _describe(log_doc: dict[str, Any], form: dict[str, Any]) -> str:
    """How often ``form`` occurs in a structure log and whether it is the identity chain, with
    what the log's cells read."""
    kind = "the identity chain (a plain sum of leaves)" if form["identity_chain"] else "not the identity chain"
    return (f"{form['count']} of {log_doc['n_cells']} cells ({form['count'] / log_doc['n_cells']:.0%}), "
            f"{kind}\n    over all cells: {reads_summary(log_doc)}")


def _show_cell(run_dir: Path, out: Path, log: Callable[[str], None]) -> None:
    """The most frequent cell of the run's last structure log that reads both ``x_t`` and
    ``h_{t-1}``: drawing, equations, and its departure from the run's target (the GRU)."""
    from cellgraph.experiment.runlog import RunLog
    from cellgraph.export import draw, jsonio, symbolic
    from cellgraph.export.diff import diff_lines
    from cellgraph.targets import target

    run = RunLog.load(run_dir)
    logs = run.structures()
    if len(logs) < 2 or not logs[-1]["forms"]:
        log("  (no structure log of a trained epoch was written)")
        return
    start, last = logs[0], run.structure_log(logs[-1]["epoch"])
    log(f"  before training (epoch 0), most frequent: {start['forms'][0]['canonical']}")
    log(f"    {_describe(start, start['forms'][0])}")
    reading = [f for f in last["forms"] if f.get("reads_input") and f.get("reads_state")]
    if not reading:
        log(f"  after training (epoch {last['epoch']}) no logged cell reads both x_t and h_(t-1); most frequent: "
            f"{last['forms'][0]['canonical']}")
        return
    form = reading[0]
    log(f"  after training (epoch {last['epoch']}), the most frequent cell that reads x_t and h_(t-1): "
        f"{form['canonical']}")
    log(f"    {_describe(last, form)}")
    doc = jsonio.load_document(form["cell"])
    try:
        path = draw.render(doc.cell, out / "discovered_cell.svg", layout=doc.layout)
    except CellGraphError as err:
        log(f"  {err}")
        path = draw.render(doc.cell, out / "discovered_cell.dot", layout=doc.layout)
    log(f"  drawing: {path}")
    log("  as sympy equations:")
    for line in symbolic.sstr(symbolic.equations(doc.cell, doc.layout)).splitlines():
        log(f"    {line}")
    goal = target(run.config.get("target", "gru"))
    log(f"  against {goal.name} (cellgraph diff {run_dir} shows the next ones):")
    for line in diff_lines(doc.cell, doc.layout, goal):
        log(f"    {line}")


def run_demo(checks: Sequence[Callable[..., Any]], out_dir: str | Path = "demo-out", seed: int = 0,
             quick: bool = False, log: Callable[[str], None] = print, device: str = "auto",
             backend: str = "torch") -> list[dict[str, Any]]:
    """Run the demo into ``out_dir``, training with the plugin ``backend`` on ``device`` (a
    ``device`` setting); returns the comparison rows. ``checks``: the statements of step 1, functions ``(seed, n_draws=)
    -> Result`` (``cellgraph demo`` passes the GRU and LSTM theorems of
    :mod:`cellgraph.proofs`)."""
    from cellgraph.experiment.plots import plot_runs
    from cellgraph.experiment.runlog import RunLog

    trainer = training_backend(backend)
    trainer.resolve_device(device)  # a GPU asked for and missing: an error before any work
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    _step(log, 1, "Checking that Algorithm 2 rebuilds the GRU and the LSTM (corrected Lemma 1 scoring)")
    _expressibility(checks, seed, quick, log)

    _step(log, 2, "Training a GRU on the planted task (sequences labelled by a hidden GRU cell), then RRNN and "
                  "RRNN-GRU starting from it")
    epochs = 1 if quick else SHARED["epochs"]
    size = {"max_train": 64, "max_eval": 64} if quick else {}
    common = {**SHARED, **size, "seed": seed, "device": device, "backend": backend}
    teacher = out / "runs" / "teacher-gru"
    plan = [("teacher-gru", teacher, {**PLANTED_MODELS["gru"], "model": "gru", "epochs": epochs}),
            ("gru", out / "runs" / "gru", {**PLANTED_MODELS["gru"], "model": "gru", "epochs": 2 * epochs})]
    plan += [(model, out / "runs" / model, {**settings, "model": model, "epochs": epochs, "teacher": str(teacher)})
             for model, settings in DEMO_MODELS.items()]
    rows, runs = [], []
    for name, run_dir, settings in plan:
        config = resolve_config(overrides={**common, **settings})
        log(f"  {name}: training into {run_dir}")
        t0 = time.perf_counter()
        final = trainer.train(config, run_dir, resume=(run_dir / "config.json").exists())
        if name == "teacher-gru":
            continue
        logs = RunLog.load(run_dir).structures()
        rows.append({
            "model": name, "val": final["val_accuracy"], "test": final["test_accuracy"],
            "epochs": final.get("epochs_run", config.epochs) + (epochs if config.teacher else 0),
            "seconds": time.perf_counter() - t0, "structure": _structure_note(final, logs[-1] if logs else None),
        })
        runs.append(run_dir)

    _step(log, 3, "Comparison on the planted task")
    log(_table(rows))
    log(_verdict(rows))

    _step(log, 4, f"Plots into {out / 'plots'}")
    for path in plot_runs([RunLog.load(r) for r in runs], out / "plots"):
        log(f"  {path}")

    _step(log, 5, "The most frequent cell RRNN discovered that reads x_t and h_(t-1)")
    _show_cell(out / "runs" / "rrnn", out, log)

    _step(log, 6, "A discovery: local search with the motif moves, from the tanh RNN, on a planted MGU teacher; "
                  "random search on the same budget (progress on stderr)")
    run_discovery(out, seed, quick, backend, log)
    log(f"\ndemo finished in {time.perf_counter() - start:.0f} s; everything is under {out}/")
    return rows
