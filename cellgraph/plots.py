"""Pictures of runs (matplotlib, Agg): learning curves, the paper's ``N_e`` figure, and the
shapes of discovered trees over epochs (paper, Sec. 5.2 and Appendix "Figures").

Each function takes :class:`~cellgraph.runlog.RunLog`s and writes ``NAME.png`` and
``NAME.svg`` into ``out_dir``, returning the paths written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from cellgraph.errors import CellGraphError
from cellgraph.runlog import RunLog

__all__ = ["plot_runs", "learning_curves", "n_e_curve", "tree_shapes"]


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


def _finish(ax, ylabel: str, title: str) -> None:
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def learning_curves(runs: Sequence[RunLog], out_dir: Path) -> list[Path]:
    """Train and validation metric per epoch, every run overlaid."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for run in runs:
        for split, style in (("train", "--"), ("val", "-")):
            epochs, values = run.series(f"{split}_{run.metric}")
            if epochs:
                ax.plot(epochs, values, style, marker="o", ms=3, label=f"{run.label} {split}")
    _finish(ax, " / ".join(sorted({run.metric for run in runs})), "Learning curves")
    return _save(fig, out_dir, "learning_curves")


def n_e_curve(runs: Sequence[RunLog], out_dir: Path) -> list[Path]:
    """``N_e``: changed tuple choices between consecutive epochs (RRNN-GRU runs)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    drawn = False
    for run in runs:
        epochs, values = run.series("n_e")
        if epochs:
            ax.plot(epochs, values, marker="o", ms=3, label=run.label)
            drawn = True
    if not drawn:
        plt.close(fig)
        return []
    _finish(ax, "$N_e$ (changed tuple choices)", "Tuple choices that changed since the previous epoch")
    return _save(fig, out_dir, "n_e")


def tree_shapes(runs: Sequence[RunLog], out_dir: Path) -> list[Path]:
    """Mean depth, mean balance and the target form's share of discovered cells per epoch."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    drawn = False
    for run in runs:
        logs = run.structures()
        if not logs:
            continue
        drawn = True
        epochs = [s["epoch"] for s in logs]

        def mean(key: str) -> list[float]:
            return [
                sum(f[key] * f["count"] for f in s["forms"]) / max(1, sum(f["count"] for f in s["forms"]))
                for s in logs
            ]

        axes[0].plot(epochs, mean("depth"), marker="o", ms=3, label=run.label)
        axes[1].plot(epochs, mean("balance"), marker="o", ms=3, label=run.label)
        axes[2].plot(epochs, [s.get("target_share", 0.0) for s in logs], marker="o", ms=3, label=run.label)
    if not drawn:
        plt.close(fig)
        return []
    for ax, title in zip(axes, ("mean tree depth", "mean balance (min/max leaf depth)", "share of target's form")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[2].legend(fontsize=7)
    return _save(fig, out_dir, "tree_shapes")


def plot_runs(runs: Sequence[RunLog], out_dir: str | Path) -> list[Path]:
    """All pictures for ``runs``; returns every file written."""
    out = Path(out_dir)
    return learning_curves(runs, out) + n_e_curve(runs, out) + tree_shapes(runs, out)
