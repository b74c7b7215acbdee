r"""Training, evaluation, structure logs and cell export of RRNN, RRNN-GRU and the GRU/LSTM
baselines (paper, Sec. 5 and Appendix "Details of Experimental Study"; docs/paper-notes.md,
*Eq. 5's reduction*, *RRNN-GRU: where the weights go* and *Experiments: data protocol*).

:func:`train` minimises Eq. 5 with Adam,

.. math::
    L = \tfrac1B \sum_b \Big( \lambda_{task} \sum_t CE(y_{b,t}, q_{b,t})
      + \lambda_{td} \sum_{t,i} \min_{Iso} TD + \lambda_{margin} \sum_{t,i,k} m(N^t_{k,i}) \Big)
      + \lambda_{l2} \sum \|\phi\|^2

(the baselines: ``lambda_td = lambda_margin = 0``; a classification task has one CE term per
sequence), with gradient clipping, RRNN-GRU's alternating
phases (tuples / scoring network every ``alternate_every`` epochs; embedding and output layer
always train), early stopping on the validation metric, and a run folder
(:mod:`cellgraph.experiment.runs`): ``config.json``, ``env.json``, ``metrics.jsonl`` (keys of
:mod:`cellgraph.experiment.runlog`), ``structures/epoch_EEE.json``, ``checkpoints/{best,last}.pt``,
``final.json``.

Several processes (``torchrun``, :mod:`cellgraph.backends.torch.distributed`): each rank trains
its share of every global batch of ``batch_size`` samples through DistributedDataParallel, the
decisions (skip a step, stop early) are taken jointly, the epoch's train metrics and N_e
choices are combined over the ranks, validation is split over them, and rank 0 alone writes
the run folder and computes ``final.json``.

Faults. The data order of epoch ``e`` is a pure function of ``(seed, e)`` and ``last.pt``
holds the model, the optimizer, the RNG states, the early-stopping state and the previous
epoch's tuple choices, so ``train(..., resume=True)`` after a kill continues from the last
finished epoch and ends with the same final metrics as an uninterrupted run (CPU). It also
holds the run's CPU seconds so far, so ``final.json``'s ``cpu_seconds`` counts every process of
the run (rank 0's), less the work a kill threw away after the last checkpoint. A step
whose loss or gradient norm is not finite is skipped (no update) and counted; after
``max_bad_steps`` in a row the run stops (:class:`TrainingStopped`), ``last.pt`` untouched.

Evaluation (validation, test, structure logs, export) runs the search in
``config.eval_mode`` (``hard`` by default:
docs/paper-notes.md, *Scoring, choice modes and the margin*).
"""

from __future__ import annotations

import math
import random
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch import Tensor, nn

from cellgraph.algorithms.shape import shape_form
from cellgraph.backends.torch.checkpoint import load_latest, save_checkpoint
from cellgraph.backends.torch.device import autocast, resolve_device
from cellgraph.backends.torch.distributed import Distributed, share
from cellgraph.backends.torch.logger import check_logger, open_logger
from cellgraph.backends.torch.loss import TERMS, WEIGHT_KEYS, LossTerms, RRNNLoss
from cellgraph.backends.torch.batches import batches, chunks, device_of, host, metric_value, task_loss
from cellgraph.backends.torch.evaluation import MODES_EVALUATED, both_searches, evaluate, validation
from cellgraph.backends.torch.structures import structure_log, structure_recovery
from cellgraph.backends.torch.task import SelfTargets, TaskModel, TeacherTargets, load_teacher
from cellgraph.backends.torch.warmstart import warm_start
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.datadir import data_sha256, run_data_dir
from cellgraph.data.datasets import Dataset, Split, load_dataset
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig, load_run_config, resolved_td_match
from cellgraph.experiment.runlog import METRICS
from cellgraph.experiment.runs import RunDir
from cellgraph.files import write_json
from cellgraph.progress import progress

