"""``score_lr``: alpha's learning rate as a multiple of ``lr`` (0 freezes alpha; the structural
logits and the tuples still train)."""

from __future__ import annotations

import pytest
import torch

from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.runs.train import build_model, load_data
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig

TINY = dict(task="planted", hidden_size=8, scoring_hidden=8, max_train=16, max_eval=8, seq_len=4,
            batch_size=8, log_structures=2, num_threads=1, epochs=1, structure_term=True, n_tuples=3)


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_alpha_frozen_keeps_its_weights_while_the_rest_trains(tmp_path, monkeypatch, model):
    built = {}

    def keep(config, dataset, *args, **kwargs):
        built["model"] = build_model(config, dataset, *args, **kwargs)
        built["start"] = {name: p.detach().clone() for name, p in built["model"].named_parameters()}
        return built["model"]

    monkeypatch.setattr(torch_train, "build_model", keep)
    torch_train.train(TrainConfig(model=model, score_lr=0.0, **TINY), tmp_path, log=lambda s: None)
    trained, start = built["model"], built["start"]
    alpha = {id(p) for p in trained.alpha_parameters()}
    for name, p in trained.named_parameters():
        moved = not torch.equal(p.detach(), start[name])
        assert moved != (id(p) in alpha), name if id(p) in alpha else f"{name} did not train"


def test_the_optimizer_puts_alpha_in_a_group_at_its_rate_only_when_asked():
    config = TrainConfig(model="rrnn", lr=2e-3, **TINY)
    model = build_model(config, load_data(config))
    assert len(torch_train._optimizer(model, config).param_groups) == 1  # as every earlier checkpoint holds
    groups = torch_train._optimizer(model, config.replace(score_lr=0.25)).param_groups
    assert [g["lr"] for g in groups] == [2e-3, 5e-4]
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in model.alpha_parameters()}
    assert not {id(p) for p in groups[0]["params"]} & {id(p) for p in groups[1]["params"]}


def test_a_negative_score_lr_is_refused():
    with pytest.raises(CellGraphError, match="score_lr.*must be >= 0"):
        TrainConfig(model="rrnn", score_lr=-1.0, **TINY)
