"""Pictures of runs (matplotlib, Agg): learning curves, the paper's ``N_e`` figure, and the
shapes of discovered trees over epochs (paper, Sec. 5.2 and Appendix "Figures").

Each function takes :class:`~cellgraph.experiment.runlog.RunLog`s and writes ``NAME.png`` and
``NAME.svg`` into ``out_dir``, returning the paths written; a figure with nothing to show is
not written, and ``note`` receives a line saying why. Every figure gives run ``i`` the same
colour, names each run once in its legend and has whole-number epoch ticks; a panel whose
values span two decades or more has a log axis, said in its label. Learning curves get one
panel per metric (accuracy and perplexity never share an axis), train dashed, val solid.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from cellgraph.errors import CellGraphError
from cellgraph.experiment.runlog import RunLog

__all__ = ["plot_runs", "learning_curves", "seed_bands", "n_e_curve", "tree_shapes", "run_labels"]

Note = Callable[[str], None]

#: A panel whose positive values span this factor or more gets a log axis.
LOG_SPAN = 100.0


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise CellGraphError("plots need matplotlib: pip install 'cellgraph[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("png", "svg")]
    for p in paths:
        fig.savefig(p, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)
    return paths


def _ignore(_: str) -> None:
    """The default ``note``."""


def run_labels(runs: Sequence[RunLog]) -> list[str]:
    """``model (folder)`` per run, with as many parent folders as it takes to tell runs apart;
    the folder alone where its name already names the model (``rrnn``, ``p-rrnn-s0``)."""
    for depth in range(1, 1 + max((len(run.path.parts) for run in runs), default=1)):
        labels = [_run_label(run, depth) for run in runs]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{label} #{i + 1}" for i, label in enumerate(labels)]


def _run_label(run: RunLog, depth: int) -> str:
    model, folder = str(run.config.get("model")), Path(*run.path.parts[-depth:])
    named = re.search(rf"(^|[-_.]){re.escape(model)}($|[-_.])", run.path.name)
    return str(folder) if named else f"{model} ({folder})"


def _colour(i: int) -> str:
    return f"C{i % 10}"


def _epoch_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.grid(alpha=0.3)


def _scale(ax, values: list[float], label: str) -> None:
    """Label the y axis; a log axis (said in the label) where the values span decades."""
    finite = [v for v in values if math.isfinite(v)]
    positive = [v for v in finite if v > 0]
    if positive and max(positive) >= LOG_SPAN * min(positive):
        if min(finite) > 0:
            ax.set_yscale("log")
            label += " (log scale)"
        elif min(finite) == 0:
            ax.set_yscale("symlog", linthresh=min(positive))
            label += f" (log scale above {min(positive):g})"
    ax.set_ylabel(label)


def _run_legend(ax, labels: Sequence[str], indices: Sequence[int], styles: bool = False) -> None:
    """One entry per run (its colour), then, with ``styles``, what dashed and solid mean."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=_colour(i), label=labels[i]) for i in indices]
    if styles:
        handles += [Line2D([], [], color="0.3", ls="--", label="train"),
                    Line2D([], [], color="0.3", ls="-", label="val")]
    ax.legend(handles=handles, fontsize=7)


def learning_curves(runs: Sequence[RunLog], out_dir: Path, note: Note = _ignore) -> list[Path]:
    """Train (dashed) and validation (solid) metric per epoch, one panel per metric."""
    metrics = list(dict.fromkeys(run.metric for run in runs))
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.4 * len(metrics), 4.0), squeeze=False)
    labels = run_labels(runs)
    drawn = False
    for ax, metric in zip(axes[0], metrics):
        shown, values = [], []
        for i, run in enumerate(runs):
            if run.metric != metric:
                continue
            for split, style in (("train", "--"), ("val", "-")):
                epochs, ys = run.series(f"{split}_{metric}")
                ax.plot(epochs, ys, style, color=_colour(i), marker="o", ms=3)
                values += ys
            if run.series(f"val_{metric}")[0] or run.series(f"train_{metric}")[0]:
                shown.append(i)
        drawn = drawn or bool(shown)
        _epoch_axis(ax)
        _scale(ax, values, metric)
        ax.set_title(f"Learning curves: {metric}")
        _run_legend(ax, labels, shown, styles=True)
    if not drawn:
        plt.close(fig)
        note("learning_curves: not drawn: no run has logged an epoch yet (metrics.jsonl is empty)")
        return []
    return _save(fig, out_dir, "learning_curves")