__all__ = [
    "TrainingStopped", "Distributed", "epoch_order", "task_loss", "load_data", "build_model",
    "evaluate", "shape_form", "train", "evaluate_run", "export_cell",
]

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


def _better(task: str, new: float, best: float | None) -> bool:
    if best is None:
        return True
    return new < best if METRICS[task][1] else new > best


# --- data and model --------------------------------------------------------------------


def _head(split: Split, n: int) -> Split:
    if not n or n >= len(split):
        return split
    return Split(split.inputs[:n], split.targets[:n], split.origin[:n], split.source)


def load_data(config: TrainConfig) -> Dataset:
    """The task's data set (seed ``data_seed``), cut to ``max_train`` / ``max_eval`` sequences.

    ``seq_len`` applies to every task but ``sst`` (padded to its longest training sentence)."""
    options: dict[str, Any] = {"seed": config.data_seed}
    if config.task != "sst":
        options["seq_len"] = config.seq_len
    if config.task in ("wiki", "wiki5k"):
        options["wiki_cleaning"] = config.wiki_cleaning
    data = load_dataset(config.task, config.data_dir or None, **options)
    return Dataset(data.name, data.task, data.metric, data.vocab, _head(data.train, config.max_train),
                   _head(data.val, config.max_eval), _head(data.test, config.max_eval), data.classes,
                   data.padding_idx, data.seed, data.info, data.teacher)


def build_model(config: TrainConfig, dataset: Dataset, pretrained: bool = True) -> TaskModel:
    """A :class:`TaskModel` for ``dataset``; ``pretrained`` loads ``config.glove`` if set."""
    embedding = None
    if pretrained and config.glove:
        from cellgraph.data.glove import load_glove

        embedding = load_glove(config.glove, dataset.vocab, config.hidden_size, config.seed,
                               dataset.padding_idx).vectors
    states = ("h",) if config.teacher else None
    return TaskModel(config, len(dataset.vocab), dataset.n_classes, dataset.per_step,
                     dataset.padding_idx, states, embedding)


def _targets(config: TrainConfig, dataset: Dataset,
             device: torch.device | str = "cpu") -> SelfTargets | TeacherTargets | None:
    if config.model not in ("rrnn", "rrnn-gru") or not config.lambda_td:
        return None
    if config.teacher:
        return TeacherTargets.from_run(config.teacher, config, len(dataset.vocab), dataset.n_classes,
                                       dataset.per_step, dataset.padding_idx, device)
    return SelfTargets(config.target)


def _loss(config: TrainConfig) -> RRNNLoss:
    structured = config.model in ("rrnn", "rrnn-gru")
    return RRNNLoss(config.lambda_task, config.lambda_td if structured else 0.0,
                    config.lambda_margin if structured else 0.0, config.lambda_l2, config.margin, config.iso,
                    resolved_td_match(config))


def _shares(order: np.ndarray, size: int, dist: Distributed) -> Iterator[tuple[np.ndarray, float]]:
    """This rank's part ``batch[rank::world_size]`` of each global batch of ``order`` and its
    loss factor (:func:`~cellgraph.backends.torch.distributed.share`). A rank left without a
    sample (a short last batch) computes the batch's first sample with factor 0, so that its
    DistributedDataParallel step stays in step with the others and adds nothing."""
    for batch in chunks(order, size):
        mine = dist.shard(batch)
        yield (mine, share(len(mine), len(batch), dist.world_size)) if len(mine) else (batch[:1], 0.0)


# --- training --------------------------------------------------------------------------


@dataclass
class _State:
    """What :func:`train` carries from epoch to epoch (and in ``last.pt``).

    ``cpu_before``: the CPU seconds (user + system, all threads) of the run's earlier
    processes, up to the checkpoint this one resumed from (None where that checkpoint predates
    the count); ``cpu_start``: :func:`time.process_time` when this process began the run."""

    epoch: int = 0
    best: float | None = None
    best_epoch: int = 0
    bad_epochs: int = 0
    bad_steps: int = 0
    choices: Tensor | None = None
    cpu_before: float | None = 0.0
    cpu_start: float = field(default_factory=time.process_time)

    def cpu_seconds(self) -> float | None:
        """The run's CPU seconds so far, over all its processes (None: not known)."""
        return None if self.cpu_before is None else self.cpu_before + time.process_time() - self.cpu_start

    def early(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "bad_epochs": self.bad_epochs,
                "bad_steps": self.bad_steps}


