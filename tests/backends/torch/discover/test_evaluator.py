"""The search's torch evaluator: the objective is the fit's validation error plus the parsimony
term, and the command line's defaults are the fit's and the data's."""

import inspect
import math
from dataclasses import fields

import pytest

import cellgraph
from cellgraph.backend import DiscoverBackend
from cellgraph.backends.torch.discover.evaluator import PlantedEvaluator
from cellgraph.backends.torch.discover.fit import FitSettings, fit_cell
from cellgraph.cli.commands import discover as command
from cellgraph.data.planted_values import load_planted_values
from cellgraph.discover.evaluator import ERROR_FLOOR
from cellgraph.discover.space import complexity, from_cell, to_cell
from cellgraph.errors import CellGraphError
from cellgraph.targets import target


@pytest.fixture(scope="module")
def data():
    return load_planted_values("mgu", seed=0, n_train=50, n_val=20, n_test=20, seq_len=4, p=4, n_out=2)


def test_the_objective_is_the_validation_error_penalised_by_complexity(data):
    t = target("mgu")
    cell, layout = to_cell(from_cell(t.cell, t.layout))
    settings = FitSettings(epochs=1, restarts=2, batch_size=25)
    evaluator = PlantedEvaluator(data, settings, parsimony=0.01, num_threads=1)
    objective = evaluator.evaluate(cell, layout, 2, 3)
    fit = fit_cell(cell, layout, data, FitSettings(epochs=2, restarts=2, batch_size=25), 3)  # the rung's epochs
    details = evaluator.last_details
    assert details["val_mse"] == fit.loss and details["test_mse"] == fit.test_loss and details["complexity"] == 11
    assert math.isclose(objective, fit.loss * math.exp(0.01 * 11)) and details["seconds"] > 0
    absolute = PlantedEvaluator(data, settings, parsimony=0.01, num_threads=1, penalty="absolute")
    assert math.isclose(absolute.evaluate(cell, layout, 2, 3), fit.loss + 0.01 * 11)
    assert PlantedEvaluator(data, settings).parsimony == 0.1 and absolute.objective(details) == fit.loss + 0.01 * 11


def test_the_error_floor_raises_a_fit_below_it_and_is_on_by_default(data):
    details = {"val_mse": 4e-7, "complexity": 11}
    assert PlantedEvaluator(data).floor == ERROR_FLOOR == 1e-5
    assert PlantedEvaluator(data).objective(details) == pytest.approx(1e-5 * math.exp(0.1 * 11))
    assert PlantedEvaluator(data, floor=0.0).objective(details) == pytest.approx(4e-7 * math.exp(0.1 * 11))
    assert PlantedEvaluator(data).objective({"val_mse": 0.5, "complexity": 1}) == pytest.approx(0.5 * math.exp(0.1))
    assert cellgraph.backend("torch").planted_evaluator(data, floor=3e-6).floor == 3e-6
    with pytest.raises(CellGraphError, match="the error floor must be >= 0, got -1"):
        PlantedEvaluator(data, floor=-1.0)


def test_the_torch_plugin_makes_the_evaluator_by_name(data):
    found = cellgraph.backend("torch")
    assert isinstance(found, DiscoverBackend) and not isinstance(cellgraph.backend("numpy"), DiscoverBackend)
    made = found.planted_evaluator(data, 0.5, None, "absolute", restarts=3, lr=0.1, batch_size=10, clip=2.0)
    assert made.parsimony == 0.5 and made.penalty == "absolute" and made.settings == FitSettings(restarts=3, lr=0.1, batch_size=10, clip=2.0)
    with pytest.raises(CellGraphError, match="parsimony"):
        PlantedEvaluator(data, parsimony=-1.0)


def test_the_command_line_defaults_are_the_fits_and_the_datas():
    defaults = {f.name: f.default for f in fields(FitSettings)}
    assert {k: d for k, (_, d) in command.FIT.items()} == {k: defaults[k] for k in command.FIT}
    assert set(defaults) - set(command.FIT) == {"epochs"}
    params = inspect.signature(load_planted_values).parameters
    assert command.SIZES == {k: params[k].default for k in command.SIZES}
    assert params["weight_scale"].default == 2.0 and defaults["epochs"] == 20  # the flags' help says so
