"""``benchmarks/storage_bench.py``: both journal modes write the same trials, each in the mode it
names, and the printout and record carry them (no speed assertions)."""

from __future__ import annotations

import json

import pytest

from cellgraph.benchmarks.storage_bench import MODES, main, storage_bench


def test_each_mode_writes_the_same_trials_in_its_own_journal_mode(tmp_path):
    result = storage_bench(trials=2, rungs=1, folder=str(tmp_path))
    rows = result["rows"]
    assert list(rows) == list(MODES)
    assert [r["journal_mode"] for r in rows.values()] == ["delete", "wal"]
    commits = {r["commits_per_trial"] for r in rows.values()}
    assert len(commits) == 1 and commits.pop() > 10  # a trial's writes are each a commit
    assert all(r["wall_ms_per_trial"] > 0 and r["cpu_ms_per_trial"] > 0 for r in rows.values())
    assert list(tmp_path.iterdir()) == []  # the studies are removed


def test_the_command_prints_the_table_and_writes_the_record(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--trials", "1", "--json", str(tmp_path / "missing" / "bench.json")])
    assert f"folder {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    main(["--trials", "1", "--rungs", "1", "--dir", str(tmp_path), "--json", str(tmp_path / "bench.json")])
    printed = capsys.readouterr().out
    assert all(f"| {name} |" in printed for name in MODES)
    record = json.loads((tmp_path / "bench.json").read_text())
    assert record["config"] == {"trials": 1, "rungs": 1} and "optuna" in record["versions"]
