"""``benchmarks/proposal_bench.py``: a proposal's bookkeeping timed on a real expansion's study,
the kept records and insertions giving what making them again gives (no speed assertions)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from cellgraph.benchmarks import proposal_bench
from cellgraph.benchmarks.subcells import expansion_strategy, load_search, search_space
from cellgraph.cli.main import main
from cellgraph.discover import strategies
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.search import History

pytest.importorskip("torch")
SIZES = ["--n-train", "40", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2"]


def _search(folder, *flags, budget="12"):
    assert main(["discover", "--teacher", "minimal:0:2-3", "--weight-scale", "1", "--strategy", "enumerate",
                 "--nodes", "1", "--budget", budget, "--fidelity", "1,2", "--restarts", "1", "--dir", str(folder),
                 *flags, *SIZES]) == 0


@pytest.fixture(scope="module")
def expansion(tmp_path_factory):
    run = tmp_path_factory.mktemp("proposal") / "run"
    _search(run, "--expand", budget="24")  # past the 16 cells of one node: the last proposals insert
    return run


def test_the_kept_insertions_and_records_give_the_same_proposal_as_made_again(expansion):
    spec, _, trials = load_search(expansion)
    strategy, space = expansion_strategy(spec), search_space(spec)
    kept = History(Fidelity.from_dict(spec["fidelity"]))
    strategy.propose(kept(trials[:len(trials) // 2]), space, random.Random(0), Counter())  # fills both
    later = strategy.propose(kept(trials), space, random.Random(0), Counter())
    strategies._insertions.cache_clear()
    strategies._insertion_keys.cache_clear()
    made = History(kept.fidelity)(trials)
    assert kept(trials) == made and [r.rungs for r in kept(trials)] == [r.rungs for r in made]
    assert later.origin == "insert" and later == strategy.propose(made, space, random.Random(0), Counter())


def test_the_record_has_a_row_per_size_with_each_time(expansion, tmp_path, capsys):
    trials = len(load_search(expansion)[2])
    proposal_bench.main([str(expansion), "--sizes", f"5,{trials}", "--repeat", "1", "--json", str(tmp_path / "p.json")])
    record = json.loads((tmp_path / "p.json").read_text())
    assert [r["trials"] for r in record["rows"]] == [5, trials] and record["run"] == "run"
    assert record["rows"][0]["records"] <= 5 < record["rows"][1]["records"] <= trials
    assert all(r[k] >= 0 for r in record["rows"] for k in r)
    assert capsys.readouterr().out.splitlines()[2].startswith("| 5 |")
    assert [r["trials"] for r in proposal_bench.proposal_costs(expansion, repeat=1)["rows"]] == [trials]  # all by default


@pytest.mark.parametrize("flags, sizes, message", [((), "5", "ran no best-first expansion"),
                                                   (("--expand",), "100000", "has")])
def test_a_search_without_an_expansion_or_a_size_past_its_trials_is_one_line(tmp_path, capsys, flags, sizes, message):
    _search(tmp_path / "run", *flags)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        proposal_bench.main([str(tmp_path / "run"), "--sizes", sizes])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_a_record_into_a_missing_folder_is_refused_before_the_study_is_read(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        proposal_bench.main([str(tmp_path / "no-run"), "--json", str(tmp_path / "no" / "p.json")])
    assert stop.value.code == 2 and f"folder {tmp_path / 'no'} does not exist" in capsys.readouterr().err
