"""The refits benchmark: a search's best cells retrained with other training seeds."""

import json

import pytest

from cellgraph.benchmarks import refits
from cellgraph.cli.main import main

pytest.importorskip("torch")
SIZES = ["--n-train", "40", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2"]


def test_the_search_seed_reproduces_the_searchs_objective_and_other_seeds_refit(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["discover", "--teacher", "minimal:0:2-3", "--weight-scale", "1", "--strategy", "enumerate",
                 "--nodes", "1", "--budget", "6", "--fidelity", "1,2", "--restarts", "2", "--lr", "0.05",
                 "--seed", "3", "--dir", str(run), *SIZES]) == 0
    capsys.readouterr()
    refits.main(["--records", str(tmp_path / "rec"), "--top", "2", "--seeds", "3", "4", "--", str(run)])
    record = json.loads((tmp_path / "rec" / "refits-run.json").read_text())
    assert record["search_seed"] == 3 and record["epochs"] == 2 and len(record["rows"]) == 2
    first, second = record["rows"]
    assert first["search"] <= second["search"] and first["trial"] != second["trial"]
    for row in record["rows"]:
        same, other = row["fits"]
        assert same["objective"] == row["search"]  # the run's own evaluator and seed: the same training
        assert other["objective"] != row["search"] and row["mean"] == (same["objective"] + other["objective"]) / 2
    assert "searched with seed 3" in capsys.readouterr().out


def test_a_folder_without_a_search_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        refits.main(["--records", str(tmp_path / "rec"), str(tmp_path)])
    assert "is not a search folder with its study" in capsys.readouterr().err
