"""Data-parallel training: ``torchrun`` with 2 gloo processes (2 NCCL processes, one per GPU,
where two GPUs are present) follows the loss trajectory of one process on the same global
batches; the loss scaling of uneven shards; the environment torchrun leaves."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cellgraph.backends.torch.training import epoch as torch_epoch

from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.training.distributed import Distributed, launched, share
from cellgraph.backends.torch.training.trainstate import seed_everything
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig, paper_settings
from cellgraph.experiment.runlog import RunLog

TINY = dict(task="planted", hidden_size=16, max_train=64, max_eval=32, seq_len=5, epochs=2, batch_size=16,
            num_threads=1, scoring_hidden=8, log_structures=4, lr=1e-2)
#: Per-epoch records compared between 1 and 2 processes, and the relative tolerance: the two
#: sum the same gradients in another order (float32), nothing else differs.
COMPARED = ("loss_total", "loss_task", "loss_td", "loss_margin", "loss_l2", "train_accuracy", "val_accuracy",
            "n_e", "phase", "bad_steps", "target_share")
RTOL = 1e-5


#: A training script for torchrun whose rank 1 alone gets a NaN task loss in step 2.
NAN_ON_RANK_1 = """
import json, sys
from cellgraph.backends.torch.training import epoch as torch_epoch
from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.training.distributed import launched
from cellgraph.experiment.config import TrainConfig

real, calls = torch_epoch.task_loss, []

def task_loss(logits, targets):
    loss, n, right = real(logits, targets)
    if logits.requires_grad:
        calls.append(1)
        if dist.rank == 1 and len(calls) == 2:
            loss = loss * float("nan")
    return loss, n, right

torch_epoch.task_loss = task_loss
with launched() as dist:
    torch_train.train(TrainConfig(**json.loads(sys.argv[1])), sys.argv[2], dist=dist)
"""


def _cli_sets(settings: dict) -> list[str]:
    """``--set`` flags of ``settings`` over the paper's values of the recipe's keys, so that the
    command line trains what ``TrainConfig(**settings)`` does."""
    settings = {**paper_settings(settings.get("model", "")), **settings}
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


def _torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CELLGRAPH_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def _close(a, b) -> bool:
    """``a == b``, floats within RTOL, dictionaries key by key."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=RTOL)
    return a == b


