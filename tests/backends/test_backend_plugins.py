"""Backend discovery through the ``cellgraph.backends`` entry points."""

import contextlib
import importlib
import json
import subprocess
import sys
import types
from importlib import metadata

import pytest

import cellgraph
from cellgraph import CellGraphError

backend_module = importlib.import_module("cellgraph.backend")  # the package exports a function of that name


def _fake_backend(name: str = "fake"):
    return types.SimpleNamespace(name=name, evaluate=lambda *a: {}, evaluate_cell=lambda *a: {})


class _Trainer:
    """A training backend that records what the CLI asks of it."""

    name = "trainer"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def evaluate(self, *a):
        return {}

    def evaluate_cell(self, *a):
        return {}

    def resolve_device(self, name):
        return "cpu"

    @contextlib.contextmanager
    def launched(self, device):
        yield types.SimpleNamespace(writes=True)

    def train(self, config, out_dir, resume=False, argv=None, log=print, dist=None):
        self.calls.append(("train", config.backend, config.model, str(out_dir), resume, dist.writes))
        return {}

    def evaluate_run(self, run_dir, split="test", checkpoint="best", mode=None, device=None):
        self.calls.append(("evaluate_run", str(run_dir), split, checkpoint))
        return {"metric": "accuracy", f"{split}_accuracy": 0.5, "epoch": 1, "mode": "hard", "n": 3}

    def load_run(self, path, checkpoint="best", device=None):
        self.calls.append(("load_run", str(path), checkpoint))
        return "loaded"


@pytest.fixture
def fake_plugins(monkeypatch):
    """Entry points ``fake`` (a good plugin), ``broken`` (import fails), ``odd`` (no protocol)."""
    module = types.ModuleType("cellgraph_fake_plugin")
    module.backend = _fake_backend()
    module.odd = object()
    module.trainer = _Trainer()
    monkeypatch.setitem(sys.modules, "cellgraph_fake_plugin", module)
    points = [
        metadata.EntryPoint("fake", "cellgraph_fake_plugin:backend", backend_module.ENTRY_POINT_GROUP),
        metadata.EntryPoint("broken", "cellgraph_no_such_module:backend", backend_module.ENTRY_POINT_GROUP),
        metadata.EntryPoint("odd", "cellgraph_fake_plugin:odd", backend_module.ENTRY_POINT_GROUP),
        metadata.EntryPoint("trainer", "cellgraph_fake_plugin:trainer", backend_module.ENTRY_POINT_GROUP),
    ]

    def entry_points(group=None):
        assert group == backend_module.ENTRY_POINT_GROUP
        return metadata.EntryPoints(points)

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    backend_module.backend.cache_clear()
    yield module
    backend_module.backend.cache_clear()


def test_names_come_from_entry_points(fake_plugins):
    assert cellgraph.backend_names() == ("broken", "fake", "odd", "trainer")


def test_backend_loads_and_caches(fake_plugins):
    loaded = cellgraph.backend("fake")
    assert loaded is fake_plugins.backend
    assert isinstance(loaded, backend_module.Backend)
    assert not isinstance(loaded, backend_module.SearchBackend)
    fake_plugins.backend = _fake_backend("replaced")
    assert cellgraph.backend("fake") is loaded  # cached: not loaded again


def test_unknown_backend_lists_installed(fake_plugins):
    with pytest.raises(CellGraphError, match=r"unknown backend 'jax' \(installed: broken, fake, odd, trainer"):
        cellgraph.backend("jax")


def test_failing_plugin_names_plugin_and_cause(fake_plugins):
    with pytest.raises(CellGraphError, match=r"backend plugin 'broken' \(cellgraph_no_such_module:backend\) "
                                             r"failed to load: ModuleNotFoundError"):
        cellgraph.backend("broken")


def test_object_without_protocol_is_rejected(fake_plugins):
    with pytest.raises(CellGraphError, match="plugin 'odd' .* without the Backend protocol"):
        cellgraph.backend("odd")


def test_installed_numpy_backend_is_a_search_backend():
    backend_module.backend.cache_clear()
    assert {"numpy", "torch"} <= set(cellgraph.backend_names())
    numpy_backend = cellgraph.backend("numpy")
    assert numpy_backend.name == "numpy"
    assert isinstance(numpy_backend, backend_module.SearchBackend)
    assert numpy_backend is importlib.import_module("cellgraph.backends.numpy.plugin").backend


def test_core_and_numpy_backend_run_without_torch():
    code = (
        "import sys, numpy as np, cellgraph\n"
        "from cellgraph.cell.expr import x, h\n"
        "b = cellgraph.backend('numpy')\n"
        "p = 3; I = (np.eye(p), np.eye(p), np.zeros(p))\n"
        "out = b.evaluate_cell(cellgraph.target('gru').cell, {x: np.ones(p), h: np.ones(p)}, [I] * 4)\n"
        "assert out['h'].shape == (p,)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_backend_that_cannot_train_is_refused_by_name(fake_plugins):
    assert isinstance(backend_module.training_backend("trainer"), backend_module.TrainingBackend)
    with pytest.raises(CellGraphError, match=r"backend 'fake' evaluates cells but cannot train or load runs "
                                             r"\(training backends installed: trainer\); set backend=trainer"):
        backend_module.training_backend("fake")


def test_the_cli_trains_evaluates_and_loads_through_the_backend_setting(fake_plugins, tmp_path, capsys):
    from cellgraph.cli import main
    from cellgraph.experiment.runs import load_run

    out = tmp_path / "run"
    assert main(["train", "--task", "planted", "--model", "gru", "--backend", "trainer", "--out", str(out)]) == 0
    assert fake_plugins.trainer.calls == [("train", "trainer", "gru", str(out), False, True)]
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"task": "planted", "model": "gru", "backend": "trainer"}))
    assert main(["eval", str(out), "--split", "val"]) == 0  # the run's own backend setting
    assert "val_accuracy 0.500000" in capsys.readouterr().out
    assert load_run(out, "last") == "loaded"
    assert fake_plugins.trainer.calls[1:] == [("evaluate_run", str(out), "val", "best"), ("load_run", str(out), "last")]
    assert main(["train", "--task", "planted", "--model", "gru", "--backend", "fake", "--out", str(tmp_path / "b")]) == 2
    assert "backend 'fake' evaluates cells but cannot train" in capsys.readouterr().err


def test_installed_torch_backend_trains():
    pytest.importorskip("torch")
    backend_module.backend.cache_clear()
    assert isinstance(cellgraph.backend("torch"), backend_module.TrainingBackend)
    assert not isinstance(cellgraph.backend("numpy"), backend_module.TrainingBackend)
