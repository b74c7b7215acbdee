"""Exhaustive enumeration of the small cells and the strategy that proposes them."""

import random
from collections import Counter

import optuna
import pytest

from cellgraph.cell.expr import Node, h, x
from cellgraph.data.planted_values import load_planted_values
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.mutations import hashed_neighbours
from cellgraph.discover.search import discover
from cellgraph.discover.space import CellSpace, from_cell, validate
from cellgraph.discover.strategies import EnumerationSearch, RandomSearch, Record
from cellgraph.discover.synthetic import StructureEvaluator
from cellgraph.errors import CellGraphError

SPACE = CellSpace()
optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_the_default_space_has_16_cells_of_one_node_and_1616_of_two_each_valid_and_distinct():
    one, two = cells_of_size(1, SPACE), cells_of_size(2, SPACE)
    assert (len(one), len(two)) == (16, 1616)
    for cells, k in ((one, 1), (two, 2)):
        assert all(validate(c, SPACE) is None and len(c.internal_nodes()) == k for c in cells)
        keys = [cell_hash(c) for c in cells]
        assert len(set(keys)) == len(keys) and keys == sorted(keys)
    assert cell_hash(Node("add", "tanh", 1, x, h)) in {cell_hash(c) for c in one}  # the tanh RNN


def test_a_planted_two_node_teacher_is_among_the_two_node_cells():
    data = load_planted_values("minimal:0:2-3", 0, weight_scale=1.0, n_train=2, n_val=2, n_test=2)
    teacher = from_cell(data.cell, data.layout)
    assert len(teacher.internal_nodes()) == 2
    assert cell_hash(teacher) in {cell_hash(c) for c in cells_of_size(2, SPACE)}


def test_a_smaller_space_has_fewer_cells_and_size_zero_is_refused():
    narrow = CellSpace(ops=("add",), activations=("tanh",), kinds=("W",))
    assert [cell_hash(c) for c in cells_of_size(1, narrow)] == [cell_hash(Node("add", "tanh", 1, x, h))]
    with pytest.raises(CellGraphError, match="at least one generated node"):
        cells_of_size(0, SPACE)


def _record(k, cell):
    return Record(k, cell, cell_hash(cell), 1.0, True)


def test_enumeration_proposes_the_small_cells_first_in_a_seeded_order_then_random_ones():
    narrow = CellSpace(ops=("add", "mul"), activations=("tanh",), kinds=("W",), max_nodes=1)
    strategy, history, rng = EnumerationSearch(nodes=2, seed=0), [], random.Random(0)
    for k in range(len(cells_of_size(1, narrow))):
        proposal = strategy.propose(history, narrow, rng, Counter())
        assert proposal.origin == "enumerate" and cell_hash(proposal.root) not in {r.hash for r in history}
        history.append(_record(k, proposal.root))
    assert strategy.propose(history, narrow, rng, Counter()).origin == "random"  # max_nodes 1: all listed
    first = [cell_hash(EnumerationSearch(2, s).propose([], SPACE, rng, Counter()).root) for s in range(4)]
    assert len(set(first)) > 1  # the seed shuffles the order
    ones = {cell_hash(c) for c in cells_of_size(1, SPACE)}
    assert set(first) <= ones
    with pytest.raises(CellGraphError, match="nodes must be >= 1"):
        EnumerationSearch(nodes=0)


def test_enumeration_finds_a_two_node_structure_within_the_count_of_small_cells_where_random_search_does_not(tmp_path):
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",))
    cells = [*cells_of_size(1, narrow), *cells_of_size(2, narrow)]
    target = cells[-7]
    found = {}
    for name, strategy in (("enumerate", EnumerationSearch(nodes=2, seed=1)), ("random", RandomSearch())):
        result = discover(narrow, StructureEvaluator(target, noise=0.0), strategy, len(cells), seed=0,
                          target_hash=cell_hash(target), show_progress=False, run_dir=tmp_path / name)
        found[name] = result.target
        assert result.duplicates == 0 or name == "random"
    assert found["enumerate"] is not None and found["random"] is None


def test_grow_follows_the_list_with_insertions_around_the_best_listed_cell():
    narrow = CellSpace(ops=("add",), activations=("tanh", "sigmoid"), kinds=("W",))
    ones = cells_of_size(1, narrow)
    history = [Record(k, cell, cell_hash(cell), 1.0 + k, True) for k, cell in enumerate(ones)]
    rng = random.Random(0)
    assert EnumerationSearch(nodes=1).propose(history, narrow, rng, Counter()).origin == "random"
    proposal = EnumerationSearch(nodes=1, grow=True).propose(history, narrow, rng, Counter())
    assert proposal.origin == "insert" and proposal.parent == 0
    assert len(proposal.root.internal_nodes()) == 2 and validate(proposal.root, narrow) is None
    assert EnumerationSearch(nodes=1, grow=True).to_dict()["grow"] is True
    assert "grow" not in EnumerationSearch(nodes=1).to_dict()  # studies made before it resume


