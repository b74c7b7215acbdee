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

Several processes (``torchrun``, :mod:`cellgraph.backends.torch.training.distributed`): each rank trains
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

The epoch itself is :mod:`cellgraph.backends.torch.training.epoch`, what ``last.pt`` holds
:mod:`cellgraph.backends.torch.training.trainstate`, the epoch summary and warnings
:mod:`cellgraph.backends.torch.runs.messages`.

Evaluation (validation, test, structure logs, export) runs the search in
``config.eval_mode`` (``hard`` by default:
docs/paper-notes.md, *Scoring, choice modes and the margin*).
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from cellgraph.backends.torch.training.batches import device_of
from cellgraph.backends.torch.training.checkpoint import load_latest, save_checkpoint
from cellgraph.backends.torch.runtime.device import resolve_device
from cellgraph.backends.torch.training.distributed import Distributed
from cellgraph.backends.torch.training.epoch import EpochLoop, Log, TrainingStopped, epoch_order, tau_at
from cellgraph.backends.torch.runs.evaluation import both_searches, evaluate, validation
from cellgraph.backends.torch.training.logger import check_logger, open_logger
from cellgraph.backends.torch.training.loss import RRNNLoss
from cellgraph.backends.torch.runs.messages import epoch_summary, hard_search_warning, outweighed
from cellgraph.backends.torch.runs.structure_log import structure_log, structure_recovery
from cellgraph.backends.torch.training.task import SelfTargets, TaskModel, TeacherTargets, load_teacher
from cellgraph.backends.torch.training.trainstate import TrainState, last_checkpoint, restore, seed_everything
from cellgraph.backends.torch.models.warmstart import warm_start
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.data.datadir import data_sha256, run_data_dir
from cellgraph.data.datasets import Dataset, Split, load_dataset
from cellgraph.errors import CellGraphError
from cellgraph.experiment.cellspec import FixedCell, resolve_cell
from cellgraph.experiment.config import TrainConfig, dataset_options, resolved_td_match
from cellgraph.experiment.runlog import METRICS
from cellgraph.experiment.runs import TEACHER, RunDir
from cellgraph.files import read_json, write_json

__all__ = [
    "TrainingStopped", "Distributed", "epoch_order", "load_data", "build_model", "evaluate", "train",
    "evaluate_run", "export_cell", "run_cell", "CELL_FILE",
]

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
    """The task's data set with the options ``config`` sets for it
    (:func:`~cellgraph.experiment.config.dataset_options`: ``data_seed``, ``seq_len``, the
    enwik8 cleaning, the planted teacher), cut to ``max_train`` / ``max_eval`` sequences."""
    data = load_dataset(config.task, config.data_dir or None, **dataset_options(config))
    return Dataset(data.name, data.task, data.metric, data.vocab, _head(data.train, config.max_train),
                   _head(data.val, config.max_eval), _head(data.test, config.max_eval), data.classes,
                   data.padding_idx, data.seed, data.info, data.teacher)


def build_model(config: TrainConfig, dataset: Dataset, pretrained: bool = True,
                fixed: FixedCell | None = None) -> TaskModel:
    """A :class:`TaskModel` for ``dataset``; ``pretrained`` loads ``config.glove`` if set;
    ``fixed``: ``model = cell``'s cell (default: ``config.cell`` resolved)."""
    embedding = None
    if pretrained and config.glove:
        from cellgraph.data.glove import load_glove

        embedding = load_glove(config.glove, dataset.vocab, config.hidden_size, config.seed,
                               dataset.padding_idx).vectors
    states = ("h",) if config.teacher else None
    return TaskModel(config, len(dataset.vocab), dataset.n_classes, dataset.per_step,
                     dataset.padding_idx, states, embedding, fixed)


#: The run folder's copy of ``model = cell``'s cell (:meth:`FixedCell.to_json`): a resumed or
#: loaded run reads it, not the ``cell`` setting's file, which may have changed or gone.
CELL_FILE = "cell.json"


