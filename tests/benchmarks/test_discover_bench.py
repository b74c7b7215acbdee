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
