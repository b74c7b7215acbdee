"""Where data is looked for (``--data``, ``$CELLGRAPH_DATA``, the cache, ``../shared/data`` from
the working directory), the errors that name ``cellgraph data fetch``, and what a run records
about the data it read (``config.json``'s resolved ``data_dir``, ``env.json``'s sha256s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cellgraph.cli import main
from cellgraph.data.datadir import locate, resolve_data_dir
from cellgraph.data.datasets import load_dataset
from cellgraph.data.glove import find_glove
from cellgraph.data.text import find_enwik8
from cellgraph.errors import CellGraphError

from needs_data import DATA, needs_data as real


def _sst(folder: Path) -> Path:
    (folder / "sst").mkdir(parents=True)
    for name in ("train.txt", "dev.txt", "test.txt"):
        (folder / "sst" / name).write_text("(2 ok)\n")
    return folder


@pytest.fixture
def machine(tmp_path, monkeypatch) -> Path:
    """A fresh machine: an empty home, no $CELLGRAPH_DATA, working directory ``tmp/work/repo``."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CELLGRAPH_DATA", raising=False)
    (tmp_path / "work" / "repo").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work" / "repo")
    return tmp_path


def test_resolution_order(machine, monkeypatch):
    cache, shared = machine / "home" / ".cache" / "cellgraph", machine / "work" / "shared" / "data"
    _sst(shared)
    assert locate("sst") == (shared, "../shared/data, development fallback")
    _sst(cache)
    assert locate("sst") == (cache, "cache")
    (shared / "ptb").mkdir()  # an empty data set folder does not hold the data set
    with pytest.raises(CellGraphError, match="no ptb data in .*run `cellgraph data fetch ptb`"):
        resolve_data_dir(None, "ptb")
    monkeypatch.setenv("CELLGRAPH_DATA", str(machine / "env"))
    with pytest.raises(CellGraphError, match=r"env \(from \$CELLGRAPH_DATA\) does not exist; `cellgraph data "
                                             "fetch sst` downloads it"):
        resolve_data_dir(None, "sst")
    (machine / "env").mkdir()
    assert locate("sst") == (machine / "env", "from $CELLGRAPH_DATA")  # it wins, even without the set
    assert resolve_data_dir(shared, "sst") == shared


def test_fallback_is_never_next_to_the_installed_package(machine):
    """From a working directory without ../shared/data nothing is found, wherever the package
    (here: this checkout, beside ../shared/data in development) is installed."""
    with pytest.raises(CellGraphError, match="no data folder in .*: run `cellgraph data fetch NAME`"):
        resolve_data_dir()
    with pytest.raises(CellGraphError, match=f"no sst data in {machine}/home/.cache/cellgraph: "
                                             "run `cellgraph data fetch sst`"):
        load_dataset("sst")


def test_missing_data_names_the_fetch_command(machine, capsys):
    empty = machine / "empty"
    empty.mkdir()
    for name, command in [("wiki", "wiki"), ("wiki5k", "wiki"), ("ptb", "ptb"), ("sst", "sst")]:
        with pytest.raises(CellGraphError, match=f"`cellgraph data fetch {command}`"):
            load_dataset(name, empty)
    with pytest.raises(CellGraphError, match="`cellgraph data fetch glove`"):
        find_glove(empty)
    assert main(["train", "--task", "ptb", "--model", "gru", "--out", str(machine / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cellgraph train: error: no ptb data in ") and err.count("\n") == 1
    assert "run `cellgraph data fetch ptb`" in err
    assert not (machine / "run").exists()  # the data is resolved before the run folder is made


def test_an_unfinished_download_is_not_data(tmp_path):
    (tmp_path / "enwik8").mkdir()
    (tmp_path / "enwik8" / "enwik8-prefix-4154064.part").write_text("<mediawiki>")
    with pytest.raises(CellGraphError, match="no enwik8 file"):
        find_enwik8(tmp_path)


@real
def test_run_records_its_data_folder_and_checksums(tmp_path, monkeypatch, capsys):
    from cellgraph.backends.torch.runs.train import train
    from cellgraph.experiment.config import TrainConfig

    from cellgraph.data.fetch import SOURCES

    sums = {os.path.realpath(DATA / file.path): file.sha256 for files in SOURCES.values() for file in files}
    monkeypatch.chdir(DATA.parent)
    config = TrainConfig(task="sst", model="gru", data_dir=DATA.name, glove=f"{DATA.name}/glove", hidden_size=100,
                         epochs=1, max_train=8, max_eval=8, num_threads=1)
    train(config, tmp_path / "run", log=lambda s: None)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())
    assert recorded["data_dir"] == os.path.realpath(DATA)  # given relative: recorded resolved (a linked folder too)
    assert recorded["glove"] == f"{DATA.name}/glove"
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    read = [*(f"sst/{name}" for name in ("dev.txt", "test.txt", "train.txt")), "glove/glove.6B.100d.first2604.txt"]
    assert env["data_sha256"] == {os.path.realpath(DATA / path): sums[os.path.realpath(DATA / path)] for path in read}

    # on a machine that keeps the data elsewhere, --resume takes --data
    recorded["data_dir"] = str(tmp_path / "moved")
    (tmp_path / "run" / "config.json").write_text(json.dumps(recorded))
    assert main(["train", "--resume", str(tmp_path / "run")]) == 2
    assert f"data folder {tmp_path}/moved (given) does not exist" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "run"), "--data", DATA.name]) == 0


def test_generated_task_records_no_data(tmp_path):
    from cellgraph.backends.torch.runs.train import train
    from cellgraph.experiment.config import TrainConfig

    train(TrainConfig(task="planted", model="gru", hidden_size=8, epochs=1, max_train=16, max_eval=8,
                      num_threads=1), tmp_path, log=lambda s: None)
    assert json.loads((tmp_path / "config.json").read_text())["data_dir"] == ""
    assert json.loads((tmp_path / "env.json").read_text())["data_sha256"] == {}
