"""The screen benchmark: what the screen at initialisation keeps, and what its stricter variant refuses."""

import json

from cellgraph.benchmarks import screen
from cellgraph.benchmarks.reach import structure
from cellgraph.cell.expr import Node, h, x
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace

NARROW = CellSpace(ops=("add",), activations=("tanh", "sigmoid", "identity"), kinds=("W",))


def test_screened_counts_the_kept_cells_and_the_others_by_their_first_refusal():
    cells = [Node("add", "tanh", 1, x, h), Node("add", "identity", 1, x, h), Node("add", "sigmoid", 1, x, h)]
    assert screen.screened(cells, Screen()) == {"kept": 1, "unbounded": 1, "forgetful": 1}


def test_the_stricter_variant_refuses_the_gru_and_the_searchs_keeps_it():
    gru = structure("gru")
    assert screen.VARIANTS["conditioning"].problem(gru) is None
    assert screen.VARIANTS["ablations"].problem(gru) == "drop"


def test_the_record_is_written_and_its_table_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(screen, "cells_of_size", lambda k, space: cells_of_size(k, NARROW))
    screen.main(["--records", str(tmp_path / "new"), "--targets", "rnn", "gru", "--three", "5"])
    record = json.loads((tmp_path / "new" / "screen.json").read_text())
    rows = {row["variant"]: row for row in record["rows"]}
    assert rows["conditioning"]["targets"] == {"rnn": "kept", "gru": "kept"}
    assert rows["ablations"]["targets"]["gru"] == "drop"
    assert sum(rows["conditioning"]["small"].values()) == rows["conditioning"]["small_cells"]
    assert sum(rows["conditioning"]["three"].values()) == 5
    printed = capsys.readouterr().out
    assert "targets kept: 1 of 2; refused: gru (drop)" in printed
    screen.main(["--records", str(tmp_path / "new"), "--table"])
    assert capsys.readouterr().out == printed
