"""The landscape benchmark on tiny sizes: its record, resumption and table."""

import json

import pytest

from cellgraph.benchmarks import landscape

pytest.importorskip("torch")
pytest.importorskip("optuna")
TINY = ["--n-train", "40", "--n-val", "20", "--n-test", "20", "--seq-len", "3", "--p", "3", "--n-out", "2",
        "--epochs", "1", "--restarts", "1", "--weight-scale", "1"]


def test_the_landscape_records_every_cell_resumes_and_prints_its_groups(tmp_path, capsys):
    args = ["--records", str(tmp_path), "--targets", "mgu", "--lengths", "1", "2", "--per", "2", "--random", "1",
            *TINY]
    landscape.main(args)
    out = capsys.readouterr().out.splitlines()
    stored = json.loads((tmp_path / "landscape-mgu.json").read_text())
    names = [row["name"] for row in stored["rows"]]
    assert names == ["teacher", "gru", "walk 1 #0", "walk 1 #1", "walk 2 #0", "walk 2 #1", "random #0"]
    assert stored["spec"]["epochs"] == 1 and stored["spec"]["data"]["teacher"] == "mgu"
    assert [line.split()[1:3] for line in out[1:]] == [["teacher", "1"], ["gru", "1"], ["walk", "1"], ["walk", "2"],
                                                       ["random", "1"]]
    gru = stored["rows"][1]["details"]["val_mse"]
    below = sum(r["details"]["val_mse"] < gru for r in stored["rows"][2:4])
    assert out[3].split()[-1] == str(below)
    before = (tmp_path / "landscape-mgu.json").read_bytes()
    landscape.main(args + ["--per", "3"])  # the cells already there are kept, one more per length trained
    rows = json.loads((tmp_path / "landscape-mgu.json").read_text())["rows"]
    assert len(rows) == 9 and rows[:7] == stored["rows"] and before != (tmp_path / "landscape-mgu.json").read_bytes()
    with pytest.raises(SystemExit):
        landscape.main([*args, "--epochs", "2"])
    assert "other settings (epochs)" in capsys.readouterr().err


def test_the_table_says_when_a_teacher_has_no_record(tmp_path, capsys):
    landscape.main(["--table", "--records", str(tmp_path), "--targets", "mut1"])
    assert capsys.readouterr().out.splitlines()[1] == "mut1             (no record)"
