"""The retraining of a search's best cells beside matched GRU and LSTM baselines, on the planted
task at one epoch: its runs, their parameter counts and the table."""

import json

import pytest

from cellgraph.benchmarks import found_retrains
from cellgraph.data.datasets import load_dataset
from cellgraph.discover.cache import cell_json
from cellgraph.discover.space import from_cell
from cellgraph.targets import target

pytest.importorskip("torch")


def test_matched_size_is_the_nearest_count():
    v = c = 27
    for model in ("gru", "lstm"):
        for want in (5_000, 60_300, 123_456):
            p = found_retrains.matched_size(model, want, v, c)
            count = lambda q: found_retrains.parameters(found_retrains.CORES[model](q), q, v, c)  # noqa: E731
            assert abs(count(p) - want) <= min(abs(count(p - 1) - want), abs(count(p + 1) - want))


def test_the_cells_and_matched_baselines_train_and_the_table_reads_them(tmp_path, capsys):
    search = tmp_path / "search"
    (search / "best").mkdir(parents=True)
    mgu = target("mgu")
    (search / "best" / "cell_1.json").write_text(json.dumps(cell_json(from_cell(mgu.cell, mgu.layout))))
    (search / "discovery.json").write_text(json.dumps({"config": {"task": "planted"}}))
    records = tmp_path / "records"
    args = ["--search", str(search), "--top", "1", "--seeds", "0", "--hidden-size", "16", "--epochs", "1",
            "--root", str(tmp_path / "runs"), "--records", str(records)]
    found_retrains.main(args)
    out = capsys.readouterr().out
    assert sorted(d.name for d in records.iterdir() if d.is_dir()) == ["cell1-s0", "gru-s0", "lstm-s0"]
    final = {name: json.loads((records / name / "final.json").read_text()) for name in ("cell1-s0", "gru-s0", "lstm-s0")}
    data = load_dataset("planted")
    v, c = len(data.vocab), data.n_classes
    cell = final["cell1-s0"]["parameters"]
    assert cell == found_retrains.parameters(2 * (2 * 16 * 16 + 16), 16, v, c)  # MGU: two trainable tuples
    sizes = {}
    for model in ("gru", "lstm"):
        config = json.loads((records / f"{model}-s0" / "config.json").read_text())
        sizes[model] = config["hidden_size"]
        assert sizes[model] == found_retrains.matched_size(model, cell, v, c) != 16
        assert config["epochs"] == 1 and config["task"] == "planted" and config["model"] == model
        assert final[f"{model}-s0"]["parameters"] == found_retrains.parameters(
            found_retrains.CORES[model](sizes[model]), sizes[model], v, c)
    rows = [line.split(" | ")[1] for line in out.splitlines() if line.startswith("| planted")]
    assert rows == ["cell1", "gru", "lstm"]
    assert out.splitlines()[-1] == (f"parameters: cell1 {cell:,} (p = 16), gru {final['gru-s0']['parameters']:,} "
                                    f"(p = {sizes['gru']}), lstm {final['lstm-s0']['parameters']:,} (p = {sizes['lstm']})")
    found_retrains.main(args)
    assert capsys.readouterr().out.startswith("cell1-s0: done\ngru-s0: done\nlstm-s0: done")
