"""The search's evaluator on a training task (the small data folder): each candidate is a
model=cell run whose validation bpc, penalised by complexity, is the objective; a later rung
resumes the run and ends where a straight run ends."""

import json
import math
from pathlib import Path

import pytest

import cellgraph
from cellgraph.backend import DiscoverBackend
from cellgraph.backends.torch.discover.task_evaluator import PROXY, TaskEvaluator, proxy_config
from cellgraph.discover.space import complexity, from_cell, to_cell
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

TINY = {"hidden_size": "8", "num_threads": "1"}


@pytest.fixture
def mgu():
    t = target("mgu")
    return to_cell(from_cell(t.cell, t.layout))


def test_the_objective_is_the_runs_validation_bpc_penalised_by_complexity(small_data, tmp_path, mgu):
    evaluator = TaskEvaluator(proxy_config("wiki5k", TINY), tmp_path)
    objective = evaluator.evaluate(*mgu, 1, 3)
    details = evaluator.last_details
    run = Path(details["run"])
    final = json.loads((run / "final.json").read_text())
    config = json.loads((run / "config.json").read_text())
    assert details["metric"] == "bpc" and details["val_bpc"] == final["val_bpc"] and details["test_bpc"] == final["test_bpc"]
    assert details["complexity"] == complexity(from_cell(*mgu)) == 11
    assert objective == pytest.approx(final["val_bpc"] * math.exp(0.01 * 11)) and math.isfinite(objective)
    assert details["seconds"] > 0 and details["wall_seconds"] > 0 and details["parameters"] == final["parameters"] > 0
    assert config["model"] == "cell" and config["seed"] == 3 and config["epochs"] == 1
    assert config["hidden_size"] == 8 and config["max_train"] == PROXY["max_train"]
    assert final["cell"]["document"] == json.loads((tmp_path / f"{run.name.rpartition('-s')[0]}.json").read_text())
    absolute = TaskEvaluator(proxy_config("wiki5k", TINY), tmp_path / "a", parsimony=0.5, penalty="absolute")
    assert absolute.objective(details) == pytest.approx(final["val_bpc"] + 0.5 * 11)


def test_a_later_rung_resumes_the_run_and_ends_as_a_straight_run(small_data, tmp_path, mgu):
    stepped = TaskEvaluator(proxy_config("wiki5k", TINY), tmp_path / "stepped")
    one = stepped.evaluate(*mgu, 1, 0)
    two = stepped.evaluate(*mgu, 2, 0)
    metrics = Path(stepped.last_details["run"]) / "metrics.jsonl"
    assert stepped.resumes and [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]
    straight = TaskEvaluator(proxy_config("wiki5k", TINY), tmp_path / "straight")
    assert straight.evaluate(*mgu, 2, 0) == pytest.approx(two, rel=1e-6) and two != one
    assert stepped.evaluate(*mgu, 1, 0) == pytest.approx(one, rel=1e-6)  # a run past the rung starts over


def test_the_proxy_lies_under_the_settings_and_the_search_keys_are_refused():
    config = proxy_config("wiki5k", {"hidden_size": "16", "lr": "0.01"})
    assert config.hidden_size == 16 and config.lr == 0.01 and config.max_eval == PROXY["max_eval"]
    assert config.task == "wiki5k" and config.model == "cell"
    assert proxy_config("ptb").batch_size == PROXY["batch_size"]
    with pytest.raises(CellGraphError, match="tasks with one: wiki, wiki5k, ptb"):
        proxy_config("sst")
    with pytest.raises(CellGraphError, match="--set epochs, seed: the search sets these"):
        proxy_config("wiki", {"epochs": "3", "seed": "1"})
    with pytest.raises(CellGraphError, match="hiden_size"):
        proxy_config("wiki", {"hiden_size": "3"})
    with pytest.raises(CellGraphError, match="model=gru on wiki"):
        TaskEvaluator(proxy_config("wiki").replace(model="gru", cell=""), "x")


def test_the_torch_plugin_makes_the_task_evaluator(tmp_path):
    found = cellgraph.backend("torch")
    assert isinstance(found, DiscoverBackend)
    made = found.task_evaluator("ptb", {"lr": "0.003"}, tmp_path, None, "absolute")
    assert made.config.lr == 0.003 and made.parsimony == 1e-3 and made.penalty == "absolute"
    assert "epochs" not in made.settings() and made.settings()["hidden_size"] == PROXY["hidden_size"]
    with pytest.raises(CellGraphError, match="parsimony weight"):
        found.task_evaluator("ptb", {}, tmp_path, -1.0)
