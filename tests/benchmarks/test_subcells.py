"""The sub-cells benchmark: where a teacher and the cells one removal leaves rank at each rung."""

import json
from dataclasses import replace

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from cellgraph.benchmarks import subcells
from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.cli.main import main
from cellgraph.discover.cache import cell_hash, cell_json
from cellgraph.discover.mutations import hashed_neighbours
from cellgraph.discover.space import CellSpace
from cellgraph.discover.strategies import EnumerationSearch, Record

pytest.importorskip("torch")
SIZES = ["--n-train", "40", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2"]


def _three_nodes():
    n0 = Node("add", "tanh", 1, x, h)
    return Node("add", "one_minus", 2, Node("add", "tanh", 0, zero, n0), n0)


def test_the_sub_cells_of_a_three_node_cell_are_named_by_their_removal_and_size():
    names = subcells.sub_cells(_three_nodes())
    assert names[cell_hash(_three_nodes())] == "teacher"
    sizes = sorted(name.split("(")[1] for name in names.values() if name != "teacher")
    assert sizes == ["1 node)", "2 nodes)", "2 nodes)", "2 nodes)"]


def _trial(key, losses):
    if 60 in losses:
        return create_trial(value=losses[60], intermediate_values=losses, user_attrs={"hash": key})
    return create_trial(state=TrialState.PRUNED, intermediate_values=losses, user_attrs={"hash": key})


def test_ranks_count_the_cells_at_each_rung_and_skip_the_rungs_a_cell_did_not_reach():
    trials = [_trial("t", {5: 0.3, 60: 0.01}), _trial("a", {5: 0.1, 60: 0.02}), _trial("b", {5: 0.5}),
              _trial("c", {5: 0.3})]
    rows = subcells.rung_ranks(trials, {"t": "teacher", "b": "remove b", "c": "remove c"})
    assert [(r["epochs"], r["cells"], r["best"]) for r in rows] == [(5, 4, 0.1), (60, 2, 0.01)]
    assert [(c["name"], c["rank"]) for c in rows[0]["ranked"]] == [("teacher", 2), ("remove c", 2), ("remove b", 4)]
    assert rows[1]["ranked"] == [{"name": "teacher", "rank": 1, "loss": 0.01}]


def test_ranks_among_the_cells_of_one_size_and_among_one_parents_children():
    one, two = Node("add", "tanh", 0, x, h), _three_nodes().children[0]
    big = _three_nodes()

    def made(key, cell, loss, parent=None):
        attrs = {"hash": key, "cell": cell_json(cell), **({"parent": parent} if parent is not None else {})}
        return create_trial(state=TrialState.PRUNED, intermediate_values={5: loss}, user_attrs=attrs)

    trials = [made("a", one, 0.1), made("b", two, 0.2), made("c", big, 0.3, parent=1), made("d", big, 0.4, parent=2),
              made("t", big, 0.5, parent=2), made("e", two, 0.6, parent=2)]
    cell, = subcells.rung_ranks(trials, {"t": "teacher"})[0]["ranked"]
    assert cell == {"name": "teacher", "rank": 5, "loss": 0.5, "size_rank": 3, "size_cells": 3, "sibling_rank": 2,
                    "siblings": 3}
    line = subcells.table([{"run": "r", "rungs": subcells.rung_ranks(trials, {"t": "teacher"})}]).splitlines()[1]
    assert line.split()[-2:] == ["3/3", "2/3"]


def test_the_record_of_a_tiny_enumeration_ranks_its_teacher(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["discover", "--teacher", "minimal:0:2-3", "--weight-scale", "1", "--strategy", "enumerate",
                 "--nodes", "1", "--budget", "12", "--fidelity", "1,2", "--restarts", "1", "--dir", str(run), *SIZES]) == 0
    capsys.readouterr()
    subcells.main(["--records", str(tmp_path / "rec"), str(run)])
    record = json.loads((tmp_path / "rec" / "subcells-run.json").read_text())
    assert record["teacher"] == "minimal:0:2-3" and record["nodes"] == 2 and record["finished"]
    trials = optuna.load_study(study_name="discover", storage=f"sqlite:///{run / 'study.db'}").trials
    assert [r["epochs"] for r in record["rungs"]] == [1, 2]
    assert record["rungs"][0]["cells"] == sum(1 in t.intermediate_values for t in trials) > 10
    assert any(c["name"].startswith("remove ") for c in record["rungs"][0]["ranked"])
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["run", "1", str(record["rungs"][0]["cells"])]


def test_a_folder_without_a_search_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        subcells.main(["--records", str(tmp_path / "rec"), str(tmp_path)])
    assert "is not a search folder with its study" in capsys.readouterr().err


def test_the_teachers_place_in_the_expansion_follows_its_best_sub_cells_rank_at_the_first_rung():
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=2)
    strategy = EnumerationSearch(nodes=1, expand=True)
    ones = [cell for cell, _ in strategy.listed(narrow)]
    teacher = Node("add", "sigmoid", 2, ones[0], h)

    def history(losses):
        study = optuna.create_study()
        study.add_trials([create_trial(state=TrialState.PRUNED, intermediate_values={1: loss},
                                       user_attrs={"hash": cell_hash(c), "cell": cell_json(c)})
                          for c, loss in zip(ones, losses)])
        return subcells.records(study.get_trials(), (1,))

    subs = set(subcells.sub_cells(teacher, narrow))
    places = {}
    for first in (0.1, 0.9):  # the teacher's sub-cells best, then worst, after the first rung
        losses = [first if cell_hash(c) in subs else 0.5 + 0.01 * k for k, c in enumerate(ones)]
        place = subcells.expansion_place(history(losses), teacher, strategy, narrow)
        parents = sum(cell_hash(c) in subs for c in ones)
        assert place["parents"] == len(ones) > parents
        assert place["parent_rank"] == (1 if first < 0.5 else len(ones) - parents + 1)
        places[first] = place["place"]
    assert 1 <= places[0.1] < places[0.9] <= subcells.expansion_size(strategy, narrow)
    assert subcells.expansion_place(history([0.1])[:1], teacher, strategy, narrow) is None  # the list unfinished


