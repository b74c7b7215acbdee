"""The ``device`` and ``amp`` settings: resolving a device against the machine, a training step
that keeps every tensor on its device and reads one value from it per step, checkpoints that
move between devices, the process-group backend, and bfloat16 autocast.

Without a GPU (CI) the CUDA tests skip; their CPU stand-ins are the meta-device step (any
tensor the step makes on the host mixes devices and fails) and the host-traffic count (every
read of a tensor value by our code, per step)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
import torch
from devices import needs_cuda
from torch.overrides import TorchFunctionMode

import cellgraph
from cellgraph import progress
from cellgraph.backends.torch.runtime import device as torch_device
from cellgraph.backends.torch.training import distributed as torch_distributed, epoch as torch_epoch
from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.models.gated import GRUBaseline, LSTMBaseline
from cellgraph.backends.torch.training.batches import batches
from cellgraph.backends.torch.training.trainstate import TrainState, restore, seed_everything
from cellgraph.backends.torch.training.checkpoint import load_checkpoint
from cellgraph.backends.torch.runtime.device import autocast, resolve_device
from cellgraph.backends.torch.training.distributed import Distributed, launched, process_group_backend
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.cli import main
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import TrainConfig, load_run_config
from cellgraph.experiment.runlog import RunLog
from cellgraph.files import read_json

TINY = dict(task="planted", hidden_size=8, scoring_hidden=8, n_iterations=3, seq_len=5, batch_size=4,
            max_eval=8, log_structures=4, num_threads=1, epochs=1)
STEP_MODELS = ("gru", "lstm", "rrnn-gru")


# --- resolving a device --------------------------------------------------------------


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine that reports two CUDA GPUs (nothing runs on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_cpu_and_auto_without_a_gpu(no_gpu):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cpu")
    for name in ("cuda", "cuda:0", "cuda:3"):
        with pytest.raises(CellGraphError, match=f"device '{name}' asks for a CUDA GPU, but no GPU is available"):
            resolve_device(name)


def test_gpus_by_name_and_local_rank(two_gpus):
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("auto", local_rank=1) == resolve_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cpu", local_rank=1) == torch.device("cpu")
    with pytest.raises(CellGraphError, match=r"'cuda:2': this machine has 2 CUDA GPU\(s\), cuda:0..cuda:1"):
        resolve_device("cuda:2")
    with pytest.raises(CellGraphError, match="LOCAL_RANK 2.*has 2 CUDA GPU"):
        resolve_device("cuda", local_rank=2)
    with pytest.raises(CellGraphError, match="each process uses the GPU of its LOCAL_RANK"):
        resolve_device("cuda:1", local_rank=0)


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:01", "CUDA", "cuda:-1", "cpu:0", ""])
def test_bad_device_forms(name):
    with pytest.raises(CellGraphError, match="unknown device"):
        resolve_device(name)
    with pytest.raises(FormatError, match=r"device: invalid value .*: must be one of auto, cpu, cuda, cuda:N"):
        TrainConfig(device=name)


def test_amp_setting():
    assert TrainConfig(model="gru", amp="bf16").amp == "bf16"
    with pytest.raises(FormatError, match=r"amp: invalid value 'fp16': must be one of none, bf16"):
        TrainConfig(amp="fp16")
    with pytest.raises(FormatError, match="amp: bf16 applies to gru, lstm and rrnn-gru; the full RRNN search"):
        TrainConfig(model="rrnn", amp="bf16")


# --- the commands ----------------------------------------------------------------------


def test_commands_say_that_no_gpu_is_available(no_gpu, tmp_path, capsys):
    """Every command that computes refuses a missing GPU in one line, before any work."""
    commands = [
        ["train", "--task", "planted", "--model", "gru", "--device", "cuda", "--out", str(tmp_path / "run")],
        ["bench", "--quick", "--device", "cuda"],
        ["demo", "--quick", "--device", "cuda:1", "-o", str(tmp_path / "demo")],
        ["tune", "--task", "planted", "--model", "gru", "--ranges", "sst", "--trials", "1", "--device", "cuda",
         "--dir", str(tmp_path / "search")],
    ]
    for argv in commands:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "asks for a CUDA GPU, but no GPU is available" in err and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir())


def test_a_bad_device_flag_names_the_flag(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "runs/x", "--device", "gpu"])
    assert "argument --device: invalid device 'gpu' (one of auto, cpu, cuda, cuda:N)" in capsys.readouterr().err


def test_train_eval_export_on_a_named_device(tmp_path, capsys, monkeypatch):
    """``--device`` reaches the run (config.json, final.json), eval and export; a resumed run
    takes ``--device`` (a machine choice) though it refuses every other setting."""
    monkeypatch.setenv("CELLGRAPH_NO_PROGRESS", "1")
    run = tmp_path / "run"
    sets = [a for k, v in {**TINY, "model": "rrnn-gru", "max_train": 16}.items() for a in ("--set", f"{k}={v}")]
    assert main(["train", *sets, "--device", "cpu", "--out", str(run)]) == 0
    assert load_run_config(run / "config.json").device == "cpu"
    assert read_json(run / "final.json")["device"] == "cpu"
    assert main(["train", "--resume", str(run), "--device", "cpu"]) == 0
    assert main(["eval", str(run), "--device", "cpu"]) == 0
    assert main(["export", str(run), "--sample", "0", "--t", "1", "-f", "sympy", "--device", "cpu"]) == 0
    assert "h_t" in capsys.readouterr().out


# --- the training step on its device ---------------------------------------------------


def _setup(model: str, device: torch.device | str, n_train: int = 8, **settings):
    config = TrainConfig(**{**TINY, "model": model, "max_train": n_train, **settings})
    seed_everything(0)
    dataset = torch_train.load_data(config)
    net = torch_train.build_model(config, dataset).to(device)
    return config, dataset, net, torch_train._targets(config, dataset, device)


def _tensors(value) -> Iterator[torch.Tensor]:
    """The tensors in ``value`` (nested lists, tuples and dicts)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


