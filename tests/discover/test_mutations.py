import random
from collections import Counter

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.mutations import MOTIFS, MUTATIONS, insert_node, insertions, mutate, neighbours
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


def _structure(name):
    from cellgraph import target
    from cellgraph.discover.space import from_cell

    t = target(name)
    return from_cell(t.cell, t.layout)


def _moves(root, motifs):
    return {cell_hash(child): change for change, child in neighbours(root, SPACE, motifs)}


def test_motif_moves_grow_the_elman_rnn_into_mgu_and_the_gru_in_two_steps():
    """Gate the update of ``tanh(W x + U h + b)``; then gate its ``h`` with the same gate (MGU)
    or a new one (the GRU, up to the complement trade). Without motifs no neighbour grows."""
    rnn = _structure("rnn")
    assert all(len(child.internal_nodes()) == 1 for _, child in neighbours(rnn, SPACE))
    gated = [c for c in neighbours(rnn, SPACE, True) if c[0] == "gate root g=new"]
    assert len(gated) == 1 and len(gated[0][1].internal_nodes()) == 6
    after = _moves(gated[0][1], True)
    assert after[cell_hash(_structure("mgu"))] == "reset n1 right g=n0"
    assert after[cell_hash(_structure("gru"))] == "reset n1 right g=new"
    assert cell_hash(_structure("mgu")) not in _moves(gated[0][1], False)


def test_wrap_and_rewire_take_the_gru_to_mut3_and_mut1():
    """MUT3 is the GRU with ``tanh(h)`` in its update gate (one wrap); MUT1 reads no ``h`` in
    that gate and ``tanh(x)`` in its candidate (a rewire, then a wrap)."""
    gru_moves = _moves(_structure("gru"), True)
    assert gru_moves[cell_hash(_structure("mut3"))].startswith("wrap ")
    assert cell_hash(_structure("mut3")) not in _moves(_structure("gru"), False)
    mut1 = cell_hash(_structure("mut1"))
    firsts = [c for change, c in neighbours(_structure("gru"), SPACE) if change.startswith("rewire")]
    assert any(mut1 in _moves(c, True) for c in firsts)


@pytest.mark.parametrize("name", ["gate", "reset", "wrap"])
def test_each_motif_is_drawn_only_with_motifs_and_gives_valid_children(name):
    rng = random.Random(2)
    drawn = Counter(mutate(gru(), rng, SPACE, motifs=True).name for _ in range(300))
    assert drawn[name] > 0
    assert name not in Counter(mutate(gru(), rng, SPACE).name for _ in range(300))
    moves = MOTIFS[name](gru(), SPACE)
    assert any(validate(child, SPACE) is None for _, child in moves)


def _three_node_cell():
    """``1 - (W tanh(n0) + U n0 + b)`` with ``n0 = tanh(W x + U h + b)``: a random teacher's shape."""
    n0 = Node("add", "tanh", 1, x, h)
    return Node("add", "one_minus", 2, Node("add", "tanh", 0, zero, n0), n0)


def test_insertions_list_every_child_insert_node_draws():
    for root in (_three_node_cell(), gru()):
        listed = {cell_hash(child) for _, child in insertions(root, SPACE)}
        rng = random.Random(0)
        drawn = {cell_hash(insert_node(root, rng, SPACE)) for _ in range(500)}
        assert drawn <= listed and len(drawn) > 50


def test_a_three_node_cell_is_one_insertion_from_its_two_node_sub_cells_and_no_other_change():
    """Each sub-cell left by removing a node grows back into the cell by one insertion, which
    the single changes and the motifs do not offer (the ``grow`` of the enumeration relies on it)."""
    cell = _three_node_cell()
    key = cell_hash(cell)
    subs = [c for change, c in neighbours(cell, SPACE) if change.startswith("remove") and len(c.internal_nodes()) == 2]
    assert len(subs) == 3
    for sub in subs:
        grown = {cell_hash(c): change for change, c in neighbours(sub, SPACE, insert=True)}
        assert grown[key].startswith("insert ")
        assert key not in {cell_hash(c) for _, c in neighbours(sub, SPACE)}
        assert all(len(c.internal_nodes()) <= 3 for _, c in neighbours(sub, SPACE, insert=True))