def test_the_absorbed_place_drops_the_listed_cells_the_absorbing_space_refuses_and_finds_the_absorbed_teacher():
    narrow = CellSpace(activations=("tanh", "one_minus", "identity"), kinds=("W",), max_nodes=2)
    strategy = EnumerationSearch(nodes=1, expand=True)
    ones = [cell for cell, _ in strategy.listed(narrow)]
    study = optuna.create_study()
    study.add_trials([create_trial(state=TrialState.PRUNED, intermediate_values={1: 0.5 + 0.01 * k},
                                   user_attrs={"hash": cell_hash(c), "cell": cell_json(c)}) for k, c in enumerate(ones)])
    history = subcells.records(study.get_trials(), (1,))
    teacher = Node("add", "one_minus", 2, next(c for c in ones if c.act == "tanh"), h)
    plain = subcells.expansion_place(history, teacher, strategy, narrow)
    place = subcells.absorbed_place(history, teacher, strategy, narrow)
    kept = sum(c.act != "one_minus" and c.children[0] != c.children[1] for c in ones)
    assert place["parents"] == kept < plain["parents"] == len(ones)
    assert subcells.expansion_place(history, teacher, strategy, replace(narrow, absorb=True)) is None


def test_the_pending_place_counts_only_the_cells_not_yet_trained_before_the_teacher_and_follows_all_rungs():
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=2)
    strategy = EnumerationSearch(nodes=1, expand=True)
    ones = [cell for cell, _ in strategy.listed(narrow)]
    teacher = Node("add", "sigmoid", 2, ones[-1], h)
    subs = set(subcells.sub_cells(teacher, narrow))
    # the teacher's sub-cells rank last at the first rung, and first at a later rung only they reached
    values = [{1: 0.9, 5: 0.1} if cell_hash(c) in subs else {1: 0.5 + 0.01 * k} for k, c in enumerate(ones)]
    study = optuna.create_study()
    study.add_trials([create_trial(state=TrialState.PRUNED, intermediate_values=v,
                                   user_attrs={"hash": cell_hash(c), "cell": cell_json(c)})
                      for c, v in zip(ones, values)])
    history = subcells.records(study.get_trials(), (1,), (1, 5))
    whole = subcells.expansion_place(history, teacher, strategy, narrow)
    assert subcells.pending_place(history, teacher, strategy, narrow)["place"] == whole["place"] > 1
    # the cells the expansion trained before the teacher's turn do not count
    ahead = []
    for child, key, _ in strategy.expansion_order(history, {r.hash for r in history}, narrow):
        if key == cell_hash(teacher) or len(ahead) == 3:
            break
        ahead.append(Record(len(history) + len(ahead), child, key, 1.0, False, early=(9.0,)))
    assert len(ahead) == 3
    assert subcells.pending_place(history + ahead, teacher, strategy, narrow)["place"] == whole["place"] - 3
    ranked = subcells.pending_place(history, teacher, replace(strategy, all_rungs=True), narrow)
    assert ranked["parent_rank"] == 2 and ranked["place"] < whole["place"]
    others = [r for r in history if r.hash not in subs]
    assert subcells.pending_place(others, teacher, strategy, narrow) is None  # no sub-cell trained: no place


