"""Faults of training runs: kill and resume bit-exactly, non-finite losses, a
damaged checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cellgraph.backends.torch.training import epoch as torch_epoch

from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.training.trainstate import seed_everything
from cellgraph.backends.torch.training.checkpoint import load_checkpoint, save_checkpoint
from cellgraph.backends.torch.runs.train import TrainingStopped, train
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig, paper_settings
from cellgraph.experiment.runlog import RunLog

TINY = dict(task="planted", model="rrnn-gru", hidden_size=8, scoring_hidden=8, max_train=32, max_eval=16,
            seq_len=5, batch_size=8, log_structures=4, num_threads=1, alternate_every=1)
QUIET = {**os.environ, "CELLGRAPH_NO_PROGRESS": "1"}


def _strip(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "time_s"} for r in records]


def _final_metrics(path: Path) -> dict:
    final = json.loads((path / "final.json").read_text())
    return {k: v for k, v in final.items() if k not in ("train_seconds", "cpu_seconds")}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cellgraph", "train", *args]


@pytest.mark.parametrize("model", ["rrnn-gru", pytest.param("rrnn", marks=pytest.mark.slow)])
def test_resume_after_sigkill_is_bit_exact(tmp_path, model):
    """A real ``cellgraph train`` is killed in epoch 2 or later and resumed; its metrics equal
    those of an uninterrupted run of the same seed (computed here, in-process)."""
    settings = {**TINY, "model": model, "epochs": 4, "max_train": 96, "n_iterations": 3}
    sets = [a for k, v in {**paper_settings(model), **settings}.items() for a in ("--set", f"{k}={v}")]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    train(TrainConfig(**settings), whole, log=lambda s: None)
    proc = subprocess.Popen(_cli(*sets, "--out", str(killed)), env=QUIET,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (killed / "checkpoints" / "last.pt.sha256").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # into epoch 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "final.json").exists(), "the run ended before it was killed"
    done = subprocess.run(_cli("--resume", str(killed)), env=QUIET, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout
    assert _final_metrics(killed) == _final_metrics(whole)
    assert _strip(RunLog.load(killed).metrics) == _strip(RunLog.load(whole).metrics)


def _nan_on(steps: set[int], monkeypatch) -> list[int]:
    """Make the task loss NaN on the given (global, 1-based) training steps."""
    calls: list[int] = []
    real = torch_epoch.task_loss

    def patched(logits, targets):
        loss, n, right = real(logits, targets)
        if logits.requires_grad:
            calls.append(len(calls) + 1)
            if calls[-1] in steps:
                loss = loss * float("nan")
        return loss, n, right

    monkeypatch.setattr(torch_epoch, "task_loss", patched)
    return calls


def test_non_finite_steps_are_skipped_and_counted(tmp_path, monkeypatch):
    _nan_on({2, 4, 6}, monkeypatch)
    logs: list[str] = []
    final = train(TrainConfig(**{**TINY, "epochs": 2, "max_bad_steps": 2}), tmp_path, log=logs.append)
    assert final["bad_steps"] == 3
    assert [r["bad_steps"] for r in RunLog.load(tmp_path).metrics] == [2, 1]
    assert sum("step skipped" in line for line in logs) == 3


def test_a_skipped_step_does_not_update(tmp_path, monkeypatch):
    _nan_on(set(range(1, 100)), monkeypatch)
    config = TrainConfig(**{**TINY, "epochs": 1, "max_bad_steps": 100, "alternate_every": 0})
    seed_everything(config.seed)
    start = torch_train.build_model(config, torch_train.load_data(config)).state_dict()
    train(config, tmp_path, log=lambda s: None)
    end = load_checkpoint(tmp_path / "checkpoints" / "last.pt")["model"]
    assert all(torch.equal(start[k], end[k]) for k in start)
    assert RunLog.load(tmp_path).metrics[0]["loss_total"] is None


def test_stop_after_max_bad_steps_in_a_row(tmp_path, monkeypatch):
    steps_per_epoch = TINY["max_train"] // TINY["batch_size"]
    _nan_on(set(range(steps_per_epoch + 1, 100)), monkeypatch)
    config = TrainConfig(**{**TINY, "epochs": 3, "max_bad_steps": 3})
    with pytest.raises(TrainingStopped, match="3 non-finite losses in a row .*epoch 1\\) is intact"):
        train(config, tmp_path, log=lambda s: None)
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["epoch"] == 1
    assert not (tmp_path / "final.json").exists()
    assert [r["epoch"] for r in RunLog.load(tmp_path).metrics] == [1]
    stopped = json.loads((tmp_path / "stopped.json").read_text())
    assert (stopped["epoch"], stopped["last_good_epoch"], stopped["best_epoch"]) == (2, 1, 1)
    assert "3 non-finite losses in a row" in stopped["reason"]


def test_a_stopped_run_resumed_to_its_end_is_no_longer_marked_stopped(tmp_path, monkeypatch):
    steps_per_epoch = TINY["max_train"] // TINY["batch_size"]
    calls = _nan_on(set(range(steps_per_epoch + 1, steps_per_epoch + 3)), monkeypatch)
    config = TrainConfig(**{**TINY, "epochs": 2, "max_bad_steps": 2})
    with pytest.raises(TrainingStopped):
        train(config, tmp_path, log=lambda s: None)
    assert (tmp_path / "stopped.json").exists()
    calls.extend([0] * 100)  # the NaN steps are behind: the resumed epoch trains
    train(config, tmp_path, resume=True, log=lambda s: None)
    assert (tmp_path / "final.json").exists() and not (tmp_path / "stopped.json").exists()


def test_a_damaged_last_checkpoint_falls_back_and_resumes_exactly(tmp_path):
    config = TrainConfig(**{**TINY, "epochs": 3})
    whole = train(config, tmp_path / "whole", log=lambda s: None)
    train(config.replace(epochs=2), tmp_path / "cut", log=lambda s: None)
    last = tmp_path / "cut" / "checkpoints" / "last.pt"
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 0xFF
    last.write_bytes(bytes(data))
    logs: list[str] = []
    resumed = train(config, tmp_path / "cut", resume=True, log=logs.append)
    assert any("falling back" in line for line in logs)
    assert any("after epoch 1" in line for line in logs)
    drop = ("train_seconds", "cpu_seconds")
    assert {k: v for k, v in resumed.items() if k not in drop} == {k: v for k, v in whole.items() if k not in drop}
    assert _strip(RunLog.load(tmp_path / "cut").metrics) == _strip(RunLog.load(tmp_path / "whole").metrics)


class _Killed(Exception):
    """Stands for a kill in the middle of an epoch."""


@pytest.mark.parametrize("model", ["rrnn-gru", "rrnn"])
def test_a_run_killed_within_an_epoch_resumes_from_its_last_step_exactly(tmp_path, monkeypatch, model):
    """With ``checkpoint_minutes`` tiny, ``last.pt`` is saved after every step; a run stopped
    during step 7 (epoch 2, step 3 of 4) resumes after step 2 of epoch 2, and its metrics, N_e
    and final results equal an uninterrupted run's."""
    settings = {**TINY, "model": model, "epochs": 3, "n_iterations": 3, "checkpoint_minutes": 1e-9}
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    train(TrainConfig(**settings), whole, log=lambda s: None)
    calls = _nan_on(set(), monkeypatch)
    real = torch_epoch.task_loss

    def dies_at_step_7(logits, targets):
        if logits.requires_grad and len(calls) == 6:
            raise _Killed
        return real(logits, targets)

    monkeypatch.setattr(torch_epoch, "task_loss", dies_at_step_7)
    with pytest.raises(_Killed):
        train(TrainConfig(**settings), killed, log=lambda s: None)
    assert load_checkpoint(killed / "checkpoints" / "last.pt")["within_epoch"]["step"] == 2
    monkeypatch.setattr(torch_epoch, "task_loss", real)
    logs: list[str] = []
    train(TrainConfig(**settings), killed, resume=True, log=logs.append)
    assert "resuming" in logs[0] and "step 2 of epoch 2" in logs[0]
    assert _final_metrics(killed) == _final_metrics(whole)
    assert _strip(RunLog.load(killed).metrics) == _strip(RunLog.load(whole).metrics)