def _rng_state(device: torch.device) -> dict[str, Any]:
    """Python's, numpy's and torch's CPU generator states, and the GPU's when training on one."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore :func:`_rng_state` (loaded onto any device); a GPU state only on a GPU."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _phase(config: TrainConfig, epoch: int) -> str:
    """``all``, or RRNN-GRU's alternating ``tuples`` / ``scoring`` phase of ``epoch``."""
    if config.model != "rrnn-gru" or not config.alternate_every:
        return "all"
    return ("tuples", "scoring")[((epoch - 1) // config.alternate_every) % 2]


def _set_phase(model: TaskModel, phase: str) -> None:
    if phase == "all":
        return
    for p in model.tuple_parameters():
        p.requires_grad_(phase == "tuples")
    for p in model.scoring_parameters():
        p.requires_grad_(phase == "scoring")


@dataclass
class _Step:
    """What one training step computed on this rank: ``loss`` is Eq. 5 times the rank's
    factor (:func:`_shares`), the rest is unscaled."""

    loss: Tensor
    terms: LossTerms
    ce: Tensor
    count: int
    right: Tensor
    choices: Tensor | None


class _Objective(nn.Module):
    """Eq. 5 of one batch as one module, so that DistributedDataParallel sees inside
    ``forward`` every use of a parameter (the L2 term's too) and returns nothing else that
    depends on them. Call: ``(tokens, targets, factor) -> _Step``. With ``amp`` (``bf16``) the
    model runs under autocast and the loss is computed in float32 from its outputs."""

    def __init__(self, model: TaskModel, loss_fn: RRNNLoss, targets, amp: str = "none",
                 l2_embedding: bool = False) -> None:
        super().__init__()
        self.model, self.loss_fn, self.targets, self.amp = model, loss_fn, targets, amp
        self.l2_embedding = l2_embedding

    def forward(self, tokens: Tensor, gold: Tensor, factor: float) -> _Step:
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
        return _Step(terms.total * factor, terms, ce.detach().sum().double() / count, count, right, choices)


@dataclass
class _Epoch:
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
    def of(saved: dict[str, Any] | None, choices: Tensor | None) -> "_Epoch":
        """A new epoch (``saved`` None, with the empty ``choices``), or one resumed (its
        ``seconds`` are the caller's)."""
        if saved is None:
            return _Epoch(choices=choices)
        restored = saved["choices"]
        fields = {k: v for k, v in saved.items() if k != "seconds"}
        return _Epoch(**{**fields, "choices": None if restored is None else restored.to(choices.device)})


class _EpochLoop:
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

    def run(self, state: _State, started: float, resumed: dict[str, Any] | None = None,
            save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train epoch ``state.epoch + 1`` (from the step of the mid-epoch checkpoint
        ``resumed``, when given) and return its record. ``started``: the
        ``time.perf_counter()`` the epoch counts from (earlier by the time a resumed epoch had
        already taken). ``save`` receives the :class:`_Epoch` state."""
        model, config, dist = self.model, self.config, self.dist
        epoch = state.epoch + 1
        phase = _phase(config, epoch)
        _set_phase(model, phase)
        model.train()
        # after _set_phase: DDP syncs what trains; every step reads every parameter (the embedding
        # through the inputs, the rest through the L2 term too)
        objective = dist.wrap(_Objective(model, self.loss_fn, self.targets, config.amp, config.l2_embedding),
                              find_unused=not self.loss_fn.weights["l2"])
        parts, factors = zip(*_shares(epoch_order(config.seed, epoch, len(self.dataset.train)),
                                      config.batch_size, dist))
        ep = _Epoch.of(resumed, self._empty_choices())
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
            if factor:  # not a stand-in sample (_shares)
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

    def _update(self, out: _Step) -> bool:
        """Backward, clip and, where every rank's loss and gradient norm are finite, the
        optimizer step (jointly: every rank updates or none); the step's one device read."""
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()  # every rank: a non-finite loss gives non-finite gradients (DDP averages them)
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        finite = self.dist.all(torch.isfinite(out.loss) & torch.isfinite(norm))
        if finite:
            self.optimizer.step()
        return finite

    def _skip(self, ep: _Epoch, epoch: int, out: _Step, bar) -> None:
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

    def _show(self, bar, ep: _Epoch) -> None:
        """The running loss and metric on the progress bar (read from the device only when shown)."""
        if bar.disable or not ep.n:
            return
        total, nats, correct = host([ep.sums["total"], ep.nats, ep.correct])
        metric = self.dataset.metric
        bar.set_postfix(loss=f"{total / ep.good:.4f}",
                        **{metric: f"{metric_value(self.dataset, nats / ep.n, correct, ep.n):.4f}"})

    def _record(self, ep: _Epoch, state: _State, epoch: int, phase: str) -> dict[str, Any]:
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


def _accumulate(ep: _Epoch, out: _Step, factor: float) -> None:
    """Add a step's metrics and weighted loss terms (on the device) to the epoch's sums."""
    ep.nats, ep.correct, ep.n = ep.nats + out.ce * out.count, ep.correct + out.right, ep.n + out.count
    for key in ep.sums:
        value = out.terms.total.detach() if key == "total" else getattr(out.terms, key)
        if value is not None:
            ep.sums[key] = ep.sums[key] + factor * value.double()


def _checkpoint(model: TaskModel, optimizer: torch.optim.Optimizer, state: _State,
                epoch: dict[str, Any] | None = None) -> dict[str, Any]:
    """``last.pt``: after ``state.epoch`` finished epochs and, within the next one, the
    :meth:`_Epoch.saved` state ``epoch`` (None at an epoch's end)."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": state.epoch,
            "rng": _rng_state(device_of(model)), "early": state.early(), "choices": state.choices,
            "within_epoch": epoch, "cpu_seconds": state.cpu_seconds()}


def _restore(model: TaskModel, optimizer: torch.optim.Optimizer, ckpt: dict[str, Any], cpu_start: float) -> _State:
    """Continue from ``ckpt``, loaded onto the CPU whatever device wrote it: ``load_state_dict``
    moves the model's and the optimizer's state to the parameters' device but leaves Adam's
    step counters where they were loaded; on the CPU, as a new Adam keeps them, not on a GPU,
    where reading them would cost a device sync per step."""
    device = device_of(model)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    _set_rng_state(ckpt["rng"], device)
    early, choices = ckpt["early"], ckpt["choices"]
    return _State(ckpt["epoch"], early["best"], early["best_epoch"], early["bad_epochs"],
                  early["bad_steps"], None if choices is None else choices.to(device),
                  ckpt.get("cpu_seconds"), cpu_start)


def outweighed(record: dict[str, Any], factor: float = 10.0) -> str | None:
    """A warning when an auxiliary term of an epoch's ``record`` (weighted, absolute value)
    is more than ``factor`` times the weighted task term, naming the weight to lower."""
    task = record.get("loss_task")
    aux = [(abs(record[f"loss_{k}"]), k) for k in TERMS[1:] if record.get(f"loss_{k}") is not None]
    if not task or not aux:
        return None
    value, key = max(aux)
    if value <= factor * abs(task):
        return None
    return (f"warning: the weighted {key} term ({value:.4g}) is {value / abs(task):.0f}x the task term "
            f"({abs(task):.4g}) after epoch {record['epoch']}; it drives training: lower "
            f"{WEIGHT_KEYS[key]}")


#: A classifier's hard-search validation accuracy this far below the soft mixture's is warned about.
ACCURACY_GAP = 0.1


def hard_search_warning(final: dict[str, Any], vocab_size: int) -> str | None:
    """A warning when the hard search is far from the soft mixture on validation: a language
    model's metric, in bits per token, more than 1 bit above the soft one, not finite, or above
    the uniform baseline ``log2(V)``; a classifier's accuracy more than :data:`ACCURACY_GAP`
    below the soft one."""
    metric = final["metric"]
    if f"val_{metric}_soft" not in final:  # trained straight-through: no mixture to compare with
        return None
    if metric not in ("bpc", "perplexity"):
        hard, soft = final[f"val_{metric}_hard"], final[f"val_{metric}_soft"]
        return None if hard >= soft - ACCURACY_GAP else _hard_search_warning(final, "")
    bits = (lambda v: v) if metric == "bpc" else (lambda v: math.log2(v) if v > 0 else math.inf)  # noqa: E731
    hard, soft = bits(final[f"val_{metric}_hard"]), bits(final[f"val_{metric}_soft"])
    uniform = math.log2(vocab_size)
    if math.isfinite(hard) and hard <= uniform and hard - soft <= 1.0:
        return None
    return _hard_search_warning(final, f" (uniform guessing: {uniform:.2f} bits per token)")


def _hard_search_warning(final: dict[str, Any], baseline: str) -> str:
    metric = final["metric"]
    return (f"warning: the hard search (Algorithm 2's argmax) gives val {metric} "
            f"{final[f'val_{metric}_hard']:.4g} against {final[f'val_{metric}_soft']:.4g} with the soft "
            f"mixture{baseline}: the argmax cells do not compute what training optimised; see "
            f"candidate_norm, tau_end and mode=straight-through")


def _summary(record: dict[str, Any], metric: str, config: TrainConfig, improved: bool) -> str:
    parts = [f"epoch {record['epoch']}/{config.epochs}"]
    if record[f"train_{metric}"] is not None:
        parts.append(f"train {metric} {record[f'train_{metric}']:.4f}")
    parts.append(f"val {metric} {record[f'val_{metric}']:.4f}")
    parts += [f"{mode} search {record[key]:.4f}" for mode in MODES_EVALUATED
              if mode != config.eval_mode and (key := f"val_{metric}_{mode}") in record]
    if record["loss_total"] is not None:
        parts.append(f"loss {record['loss_total']:.4f}")
    if record.get("n_e") is not None:
        parts.append(f"N_e {record['n_e']}")
    if record["phase"] != "all":
        parts.append(f"phase {record['phase']}")
    if record["bad_steps"]:
        parts.append(f"{record['bad_steps']} skipped steps")
    parts.append(f"{record['time_s']:.1f}s" + (" *" if improved else ""))
    return ", ".join(parts)


def train(config: TrainConfig, out_dir: str | Path, resume: bool = False, argv: list[str] | None = None,
          log: Log = print, dist: Distributed | None = None) -> dict[str, Any]:
    """Train ``config`` into the run folder ``out_dir`` (module docstring); return final.json.

    With ``resume``, ``out_dir`` holds the run: it continues from ``checkpoints/last.pt``
    (or its previous version if that is damaged) with ``config`` (``cellgraph train
    --resume`` passes the run's own ``config.json``; a larger ``epochs`` extends the run).
    ``log`` receives the per-epoch summaries and warnings; ``dist`` says which share of each
    global batch this process trains and whether it writes the run folder and final.json
    (rank 0, which logs; the other ranks return ``{}``); None: this process alone."""
    dist = Distributed() if dist is None else dist
    config = _with_teacher(config, out_dir, log, dist)
    with _threads(config.num_threads), ExitStack() as held:  # threads: a search's next trial starts afresh
        return _train(config, out_dir, resume, argv, log, dist, held)


def _with_teacher(config: TrainConfig, out_dir: str | Path, log: Log, dist: Distributed) -> TrainConfig:
    """``config`` with a teacher: as given, or, for ``warm_start=teacher`` without one, the
    ``gru`` run of ``teacher_epochs`` trained (or resumed, or found finished) in
    ``RUN_DIR/teacher`` on the same task, data, seed and hidden size."""
    if config.warm_start != "teacher" or config.teacher:
        return config
    if dist.active:
        raise CellGraphError("warm_start=teacher under torchrun needs a finished gru run: train it first and "
                             "pass it with --teacher")
    folder = Path(out_dir) / "teacher"
    if not (folder / "final.json").exists():
        resume = RunDir(folder).has_checkpoint()
        log(f"warm start: {'resuming' if resume else 'training'} the teacher gru run in {folder} "
            f"({config.teacher_epochs} epochs)")
        gru = config.replace(model="gru", epochs=config.teacher_epochs, warm_start="none", structure_term=False)
        train(gru, folder, resume=resume, log=log)
    return config.replace(teacher=str(folder))


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch's CPU threads set to ``n`` (0: left as they are) inside the block only."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _train(config: TrainConfig, out_dir: str | Path, resume: bool, argv: list[str] | None, log: Log,
           dist: Distributed, held: ExitStack) -> dict[str, Any]:
    """:func:`train`; ``held`` keeps the run folder's lock until the caller's block ends."""
    cpu_start = time.process_time()  # the run's CPU time counts from here (final.json cpu_seconds)
    if config.batch_size < dist.world_size:
        raise CellGraphError(f"batch_size={config.batch_size} is smaller than the {dist.world_size} "
                             "processes: every global batch needs a sample for each process")
    check_logger(config.logger)  # a missing package fails before the run folder is made
    config = config.replace(data_dir=run_data_dir(config.task, config.data_dir))  # recorded resolved
    device = torch.device(dist.device) if dist.active else resolve_device(config.device)
    if dist.writes:
        run = RunDir.vet(out_dir, resume=resume)  # a folder in the way fails before the inputs load
        if resume and run.path.is_dir():
            with run.lock():  # and so does a folder another process is training
                pass
    _seed(config.seed)
    # every input (data set, GloVe, teacher run) is read before anything is written
    dataset = load_data(config)
    model = build_model(config, dataset).to(device)  # made on the CPU: the same start on every device
    if config.warm_start == "teacher":
        warm_start(model, load_teacher(config.teacher, config, len(dataset.vocab), dataset.n_classes,
                                       dataset.per_step, dataset.padding_idx, device), config.warm_weight)
    targets = _targets(config, dataset, device)
    if dist.writes:
        run = RunDir.create(out_dir, resume=resume)
        held.enter_context(run.lock())  # before anything is written into the folder
        if not (resume and run.has_checkpoint()):  # a run without a checkpoint starts over
            read = data_sha256(config.task, config.data_dir, config.glove, config.hidden_size)
            run.write_config(config.to_dict(), argv, dist.world_size, read)
    else:
        run, log = RunDir(out_dir), _quiet
    dist.barrier()  # the others start once rank 0 has the run folder (or has failed to make it)
    loss_fn = _loss(config)
    optimizer = _optimizer(model, config)
    state, within = _State(cpu_start=cpu_start), None
    last = run.checkpoints / "last.pt"
    if resume and run.has_checkpoint():
        ckpt = load_latest(last, log, map_location="cpu")
        state, within = _restore(model, optimizer, ckpt, cpu_start), ckpt.get("within_epoch")
        where = f", step {within['step']} of epoch {state.epoch + 1}" if within else ""
        log(f"resuming {out_dir} after epoch {state.epoch}{where}")
    board = open_logger(config.logger if dist.writes else "none", run.path, state.epoch)
    if dist.writes:
        run.truncate_metrics(state.epoch)
        run.clear_stopped()  # a resumed run is no longer stopped
        if state.epoch == 0 and within is None and model.structured:  # the untrained cells
            model.set_tau(tau_at(config, 0.0))
            initial = structure_log(model, dataset, config, 0)
            write_json(run.path / "structures" / "epoch_000.json", initial)
            board.epoch({"epoch": 0}, initial)
    metric = dataset.metric
    loop = _EpochLoop(model, dataset, config, optimizer, loss_fn, targets, dist, log)
    while state.epoch < config.epochs and not (config.patience and state.bad_epochs >= config.patience):
        start = time.perf_counter() - (within["seconds"] if within else 0.0)
        save = (lambda done: save_checkpoint(last, _checkpoint(model, optimizer, state, done))) \
            if dist.writes else None
        try:
            record = loop.run(state, start, within, save)
        except TrainingStopped as stop:
            if dist.writes:  # the run folder says so too (cellgraph summarize, the recipe ablation)
                run.write_stopped({"reason": str(stop), "epoch": state.epoch + 1,
                                   "last_good_epoch": state.epoch, "best_epoch": state.best_epoch})
            raise
        within = None
        dist.sync_buffers(model)  # rank 0's BatchNorm statistics, as in its checkpoint
        record.update(validation(model, dataset, config, dist))
        state.epoch += 1
        improved = _better(config.task, record[f"val_{metric}"], state.best)
        if improved:
            state.best, state.best_epoch, state.bad_epochs = record[f"val_{metric}"], state.epoch, 0
        else:
            state.bad_epochs += 1
        logs_structures = model.structured and dist.writes
        structures = structure_log(model, dataset, config, state.epoch) if logs_structures else None
        record["time_s"] = time.perf_counter() - start
        if structures is not None:
            record["target_share"] = structures["target_share"]
        log(_summary(record, metric, config, improved))
        if state.epoch == 1 and (warning := outweighed(record)):
            log(warning)
        if dist.writes:
            run.append_metrics(record)
            board.epoch(record, structures)
            if structures is not None:
                write_json(run.path / "structures" / f"epoch_{state.epoch:03d}.json", structures)
            if improved:
                save_checkpoint(run.checkpoints / "best.pt", {"model": model.state_dict(), "epoch": state.epoch})
            save_checkpoint(last, _checkpoint(model, optimizer, state))
    final = _finish(run, model, dataset, config, state, targets, dist.world_size, log) if dist.writes else {}
    board.close(final)
    return final


def _optimizer(model: TaskModel, config: TrainConfig) -> torch.optim.Adam:
    """Adam at ``lr``; with ``score_lr != 1`` alpha's parameters in a group of their own at
    ``lr * score_lr`` (one group otherwise, as checkpoints of earlier runs hold)."""
    if config.score_lr == 1.0 or not model.structured:
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    alpha = model.alpha_parameters()
    ids = {id(p) for p in alpha}
    return torch.optim.Adam([{"params": [p for p in model.parameters() if id(p) not in ids]},
                             {"params": alpha, "lr": config.lr * config.score_lr}], lr=config.lr)


def _quiet(_: str) -> None:
    """The log of the ranks other than 0."""


def _finish(run: RunDir, model: TaskModel, dataset: Dataset, config: TrainConfig, state: _State,
            targets, world_size: int, log: Log) -> dict[str, Any]:
    best = load_latest(run.checkpoints / "best.pt", log, map_location=device_of(model))
    model.load_state_dict(best["model"])
    model.set_tau(tau_at(config, best["epoch"] / config.epochs))
    metric = dataset.metric
    final: dict[str, Any] = {
        "metric": metric, "eval_mode": config.eval_mode,
        f"val_{metric}": evaluate(model, dataset, "val", config)[metric],
        f"test_{metric}": evaluate(model, dataset, "test", config)[metric],
    }
    for split in ("val", "test"):  # a searching model: the same checkpoint scored with both searches
        final.update(both_searches(model, dataset, split, config, final[f"{split}_{metric}"]))
    final.update({
        "best_epoch": best["epoch"], "epochs_run": state.epoch,
        "stopped_early": state.epoch < config.epochs, "bad_steps": state.bad_steps,
        "train_seconds": sum(r.get("time_s", 0.0) for r in run.metrics()),
        "target_provider": None if targets is None else targets.name, "world_size": world_size,
        "device": str(device_of(model)),
    })
    if targets is not None and targets.name == "teacher":
        final["teacher"] = targets.source
    if config.task == "planted" and model.structured:
        final["recovery"] = structure_recovery(model, dataset, config)
    log(f"best epoch {final['best_epoch']}: val {metric} {final[f'val_{metric}']:.4f}, "
        f"test {metric} {final[f'test_{metric}']:.4f} ({config.eval_mode} search)")
    other = "soft" if config.eval_mode == "hard" else "hard"
    if f"val_{metric}_{other}" in final:
        log(f"  {other} search: val {metric} {final[f'val_{metric}_{other}']:.4f}, "
            f"test {metric} {final[f'test_{metric}_{other}']:.4f}")
    if model.structured:
        if warning := hard_search_warning(final, len(dataset.vocab)):
            log(warning)
    if (cpu := state.cpu_seconds()) is not None:  # rank 0's processes, evaluation included
        final["cpu_seconds"] = cpu
    run.write_final(final)
    return final


# --- finished runs ---------------------------------------------------------------------


def _load_run(run_dir: str | Path, checkpoint: str = "best",
              device: str | None = None) -> tuple[TrainConfig, Dataset, TaskModel, int]:
    """The run's config, data and model with its ``checkpoint`` loaded, on ``device`` (a
    ``device`` setting; default: the run's own)."""
    if checkpoint not in ("best", "last"):
        raise CellGraphError(f"unknown checkpoint {checkpoint!r} (best or last)")
    run = RunDir(run_dir)
    if not run.file("config.json").exists():
        raise CellGraphError(f"{run_dir} is not a run folder (no config.json)")
    config = load_run_config(run.file("config.json"))
    where = resolve_device(device or config.device)
    dataset = load_data(config)
    model = build_model(config, dataset, pretrained=False).to(where)
    state = load_latest(run.checkpoints / f"{checkpoint}.pt", map_location=where)
    model.load_state_dict(state["model"])
    model.set_tau(tau_at(config, state["epoch"] / config.epochs))
    return config, dataset, model, state["epoch"]


def evaluate_run(run_dir: str | Path, split: str = "test", checkpoint: str = "best",
                 mode: str | None = None, device: str | None = None) -> dict[str, Any]:
    """The metric of a run's ``best`` (or ``last``) checkpoint on ``split`` (``val``/``test``),
    its cells searched in ``mode`` (default: the run's ``eval_mode``, hard unless set), computed
    on ``device`` (default: the run's ``device`` setting)."""
    if split not in ("val", "test"):
        raise CellGraphError(f"unknown split {split!r} (val or test)")
    config, dataset, model, epoch = _load_run(run_dir, checkpoint, device)
    config = config if mode is None else config.replace(eval_mode=mode)
    result = evaluate(model, dataset, split, config)
    return {"split": split, "checkpoint": checkpoint, "epoch": epoch, "mode": config.eval_mode,
            "metric": dataset.metric,
            f"{split}_{dataset.metric}": result[dataset.metric], "nats": result["nats"],
            "accuracy": result["accuracy"], "n": len(dataset.splits[split])}


def export_cell(run_dir: str | Path, sample: int, t: int, split: str = "test",
                device: str | None = None) -> tuple[MultiCell, Layout]:
    """The cell the best checkpoint builds (``eval_mode`` search) for ``sample`` of ``split``
    at step ``t``, and the model's tuple layout (with the node vectors:
    :meth:`cellgraph.backends.torch.run.LoadedRun.sample_cell`); searched on ``device``
    (default: the run's)."""
    from cellgraph.backends.torch.run import load_run

    run = load_run(run_dir, device=device)
    return run.sample_cell(split, sample, t)[0], run.layout
