"""Item 8 of ``cellgraph bench``: the training step of ``model = cell`` (a fixed cell frozen
into :class:`~cellgraph.backends.torch.models.freeze.FrozenRNN`) against ``torch.nn.GRU``.

One step is what training does: forward over a ``(T, B, p)`` batch, backward, and an Adam
update. Three modules run at the same sizes, round by round beside each other so that the
load of the machine falls on all alike (the best round of each counts):

* ``torch_gru``: ``torch.nn.GRU`` over the whole sequence (the ``gru`` baseline's core);
* ``frozen_gru``: the ``gru`` target (8 generated nodes) frozen;
* ``frozen_large``: a random cell of :data:`LARGE_NODES` generated nodes over the ``gru``
  target's space (x, h, the zero constant; its 3 trainable tuples and the identity), drawn
  from seed :data:`LARGE_SEED` (:func:`large_cell`).

With ``compiled`` two more run beside them, ``frozen_gru_compiled`` and
``frozen_large_compiled``: the same cells with ``compile=true``
(:class:`~cellgraph.backends.torch.models.freeze.FrozenRNN` compiles its training pass over the
sequence), compiled by their first step, which is not timed (``first_step_s`` records it,
compilation included; shorter when inductor's on-disk cache holds the kernels).

The ratios: each step to ``torch_gru``'s, and the large cell's time per generated node to the
frozen GRU's (eager, and compiled to compiled); with each eager step's compute operations
(:func:`~cellgraph.benchmarks.measure.dispatched_ops`, Adam's included), which at these sizes say
where the time goes. A compiled step's are not counted: under the counting mode it runs eagerly.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from cellgraph.backends.torch.models.freeze import FrozenRNN, freeze
from cellgraph.backends.torch.models.gated import GRUBaseline
from cellgraph.backends.torch.runtime.device import synchronize
from cellgraph.benchmarks.measure import dispatched_ops
from cellgraph.cell.graph import MultiCell
from cellgraph.data.planted import random_cell
from cellgraph.targets import Target, target

__all__ = ["LARGE_NODES", "LARGE_SEED", "large_cell", "compare_cells"]

#: Generated nodes of the large cell (the issue asks for 12-15).
LARGE_NODES = 14
#: Seed of the large cell's drawing.
LARGE_SEED = 0


def large_cell(n_nodes: int = LARGE_NODES, seed: int = LARGE_SEED) -> Target:
    """A random cell of ``n_nodes`` generated nodes over the ``gru`` target's space and layout
    (:func:`~cellgraph.data.planted.random_cell`, seeded)."""
    gru = target("gru")
    space = dataclasses.replace(gru.spaces[0], n_iterations=n_nodes)
    cell = MultiCell((random_cell(space, gru.layout, np.random.default_rng(seed)),))
    return Target(f"random {n_nodes}-node cell (seed {seed})", cell, gru.layout, (space,), ())


def _step(model: nn.Module, input: torch.Tensor) -> Callable[[], None]:
    """Forward, backward (loss: mean square of the outputs) and one Adam update."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(input)[0].square().mean().backward()
        optimizer.step()

    return step


def compare_cells(p: int = 100, batch: int = 16, steps: int = 20, repeat: int = 5, seed: int = 0,
                  device: torch.device = torch.device("cpu"), compiled: bool = True) -> dict[str, Any]:
    """Best-of-``repeat`` time of one training step (module docstring) of each module, the
    rounds interleaved; ratios to ``torch_gru`` and per generated node. ``compiled``: with
    the compiled rows (each compiles for a minute or two on a CPU)."""
    large = large_cell()
    cells = {"torch_gru": (None, False), "frozen_gru": (target("gru"), False), "frozen_large": (large, False)}
    if compiled:
        cells |= {"frozen_gru_compiled": (target("gru"), True), "frozen_large_compiled": (large, True)}
    torch.manual_seed(seed)
    input = torch.randn(steps, batch, p, device=device)
    fns, models, first = {}, {}, {}
    for name, (cell, compile) in cells.items():
        torch.manual_seed(seed)
        models[name] = (GRUBaseline(p) if cell is None else
                        FrozenRNN(freeze(cell, hidden_size=p), compile=compile)).to(device)
        fns[name] = _step(models[name], input)
        start = time.perf_counter()
        fns[name]()  # warm-up; a compiled module compiles here
        synchronize(device)
        first[name] = time.perf_counter() - start
    best = dict.fromkeys(fns, float("inf"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, fn in fns.items():
                start = time.perf_counter()
                fn()
                synchronize(device)
                best[name] = min(best[name], time.perf_counter() - start)
    finally:
        gc.enable()
    rows: dict[str, dict[str, Any]] = {}
    for name, (cell, compile) in cells.items():
        nodes = 0 if cell is None else len(cell.cell.output.internal_nodes())
        rows[name] = {"time_s": best[name], "time_vs_torch_gru": best[name] / best["torch_gru"], "nodes": nodes,
                      "compute_ops": None if compile else dispatched_ops(fns[name], device)["compute"]}
        if nodes:
            rows[name]["time_per_node_s"] = best[name] / nodes
        if compile:
            eager = name.removesuffix("_compiled")
            rows[name] |= {"first_step_s": first[name], "speedup_over_eager": best[eager] / best[name],
                           "fell_back": models[name].compiled.fell_back}
    per_node = lambda suffix: (rows[f"frozen_large{suffix}"]["time_per_node_s"]  # noqa: E731
                               / rows[f"frozen_gru{suffix}"]["time_per_node_s"])
    return {"config": {"p": p, "batch": batch, "steps": steps, "repeat": repeat, "dtype": "float32",
                       "step": "forward + backward + Adam", "large_cell": str(large.cell.output.root),
                       "compiled": compiled},
            "models": rows, "large_per_node_vs_frozen_gru": per_node(""),
            **({"compiled_large_per_node_vs_compiled_frozen_gru": per_node("_compiled")} if compiled else {})}