def test_expand_follows_the_list_with_the_insertions_of_its_cells_best_first_rung_loss_first():
    narrow = CellSpace(ops=("add",), activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=2)
    ones = cells_of_size(1, narrow)
    # the last listed cell did best at the first rung; the full-fidelity loss does not order them
    history = [Record(k, cell, cell_hash(cell), 1.0, True, early=(2.0 - k,)) for k, cell in enumerate(ones)]
    strategy, rng = EnumerationSearch(nodes=1, expand=True), random.Random(0)
    best = history[-1]
    children = set()
    while True:
        proposal = strategy.propose(history, narrow, rng, Counter())
        if proposal.parent != best.number:
            break
        assert proposal.origin == "insert" and len(proposal.root.internal_nodes()) == 2
        children.add(cell_hash(proposal.root))
        history.append(Record(len(history), proposal.root, cell_hash(proposal.root), 1.0, True, early=(0.5,)))
    assert len(children) > 3 and proposal.origin == "insert" and proposal.parent == 0  # then the next parent
    # a cell expanded is not a parent: only the listed ones are, so the expansion ends and random cells follow
    every = {cell_hash(child): child for one in ones for child in _insertions(one, narrow)}
    history += [Record(len(history) + i, child, key, 1.0, True) for i, (key, child) in enumerate(every.items())]
    assert strategy.propose(history, narrow, rng, Counter()).origin == "random"
    assert strategy.to_dict()["expand"] is True and "expand" not in EnumerationSearch().to_dict()
    with pytest.raises(CellGraphError, match="choose one"):
        EnumerationSearch(grow=True, expand=True)


def test_with_two_early_rungs_the_expansion_takes_its_parents_from_each_rungs_ranking_in_turn():
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=2)
    ones = cells_of_size(1, narrow)
    n = len(ones)
    # rung 0 ranks the listed cells 0, 1, 2, ...; rung 1 the other way round
    history = [Record(k, cell, cell_hash(cell), 1.0, False, early=(k, -k)) for k, cell in enumerate(ones)]
    strategy = EnumerationSearch(nodes=1, expand=True)
    turns = list(dict.fromkeys(parent for _, _, parent in
                               strategy.expansion_order(history, {r.hash for r in history}, narrow)))
    assert n >= 4 and turns[:4] == [0, n - 1, 1, n - 2] and sorted(turns) == list(range(n))
    # a record without the second rung's loss (pruned by a failure) is ranked by the first alone
    history[0] = Record(0, ones[0], cell_hash(ones[0]), None, False, early=(99.0,))
    turns = list(dict.fromkeys(parent for _, _, parent in
                               strategy.expansion_order(history, {r.hash for r in history}, narrow)))
    assert turns[:3] == [1, n - 1, 2] and turns[-1] == 0


def _insertions(cell, space):
    return [child for name, child, _ in hashed_neighbours(cell, space, insert=True) if name.startswith("insert ")]


def test_an_enumeration_that_grows_or_expands_finds_a_structure_one_node_beyond_its_list(tmp_path):
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",))
    target = Node("mul", "sigmoid", 2, Node("add", "tanh", 1, x, h), h)
    budget = len(cells_of_size(1, narrow)) + 60
    found = {}
    for name, strategy in (("grow", EnumerationSearch(1, 0, grow=True)), ("expand", EnumerationSearch(1, 0, expand=True)),
                           ("list", EnumerationSearch(1, 0))):
        result = discover(narrow, StructureEvaluator(target, noise=0.0), strategy, budget, seed=0,
                          target_hash=cell_hash(target), show_progress=False, run_dir=tmp_path / name)
        found[name] = result.target
    assert found["grow"] is not None and found["expand"] is not None and found["list"] is None