class DeviceMixing(TorchFunctionMode):
    """Records every torch call whose tensor operands lie on more than one device (a 0-d CPU
    tensor, which torch treats as a number, aside): on a GPU such a call fails or copies."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device for t in _tensors((args, kwargs)) if not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            self.found.append(f"{getattr(func, '__name__', func)} at {_our_caller() or 'torch'}: {sorted(map(str, devices))}")
        return func(*args, **kwargs)


@pytest.mark.parametrize("model", STEP_MODELS)
def test_a_training_step_makes_no_tensor_on_the_host(model):
    """Forward, Eq. 5 (task, TD to the self target, margin, L2) and backward with the model and
    the batch on the meta device: no call meets a tensor the step made on the CPU (an index,
    a constant, a target tree's indices)."""
    config, dataset, net, targets = _setup(model, "meta", lambda_td=0.1, lambda_margin=0.1)
    objective = torch_epoch.Objective(net, torch_train._loss(config), targets)
    ((_, tokens, gold),) = batches(dataset.train, [np.arange(4)], "meta")
    with DeviceMixing() as mixing:
        out = objective(tokens, gold, 1.0)
        out.loss.backward()
    assert not mixing.found
    assert out.loss.is_meta and all(p.grad.is_meta for p in net.parameters() if p.grad is not None)
    assert (out.choices is None) == (model != "rrnn-gru") and (out.choices is None or out.choices.is_meta)


#: Tensor methods and functions that read a value to the host (a device sync on a GPU) ...
HOST_READS = {"__bool__", "__float__", "__int__", "__index__", "item", "tolist", "numpy", "cpu", "nonzero",
              "unique", "argwhere", "masked_select", "__array__"}
#: ... and those that build a tensor from host data (a copy to the GPU, once placed there).
FROM_HOST = {"tensor", "as_tensor", "from_numpy", "new_tensor"}
_OURS = tuple(str(Path(cellgraph.__file__).parents[1] / d) + os.sep for d in ("backends", "cellgraph"))
_DISPATCH = (torch.overrides.__file__, __file__)


def _our_caller() -> str | None:
    """``file:line`` of the call into torch when our code made it (not torch itself, e.g. the
    optimizer reading its CPU step counter), else None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _DISPATCH:
        frame = frame.f_back
    if frame is None or not frame.f_code.co_filename.startswith(_OURS):
        return None
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"


class HostTraffic(TorchFunctionMode):
    """Records where our code reads a tensor's value on the host or builds one from host data
    (``torch.from_numpy`` bypasses torch-function modes: it is wrapped while the mode is on)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.made: list[str] = []
        self._from_numpy = torch.from_numpy

    def __enter__(self) -> "HostTraffic":
        real, made = self._from_numpy, self.made

        def from_numpy(array):
            where = _our_caller()
            if where is not None:
                made.append(f"from_numpy at {where}")
            return real(array)

        torch.from_numpy = from_numpy
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        torch.from_numpy = self._from_numpy
        super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS or name in FROM_HOST or _scalar_put(name, args):
            where = _our_caller()
            if where is not None:
                (self.reads if name in HOST_READS else self.made).append(f"{name} at {where}")
        return func(*args, **(kwargs or {}))


def _scalar_put(name: str, args: tuple) -> bool:
    """``t[index] = number`` with a tensor in ``index``: ``index_put_`` makes the number a host
    tensor and copies it to ``t``'s device, a synchronising copy on a GPU (seen on an H200)."""
    if name != "__setitem__" or not isinstance(args[2], (bool, int, float)):
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, torch.Tensor) for i in index)


