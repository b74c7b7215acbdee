"""``cellgraph demo``: the whole project in a few minutes on a laptop, with no data files.

1. Checks that Algorithm 2, with the scoring function of the corrected Lemma 1, rebuilds the
   GRU and the LSTM (the checks of ``cellgraph.proofs``, passed in by the command).
2. Trains RRNN, RRNN-GRU and GRU on the generated ``planted`` task (a hidden GRU teacher).
3. Prints a comparison table (validation/test accuracy, time, structure recovery).
4. Writes the plots (learning curves, N_e, tree shapes).
5. Renders the most frequent discovered RRNN cell to SVG and prints it as sympy equations.

Training goes through the backend found by name (``cellgraph.backend.training_backend``), so the core
still never imports torch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from cellgraph.backend import training_backend
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import resolve_config
from cellgraph.experiment.reproduce import PLANTED, PLANTED_MODELS
from cellgraph.experiment.runlog import reads_summary

__all__ = ["DEMO_MODELS", "run_demo"]

#: model -> settings on top of :data:`SHARED`: the planted experiment's (docs/reproduce.md)
DEMO_MODELS: dict[str, dict[str, Any]] = PLANTED_MODELS

# One torch thread: the demo's tensors are small, and on a busy 2-core machine two
# OpenMP threads per process spin against each other (measured: 20x slower).
SHARED = {"task": "planted", **PLANTED, "epochs": 4, "patience": 4, "max_train": 384, "max_eval": 128,
          "num_threads": 1}


def _step(log: Callable[[str], None], number: int, text: str) -> None:
    log(f"\n[{number}/5] {text}")


def _expressibility(checks: Sequence[Callable[..., Any]], seed: int, quick: bool,
                    log: Callable[[str], None]) -> None:
    draws = 2 if quick else 8
    for result in (check(seed, n_draws=draws) for check in checks):
        outcome = result.corrected or result.literal
        if not outcome.holds:
            raise CellGraphError(f"demo: {result.title} failed: {outcome.summary}")
        log(f"  {result.title}: {outcome.summary}")


def _table(rows: list[dict[str, Any]]) -> str:
    """The comparison: test accuracy of the hard search (Algorithm 2's argmax, the default
    evaluation) and of the soft mixture (how the RRNN models train) of the same checkpoint."""
    head = f"{'model':<10}{'val acc':>9}{'test acc':>10}{'test soft':>11}{'epochs':>8}{'seconds':>9}  structure"
    lines = [head, "-" * len(head)]
    for r in rows:
        soft = f"{r['soft']:>11.3f}" if r["soft"] is not None else f"{'-':>11}"
        lines.append(f"{r['model']:<10}{r['val']:>9.3f}{r['test']:>10.3f}{soft}{r['epochs']:>8}"
                     f"{r['seconds']:>9.1f}  {r['structure']}")
    lines.append("(val acc, test acc: hard search; test soft: the soft mixture of the same checkpoint)")
    return "\n".join(lines)


def _structure_note(final: dict[str, Any]) -> str:
    recovery = final.get("recovery")
    if not recovery:
        return "-"
    note = f"teacher's form in {recovery['structure_recovery']:.0%} of cells"
    td = recovery.get("td_iso_teacher")
    return note + (f", TD to teacher {td:.3g}" if td is not None else "")


def _describe(log_doc: dict[str, Any]) -> str:
    """How often the most frequent form of a structure log occurs and whether it is the
    identity chain, with what the log's cells read and their share of identity chains."""
    form = log_doc["forms"][0]
    kind = "the identity chain (a plain sum of leaves)" if form["identity_chain"] else "not the identity chain"
    return (f"{form['count']} of {log_doc['n_cells']} cells ({form['count'] / log_doc['n_cells']:.0%}), "
            f"{kind}\n    over all cells: {reads_summary(log_doc)}")


def _show_cell(run_dir: Path, out: Path, log: Callable[[str], None]) -> None:
    from cellgraph.experiment.runlog import RunLog
    from cellgraph.export import draw, jsonio, symbolic

    logs = RunLog.load(run_dir).structures()
    if len(logs) < 2 or not logs[-1]["forms"]:
        log("  (no structure log of a trained epoch was written)")
        return
    start, last = logs[0], logs[-1]
    log(f"  before training (epoch 0), the search built most often: {start['forms'][0]['canonical']}")
    log(f"    {_describe(start)}")
    form = last["forms"][0]
    log(f"  after training (epoch {last['epoch']}), most frequent: {form['canonical']}")
    log(f"    {_describe(last)}")
    if form["canonical"] == start["forms"][0]["canonical"]:
        log("    the same cell the untrained search built: training did not move the search off its starting point")
    doc = jsonio.load_document(form["cell"])
    cell = doc.cell
    try:
        path = draw.render(cell, out / "discovered_cell.svg", layout=doc.layout)
    except CellGraphError as err:
        log(f"  {err}")
        path = draw.render(cell, out / "discovered_cell.dot", layout=doc.layout)
    log(f"  drawing: {path}")
    log("  as sympy equations:")
    for line in symbolic.sstr(symbolic.equations(cell, doc.layout)).splitlines():
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

    _step(log, 2, "Training RRNN, RRNN-GRU and GRU on the planted task (sequences from a hidden GRU cell)")
    rows, runs = [], []
    for model, settings in DEMO_MODELS.items():
        run_dir = out / "runs" / model
        overrides = {**SHARED, **settings, "model": model, "seed": seed, "device": device,
                     "backend": backend}
        if quick:
            overrides.update(epochs=1, max_train=64, max_eval=64)
        config = resolve_config(overrides=overrides)
        log(f"  {model}: training into {run_dir}")
        t0 = time.perf_counter()
        final = trainer.train(config, run_dir, resume=(run_dir / "config.json").exists())
        rows.append({
            "model": model, "val": final["val_accuracy"], "test": final["test_accuracy"],
            "soft": final.get("test_accuracy_soft"),
            "epochs": final.get("epochs_run", config.epochs), "seconds": time.perf_counter() - t0,
            "structure": _structure_note(final),
        })
        runs.append(run_dir)

    _step(log, 3, "Comparison on the planted task")
    log(_table(rows))

    _step(log, 4, f"Plots into {out / 'plots'}")
    for path in plot_runs([RunLog.load(r) for r in runs], out / "plots"):
        log(f"  {path}")

    _step(log, 5, "The most frequent cell RRNN discovered")
    _show_cell(out / "runs" / "rrnn", out, log)
    log(f"\ndemo finished in {time.perf_counter() - start:.0f} s; everything is under {out}/")
    return rows