def test_with_depth_two_the_cells_the_expansion_made_are_parents_too_their_level_in_turn_with_the_list():
    narrow = CellSpace(ops=("add",), activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=3)
    ones = cells_of_size(1, narrow)
    n = len(ones)
    listed = [Record(k, cell, cell_hash(cell), 1.0, False, early=(float(k),)) for k, cell in enumerate(ones)]
    # two cells the expansion made (2 nodes): the second ranks first at its level
    made = [child for child in _insertions(ones[0], narrow)[:2]]
    history = listed + [Record(n + i, c, cell_hash(c), 1.0, False, early=(5.0 - i,)) for i, c in enumerate(made)]
    keys = {r.hash for r in listed}
    deep = EnumerationSearch(nodes=1, expand=True, depth=2)
    turns = list(dict.fromkeys(p for _, _, p in deep.expansion_order(history, keys, narrow)))
    assert turns[:4] == [0, n + 1, 1, n] and sorted(turns) == list(range(n + 2))  # the levels in turn
    assert all(len(child.internal_nodes()) == 3 for child, _, p in deep.expansion_order(history, keys, narrow)
               if p >= n)
    shallow = EnumerationSearch(nodes=1, expand=True)
    assert list(dict.fromkeys(p for _, _, p in shallow.expansion_order(history, keys, narrow))) == list(range(n))
    assert deep.to_dict()["depth"] == 2 and "depth" not in shallow.to_dict()  # earlier studies resume
    with pytest.raises(CellGraphError, match="depth"):
        EnumerationSearch(depth=2)


def test_with_all_rungs_a_parent_that_ranks_first_only_after_longer_training_comes_in_that_rankings_turn():
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",), max_nodes=2)
    ones = cells_of_size(1, narrow)
    n = len(ones)
    # the early rung ranks the cells 0, 1, 2, ...; the last ranks worst there but first at the later rung,
    # which only it and cell 0 reached
    history = [Record(k, cell, cell_hash(cell), 1.0, False, early=(float(k),), rungs=(float(k),)) for k, cell in
               enumerate(ones)]
    history[0] = Record(0, ones[0], history[0].hash, 1.0, False, early=(0.0,), rungs=(0.0, 0.5))
    history[-1] = Record(n - 1, ones[-1], history[-1].hash, 1.0, False, early=(n - 1.0,), rungs=(n - 1.0, 0.1))
    keys = {r.hash for r in history}

    def turns(strategy):
        return list(dict.fromkeys(p for _, _, p in strategy.expansion_order(history, keys, narrow)))

    assert n >= 4 and turns(EnumerationSearch(nodes=1, expand=True))[-1] == n - 1
    ranked = EnumerationSearch(nodes=1, expand=True, all_rungs=True)
    assert turns(ranked)[:3] == [0, n - 1, 1] and sorted(turns(ranked)) == list(range(n))
    assert ranked.to_dict()["all_rungs"] is True and "all_rungs" not in EnumerationSearch().to_dict()
    with pytest.raises(CellGraphError, match="all_rungs"):
        EnumerationSearch(all_rungs=True)


def test_a_record_holds_its_losses_at_the_early_rungs_and_at_every_rung_it_reached():
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED,
                                      intermediate_values={1: 0.9, 5: 0.5, 20: 0.2}, user_attrs={"hash": "k"})
    record = Record.from_trial(trial, x, (1, 5), (1, 5, 20, 60))
    assert record.early == (0.9, 0.5) and record.rungs == (0.9, 0.5, 0.2)
    assert Record.from_trial(trial, x, (1, 5)).rungs == ()


def test_probing_the_parents_only_lets_halving_stop_the_deepest_insertions_after_their_first_rung(tmp_path):
    narrow = CellSpace(activations=("tanh", "sigmoid"), kinds=("W",))
    target = Node("mul", "sigmoid", 2, Node("add", "tanh", 1, x, h), h)
    fidelity = Fidelity((1, 3, 9), 3, probes=1)
    inserted = {}
    for lean in (False, True):
        strategy = EnumerationSearch(1, 0, expand=True, probe_parents_only=lean)
        discover(narrow, StructureEvaluator(target, noise=0.0), strategy, 20, fidelity=fidelity, seed=0,
                 show_progress=False, run_dir=tmp_path / str(lean))
        study = optuna.load_study(study_name="discover", storage=f"sqlite:///{tmp_path / str(lean) / 'study.db'}")
        trials = [t for t in study.get_trials() if t.intermediate_values and t.user_attrs.get("budget") is None]
        listed = [t for t in trials if t.user_attrs["origin"] == "enumerate"]
        assert listed and all(3 in t.intermediate_values for t in listed)  # the parents train the probe
        inserted[lean] = [t for t in trials if t.user_attrs["origin"] == "insert"]
    assert inserted[False] and all(3 in t.intermediate_values for t in inserted[False])
    assert all(t.user_attrs["probing"] is False for t in inserted[True])
    assert any(3 not in t.intermediate_values and t.state == optuna.trial.TrialState.PRUNED for t in inserted[True])
    assert len(inserted[True]) > len(inserted[False])  # the same budget trains more of them
    assert EnumerationSearch(expand=True, probe_parents_only=True).to_dict()["probe_parents_only"] is True
    with pytest.raises(CellGraphError, match="probe_parents_only"):
        EnumerationSearch(probe_parents_only=True)