def _band(runs: Sequence[RunLog], key: str) -> tuple[list[int], list[float], list[float], list[float], list[int]]:
    """Per epoch logged by every run: the epoch, the mean, min and max of ``key`` over ``runs``;
    an epoch where a run's value is not finite (an overflowed perplexity) is left out and
    listed last."""
    series = [dict(zip(*run.series(key))) for run in runs]
    logged = sorted(set.intersection(*(set(s) for s in series))) if series else []
    unbounded = [e for e in logged if not all(math.isfinite(s[e]) for s in series)]
    epochs = [e for e in logged if e not in unbounded]
    columns = [[s[e] for s in series] for e in epochs]
    return (epochs, [sum(c) / len(c) for c in columns], [min(c) for c in columns], [max(c) for c in columns],
            unbounded)


def _epoch_list(epochs: list[int]) -> str:
    """``3``, ``3-5`` or ``1, 4``: a short list of epoch numbers for a legend."""
    if len(epochs) > 1 and epochs == list(range(epochs[0], epochs[-1] + 1)):
        return f"{epochs[0]}-{epochs[-1]}"
    return ", ".join(map(str, epochs))


def _searches(metric: str, group: Sequence[RunLog]) -> tuple[tuple[str, str], ...]:
    """(search, metrics key) of the validation series to draw for a variant: both searches,
    the mixture ("soft") and the argmax ("hard"), where every seed recorded both (searching
    models); else its one validation metric (search "")."""
    if all(run.series(f"val_{metric}_soft")[0] and run.series(f"val_{metric}_hard")[0] for run in group):
        return (("soft", f"val_{metric}_soft"), ("hard", f"val_{metric}_hard"))
    return (("", f"val_{metric}"),)


#: panel title of each search where a metric's variants search; the argmax's metric can sit
#: decades above the mixture's, so each gets its own panel and scale
_SEARCH_PANELS = {"soft": "the soft mixture", "hard": "the hard search (argmax)"}


def _panels(bands: Iterable[tuple[str, str, int, str]]) -> list[tuple[str, str]]:
    """(metric, search) of each panel, from the bands' keys ``(metric, variant, colour,
    search)``: one per search for a metric whose variants search (variants without a search
    are drawn in both, for scale), else one (search "")."""
    metrics = list(dict.fromkeys(metric for metric, *_ in bands))
    searching = {metric for metric, _, _, search in bands if search}
    return [(m, s) for m in metrics for s in (_SEARCH_PANELS if m in searching else ("",))]


def seed_bands(runs: Sequence[RunLog], out_dir: Path, note: Note = _ignore) -> list[Path]:
    """Validation metric per epoch of each variant (runs whose folder names differ only in
    ``-s<seed>``): the mean over its seeds as a line, their range as a band (a variant of one
    seed has a line only, and the title says so); one panel per metric, or, where a variant
    searches (:func:`_searches`), one per search: the mixture and the argmax, each variant in
    its colour in both, and the variants without a search (the GRU) in both. Every line is
    solid (dashed lines mean training in :func:`learning_curves`). An epoch counts where every
    seed logged it and every seed's value is finite; the legend and ``note`` name the epochs
    left out for an overflow."""
    variants: dict[tuple[str, str], list[RunLog]] = {}
    for run in runs:
        variants.setdefault((run.metric, run.variant), []).append(run)
    bands = {(m, name, i, search): _band(group, key) for i, ((m, name), group) in enumerate(variants.items())
             for search, key in _searches(m, group)}
    for (m, name, _, search), band in bands.items():
        if band[4]:
            what = f"{name}, {search} search" if search else name
            note(f"seed_bands: {what}: epoch {_epoch_list(band[4])} left out: a seed's val {m} is not finite")
    bands = {k: band for k, band in bands.items() if band[0]}
    if not bands:
        note("seed_bands: not drawn: no variant has an epoch logged by all of its seeds")
        return []
    panels = _panels(bands)
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.0), squeeze=False)
    for ax, (metric, panel) in zip(axes[0], panels):
        values: list[float] = []
        seeds = set()
        for (m, name, i, search), (epochs, mean, low, high, unbounded) in bands.items():
            if m != metric or search not in ("", panel):
                continue
            n = len(variants[(m, name)])
            seeds.add(n)
            suffix = f", {search} search" if search else ""
            gap = f"; not finite at epoch {_epoch_list(unbounded)}" if unbounded else ""
            ax.plot(epochs, mean, "-", color=_colour(i), marker="o", ms=3,
                    label=f"{name}{suffix} ({n} seed{'s' * (n > 1)}{gap})")
            if n > 1:
                ax.fill_between(epochs, low, high, color=_colour(i), alpha=0.2, lw=0)
            values += low + high
        _epoch_axis(ax)
        _scale(ax, values, f"val {metric}")
        which = f", {_SEARCH_PANELS[panel]}" if panel else ""
        ax.set_title(f"Validation {metric}{which}\n{_band_key(seeds)}", fontsize=10)
        ax.legend(fontsize=7)
    return _save(fig, out_dir, "seed_bands")


