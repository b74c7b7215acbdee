r"""One training epoch of :func:`~cellgraph.backends.torch.runs.train.train` (paper, Sec. 5 and
Appendix "Details of Experimental Study"; docs/paper-notes.md, *Eq. 5's reduction*).

:class:`Objective` computes Eq. 5 of one batch as one module (so that DistributedDataParallel
sees every use of a parameter); :class:`EpochLoop` runs the batches of an epoch in its seeded
order (:func:`epoch_order`), each step forward, backward, clip and update, skips a step whose
loss or gradient norm is not finite (:class:`TrainingStopped` after ``max_bad_steps`` in a
row), keeps the running sums on the device (:class:`EpochProgress`, which a mid-epoch
checkpoint saves) and gives the epoch's record. RRNN-GRU alternates its phases
(:func:`phase_of`): tuples / scoring network every ``alternate_every`` epochs. Under
``torchrun`` each rank trains its share of every global batch (:func:`rank_shares`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch import Tensor, nn

from cellgraph.backends.torch.training.batches import batches, chunks, device_of, host, metric_value, task_loss
from cellgraph.backends.torch.runtime.device import autocast
from cellgraph.backends.torch.training.distributed import Distributed, share
from cellgraph.backends.torch.training.loss import TERMS, LossTerms, RRNNLoss
from cellgraph.backends.torch.training.task import TaskModel
from cellgraph.backends.torch.training.trainstate import TrainState
from cellgraph.data.datasets import Dataset
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig
from cellgraph.progress import progress

__all__ = ["Log", "TrainingStopped", "epoch_order", "tau_at", "rank_shares", "phase_of", "set_phase", "Step",
           "Objective", "EpochProgress", "EpochLoop"]

#: Where training's summaries and warnings go (``print`` by default; nothing on ranks > 0).
Log = Callable[[str], None]


class TrainingStopped(CellGraphError):
    """The run stopped on ``max_bad_steps`` non-finite losses in a row; the run folder then
    holds :data:`~cellgraph.experiment.runs.STOPPED` (why, at which epoch, the last good
    epoch) until it is resumed."""


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The training-sample order of ``epoch``: a pure function of ``(seed, epoch)``."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def tau_at(config: TrainConfig, progress: float) -> float:
    """The softmax temperature after ``progress`` (0..1) of training: ``tau``, or with
    ``tau_end > 0`` annealed geometrically, ``tau (tau_end / tau) ** progress``."""
    if not config.tau_end:
        return config.tau
    return config.tau * (config.tau_end / config.tau) ** min(max(progress, 0.0), 1.0)


def rank_shares(order: np.ndarray, size: int, dist: Distributed) -> Iterator[tuple[np.ndarray, float]]:
    """This rank's part ``batch[rank::world_size]`` of each global batch of ``order`` and its
    loss factor (:func:`~cellgraph.backends.torch.training.distributed.share`). A rank left without a
    sample (a short last batch) computes the batch's first sample with factor 0, so that its
    DistributedDataParallel step stays in step with the others and adds nothing."""
    for batch in chunks(order, size):
        mine = dist.shard(batch)
        yield (mine, share(len(mine), len(batch), dist.world_size)) if len(mine) else (batch[:1], 0.0)


def phase_of(config: TrainConfig, epoch: int) -> str:
    """``all``, or RRNN-GRU's alternating ``tuples`` / ``scoring`` phase of ``epoch``."""
    if config.model != "rrnn-gru" or not config.alternate_every:
        return "all"
    return ("tuples", "scoring")[((epoch - 1) // config.alternate_every) % 2]


def set_phase(model: TaskModel, phase: str) -> None:
    if phase == "all":
        return
    for p in model.tuple_parameters():
        p.requires_grad_(phase == "tuples")
    for p in model.scoring_parameters():
        p.requires_grad_(phase == "scoring")


@dataclass
class Step:
    """What one training step computed on this rank: ``loss`` is Eq. 5 times the rank's
    factor (:func:`rank_shares`), the rest is unscaled."""

    loss: Tensor
    terms: LossTerms
    ce: Tensor
    count: int
    right: Tensor
    choices: Tensor | None


class Objective(nn.Module):
    """Eq. 5 of one batch as one module, so that DistributedDataParallel sees inside
    ``forward`` every use of a parameter (the L2 term's too) and returns nothing else that
    depends on them. Call: ``(tokens, targets, factor) -> Step``. With ``amp`` (``bf16``) the
    model runs under autocast and the loss is computed in float32 from its outputs."""

    def __init__(self, model: TaskModel, loss_fn: RRNNLoss, targets, amp: str = "none",
                 l2_embedding: bool = False) -> None:
        super().__init__()
        self.model, self.loss_fn, self.targets, self.amp = model, loss_fn, targets, amp
        self.l2_embedding = l2_embedding

    def forward(self, tokens: Tensor, gold: Tensor, factor: float) -> Step:
        model, targets = self.model, self.targets
        with autocast(tokens.device, self.amp):
            logits, traces = model(tokens)
        if self.amp != "none":
            logits = logits.float()
            traces = traces and [[trace.to(dtype=torch.float32) for trace in step] for step in traces]
        ce, count, right = task_loss(logits, gold)
        vectors = targets(model, tokens, traces) if targets is not None else None
        terms = self.loss_fn(ce, traces or (), vectors, targets.trees if targets is not None else (),
                             model.penalized_parameters(self.l2_embedding))
        choices = model.choices(traces) if model.model_name == "rrnn-gru" else None
        return Step(terms.total * factor, terms, ce.detach().sum().double() / count, count, right, choices)


@dataclass
class EpochProgress:
    """Where an epoch is and its running sums (on the device, read once after the epoch):
    what a mid-epoch checkpoint saves (:meth:`saved`) and a resumed run continues from."""

    step: int = 0  # the steps done
    nats: float | Tensor = 0.0
    correct: float | Tensor = 0.0
    n: int = 0
    good: int = 0
    skipped: int = 0
    bad_in_row: int = 0
    sums: dict[str, float | Tensor] = field(default_factory=lambda: dict.fromkeys((*TERMS, "total"), 0.0))
    choices: Tensor | None = None  # rrnn-gru: the tuple choices of the epoch's samples

    def saved(self, seconds: float) -> dict[str, Any]:
        """The plain-data form, with ``seconds`` spent so far."""
        nats, correct, *sums = host([self.nats, self.correct, *self.sums.values()])
        return {"step": self.step, "seconds": seconds, "nats": nats, "correct": correct, "n": self.n,
                "good": self.good, "skipped": self.skipped, "bad_in_row": self.bad_in_row,
                "sums": dict(zip(self.sums, sums)), "choices": self.choices}

    @staticmethod
    def of(saved: dict[str, Any] | None, choices: Tensor | None) -> "EpochProgress":
        """A new epoch (``saved`` None, with the empty ``choices``), or one resumed (its
        ``seconds`` are the caller's)."""
        if saved is None:
            return EpochProgress(choices=choices)
        restored = saved["choices"]
        fields = {k: v for k, v in saved.items() if k != "seconds"}
        return EpochProgress(**{**fields, "choices": None if restored is None else restored.to(choices.device)})


class EpochLoop:
    """One training epoch: the batches in the epoch's seeded order, each step forward,
    backward, clip and update; a non-finite step is skipped and ``config.max_bad_steps`` of
    them in a row stop the run; running sums stay on the device; a mid-epoch checkpoint every
    ``config.checkpoint_minutes`` (single process only). :meth:`run` gives the epoch's record.
    """

    def __init__(self, model: TaskModel, dataset: Dataset, config: TrainConfig,
                 optimizer: torch.optim.Optimizer, loss_fn: RRNNLoss, targets, dist: Distributed,
                 log: Log) -> None:
        self.model, self.dataset, self.config, self.optimizer = model, dataset, config, optimizer
        self.loss_fn, self.targets, self.dist, self.log = loss_fn, targets, dist, log
        self.params = list(model.parameters())
        self.clip = config.clip if config.clip > 0 else math.inf

    def run(self, state: TrainState, started: float, resumed: dict[str, Any] | None = None,
            save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train epoch ``state.epoch + 1`` (from the step of the mid-epoch checkpoint
        ``resumed``, when given) and return its record. ``started``: the
        ``time.perf_counter()`` the epoch counts from (earlier by the time a resumed epoch had
        already taken). ``save`` receives the :class:`EpochProgress` state."""
        model, config, dist = self.model, self.config, self.dist
        epoch = state.epoch + 1
        phase = phase_of(config, epoch)
        set_phase(model, phase)
        model.train()
        # after set_phase: DDP syncs what trains; every step reads every parameter (the embedding
        # through the inputs, the rest through the L2 term too)
        objective = dist.wrap(Objective(model, self.loss_fn, self.targets, config.amp, config.l2_embedding),
                              find_unused=not self.loss_fn.weights["l2"])
        parts, factors = zip(*rank_shares(epoch_order(config.seed, epoch, len(self.dataset.train)),
                                      config.batch_size, dist))
        ep = EpochProgress.of(resumed, self._empty_choices())
        saved_at = time.perf_counter()
        every = 60 * config.checkpoint_minutes if save is not None and not dist.active else math.inf
        bar = progress(len(parts), f"epoch {epoch}", dist.writes, initial=ep.step)
        loaded = batches(self.dataset.train, parts[ep.step:], device_of(model))
        for step, ((index, tokens, gold), factor) in enumerate(zip(loaded, factors[ep.step:]), ep.step + 1):
            model.set_tau(tau_at(config, (state.epoch + (step - 1) / len(parts)) / config.epochs))
            out = objective(tokens, gold, factor)
            if ep.choices is not None and factor:
                ep.choices[index] = out.choices.to(ep.choices.dtype)
            finite = self._update(out)
            bar.update()
            ep.step = step
            if not finite:
                self._skip(ep, epoch, out, bar)
                continue
            ep.good, ep.bad_in_row = ep.good + 1, 0
            if factor:  # not a stand-in sample (rank_shares)
                _accumulate(ep, out, factor)
            self._show(bar, ep)
            if time.perf_counter() - saved_at >= every and step < len(parts):
                save(ep.saved(time.perf_counter() - started))
                saved_at = time.perf_counter()
        bar.close()
        return self._record(ep, state, epoch, phase)

    def _empty_choices(self) -> Tensor | None:
        """rrnn-gru: ``(samples, steps, choosing nodes)`` tuple choices, -1 until made."""
        if self.model.model_name != "rrnn-gru":
            return None
        shape = (len(self.dataset.train), self.dataset.seq_len, len(self.model.core.cell.choosing_nodes))
        return torch.full(shape, -1, dtype=torch.int16, device=device_of(self.model))

    def _update(self, out: Step) -> bool:
        """Backward, clip and, where every rank's loss and gradient norm are finite, the
        optimizer step (jointly: every rank updates or none); the step's one device read."""
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()  # every rank: a non-finite loss gives non-finite gradients (DDP averages them)
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        finite = self.dist.all(torch.isfinite(out.loss) & torch.isfinite(norm))
        if finite:
            self.optimizer.step()
        return finite

    def _skip(self, ep: EpochProgress, epoch: int, out: Step, bar) -> None:
        """Count a skipped step, say so, and stop the run after too many in a row."""
        ep.skipped, ep.bad_in_row = ep.skipped + 1, ep.bad_in_row + 1
        value = float(out.terms.total.detach())
        where = f" on rank 0 of {self.dist.world_size}" if self.dist.active else ""
        self.log(f"epoch {epoch}, step {ep.step}: non-finite loss or gradient ({value}{where}); "
                 f"step skipped ({ep.bad_in_row} in a row)")
        if ep.bad_in_row >= self.config.max_bad_steps:
            bar.close()
            raise TrainingStopped(
                f"training stopped at epoch {epoch}, step {ep.step}: {ep.bad_in_row} non-finite losses "
                f"in a row (max_bad_steps={self.config.max_bad_steps}); the last good checkpoint "
                f"(epoch {epoch - 1}) is intact")

    def _show(self, bar, ep: EpochProgress) -> None:
        """The running loss and metric on the progress bar (read from the device only when shown)."""
        if bar.disable or not ep.n:
            return
        total, nats, correct = host([ep.sums["total"], ep.nats, ep.correct])
        metric = self.dataset.metric
        bar.set_postfix(loss=f"{total / ep.good:.4f}",
                        **{metric: f"{metric_value(self.dataset, nats / ep.n, correct, ep.n):.4f}"})

    def _record(self, ep: EpochProgress, state: TrainState, epoch: int, phase: str) -> dict[str, Any]:
        """The epoch's record: train metric, phase, skipped steps, tau reached, each weighted
        term of Eq. 5 as its mean over the good steps, and rrnn-gru's ``n_e``; ``state`` takes
        the epoch's choices and skipped steps."""
        model, config, dist, dataset = self.model, self.config, self.dist, self.dataset
        # over the ranks: the factors make sum / world_size each global batch's mean (share())
        nats, correct, n, *totals = dist.sum(host([ep.nats, ep.correct, ep.n, *ep.sums.values()]))
        sums = {key: total / dist.world_size for key, total in zip(ep.sums, totals)}
        record: dict[str, Any] = {
            "epoch": epoch, f"train_{dataset.metric}": metric_value(dataset, nats / n, correct, n) if n else None,
            "phase": phase, "bad_steps": ep.skipped,
        }
        tau = tau_at(config, epoch / config.epochs)
        if model.structured and config.tau_end:
            record["tau"] = tau
        model.set_tau(tau)  # evaluation: the temperature reached
        for key in TERMS:
            record[f"loss_{key}"] = sums[key] / ep.good if ep.good and self.loss_fn.weights[key] else None
        record["loss_total"] = sums["total"] / ep.good if ep.good else None
        if ep.choices is not None:
            choices = dist.max(ep.choices)  # each rank filled its own samples' rows, -1 elsewhere
            record["n_e"] = None if state.choices is None else int((choices != state.choices).sum())
            state.choices = choices
        state.bad_steps += ep.skipped
        return record


def _accumulate(ep: EpochProgress, out: Step, factor: float) -> None:
    """Add a step's metrics and weighted loss terms (on the device) to the epoch's sums."""
    ep.nats, ep.correct, ep.n = ep.nats + out.ce * out.count, ep.correct + out.right, ep.n + out.count
    for key in ep.sums:
        value = out.terms.total.detach() if key == "total" else getattr(out.terms, key)
        if value is not None:
            ep.sums[key] = ep.sums[key] + factor * value.double()
