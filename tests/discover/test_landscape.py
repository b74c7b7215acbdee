import random

import pytest

from cellgraph.cell.expr import Node, h, x

from cellgraph.discover.cache import cell_hash
from cellgraph.discover.landscape import around, distance, shells, walk
from cellgraph.discover.mutations import neighbours
from cellgraph.discover.space import CellSpace, validate
from cellgraph.errors import CellGraphError
from tests.discover.cells import gru, small

SPACE = CellSpace()


def test_a_walk_of_one_step_is_a_valid_neighbour_or_an_insertion_and_of_zero_steps_the_root():
    root = small()
    assert walk(root, 0, random.Random(0), SPACE) is root
    near = {cell_hash(c) for _, c in neighbours(small(), SPACE)}
    for k in range(30):
        child = walk(small(), 1, random.Random(k), SPACE)
        assert validate(child, SPACE) is None and cell_hash(child) != cell_hash(small())
        assert cell_hash(child) in near or len(child.internal_nodes()) == len(small().internal_nodes()) + 1


def test_a_walk_never_comes_back_to_its_start():
    rnn = Node("add", "tanh", 1, x, h)  # few changes: a 2-step walk would often undo its first step
    for k in range(200):
        assert cell_hash(walk(rnn, 2, random.Random(k), SPACE)) != cell_hash(rnn)


def test_around_draws_distinct_named_cells_reproducibly():
    cells = around(gru(), (1, 3), 4, 3, SPACE, seed=5)
    assert [n for n, _ in cells] == [*(f"walk 1 #{k}" for k in range(4)), *(f"walk 3 #{k}" for k in range(4)),
                                     *(f"random #{k}" for k in range(3))]
    keys = [cell_hash(c) for _, c in cells]
    assert len(set(keys)) == len(keys) and cell_hash(gru()) not in keys
    assert [cell_hash(c) for _, c in around(gru(), (1, 3), 4, 3, SPACE, seed=5)] == keys
    assert [cell_hash(c) for _, c in around(gru(), (1, 3), 4, 3, SPACE, seed=6)] != keys


@pytest.mark.parametrize("args", [((0,), 1, 1), ((1,), -1, 1), ((1,), 1, -1)])
def test_around_refuses_bad_counts(args):
    with pytest.raises(CellGraphError, match="lengths >= 1 and counts >= 0"):
        around(small(), *args, SPACE)


def test_shells_hold_the_neighbours_then_their_new_neighbours_each_structure_once():
    rnn = Node("add", "tanh", 1, x, h)
    found = shells(rnn, 2, SPACE)
    first = {cell_hash(c) for _, c in neighbours(rnn, SPACE, motifs=True)}
    assert found[0] == {cell_hash(rnn)} and found[1] == first
    second = {cell_hash(g) for _, c in neighbours(rnn, SPACE, motifs=True) for _, g in neighbours(c, SPACE, motifs=True)}
    assert found[2] == second - first - found[0] and found[2]
    assert [len(s) for s in shells(rnn, 1, SPACE, motifs=False)] == [1, len(neighbours(rnn, SPACE))]


def test_distance_is_the_shell_that_holds_a_structure_or_none_beyond():
    rnn = Node("add", "tanh", 1, x, h)
    found = shells(rnn, 2, SPACE)
    assert distance(found, rnn) == 0
    one = neighbours(rnn, SPACE, motifs=True)[0][1]
    two = next(g for _, g in neighbours(one, SPACE, motifs=True) if cell_hash(g) in found[2])
    assert distance(found, one) == 1 and distance(found, two) == 2
    assert distance(found, gru()) == 2  # gate, then reset: the motif moves
    assert distance(shells(rnn, 2, SPACE, motifs=False), gru()) is None
    assert distance(shells(rnn, 1, SPACE), two) is None
    with pytest.raises(CellGraphError, match="depth must be >= 0"):
        shells(rnn, -1, SPACE)
