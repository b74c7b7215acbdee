"""The optional TensorBoard logger (config key logger): event files that hold the per-epoch
metrics, the loss terms, N_e and the discovered-cell frequencies; a clear error without it."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from cellgraph.backends.torch.training.logger import epoch_scalars, form_scalars
from cellgraph.backends.torch.runs.train import train
from cellgraph.cli import main
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.runlog import RunLog

TINY = dict(task="planted", hidden_size=8, scoring_hidden=8, max_train=32, max_eval=16, seq_len=5,
            epochs=2, batch_size=16, log_structures=4, num_threads=1)
needs_tensorboard = pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                                       reason="tensorboard is not installed (pip install 'cellgraph[tensorboard]')")


def test_epoch_scalars_name_every_number_of_a_record():
    record = {"epoch": 3, "train_bpc": 2.5, "val_bpc": 2.6, "loss_task": 1.0, "loss_td": None,
              "loss_total": 1.2, "n_e": 7, "phase": "all", "bad_steps": 0, "time_s": 4.5,
              "target_share": 0.25, "stopped": True}
    assert epoch_scalars(record) == {
        "bpc/train": 2.5, "bpc/val": 2.6, "loss/task": 1.0, "loss/total": 1.2, "structure/N_e": 7.0,
        "run/bad_steps": 0.0, "run/time_s": 4.5, "structure/target_share": 0.25}
    forms = {"n_cells": 10, "forms": [{"count": 6}, {"count": 3}, {"count": 1}]}
    assert form_scalars(forms, top=2) == {"cells/top1_share": 0.6, "cells/top2_share": 0.3,
                                          "cells/distinct_forms": 3.0}
    shares = {"reads_input_share": 0.7, "reads_state_share": 0.9, "reads_both_share": 0.6,
              "identity_chain_share": 0.2}
    assert form_scalars({**forms, **shares}, top=1) == {
        "cells/top1_share": 0.6, "cells/distinct_forms": 3.0, **{f"cells/{k}": v for k, v in shares.items()}}


@needs_tensorboard
def test_event_files_hold_metrics_losses_n_e_and_form_shares(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "run"
    final = train(TrainConfig(**TINY, model="rrnn-gru", logger="tensorboard"), run_dir, log=lambda s: None)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()

    def series(tag: str) -> tuple[list[int], list[float]]:
        scalars = events.Scalars(tag)
        return [s.step for s in scalars], [s.value for s in scalars]

    log = RunLog.load(run_dir)
    for tag, key in (("accuracy/val", "val_accuracy"), ("accuracy/train", "train_accuracy"),
                     ("loss/task", "loss_task"), ("loss/td", "loss_td"), ("loss/total", "loss_total")):
        assert series(tag)[0] == [1, 2]
        assert series(tag)[1] == pytest.approx([r[key] for r in log.metrics], rel=1e-6)
    assert series("structure/N_e") == ([2], [pytest.approx(log.metrics[1]["n_e"])])
    structures = log.structures()
    steps, shares = series("cells/top1_share")
    assert steps == [0, 1, 2]
    assert shares == pytest.approx([s["forms"][0]["count"] / s["n_cells"] for s in structures], rel=1e-6)
    assert series("cells/reads_both_share") == ([0, 1, 2], pytest.approx([s["reads_both_share"] for s in structures]))
    assert series("final/test_accuracy") == ([final["best_epoch"]], [pytest.approx(final["test_accuracy"])])
    assert "cells/top_forms/text_summary" in events.Tags()["tensors"]


def test_without_tensorboard_one_line_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard fails
    out = tmp_path / "run"
    argv = ["train", "--task", "planted", "--model", "gru", "--set", "logger=tensorboard", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install 'cellgraph[tensorboard]'" in err
    assert not (out / "config.json").exists()  # failed before the run folder was made
    assert main(["train", "--task", "planted", "--model", "gru", "--set", "logger=wandb", "--out", str(out)]) == 2
    assert "logger: invalid value 'wandb': must be one of none, tensorboard" in capsys.readouterr().err
