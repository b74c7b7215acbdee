"""The cell search's throughput benchmark, at tiny settings: it prints its tables and writes JSON."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("optuna")

from cellgraph.benchmarks import discover_bench  # noqa: E402


def test_tables_and_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    discover_bench.main(["--epochs", "1", "--restarts", "2", "--repeat", "1", "--budget", "1", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "| mgu |" in printed and "| 2 workers |" in printed
    result = json.loads(out.read_text())
    assert set(result["fit"]["cells"]) == {"mgu", "gru", "random 14-node"}
    row = result["fit"]["cells"]["mgu"]
    assert row["batched_s"] > 0 and row["looped_per_hour"] == pytest.approx(3600 / row["looped_s"])
    assert result["search"]["runs"]["2 workers"]["evaluations"] == 2  # the two workers shared one budget of 2


def test_batched_only_leaves_the_loop_out(tmp_path, capsys):
    discover_bench.main(["--epochs", "1", "--restarts", "2", "--repeat", "1", "--budget", "0", "--batched-only",
                         "--device", "cpu", "--json", str(tmp_path / "bench.json")])
    assert "| gru |" in capsys.readouterr().out
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["fit"]["device"] == "cpu" and result["machine"]["device"] == "cpu" and "search" not in result
    row = result["fit"]["cells"]["gru"]
    assert row["batched_s"] > 0 and row["looped_s"] is None and row["looped_per_hour"] is None
