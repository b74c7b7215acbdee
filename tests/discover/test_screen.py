import random
from collections import Counter

import pytest

from cellgraph.cell.expr import Node, h, x
from cellgraph.benchmarks.reach import structure
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace
from cellgraph.discover.strategies import EnumerationSearch, LocalSearch, RandomSearch, Record
from cellgraph.errors import CellGraphError

SPACE = CellSpace()
NARROW = CellSpace(ops=("add", "mul"), activations=("tanh", "sigmoid", "identity"), kinds=("W",))


def _passes(root) -> bool:
    return Screen().problem(root) is None


@pytest.mark.parametrize("name", ["rnn", "gru", "mgu", "mut1", "mut2", "mut3", "minimal:0:2-3", "minimal:1:2-3"])
def test_the_named_targets_and_the_planted_random_teachers_pass_the_screen(name):
    assert _passes(structure(name))


def test_the_screen_refuses_cells_whose_states_grow_or_forget_and_names_why():
    assert Screen().problem(Node("add", "identity", 1, x, h)) == "unbounded"  # a linear RNN at weight scale 1
    assert Screen().problem(Node("add", "sigmoid", 1, x, h)) == "forgetful"
    assert Screen().problem(Node("add", "tanh", 1, x, h)) is None


def test_the_verdict_is_the_structures_alone_and_a_sixth_of_the_small_cells_pass():
    cells = [*cells_of_size(1, SPACE), *cells_of_size(2, SPACE)]
    kept = [c for c in cells if _passes(c)]
    assert len(kept) == 282  # of 1,632 (docs/discover.md, *The screen*)
    one = kept[0]
    assert Screen().problem(one) is None and Screen(draws=1).problem(one) in (None, "unbounded", "deaf", "chaotic",
                                                                             "forgetful")
    with pytest.raises(CellGraphError, match="draws must be >= 1"):
        Screen(draws=0)


def _history(cells):
    return [Record(k, c, cell_hash(c), 1.0 + k, True) for k, c in enumerate(cells)]


def test_a_screened_enumeration_lists_only_the_cells_the_screen_keeps_then_draws_kept_random_cells():
    listed = [c for k in (1, 2) for c in cells_of_size(k, NARROW)]
    kept = {cell_hash(c) for c in listed if _passes(c)}
    assert 0 < len(kept) < len(listed)
    strategy, history, rng = EnumerationSearch(nodes=2, seed=0, screen=Screen()), [], random.Random(0)
    for _ in range(len(kept)):
        proposal = strategy.propose(history, NARROW, rng, Counter())
        assert proposal.origin == "enumerate"
        history.append(_history([proposal.root])[0])
    assert {r.hash for r in history} == kept
    rejected = Counter()
    for _ in range(5):
        proposal = strategy.propose(history, NARROW, rng, rejected)
        assert proposal.origin == "random" and _passes(proposal.root)
    assert strategy.to_dict()["screen"] == {"draws": 3} and "screen" not in EnumerationSearch().to_dict()


def test_random_search_with_the_screen_proposes_only_kept_cells_and_counts_the_others():
    rng, rejected = random.Random(1), Counter()
    proposals = [RandomSearch(Screen()).propose([], SPACE, rng, rejected).root for _ in range(20)]
    assert all(_passes(p) for p in proposals)
    assert sum(n for reason, n in rejected.items() if reason.startswith("screen: ")) > 0
    unscreened = [RandomSearch().propose([], SPACE, random.Random(1), Counter()).root for _ in range(20)]
    assert not all(_passes(p) for p in unscreened)


def test_screened_local_search_and_grow_propose_only_kept_neighbours():
    start = Node("add", "tanh", 1, x, h)
    rng = random.Random(0)
    local = LocalSearch(seeds=(start,), screen=Screen())
    history = _history([start])
    for _ in range(15):
        proposal = local.propose(history, SPACE, rng, Counter())
        assert _passes(proposal.root)
        history.append(Record(len(history), proposal.root, cell_hash(proposal.root), 5.0, True))
    ones = cells_of_size(1, NARROW)
    grown = EnumerationSearch(nodes=1, grow=True, screen=Screen())
    history = _history([c for c in ones if _passes(c)])
    for _ in range(10):
        proposal = grown.propose(history, NARROW, rng, Counter())
        assert proposal.origin == "insert" and _passes(proposal.root)
        history.append(Record(len(history), proposal.root, cell_hash(proposal.root), 50.0, True))
