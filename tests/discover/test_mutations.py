import random
from collections import Counter

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.mutations import MUTATIONS, mutate
from cellgraph.discover.space import CellSpace, sample_cell, validate
from tests.discover.cells import gru

SPACE = CellSpace()


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_mutation_gives_a_valid_cell_or_a_named_reason(name):
    rng = random.Random(0)
    outcomes = Counter()
    for _ in range(60):
        parent = sample_cell(SPACE, rng)
        child = MUTATIONS[name](parent, rng, SPACE)
        reason = validate(child, SPACE)
        outcomes["valid" if reason is None else "rejected"] += 1
        assert isinstance(child, Node) or reason == "the root is a leaf"
    assert outcomes["valid"] > 0


def test_mutate_returns_a_valid_child_or_a_reason_never_both_and_every_kind_occurs():
    rng = random.Random(1)
    names, reasons = Counter(), Counter()
    for _ in range(100):
        parent = sample_cell(SPACE, rng)
        m = mutate(parent, rng, SPACE)
        names[m.name] += 1
        assert (m.child is None) == (m.reason is not None)
        if m.child is None:
            reasons[m.reason] += 1
        else:
            assert validate(m.child, SPACE) is None and cell_hash(m.child) != cell_hash(parent)
    assert set(names) == set(MUTATIONS) and sum(reasons.values()) > 0


def _gru_variant(act: str, reset: bool) -> Node:
    """The GRU with the candidate's activation ``act`` and, without ``reset``, h in place of r * h."""
    r, z = Node("add", "sigmoid", 1, x, h), Node("add", "sigmoid", 2, x, h)
    htil = Node("add", act, 3, x, Node("mul", "identity", 0, h, r) if reset else h)
    omz = Node("add", "one_minus", 0, zero, z)
    return Node("add", "identity", 0, Node("mul", "identity", 0, h, z), Node("mul", "identity", 0, omz, htil))


def test_the_neighbourhood_of_the_gru_holds_known_single_changes():
    assert cell_hash(_gru_variant("tanh", True)) == cell_hash(gru())
    rng = random.Random(0)
    seen = {cell_hash(c) for c in (mutate(gru(), rng, SPACE).child for _ in range(3000)) if c is not None}
    assert cell_hash(_gru_variant("sigmoid", True)) in seen  # candidate activation changed
    assert cell_hash(_gru_variant("tanh", False)) in seen  # reset gate bypassed (rewire or remove)
    assert cell_hash(gru()) not in seen
