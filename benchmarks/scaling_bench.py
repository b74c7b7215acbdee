"""Item 4 of ``cellgraph bench``: time and peak memory of one RRNN training step (soft)
as ``n_iterations``, the hidden size ``p``, the batch and the scoring network's hidden width
grow, one at a time from a base configuration, with the fitted growth exponent of the cost
per cell in ``n_iterations``.

The last two sweeps say what bounds the step: at batch 1 it is the cost of launching the
search's ops (per-op overhead), and at a small scoring width that of the search without the
scoring network's first layer (building, excluding, choosing and mixing the candidates).

The incremental search scores ``C(n_leaves + N - 1, 2)`` pairs per cell, so the cost per cell
should grow like ``N^2`` (the literal Algorithm 2 rebuilds every pair every iteration:
``N^3``); the exponent is the least-squares slope of ``log(time)`` on ``log(N)``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.benchmarks.measure import best_time, peak_memory
from cellgraph.benchmarks.step_bench import training_step

__all__ = ["growth_exponent", "scaling"]


def growth_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``log y`` on ``log x``."""
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def _measure(p: int, batch: int, n_iterations: int, scoring_hidden: int, steps: int,
             repeat: int, seed: int, device: torch.device) -> dict[str, float]:
    torch.manual_seed(seed)
    model = RRNN(p, 3, n_iterations, scoring_hidden=scoring_hidden, mode="soft", return_traces=False)
    step = training_step(model.to(device), torch.randn(steps, batch, p).to(device))
    time_s = best_time(step, repeat=repeat, device=device)
    return {"time_s": time_s, "time_per_cell_s": time_s / (steps * batch),
            "peak_bytes": peak_memory(step, device)}


def scaling(base: dict[str, int], n_iterations: tuple[int, ...], hidden: tuple[int, ...],
            batch: tuple[int, ...], scoring_hidden: tuple[int, ...], steps: int = 2, repeat: int = 2,
            seed: int = 0, device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """Sweep each of ``n_iterations``, ``hidden`` (``p``), ``batch`` and ``scoring_hidden``
    (``H``) from ``base`` (keys ``p``, ``batch``, ``n_iterations``, ``scoring_hidden``) for
    ``steps`` time steps on ``device``."""
    sweeps = {"n_iterations": n_iterations, "p": hidden, "batch": batch, "scoring_hidden": scoring_hidden}
    out: dict[str, Any] = {"base": dict(base, steps=steps)}
    for key, values in sweeps.items():
        rows = []
        for value in values:
            config = dict(base, **{key: value})
            rows.append({key: value, **_measure(config["p"], config["batch"], config["n_iterations"],
                                                config["scoring_hidden"], steps, repeat, seed, device)})
        out[key] = rows
    ns = [row["n_iterations"] for row in out["n_iterations"]]
    out["n_iterations_exponent"] = growth_exponent(ns, [row["time_per_cell_s"] for row in out["n_iterations"]])
    return out
