"""Item 2 of ``cellgraph bench``: one training step (forward and backward of a sequence
batch) of the recurrent models, time and peak memory, each as a ratio to ``torch.nn.GRU``
measured in the same run.

Models (all with input size = hidden size ``p``):

* ``rrnn_soft``, ``rrnn_straight_through``: :class:`~cellgraph.backends.torch.models.rrnn.RRNN`
  with the paper's sets (3 trainable tuples + identity, U = {sigmoid, tanh, 1-x, id},
  O = {+, *}, aux {0}), per-sample trees; ``rrnn_soft_recompute`` the same with the search
  recomputed in the backward pass; ``rrnn_soft_sample_norm`` the soft step with the setting
  every full-RRNN training run of RESULTS.md uses (candidates normalised per sample, ``tau`` in
  units of the score spread); ``rrnn_soft_reading`` and ``rrnn_soft_sync_free`` the soft step
  with the search that reads its exclusion outcomes from the device at every iteration (the
  default where it runs eagerly) and the one that reads nothing until it ends (the default
  where it is compiled for a GPU), whatever the device;
* ``rrnn_recipe``: the search of the discovery recipe (straight-through, the structural term,
  exclusion by slot, ``alpha``'s output layer zero as the warm start leaves it, so that the
  search skips ``alpha``: ``constant_alpha``); ``rrnn_recipe_scored`` the same search running
  ``alpha`` all the same (the recipe's step before ``constant_alpha``);
* ``rrnn_gru``: :class:`~cellgraph.backends.torch.models.rrnn_gru.RRNNGRU`;
* ``frozen_gru``: the ``gru`` target frozen (:func:`~cellgraph.backends.torch.models.freeze.freeze`),
  run over time by :class:`~cellgraph.backends.torch.models.freeze.FrozenRNN` (a Python loop over the
  steps; the projections of ``x`` made for all steps before it);
* ``gru_cell_loop``: a Python loop over ``torch.nn.GRUCell``; ``torch_gru``: ``torch.nn.GRU``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor, nn

from cellgraph.backends.torch.models.gated import GRUBaseline
from cellgraph.backends.torch.models.freeze import FrozenRNN, freeze
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.backends.torch.models.rrnn_gru import RRNNGRU
from cellgraph.benchmarks.measure import best_time, dispatched_ops, peak_memory
from cellgraph.targets import target

__all__ = ["CellLoop", "models", "recipe_search", "training_step", "compare_steps"]


class CellLoop(nn.Module):
    """A one-step cell ``cell(x_t, h) -> h`` run over ``(T, B, p)`` by a Python loop, with the
    RRNN call convention ``forward(input) -> (output, h_T, None)``."""

    def __init__(self, cell: nn.Module) -> None:
        super().__init__()
        self.cell = cell

    def forward(self, input: Tensor) -> tuple[Tensor, Tensor, None]:
        state = None
        outputs = []
        for x_t in input:
            state = self.cell(x_t, state)
            outputs.append(state)
        return torch.stack(outputs), state, None


def models(p: int = 100, n_iterations: int = 9, scoring_hidden: int = 256, n_tuples: int = 3,
           gru_scoring_hidden: int = 64) -> dict[str, Callable[[], nn.Module]]:
    """Builders of the compared models (built lazily: each one is measured, then dropped)."""
    rrnn = dict(hidden_size=p, n_tuples=n_tuples, n_iterations=n_iterations,
                scoring_hidden=scoring_hidden, return_traces=False)
    return {
        "rrnn_soft": lambda: RRNN(mode="soft", **rrnn),
        "rrnn_straight_through": lambda: RRNN(mode="straight-through", **rrnn),
        "rrnn_soft_recompute": lambda: RRNN(mode="soft", recompute=True, **rrnn),
        "rrnn_soft_sample_norm": lambda: RRNN(mode="soft", candidate_norm="sample", tau_units="std", **rrnn),
        "rrnn_soft_reading": lambda: RRNN(mode="soft", sync_free=False, **rrnn),
        "rrnn_soft_sync_free": lambda: RRNN(mode="soft", sync_free=True, **rrnn),
        "rrnn_recipe": lambda: recipe_search(True, **rrnn),
        "rrnn_recipe_scored": lambda: recipe_search(False, **rrnn),
        "rrnn_gru": lambda: RRNNGRU(p, n_tuples, scoring_hidden=gru_scoring_hidden, return_traces=False),
        "frozen_gru": lambda: FrozenRNN(freeze(target("gru"), hidden_size=p)),
        "gru_cell_loop": lambda: CellLoop(nn.GRUCell(p, p)),
        "torch_gru": lambda: GRUBaseline(p),
    }


def recipe_search(constant_alpha: bool, **rrnn: Any) -> RRNN:
    """The discovery recipe's search (:data:`cellgraph.experiment.presets.RECIPES`) with
    ``alpha``'s output layer zero, as its warm start leaves it; ``constant_alpha``: skipped."""
    model = RRNN(mode="straight-through", structure_term=True, exclusion="slot", constant_alpha=constant_alpha,
                 **rrnn)
    with torch.no_grad():
        for net in model.cell.scoring:
            net[-1].weight.zero_()
            net[-1].bias.zero_()
    return model


def training_step(model: nn.Module, input: Tensor) -> Callable[[], None]:
    """One forward and backward pass of ``model`` on ``input (T, B, p)`` (loss: mean square
    of the outputs); gradients are dropped before each pass."""

    def step() -> None:
        for param in model.parameters():
            param.grad = None
        output = model(input)[0]
        output.square().mean().backward()

    return step


def compare_steps(p: int = 100, batch: int = 16, steps: int = 20, n_iterations: int = 9,
                  scoring_hidden: int = 256, repeat: int = 3, seed: int = 0,
                  names: tuple[str, ...] | None = None, device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """Time (best of ``repeat``), peak memory and the operations dispatched
    (:func:`~cellgraph.benchmarks.measure.dispatched_ops`) of one training step of each model
    on ``device``, the time per compute operation, and the ratios to ``torch_gru``."""
    torch.manual_seed(seed)
    input = torch.randn(steps, batch, p).to(device)
    builders = models(p, n_iterations, scoring_hidden)
    rows: dict[str, dict[str, float]] = {}
    for name in names or tuple(builders):
        torch.manual_seed(seed)
        step = training_step(builders[name]().to(device), input)
        rows[name] = {"time_s": best_time(step, repeat=repeat, device=device),
                      "peak_bytes": peak_memory(step, device), "ops": dispatched_ops(step, device)}
        rows[name]["time_per_compute_op_us"] = rows[name]["time_s"] / max(rows[name]["ops"]["compute"], 1) * 1e6
    base = rows["torch_gru"]
    for row in rows.values():
        row["time_vs_torch_gru"] = row["time_s"] / base["time_s"]
        row["memory_vs_torch_gru"] = row["peak_bytes"] / max(base["peak_bytes"], 1)
    return {
        "config": {"p": p, "batch": batch, "steps": steps, "n_iterations": n_iterations,
                   "scoring_hidden": scoring_hidden, "trainable_tuples": 3, "dtype": "float32"},
        "models": rows,
    }