def test_interleaving_two_runs_rankings_gives_the_place_of_a_search_with_a_probe_rung(tmp_path, capsys):
    """What ``--interleave`` computes from searches at 1 and at 2 epochs is what a search with
    rungs 1,2 and one probe does: the evaluator trains each rung from scratch, same seed."""
    def run(name, *fidelity):
        assert main(["discover", "--teacher", "minimal:0:2-3", "--weight-scale", "1", "--strategy", "enumerate",
                     "--expand", "--nodes", "1", "--budget", "30", "--restarts", "1", "--dir", str(tmp_path / name),
                     *fidelity, *SIZES]) == 0
        return tmp_path / name

    one, two, probed = run("one", "--fidelity", "1"), run("two", "--fidelity", "2"), \
        run("probed", "--fidelity", "1,2", "--probes", "1")
    capsys.readouterr()
    rec = tmp_path / "rec"
    subcells.main(["--records", str(rec), str(probed)])
    subcells.main(["--records", str(rec), "--interleave", str(one), str(two)])
    mixed = json.loads((rec / "interleave-one+two.json").read_text())
    assert mixed["epochs"] == [1, 2] and mixed["expansion"] is not None
    assert mixed["expansion"] == json.loads((rec / "subcells-probed.json").read_text())["expansion"]
    assert "one + two" in capsys.readouterr().out
    # the whole order of the parents, not only the teacher's: the merged records rank as the probed search's
    strategy = EnumerationSearch(nodes=1, expand=True)
    listed = {key for _, key in strategy.listed(CellSpace())}

    def turns(history):
        hashes = {r.number: r.hash for r in history}
        return list(dict.fromkeys(hashes[p] for _, _, p in strategy.expansion_order(history, listed, CellSpace())))

    def history(folder, early):
        trials = optuna.load_study(study_name="discover", storage=f"sqlite:///{folder / 'study.db'}").trials
        return subcells.records(trials, early)

    singles = [history(one, (1,)), history(two, (2,))]
    assert turns(subcells.merged(singles)) == turns(history(probed, (1, 2))) not in map(turns, singles)
    other = run("other", "--fidelity", "2", "--seed", "1")  # another seed is another search
    capsys.readouterr()
    with pytest.raises(SystemExit):
        subcells.main(["--records", str(rec), "--interleave", str(one), str(other)])
    assert "other is not the search of" in capsys.readouterr().err


def test_the_expansion_size_counts_each_insertion_into_a_listed_cell_once():
    narrow = CellSpace(ops=("add",), activations=("tanh",), kinds=("W",), max_nodes=2)
    strategy = EnumerationSearch(nodes=1, expand=True)
    (one, _), = strategy.listed(narrow)
    children = {key for name, _, key in hashed_neighbours(one, narrow, insert=True) if name.startswith("insert ")}
    assert subcells.expansion_size(strategy, narrow) == len(children) > 1
