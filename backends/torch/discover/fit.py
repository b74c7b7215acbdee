"""Train a fixed cell from scratch on the planted regression task, several restarts in one
batched program (docs/discover.md, *The evaluator*).

The student is the cell frozen into a recurrent module (:func:`~cellgraph.backends.torch.models.freeze.freeze`,
every trainable tuple drawn uniformly in ``(-1/sqrt(p), 1/sqrt(p))``) with a linear readout:

.. math::
    h_t = \\mathrm{cell}(x_t, h_{t-1}), \\qquad \\hat y_t = V h_t + c,

trained by Adam under a one-cycle learning rate on the mean squared error to the targets
(``1 - R^2`` on the train split's scale, the targets being standardised there). A cell's
value is the *best of its restarts*: a cell's loss surface has poor local minima that a
restart leaves (measured on MGU's own structure: 2 of 16 restarts stop near 0.09 where the
rest reach 1e-4), and the search must not discard the teacher's structure for one bad draw.

The restarts train at once: their parameters are stacked and one step runs
``vmap(grad(loss))`` over them (``torch.func``), which costs far less than a loop of restarts
because a planted cell's tensors are small and the step is dominated by per-operation
overhead. Each restart's gradient is clipped to norm ``clip`` on its own.

Shapes: ``inputs`` ``(n, T, p)``, ``targets`` ``(n, T, n_out)`` (the splits of
:class:`~cellgraph.data.planted_values.PlantedValues`); the module runs ``(T, B, p)``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, stack_module_state, vmap

from cellgraph.backends.torch.models.freeze import FrozenRNN, freeze
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.planted_values import PlantedValues
from cellgraph.errors import CellGraphError

__all__ = ["FitSettings", "FitResult", "Student", "fit_cell"]


@dataclass(frozen=True)
class FitSettings:
    """How a candidate trains: ``epochs`` over the train split in batches of ``batch_size``,
    Adam at peak learning rate ``lr`` (one cycle), each restart's gradient clipped to ``clip``,
    ``restarts`` independent initialisations trained at once."""

    epochs: int = 20
    restarts: int = 4
    lr: float = 3e-2
    batch_size: int = 50
    clip: float = 1.0

    def __post_init__(self) -> None:
        if min(self.epochs, self.restarts, self.batch_size) < 1 or self.lr <= 0 or self.clip <= 0:
            raise CellGraphError(f"fit settings must be positive, got {self}")


@dataclass(frozen=True)
class FitResult:
    """Per restart, the validation and test mean squared errors; ``best`` the restart with the
    lowest validation error; ``seconds`` the process CPU time the fit took."""

    val: tuple[float, ...]
    test: tuple[float, ...]
    seconds: float

    @property
    def best(self) -> int:
        return min(range(len(self.val)), key=lambda k: (self.val[k], k))

    @property
    def loss(self) -> float:
        """The cell's value: the best restart's validation error (NaN-free: a diverged restart
        counts as infinite)."""
        return self.val[self.best]

    @property
    def test_loss(self) -> float:
        return self.test[self.best]


class Student(nn.Module):
    """A frozen cell over the sequence and its linear readout.

    Shape:
        - input: ``(T, B, p)``; output ``(T, B, n_out)``.
    """

    def __init__(self, cell: CellGraph | MultiCell, layout: Layout, p: int, n_out: int) -> None:
        super().__init__()
        self.rnn = FrozenRNN(freeze(cell, layout=layout, hidden_size=p))
        self.readout = nn.Linear(p, n_out)

    def forward(self, input: Tensor) -> Tensor:
        return self.readout(self.rnn(input)[0])


def fit_cell(cell: CellGraph | MultiCell, layout: Layout, data: PlantedValues, settings: FitSettings = FitSettings(),
             seed: int = 0, device: str | torch.device = "cpu") -> FitResult:
    """Train ``settings.restarts`` students of ``cell`` from scratch on ``data``'s train split
    (restart ``k`` initialised from seed ``(seed, k)``, on the CPU whatever the ``device``, so a
    fit starts from the same weights everywhere) and score each on the val and test splits;
    the data and the training live on ``device``."""
    start = time.process_time()
    split = {s: (torch.as_tensor(data.inputs[s], dtype=torch.float32, device=device).transpose(0, 1),
                 torch.as_tensor(data.targets[s], dtype=torch.float32, device=device).transpose(0, 1))
             for s in data.inputs}
    students = []
    for k in range(settings.restarts):
        torch.manual_seed(seed * 1_000_003 + k)
        students.append(Student(cell, layout, data.p, data.n_out).to(device))
    params, buffers = stack_module_state(students)
    for value in params.values():  # torch.func computes the gradients: no graph is needed outside it
        value.requires_grad_(False)
    base = copy.deepcopy(students[0]).to("meta")

    def mse(p: dict, b: dict, x: Tensor, y: Tensor) -> Tensor:
        return ((functional_call(base, (p, b), (x,)) - y) ** 2).mean()

    step = vmap(grad_and_value(mse), in_dims=(0, 0, None, None))
    _train(params, buffers, step, *split["train"], settings, seed)
    with torch.no_grad():
        score = vmap(mse, in_dims=(0, 0, None, None))
        val, test = (_finite(score(params, buffers, *split[s])) for s in ("val", "test"))
    return FitResult(val, test, time.process_time() - start)


def _train(params: dict[str, Tensor], buffers: dict[str, Tensor], step, x: Tensor, y: Tensor,
           settings: FitSettings, seed: int) -> None:
    """Adam with a one-cycle schedule over the stacked ``params``; ``x`` ``(T, n, p)``."""
    n = x.shape[1]
    per_epoch = -(-n // settings.batch_size)
    optimizer = torch.optim.Adam(params.values(), lr=settings.lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=settings.lr,
                                                   total_steps=settings.epochs * per_epoch)
    order = torch.Generator().manual_seed(seed)
    for _ in range(settings.epochs):
        perm = torch.randperm(n, generator=order).to(x.device)
        for i in range(0, n, settings.batch_size):
            idx = perm[i:i + settings.batch_size]
            grads, _ = step(params, buffers, x[:, idx], y[:, idx])
            _clip_each(grads, settings.clip)
            for name, value in params.items():
                value.grad = grads[name]
            optimizer.step()
            schedule.step()


def _clip_each(grads: dict[str, Tensor], clip: float) -> None:
    """Scale each restart's gradient (dimension 0 of every tensor) to norm at most ``clip``;
    a non-finite gradient becomes zero, so one diverged restart leaves the others alone."""
    k = next(iter(grads.values())).shape[0]
    norm = torch.sqrt(sum((g.reshape(k, -1) ** 2).sum(1) for g in grads.values()))
    scale = torch.where(torch.isfinite(norm), torch.clamp(clip / (norm + 1e-6), max=1.0), torch.zeros_like(norm))
    for g in grads.values():
        g.mul_(scale.view(-1, *[1] * (g.dim() - 1))).nan_to_num_(0.0, 0.0, 0.0)


def _finite(values: Tensor) -> tuple[float, ...]:
    return tuple(float(v) if torch.isfinite(v) else float("inf") for v in values)
