"""``benchmarks/ledger_bench.py``: a step's reading of its study timed on a real search's study,
read in full and kept (no speed assertions)."""

from __future__ import annotations

import json

import pytest

from cellgraph.benchmarks import ledger_bench
from cellgraph.cli.main import main

pytest.importorskip("torch")
SIZES = ["--n-train", "40", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2"]


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    run = tmp_path_factory.mktemp("ledger") / "run"
    assert main(["discover", "--teacher", "minimal:0:2-3", "--weight-scale", "1", "--strategy", "random",
                 "--budget", "3", "--fidelity", "1,2", "--restarts", "1", "--dir", str(run), *SIZES]) == 0
    return run


def test_the_record_has_a_row_per_size_with_each_time(search, tmp_path, capsys):
    trials = len(ledger_bench.load_search(search)[2])
    ledger_bench.main([str(search), "--sizes", f"2,{trials}", "--repeat", "1", "--json", str(tmp_path / "l.json")])
    record = json.loads((tmp_path / "l.json").read_text())
    assert [r["trials"] for r in record["rows"]] == [2, trials] and record["run"] == "run"
    assert all(r[k] >= 0 for r in record["rows"] for k in r) and "optuna" in record["versions"]
    assert capsys.readouterr().out.splitlines()[2].startswith("| 2 |")


@pytest.mark.parametrize("sizes", ["1", "100000"])
def test_a_size_outside_the_runs_trials_is_one_line(search, capsys, sizes):
    with pytest.raises(SystemExit) as stop:
        ledger_bench.main([str(search), "--sizes", sizes])
    assert stop.value.code == 2 and "trials (give 2 or more)" in capsys.readouterr().err