def run_cell(config: TrainConfig, run_dir: str | Path | None = None) -> FixedCell | None:
    """``model = cell``'s cell: the copy in ``run_dir`` where it has one, else ``config.cell``
    resolved (:func:`~cellgraph.experiment.cellspec.resolve_cell`); None for other models."""
    if config.model != "cell":
        return None
    copy = Path(run_dir) / CELL_FILE if run_dir is not None else None
    if copy is not None and copy.is_file():
        return FixedCell.from_json(read_json(copy), str(copy))
    return resolve_cell(config.cell)


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


# --- training --------------------------------------------------------------------------


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
    folder = Path(out_dir) / TEACHER
    if not (folder / "final.json").exists():
        resume = RunDir(folder).has_checkpoint()
        log(f"warm start: {'resuming' if resume else 'training'} the teacher gru run in {folder} "
            f"({config.teacher_epochs} epochs)")
        gru = config.replace(model="gru", epochs=config.teacher_epochs, warm_start="none", structure_term=False,
                             structure_lr=1.0)  # a gru has no structural logits
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
    seed_everything(config.seed)
    # every input (data set, GloVe, teacher run) is read before anything is written
    dataset = load_data(config)
    fixed = run_cell(config, out_dir if resume else None)
    model = build_model(config, dataset, fixed=fixed).to(device)  # made on the CPU: the same start on every device
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
            if fixed is not None:
                write_json(run.path / CELL_FILE, fixed.to_json())
    else:
        run, log = RunDir(out_dir), _quiet
    dist.barrier()  # the others start once rank 0 has the run folder (or has failed to make it)
    loss_fn = _loss(config)
    optimizer = _optimizer(model, config)
    state, within = TrainState(cpu_start=cpu_start), None
    last = run.checkpoints / "last.pt"
    if resume and run.has_checkpoint():
        ckpt = load_latest(last, log, map_location="cpu")
        state, within = restore(model, optimizer, ckpt, cpu_start), ckpt.get("within_epoch")
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
    loop = EpochLoop(model, dataset, config, optimizer, loss_fn, targets, dist, log)
    while state.epoch < config.epochs and not (config.patience and state.bad_epochs >= config.patience):
        start = time.perf_counter() - (within["seconds"] if within else 0.0)
        save = (lambda done: save_checkpoint(last, last_checkpoint(model, optimizer, state, done))) \
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
        log(epoch_summary(record, metric, config, improved))
        if state.epoch == 1 and (warning := outweighed(record)):
            log(warning)
        if dist.writes:
            run.append_metrics(record)
            board.epoch(record, structures)
            if structures is not None:
                write_json(run.path / "structures" / f"epoch_{state.epoch:03d}.json", structures)
            if improved:
                save_checkpoint(run.checkpoints / "best.pt", {"model": model.state_dict(), "epoch": state.epoch})
            save_checkpoint(last, last_checkpoint(model, optimizer, state))
    final = _finish(run, model, dataset, config, state, targets, dist.world_size, log) if dist.writes else {}
    board.close(final)
    return final


def _optimizer(model: TaskModel, config: TrainConfig) -> torch.optim.Adam:
    """Adam at ``lr``; with ``score_lr != 1`` alpha's parameters, with ``structure_lr != 1``
    the structural logits, each in a group of their own at ``lr`` times that multiple (one
    group when both are 1, as checkpoints of earlier runs hold)."""
    own = [(params, config.lr * scale) for params, scale in
           ((model.alpha_parameters(), config.score_lr), (model.structure_parameters(), config.structure_lr))
           if scale != 1.0 and params] if model.structured else []
    if not own:
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    ids = {id(p) for params, _ in own for p in params}
    return torch.optim.Adam([{"params": [p for p in model.parameters() if id(p) not in ids]}]
                            + [{"params": params, "lr": lr} for params, lr in own], lr=config.lr)


def _quiet(_: str) -> None:
    """The log of the ranks other than 0."""


def _finish(run: RunDir, model: TaskModel, dataset: Dataset, config: TrainConfig, state: TrainState,
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
        "device": str(device_of(model)), "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    })
    if targets is not None and targets.name == "teacher":
        final["teacher"] = targets.source
    if model.fixed is not None:  # the run is self-contained: the cell it trained
        final["cell"] = model.fixed.to_json()
    if config.task == "planted":
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
