"""The early-ranks benchmark: where a teacher ranks among screened cells of its size at cheap fidelities."""

import json

import pytest

from cellgraph.benchmarks import early_ranks
from cellgraph.discover.screen import Screen

pytest.importorskip("torch")
TINY = {"n_train": 20, "n_val": 10, "n_test": 10, "seq_len": 4}


def test_rank_counts_the_strictly_lower_and_ties_share_the_better_rank():
    assert early_ranks.rank(0.5, [0.1, 0.5, 0.9]) == 2
    assert early_ranks.rank(0.05, [0.1, 0.5]) == 1


def test_the_sample_is_screened_seeded_and_of_the_teachers_size():
    first = early_ranks.screened_sample(2, 6, seed=0)
    assert len(first) == 6 and all(len(c.internal_nodes()) == 2 and Screen().problem(c) is None for c in first)
    assert early_ranks.screened_sample(2, 6, seed=0) == first != early_ranks.screened_sample(2, 6, seed=1)


def test_the_record_ranks_the_teacher_at_each_fidelity_and_the_table_reads_it(tmp_path, monkeypatch, capsys):
    real = early_ranks.early_ranks
    monkeypatch.setattr(early_ranks, "early_ranks", lambda *args: real(*args, sizes=TINY))
    early_ranks.main(["--records", str(tmp_path), "--teacher", "minimal:0:2-3", "--cells", "3", "--epochs", "1,2"])
    record = json.loads((tmp_path / "early-ranks-minimal-0-2-3.json").read_text())
    assert [row["epochs"] for row in record["rows"]] == [1, 2] and record["sample"] == 3
    assert all(1 <= row["rank"] <= row["cells"] == 4 for row in record["rows"])
    printed = capsys.readouterr().out
    early_ranks.main(["--records", str(tmp_path), "--table"])
    assert capsys.readouterr().out == printed and "minimal:0:2-3" in printed


def test_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        early_ranks.main(["--records", str(tmp_path), "--teacher", "minimal:0:2-3", "--epochs", "1,x"])
    assert "--epochs takes whole numbers" in capsys.readouterr().err


def test_the_sub_cells_are_the_screened_removals_of_one_node():
    from cellgraph.discover.mutations import insertions
    from cellgraph.discover.cache import cell_hash
    from cellgraph.discover.planted import planted_search

    _, root, _, _ = planted_search("minimal:25:2-3", 0, TINY, weight_scale=1.0)
    subs = early_ranks.screened_sub_cells(root)
    assert subs and all(change.startswith("remove ") for change, _ in subs)
    assert all(len(c.internal_nodes()) == 2 and Screen().problem(c) is None for _, c in subs)
    # each is a parent of the expansion: one insertion gives the teacher back
    assert all(cell_hash(root) in {cell_hash(child) for _, child in insertions(c, early_ranks.CellSpace())}
               for _, c in subs)


def test_the_sub_cell_record_ranks_each_sub_cell_and_keeps_the_best(tmp_path, monkeypatch, capsys):
    real = early_ranks.sub_cell_ranks
    monkeypatch.setattr(early_ranks, "sub_cell_ranks", lambda *args: real(*args, sizes=TINY))
    early_ranks.main(["--records", str(tmp_path), "--teacher", "minimal:25:2-3", "--cells", "4", "--epochs", "1",
                      "--sub-cells"])
    record = json.loads((tmp_path / "early-ranks-sub-minimal-25-2-3.json").read_text())
    row, = record["rows"]
    assert record["nodes"] == 2 and record["sample"] == 4 and row["cells"] == 5
    assert row["rank"] == min(r["rank"] for r in row["sub_cells"]) and len(row["sub_cells"]) >= 1
    assert "minimal:25:2-3 sub" in capsys.readouterr().out
