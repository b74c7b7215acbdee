"""``score_lr``: alpha's learning rate as a multiple of ``lr`` (0 freezes alpha; the structural
logits and the tuples still train); ``structure_lr``: the structural logits' own, which sets how
soon the recipe's warm-started cell can leave the GRU (docs/training.md, *The discovery recipe*)."""

from __future__ import annotations

import pytest
import torch

from cellgraph.backends.torch.runs import train as torch_train
from cellgraph.backends.torch.runs.train import build_model, load_data
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import TrainConfig, resolve_config
from cellgraph.files import read_json

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


def test_the_optimizer_puts_the_structural_logits_in_a_group_at_their_rate_only_when_asked():
    config = TrainConfig(model="rrnn-gru", lr=2e-3, **TINY)
    model = build_model(config, load_data(config))
    assert len(torch_train._optimizer(model, config).param_groups) == 1
    groups = torch_train._optimizer(model, config.replace(score_lr=0.0, structure_lr=8.0)).param_groups
    assert [g["lr"] for g in groups] == [2e-3, 0.0, 1.6e-2]  # alpha's group stays second, as checkpoints hold
    assert [id(p) for p in groups[2]["params"]] == [id(model.core.cell.structure_logits)]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def _structure_moves(tmp_path, monkeypatch, model: str, structure_lr: float) -> float:
    """The largest change of a structural logit from the warm start to the end of a tiny
    recipe run (2 steps after a teacher of 1 epoch); checks that config.json records the rate."""
    real, kept = torch_train.warm_start, {}

    def keep(student, teacher, weight):
        real(student, teacher, weight)
        kept["model"], kept["start"] = student, [p.detach().clone() for p in student.structure_parameters()]

    monkeypatch.setattr(torch_train, "warm_start", keep)
    config = resolve_config(f"recipe-{model}", None, {**TINY, "n_tuples": 4, "teacher_epochs": 1,
                                                      "structure_lr": structure_lr})
    out = tmp_path / f"{model}-{structure_lr:g}"
    torch_train.train(config, out, log=lambda s: None)
    assert read_json(out / "config.json")["structure_lr"] == structure_lr
    return max((p.detach() - p0).abs().max().item()
               for p, p0 in zip(kept["model"].structure_parameters(), kept["start"]))


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_a_higher_structure_lr_moves_the_warm_started_logits_that_much_further(tmp_path, monkeypatch, model):
    """Adam moves a logit by about its rate a step: after the same 2 steps from the warm start,
    the structural logits have moved about 20 times as far at ``structure_lr=20``."""
    default = _structure_moves(tmp_path, monkeypatch, model, 1.0)
    faster = _structure_moves(tmp_path, monkeypatch, model, 20.0)
    assert 0 < default <= 2 * 1e-3 * 1.01  # at most about lr a step
    assert 19 < faster / default < 21


@pytest.mark.parametrize("changes", [{"model": "rrnn", "structure_term": False}, {"model": "gru"}])
def test_a_structure_lr_without_structural_logits_is_refused(changes):
    with pytest.raises(FormatError, match="structure_lr.*only rrnn and rrnn-gru with structure_term=true"):
        TrainConfig(**{**TINY, **changes, "structure_lr": 2.0})