def test_a_run_in_use_by_another_process_is_refused_before_anything_is_written(tmp_path):
    """Resuming a folder that another process trains fails at once: the holder's metrics and
    checkpoints are left alone."""
    config = TrainConfig(**{**TINY, "model": "gru", "epochs": 1})
    train(config, tmp_path / "run", log=lambda s: None)
    records = lambda: {p.name: p.read_bytes() for p in (tmp_path / "run").rglob("*")  # noqa: E731
                       if p.is_file() and p.name != ".lock"}
    before = records()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from cellgraph.experiment.runs import RunDir\n"
        f"with RunDir({str(tmp_path / 'run')!r}).lock():\n"
        "    print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CellGraphError, match=rf"in use by another process \(pid {holder.pid}\)"):
            train(config.replace(epochs=2), tmp_path / "run", resume=True, log=lambda s: None)
    finally:
        holder.kill()
        holder.wait()
    assert records() == before
    train(config.replace(epochs=2), tmp_path / "run", resume=True, log=lambda s: None)  # free again
    assert RunLog.load(tmp_path / "run").metrics[-1]["epoch"] == 2


def _fake_cpu_clock(monkeypatch, start: float) -> list[float]:
    """``time.process_time`` as a clock that starts at ``start`` and gains 1 s per read (a new
    process); the values it gave."""
    given: list[float] = []

    def clock() -> float:
        given.append(start + len(given))
        return given[-1]

    monkeypatch.setattr(torch_train.time, "process_time", clock)
    return given


def test_cpu_seconds_count_every_process_of_a_resumed_run(tmp_path, monkeypatch):
    """final.json's cpu_seconds is the CPU time of the process that wrote the last checkpoint
    up to it, plus the resuming process's; a checkpoint from before the count makes it unknown."""
    config = TrainConfig(**{**TINY, "epochs": 1})
    first = _fake_cpu_clock(monkeypatch, 100.0)
    train(config, tmp_path / "run", log=lambda s: None)
    carried = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["cpu_seconds"]
    assert carried > 0 and first[0] == 100.0
    second = _fake_cpu_clock(monkeypatch, 5000.0)  # another process: its clock reads differently
    final = train(config.replace(epochs=2), tmp_path / "run", resume=True, log=lambda s: None)
    assert final["cpu_seconds"] == carried + second[-1] - second[0]
    assert json.loads((tmp_path / "run" / "final.json").read_text())["cpu_seconds"] == final["cpu_seconds"]

    last = tmp_path / "run" / "checkpoints" / "last.pt"
    save_checkpoint(last, {k: v for k, v in load_checkpoint(last).items() if k != "cpu_seconds"})
    final = train(config.replace(epochs=3), tmp_path / "run", resume=True, log=lambda s: None)
    assert "cpu_seconds" not in final
