"""The reach benchmark: each teacher's move distance from the search's start, and its record."""

import json

import pytest

from cellgraph.benchmarks import reach


def test_reach_records_the_shells_and_each_teachers_distance(tmp_path, capsys):
    reach.main(["--records", str(tmp_path), "--targets", "rnn", "mgu", "gru", "minimal:0:2-3", "--depth", "2"])
    out = capsys.readouterr().out.splitlines()
    stored = json.loads((tmp_path / "reach-rnn.json").read_text())
    assert stored["config"] == {"start": "rnn", "depth": 2, "motifs": True}
    assert stored["shells"][:2] == [1, 13] and stored["shells"][2] > 13
    assert stored["distances"] == {"rnn": 0, "mgu": 2, "gru": 2, "minimal:0:2-3": None}
    assert stored["versions"]["cellgraph"]
    assert out[0].endswith(f"(within 2: {sum(stored['shells']):,})")
    assert [line.split() for line in out[2:]] == [["rnn", "0"], ["mgu", "2"], ["gru", "2"], ["minimal:0:2-3", ">", "2"]]


def test_without_the_motifs_the_gru_is_farther(tmp_path):
    reach.main(["--records", str(tmp_path), "--targets", "gru", "--depth", "2", "--no-motifs"])
    stored = json.loads((tmp_path / "reach-rnn-nomotifs.json").read_text())
    assert stored["distances"] == {"gru": None} and stored["config"]["motifs"] is False


def test_a_negative_depth_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        reach.main(["--records", str(tmp_path), "--targets", "gru", "--depth", "-1"])
    assert "--depth must be >= 0" in capsys.readouterr().err