def _band_key(seeds: set[int]) -> str:
    """What a seed_bands panel draws, given the numbers of seeds of its variants."""
    if max(seeds) == 1:
        return "one seed per variant: its values, no band"
    band = "band = min to max over seeds"
    return f"mean over seeds, {band}" if min(seeds) > 1 else f"mean over seeds, {band} (variants of 2 seeds or more)"


def n_e_curve(runs: Sequence[RunLog], out_dir: Path, note: Note = _ignore) -> list[Path]:
    """``N_e``: changed tuple choices between consecutive epochs (RRNN-GRU runs)."""
    series = [(i, run.series("n_e")) for i, run in enumerate(runs)]
    series = [(i, s) for i, s in series if s[0]]
    if not series:
        note("n_e: not drawn: N_e counts the tuple choices that changed since the previous epoch, "
             "so it needs an rrnn-gru run with two epochs or more; none of these runs has one")
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (epochs, values) in series:
        ax.plot(epochs, values, color=_colour(i), marker="o", ms=3)
    _epoch_axis(ax)
    _scale(ax, [v for _, (_, values) in series for v in values], "$N_e$ (changed tuple choices)")
    ax.set_title("Tuple choices that changed since the previous epoch")
    _run_legend(ax, run_labels(runs), [i for i, _ in series])
    return _save(fig, out_dir, "n_e")


def _mean(logs: list[dict], key: str) -> list[float]:
    """Per epoch, the count-weighted mean of ``key`` over the logged forms."""
    return [sum(f[key] * f["count"] for f in s["forms"]) / max(1, sum(f["count"] for f in s["forms"]))
            for s in logs]


#: (title, y label) of each tree_shapes panel
_SHAPE_PANELS = (("mean tree depth", "depth (edges, root to deepest leaf)"),
                 ("mean balance", "balance (min / max leaf depth)"),
                 ("share of the target's form", "share of the logged cells"))


def tree_shapes(runs: Sequence[RunLog], out_dir: Path, note: Note = _ignore) -> list[Path]:
    """Mean depth, mean balance and the target form's share of discovered cells per epoch."""
    logged = [(i, run.structures()) for i, run in enumerate(runs)]
    logged = [(i, logs) for i, logs in logged if logs]
    if not logged:
        note("tree_shapes: not drawn: no run has structure logs (only rrnn and rrnn-gru runs search cells)")
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    depths = []
    for i, logs in logged:
        epochs = [s["epoch"] for s in logs]
        columns = (_mean(logs, "depth"), _mean(logs, "balance"), [s.get("target_share", 0.0) for s in logs])
        depths += columns[0]
        for ax, ys in zip(axes, columns):
            ax.plot(epochs, ys, color=_colour(i), marker="o", ms=3)
    for ax, (title, label) in zip(axes, _SHAPE_PANELS):
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(label)
        _epoch_axis(ax)
    axes[0].set_ylim(0, max(depths) * 1.15 + 0.5)  # from 0: a change of 0.3 levels looks like one
    for ax in axes[1:]:  # fractions
        ax.set_ylim(-0.03, 1.03)
    _run_legend(axes[2], run_labels(runs), [i for i, _ in logged])
    return _save(fig, out_dir, "tree_shapes")


def plot_runs(runs: Sequence[RunLog], out_dir: str | Path, note: Note = _ignore) -> list[Path]:
    """All pictures for ``runs``; returns every file written (``note``: what was not drawn)."""
    out = Path(out_dir)
    return (learning_curves(runs, out, note) + seed_bands(runs, out, note) + n_e_curve(runs, out, note)
            + tree_shapes(runs, out, note))