def _per_step(model: str, device: str, count: Callable[[], Iterator[list[str]]], **settings
              ) -> tuple[float, list[str]]:
    """The events ``count`` records per training step of ``model`` on ``device`` (with
    ``settings`` over :data:`TINY`): the difference between a 5-step and a 2-step epoch (after a
    warm-up epoch that makes what is made once), per step; and the events of the longer epoch."""
    recorded = {}
    for steps in (2, 2, 5):
        config, dataset, net, targets = _setup(model, device, n_train=4 * steps, **settings)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        with count() as events:
            loop = torch_epoch.EpochLoop(net, dataset, config, optimizer, torch_train._loss(config),
                                          targets, Distributed(), print)
            loop.run(TrainState(), time.perf_counter())
        recorded[steps] = list(events)
    return (len(recorded[5]) - len(recorded[2])) / 3, recorded[5]


@contextmanager
def _host_reads() -> Iterator[list[str]]:
    with HostTraffic() as mode:
        yield mode.reads


@contextmanager
def _host_made() -> Iterator[list[str]]:
    with HostTraffic() as mode:
        yield mode.made


@pytest.mark.parametrize("model", STEP_MODELS)
def test_one_value_read_per_training_step(model, monkeypatch):
    """Our code reads one value per training step, the joint finite check of the loss and the
    gradient norm (it decides whether the step updates); metrics stay on the device until the
    epoch ends. (The full RRNN's search also reads the data-dependent outcomes of its exclusion
    test, iteration by iteration.)"""
    monkeypatch.setenv(progress.ENV, "1")
    reads, where = _per_step(model, "cpu", _host_reads)
    assert reads == 1, where


@pytest.mark.parametrize("model", (*STEP_MODELS, "rrnn"))
def test_no_tensor_is_built_from_host_data_per_step(model, monkeypatch):
    """Index tensors, constants, coefficients and batches reach the device once (per run or
    per epoch), not at every step."""
    monkeypatch.setenv(progress.ENV, "1")
    made, where = _per_step(model, "cpu", _host_made)
    assert made == 0, where