@pytest.mark.parametrize("settings", [
    pytest.param({"model": "gru", "device": "cpu"}, id="gru"),
    # alternating phases rebuild the DDP wrapper; hard search without L2 leaves tuples unused
    pytest.param({"model": "rrnn-gru", "alternate_every": 1, "mode": "hard", "lambda_l2": 0.0, "device": "cpu"},
                 id="rrnn-gru"),
    pytest.param({"model": "rrnn-gru", "alternate_every": 1, "device": "cuda"}, id="rrnn-gru-nccl",
                 marks=pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")),
])
def test_two_processes_follow_one(tmp_path, settings):
    """A real ``torchrun --nproc_per_node 2 -m cellgraph train`` against one process: the same
    per-epoch train losses, N_e and validation metrics (within RTOL), one set of files."""
    settings = {**TINY, **settings}
    one, two = tmp_path / "one", tmp_path / "two"
    torch_train.train(TrainConfig(**settings), one, log=lambda s: None)
    done = _torchrun("-m", "cellgraph", "train", *_cli_sets(settings), "--out", str(two))
    assert done.stdout.count("best epoch") == 1  # only rank 0 logs
    _same_metrics(one, two)
    assert RunLog.load(one).metrics[-1]["loss_total"] != RunLog.load(one).metrics[0]["loss_total"]  # it trains
    assert _files(one) == _files(two)
    final1, final2 = (json.loads((p / "final.json").read_text()) for p in (one, two))
    assert (final1.pop("world_size"), final2.pop("world_size")) == (1, 2)
    assert json.loads((two / "env.json").read_text())["world_size"] == 2
    for key in ("train_seconds", "cpu_seconds"):
        final1.pop(key), final2.pop(key)
    assert _close(final1, final2), (final1, final2)


def _same_metrics(one: Path, two: Path) -> None:
    single, double = RunLog.load(one).metrics, RunLog.load(two).metrics
    assert [r["epoch"] for r in double] == [r["epoch"] for r in single]  # each written once
    for a, b in zip(single, double):
        assert _close({k: a.get(k) for k in COMPARED}, {k: b.get(k) for k in COMPARED}), (a, b)


def test_a_non_finite_loss_on_one_rank_skips_the_step_on_every_rank(tmp_path, monkeypatch):
    """Rank 1 alone sees NaN in step 2: both ranks skip it (no rank waits for the other in
    DDP's all-reduce) and the run follows one process that skips step 2."""
    settings = {**TINY, "model": "gru"}
    script = tmp_path / "nan_on_rank_1.py"
    script.write_text(NAN_ON_RANK_1)
    done = _torchrun(str(script), json.dumps(settings), str(tmp_path / "two"))
    assert done.stdout.count("step skipped") == 1, done.stdout
    real, calls = torch_epoch.task_loss, []

    def nan_in_step_2(logits, targets):  # the script's patch in one process
        loss, n, right = real(logits, targets)
        if logits.requires_grad:
            calls.append(1)
            if len(calls) == 2:
                loss = loss * float("nan")
        return loss, n, right

    monkeypatch.setattr(torch_epoch, "task_loss", nan_in_step_2)
    torch_train.train(TrainConfig(**settings), tmp_path / "one", log=lambda s: None)
    assert [r["bad_steps"] for r in RunLog.load(tmp_path / "two").metrics] == [1, 0]
    _same_metrics(tmp_path / "one", tmp_path / "two")


def test_shares_cover_every_global_batch_once():
    order = np.random.default_rng(0).permutation(11)
    ranks = [list(torch_epoch.rank_shares(order, 4, Distributed(r, 3))) for r in range(3)]
    for step, batch in enumerate((order[:4], order[4:8], order[8:])):
        parts = [ranks[r][step] for r in range(3)]
        real = [part for part, factor in parts if factor]
        assert sorted(np.concatenate(real).tolist()) == sorted(batch.tolist())
        assert sum(factor for _, factor in parts) == pytest.approx(3.0)
    # the last batch has 3 samples: 1 each; a 2-sample batch leaves rank 2 a stand-in
    ((part, factor),) = list(torch_epoch.rank_shares(order[:2], 4, Distributed(2, 3)))
    assert factor == 0.0 and part.tolist() == order[:1].tolist()


@pytest.mark.parametrize("world", [2, 3])
def test_scaled_shards_average_to_the_one_process_gradient(world):
    """What DDP computes, by hand: the mean over ranks of each rank's gradient of its scaled
    loss is the gradient of the whole batch's Eq. 5 (all four terms), for shards of unequal
    size and a rank with only a stand-in sample."""
    config = TrainConfig(**{**TINY, "model": "rrnn", "n_iterations": 3, "lambda_td": 0.5, "lambda_margin": 0.5,
                            "lambda_l2": 1e-2})
    seed_everything(0)
    dataset = torch_train.load_data(config)
    model = torch_train.build_model(config, dataset)
    objective = torch_epoch.Objective(model, torch_train._loss(config), torch_train._targets(config, dataset))
    params = list(model.parameters())
    split = dataset.train

    def gradient(index: np.ndarray, factor: float) -> list[torch.Tensor]:
        step = objective(torch.from_numpy(split.inputs[index]), torch.from_numpy(split.targets[index]), factor)
        return torch.autograd.grad(step.loss, params, allow_unused=True, materialize_grads=True)

    for batch in (np.arange(5), np.arange(world - 1)):  # uneven; fewer samples than ranks
        whole = gradient(batch, 1.0)
        shares = [next(torch_epoch.rank_shares(batch, len(batch), Distributed(r, world))) for r in range(world)]
        parts = [gradient(part, factor) for part, factor in shares]
        mean = [sum(g) / world for g in zip(*parts)]
        for a, b in zip(whole, mean):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        assert any(g.abs().sum() > 0 for g in whole)


def test_share_factors():
    assert share(16, 16, 1) == 1.0
    assert share(3, 5, 2) == 1.2 and share(2, 5, 2) == 0.8
    assert share(0, 1, 2) == 0.0


def test_environment():
    assert Distributed.from_env({}) == Distributed()
    assert Distributed.from_env({"RANK": "1", "WORLD_SIZE": "4"}) == Distributed(1, 4)
    for env, match in (({"WORLD_SIZE": "two"}, "WORLD_SIZE='two'"), ({"RANK": "-1"}, "RANK='-1'"),
                       ({"RANK": "2", "WORLD_SIZE": "2"}, "below the world size")):
        with pytest.raises(CellGraphError, match=match):
            Distributed.from_env(env)


def test_one_process_opens_no_process_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with launched() as dist:
        assert dist == Distributed() and not torch.distributed.is_initialized()
    assert dist.sum([1.5, 2]) == [1.5, 2] and dist.all(False) is False
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(CellGraphError, match="MASTER_ADDR.*torchrun"):
        with launched():
            pass


def test_batch_smaller_than_the_world_is_an_error(tmp_path):
    with pytest.raises(CellGraphError, match="batch_size=1 is smaller than the 2 processes"):
        torch_train.train(TrainConfig(**{**TINY, "batch_size": 1}), tmp_path, dist=Distributed(0, 2))
    assert not (tmp_path / "config.json").exists()