@contextmanager
def _cuda_syncs() -> Iterator[list[warnings.WarningMessage]]:
    """What CUDA itself counts (``torch.cuda.set_sync_debug_mode``): every synchronising call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield caught
        finally:
            torch.cuda.set_sync_debug_mode("default")
            caught[:] = [w for w in caught if "synchroniz" in str(w.message)]


@needs_cuda
@pytest.mark.parametrize("model", STEP_MODELS)
def test_one_device_sync_per_training_step_on_cuda(model, monkeypatch):
    """One synchronising call per training step, the finite check."""
    monkeypatch.setenv(progress.ENV, "1")
    per_step, caught = _per_step(model, "cuda", _cuda_syncs)
    assert per_step <= 1, [f"{w.filename}:{w.lineno}" for w in caught]


#: The values the full RRNN's search reads per time step, with ``N`` iterations: at iteration
#: ``k`` how many pairs' key intervals overlap (against ``P_{k-1}`` from ``k = 2`` on, and
#: against ``c_k*``: ``2 N - 1``); where the soft mixture keeps per-block partial sums (one
#: temperature for all samples, ``tau_units=score``), which blocks' eligibility each exclusion
#: changed (as often, but not after the last choice: ``2 N - 2``); and once whether a sample
#: ran out of candidates. (A hard choice in training reads, besides, which blocks hold the
#: chosen candidates.)
def _search_reads(n_iterations: int, partial_sums: bool = True) -> int:
    return 2 * n_iterations + (2 * n_iterations - 2 if partial_sums else 0)


@pytest.mark.parametrize("tau_units", ["score", "std"])
def test_the_full_rrnn_reads_its_exclusion_outcomes_and_nothing_else(tau_units, monkeypatch):
    """Per training step (soft mode): :func:`_search_reads` per time step, and the finite check."""
    monkeypatch.setenv(progress.ENV, "1")
    reads, where = _per_step("rrnn", "cpu", _host_reads, tau_units=tau_units)
    assert reads == TINY["seq_len"] * _search_reads(TINY["n_iterations"], tau_units == "score") + 1, where


@pytest.mark.parametrize("mode", ["soft", "hard", "straight-through"])
@pytest.mark.parametrize("sync_free", [False, True])
def test_a_sync_free_search_reads_once_at_its_end(mode, sync_free):
    """``sync_free`` (the search's default on a GPU) reads one value per search, once it has
    run (whether a sample ran out of candidates), in training and in evaluation; the default
    search on the CPU reads its exclusion outcomes at every iteration (and, choosing hard with
    gradients, which blocks hold the chosen candidates)."""
    torch.manual_seed(0)
    n_iterations, steps = 3, 4
    model = RRNN(6, 2, n_iterations, scoring_hidden=5, mode=mode, return_traces=False, sync_free=sync_free)
    x = torch.randn(steps, 3, 6)
    for grad in (True, False):
        with torch.set_grad_enabled(grad), HostTraffic() as traffic:
            model(x)
        if sync_free:
            assert len(traffic.reads) == steps, traffic.reads
            assert traffic.made == [], traffic.made  # a copy to a GPU would synchronise too
        else:
            assert len(traffic.reads) >= steps * 2 * n_iterations, traffic.reads  # 2 N - 1 tests, 1 check


@needs_cuda
def test_the_full_rrnn_syncs_as_often_as_it_reads_on_cuda(monkeypatch):
    """CUDA counts no synchronising call beyond those reads (no boolean-mask indexing, say)."""
    monkeypatch.setenv(progress.ENV, "1")
    per_step, caught = _per_step("rrnn", "cuda", _cuda_syncs)
    assert per_step == TINY["seq_len"] * _search_reads(TINY["n_iterations"]) + 1, \
        [f"{w.filename}:{w.lineno}" for w in caught]


@needs_cuda
@pytest.mark.parametrize("mode", ["soft", "hard", "straight-through"])
def test_a_sync_free_search_syncs_once_on_cuda(mode):
    """CUDA counts one synchronising call per sync-free search, at its end, in training (the
    backward pass included) and in evaluation."""
    torch.manual_seed(0)
    model = RRNN(6, 2, 3, scoring_hidden=5, mode=mode, return_traces=False, sync_free=True).cuda()
    x = torch.randn(4, 3, 6, device="cuda")
    model(x)[0].sum().backward()  # made once: the key rule, the index tensors
    for grad in (True, False):
        with torch.set_grad_enabled(grad), _cuda_syncs() as caught:
            output = model(x)[0]
            if grad:
                output.sum().backward()
        assert len(caught) == 4, [f"{w.filename}:{w.lineno}" for w in caught]


@pytest.mark.parametrize("model", ["gru", "lstm", "rrnn-gru"])
def test_bf16_autocast_runs_the_model_and_keeps_the_loss_in_float32(model):
    """``amp=bf16``: the same step in bfloat16 autocast gives a float32 loss close to the
    float32 step's and not equal to it (the autocast is really on), and float32 gradients."""
    losses = {}
    for amp in ("none", "bf16"):
        config, dataset, net, targets = _setup(model, "cpu", amp=amp, lambda_td=0.1)
        objective = torch_epoch.Objective(net, torch_train._loss(config), targets, config.amp)
        ((_, tokens, gold),) = batches(dataset.train, [np.arange(4)], "cpu")
        out = objective(tokens, gold, 1.0)
        out.loss.backward()
        assert out.loss.dtype == torch.float32
        assert all(p.grad.dtype == torch.float32 for p in net.parameters() if p.grad is not None)
        losses[amp] = out.loss.item()
    assert losses["bf16"] != losses["none"]
    assert losses["bf16"] == pytest.approx(losses["none"], rel=2e-2)


def test_autocast_does_not_reach_the_full_rrnn_search():
    """The search keeps its working dtype under autocast: same vectors and trees as without."""
    torch.manual_seed(0)
    model = RRNN(6, 2, 4, scoring_hidden=5, mode="soft")
    x = torch.randn(3, 4, 6)
    _, _, plain = model(x)
    with autocast(torch.device("cpu"), "bf16"):
        _, _, cast = model(x)
    for a, b in zip(plain, cast):
        assert b[0].vectors.dtype == torch.float32
        assert torch.equal(a[0].vectors, b[0].vectors) and torch.equal(a[0].tuple_pos, b[0].tuple_pos)


def test_autocast_helper():
    assert isinstance(autocast(torch.device("cpu"), "bf16"), torch.autocast)
    with autocast(torch.device("cpu"), "none"):
        assert not torch.is_autocast_enabled("cpu")
    with pytest.raises(CellGraphError, match="unknown amp 'fp8'"):
        autocast(torch.device("cpu"), "fp8")


# --- checkpoints across devices ----------------------------------------------------------


@needs_cuda
def test_a_run_moves_between_gpu_and_cpu(tmp_path):
    """Epoch 1 on the GPU, epoch 2 resumed on the CPU, epoch 3 back on the GPU: each resume
    loads the other device's checkpoint (``map_location``); the GPU's RNG state is saved
    on the GPU only."""
    config = TrainConfig(**{**TINY, "model": "rrnn-gru", "max_train": 16})
    torch_train.train(config.replace(device="cuda"), tmp_path, log=lambda s: None)
    assert "cuda" in load_checkpoint(tmp_path / "checkpoints" / "last.pt")["rng"]
    final = torch_train.train(config.replace(device="cpu", epochs=2), tmp_path, resume=True, log=lambda s: None)
    assert final["device"] == "cpu" and final["epochs_run"] == 2
    assert "cuda" not in load_checkpoint(tmp_path / "checkpoints" / "last.pt")["rng"]
    final = torch_train.train(config.replace(device="cuda", epochs=3), tmp_path, resume=True, log=lambda s: None)
    assert final["device"].startswith("cuda") and final["epochs_run"] == 3
    assert np.isfinite(final["val_accuracy"])


@needs_cuda
def test_a_resumed_optimizer_keeps_its_step_counters_on_the_cpu(tmp_path):
    """After a resume on the GPU, Adam's state is on the GPU but its step counters stay on
    the CPU, as a new Adam keeps them (on the GPU, reading them would sync every step)."""
    config = TrainConfig(**{**TINY, "model": "gru", "max_train": 8, "device": "cuda"})
    torch_train.train(config, tmp_path, log=lambda s: None)
    _, _, net, _ = _setup("gru", "cuda")
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    restore(net, optimizer, load_checkpoint(tmp_path / "checkpoints" / "last.pt"))
    for state in optimizer.state.values():
        assert state["step"].is_cpu and state["exp_avg"].is_cuda


@needs_cuda
def test_bench_on_the_gpu_adds_its_rows(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--threads", "1", "--device", "cuda", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    gpu = read_json(out)["machine"]["gpu"]
    assert gpu["name"] in printed and "float32 torch.matmul measured in this run" in printed


# --- the same run on every device --------------------------------------------------------

#: The run compared across devices: every model, 2 epochs of 2 steps, float32 on both.
ACROSS = dict(task="planted", hidden_size=16, scoring_hidden=16, n_iterations=3, seq_len=6, batch_size=8,
              max_train=16, max_eval=32, log_structures=4, num_threads=1, epochs=2, lr=1e-2)
#: What a run on another device must reproduce, per epoch: losses within a relative 1e-3 (the
#: devices' kernels sum in other orders: cuBLAS, cuDNN's GRU and LSTM, the CPU's MKL), validation
#: accuracy within 2/32 (an argmax that sits on a tie may flip).
LOSS_RTOL, ACCURACY_ATOL = 1e-3, 2 / 32
LOSSES = ("loss_total", "loss_task", "loss_td", "loss_margin", "loss_l2")
ALL_MODELS = ("gru", "lstm", "rrnn-gru", "rrnn")


def differences(one: Path, two: Path) -> list[str]:
    """The per-epoch records of runs ``one`` and ``two`` that differ beyond the tolerances
    above (losses, accuracies, the epochs run)."""
    found, records = [], [RunLog.load(run).metrics for run in (one, two)]
    if [r["epoch"] for r in records[0]] != [r["epoch"] for r in records[1]]:
        return [f"epochs {[r['epoch'] for r in records[0]]} against {[r['epoch'] for r in records[1]]}"]
    for a, b in zip(*records):
        for key in LOSSES:
            if a.get(key) is not None and not math.isclose(a[key], b[key], rel_tol=LOSS_RTOL, abs_tol=1e-6):
                found.append(f"epoch {a['epoch']} {key}: {a[key]} against {b[key]}")
        for key in ("train_accuracy", "val_accuracy"):
            if abs(a[key] - b[key]) > ACCURACY_ATOL:
                found.append(f"epoch {a['epoch']} {key}: {a[key]} against {b[key]}")
    return found


@pytest.mark.parametrize("model", ALL_MODELS)
@pytest.mark.parametrize("other", [pytest.param("cpu", id="cpu-2-threads"),
                                   pytest.param("cuda", id="cuda", marks=needs_cuda)])
def test_every_model_trains_alike_on_every_device(tmp_path, model, other, monkeypatch):
    """The same run on the CPU (one thread) and on ``other`` (a GPU; without one, the CPU with
    2 threads, whose GEMMs split their sums differently): the same per-epoch losses and
    accuracies within the tolerances above, and it trains. cuDNN's TF32 is off, as for a
    float32 comparison it must be (torch allows it for cuDNN by default on Ampere and newer)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    config = TrainConfig(**{**ACROSS, "model": model, "device": "cpu"})
    runs = tmp_path / "one", tmp_path / "other"
    torch_train.train(config, runs[0], log=lambda s: None)
    torch_train.train(config.replace(device=other, num_threads=2 if other == "cpu" else 1), runs[1],
                      log=lambda s: None)
    assert read_json(runs[1] / "final.json")["device"].startswith(other)
    assert differences(*runs) == []
    metrics = RunLog.load(runs[1]).metrics
    assert metrics[-1]["loss_total"] != metrics[0]["loss_total"]  # it trains


def test_differences_names_what_differs(tmp_path):
    """The comparison itself: one loss moved by 1% and one accuracy by 0.1 are both named."""
    config = TrainConfig(**{**ACROSS, "model": "gru", "epochs": 1, "device": "cpu"})
    torch_train.train(config, tmp_path / "a", log=lambda s: None)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    record["loss_task"] *= 1.01
    record["val_accuracy"] += 0.1
    (tmp_path / "b" / "metrics.jsonl").write_text("\n".join(lines[:-1] + [json.dumps(record)]) + "\n")
    found = differences(tmp_path / "a", tmp_path / "b")
    assert [line.split(":")[0] for line in found] == ["epoch 1 loss_task", "epoch 1 val_accuracy"], found


# --- the process group ------------------------------------------------------------------


def test_nccl_on_gpus_gloo_on_the_cpu():
    assert process_group_backend(torch.device("cuda", 1)) == "nccl"
    assert process_group_backend(torch.device("cpu")) == "gloo"


@pytest.mark.parametrize("device, backend, gpu", [("auto", "nccl", "cuda:1"), ("cpu", "gloo", None)])
def test_each_process_takes_the_gpu_of_its_local_rank(two_gpus, monkeypatch, device, backend, gpu):
    """Under torchrun (rank 3 of 4, LOCAL_RANK 1) on a machine with 2 GPUs: ``auto`` makes
    cuda:1 the process's GPU and opens an NCCL group; ``cpu`` a gloo group."""
    calls = {}
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.setdefault("gpu", str(d)))
    monkeypatch.setattr(torch_distributed.torch_dist, "init_process_group",
                        lambda backend, **kw: calls.setdefault("group", (backend, kw)))
    monkeypatch.setattr(torch_distributed.torch_dist, "destroy_process_group", lambda: None)
    for key, value in {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(key, value)
    with launched(device) as dist:
        assert dist == Distributed(3, 4, 1, gpu or "cpu")
    assert calls.get("gpu") == gpu
    assert calls["group"] == (backend, {"rank": 3, "world_size": 4})


def test_local_rank_from_the_environment():
    assert Distributed.from_env({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}) == Distributed(5, 8, 1)
    with pytest.raises(CellGraphError, match="LOCAL_RANK='x'"):
        Distributed.from_env({"LOCAL_RANK": "x"})


def test_describe_a_device():
    assert torch_device.describe(torch.device("cpu")) == "cpu"


@pytest.mark.parametrize("make", [lambda: GRUBaseline(6), lambda: LSTMBaseline(6)], ids=["gru", "lstm"])
def test_the_baselines_recurrent_layer_stays_float32_under_autocast(make):
    """Under autocast torch would run cuDNN's GRU and LSTM in float16 whatever dtype was asked
    for (and oneDNN's LSTM in bfloat16 on the CPU): the baselines keep theirs in float32."""
    torch.manual_seed(0)
    model, x = make(), torch.randn(4, 3, 6)
    plain = model(x)[0]
    with autocast(torch.device("cpu"), "bf16"):
        cast = model(x)[0]
    assert cast.dtype == torch.float32 and torch.equal(plain, cast)


@needs_cuda
def test_a_cell_search_fit_on_cuda_matches_the_cpu():
    """The discrete search's evaluator (restarts batched under vmap) trains on the GPU and
    scores as the CPU does: same initial weights, same batches, float32 on both."""
    from cellgraph.backends.torch.discover.fit import FitSettings, fit_cell
    from cellgraph.data.planted_values import load_planted_values
    from cellgraph.targets import target

    data = load_planted_values("mgu", n_train=200, n_val=50, n_test=50)
    mgu = target("mgu")
    settings = FitSettings(epochs=2, restarts=3)
    cpu = fit_cell(mgu.cell, mgu.layout, data, settings, device="cpu")
    gpu = fit_cell(mgu.cell, mgu.layout, data, settings, device="cuda")
    assert np.allclose(gpu.val, cpu.val, rtol=1e-2) and np.allclose(gpu.test, cpu.test, rtol=1e-2), (cpu, gpu)
