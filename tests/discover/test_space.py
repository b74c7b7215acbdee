import random
from collections import Counter

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.space import (IDENTITY, CellSpace, absorbed, complexity, from_cell, kind, sample_cell, to_cell,
                                    validate)
from cellgraph.errors import CellGraphError
from tests.discover.cells import gru, no_op, small

SPACE = CellSpace(min_nodes=2)


def test_the_gru_is_a_candidate_and_its_cell_has_one_tuple_per_trainable_node_identity_last():
    root = gru()
    assert validate(root, SPACE) is None
    cell, layout = to_cell(root)
    assert [t.identity for t in layout.tuples] == [False, False, False, True]
    cell.validate(layout)
    trainable = [n for n in cell.output.internal_nodes() if n.tuple != len(layout) - 1]
    assert len({n.tuple for n in trainable}) == len(trainable) == 3
    assert cell_hash(from_cell(cell, layout)) == cell_hash(root)


def test_to_cell_numbers_isomorphic_candidates_alike():
    f1, f2 = Node("add", "sigmoid", 1, x, h), Node("add", "tanh", 2, x, h)
    a = Node("mul", "identity", IDENTITY, f1, f2)
    b = Node("mul", "identity", IDENTITY, Node("add", "tanh", 1, h, x), Node("add", "sigmoid", 2, h, x))
    def tuples(root):
        return {(n.act, n.tuple) for n in to_cell(root)[0].output.internal_nodes()}

    assert tuples(a) == tuples(b) == {("sigmoid", 0), ("tanh", 1), ("identity", 2)}


@pytest.mark.parametrize("root, reason", [
    (no_op(), "no-op node (identity add of zero)"),
    (Node("mul", "tanh", 1, Node("add", "sigmoid", 2, Node("add", "tanh", 3, x, h), x), zero),
     "product with zero (a constant)"),
    (Node("add", "tanh", 1, Node("add", "sigmoid", 2, x, x), Node("add", "tanh", 3, x, x)),
     "does not read every data and state leaf"),
    (Node("add", "tanh", 1, x, h), "too few nodes"),
    (Node("add", "tanh", 1, Node("mul", "identity", 0, x, h), Node("mul", "identity", 0, h, x)),
     "duplicate identity subexpression"),
    (Node("add", "tanh", 1, Node("add", "sigmoid", 2, x, h), Node("add", "sigmoid", 3, zero, zero)),
     "node of constants only"),
])
def test_validate_names_the_broken_rule(root, reason):
    assert validate(root, SPACE) == reason


def test_validate_keeps_two_trainable_nodes_of_one_shape_and_the_size_range():
    r, z = Node("add", "sigmoid", 1, x, h), Node("add", "sigmoid", 2, x, h)
    root = Node("add", "identity", 0, Node("mul", "identity", 0, r, h), z)
    assert validate(root, SPACE) is None
    assert validate(root, CellSpace(max_nodes=3)) == "too many nodes"
    assert validate(root, CellSpace(activations=("tanh", "identity"))) == "activation outside the space"


def test_sample_cell_gives_valid_reproducible_cells_over_the_whole_size_range_and_counts_rejections():
    rejected = Counter()
    cells = [sample_cell(SPACE, random.Random(seed), rejected) for seed in range(200)]
    assert all(validate(c, SPACE) is None for c in cells)
    sizes = {len(c.internal_nodes()) for c in cells}
    assert min(sizes) == SPACE.min_nodes and max(sizes) == SPACE.max_nodes
    assert sum(rejected.values()) > 0
    assert sample_cell(SPACE, random.Random(7)) == sample_cell(SPACE, random.Random(7))
    assert all(kind(n) in "WI" for n in cells[0].internal_nodes())


def test_a_space_without_candidates_is_refused_with_a_clear_error():
    with pytest.raises(CellGraphError, match="no valid cell"):
        sample_cell(SPACE, random.Random(0), max_tries=0)
    with pytest.raises(CellGraphError, match="node range"):
        CellSpace(min_nodes=5, max_nodes=4)


def test_the_hash_ignores_operand_order_and_tuple_numbers_but_not_structure():
    a = small()
    f = Node("add", "sigmoid", 5, h, x)
    b = Node("add", "identity", 0, Node("add", "tanh", 3, f, x), Node("mul", "identity", 0, h, f))
    assert cell_hash(a) == cell_hash(b)
    c = Node("add", "identity", 0, Node("add", "sigmoid", 3, f, x), Node("mul", "identity", 0, h, f))
    assert cell_hash(a) != cell_hash(c)


def test_the_default_space_holds_the_elman_rnn():
    """The search may start at the one-node tanh RNN (target ``rnn``)."""
    from cellgraph import target

    rnn = target("rnn")
    assert validate(from_cell(rnn.cell, rnn.layout), CellSpace()) is None


def test_to_dict_records_every_setting_by_name():
    """A study records this; a resumed search compares it key by key."""
    assert CellSpace(min_nodes=2, max_nodes=9).to_dict() == {
        "leaves": ["x", "h", "zero"], "ops": ["add", "mul"],
        "activations": ["sigmoid", "tanh", "one_minus", "identity"], "kinds": ["W", "I"],
        "min_nodes": 2, "max_nodes": 9}
    assert CellSpace(absorb=True).to_dict()["absorb"] is True  # recorded only when set: earlier studies resume


GATE = Node("mul", "tanh", 1, x, h)


@pytest.mark.parametrize("root, reason", [
    (Node("add", "identity", 2, GATE, GATE), "one operand added twice on a trainable tuple (one matrix)"),
    (Node("add", "one_minus", 1, x, h), "one_minus on a trainable tuple (the identity, its tuple negated)"),
    (Node("mul", "tanh", 2, Node("mul", "one_minus", 1, x, h), h), "one_minus on a trainable tuple"),
])
def test_a_space_that_absorbs_refuses_what_a_trainable_tuple_absorbs_and_absorbed_gives_its_class(root, reason):
    assert validate(root, CellSpace()) is None
    assert validate(root, CellSpace(absorb=True)).startswith(reason)
    plain = absorbed(root)
    assert validate(plain, CellSpace(absorb=True)) is None and len(plain.internal_nodes()) == len(root.internal_nodes())
    assert absorbed(plain) == plain


def test_absorbed_leaves_the_identity_tuples_one_minus_and_sums_alone_and_reads_a_doubled_operand_once():
    kept = Node("add", "one_minus", IDENTITY, Node("add", "identity", IDENTITY, x, x), h)
    assert absorbed(kept) == kept and validate(kept, CellSpace(absorb=True)) is None
    assert absorbed(Node("add", "identity", 2, GATE, GATE)) == Node("add", "identity", 2, GATE, zero)
    assert absorbed(Node("add", "tanh", 2, GATE, GATE)) != Node("add", "tanh", 2, GATE, GATE)
    assert absorbed(Node("mul", "tanh", 2, GATE, GATE)) == Node("mul", "tanh", 2, GATE, GATE)  # (L a) (R a): no


def test_a_space_that_absorbs_lists_a_third_fewer_cells_of_two_nodes():
    assert [len(cells_of_size(k, CellSpace(absorb=True))) for k in (1, 2)] == [14, 1106]


def test_complexity_counts_nodes_and_the_matrices_that_multiply_something():
    """Nodes plus, per ``W`` node, its two matrices less one per zero operand; ``I`` nodes none."""
    assert complexity(Node("add", "tanh", 1, x, h)) == 1 + 2
    assert complexity(Node("add", "sigmoid", 1, x, zero)) == 1 + 1          # MUT1's z = sigmoid(W x + b)
    assert complexity(Node("add", "tanh", IDENTITY, x, h)) == 1
    assert complexity(Node("mul", "identity", IDENTITY, Node("add", "sigmoid", 1, x, h), h)) == 2 + 2
    assert complexity(small()) == 4 + 2 + 2                                 # two W nodes, two I nodes
    assert complexity(gru()) == 8 + 2 * sum(1 for n in gru().internal_nodes() if kind(n) == "W")


@pytest.mark.parametrize("kwargs, message", [
    (dict(ops=()), "a cell space needs at least one op, activation and tuple kind"),
    (dict(activations=()), "a cell space needs at least one op, activation and tuple kind"),
    (dict(kinds=()), "a cell space needs at least one op, activation and tuple kind"),
    (dict(kinds=("W", "X")), r"tuple kinds must be among \('W', 'I'\), got \('W', 'X'\)"),
    (dict(min_nodes=0), r"node range 0\.\.15: need 1 <= min <= max"),
    (dict(min_nodes=4, max_nodes=3), r"node range 4\.\.3: need 1 <= min <= max"),
    (dict(leaves=(x, x, h)), "leaves must be distinct and include a data or prev leaf"),
    (dict(leaves=(zero,)), "leaves must be distinct and include a data or prev leaf"),
    (dict(absorb=True, activations=("tanh", "one_minus")), "absorb: a trainable one_minus is absorbed into the identity"),
], ids=["no-op", "no-activation", "no-kind", "unknown-kind", "min-0", "min-over-max", "repeated-leaf", "no-input",
             "absorb-without-identity"])
def test_a_bad_space_is_refused_by_name(kwargs, message):
    with pytest.raises(CellGraphError, match=f"^{message}"):
        CellSpace(**kwargs)


def test_a_space_of_one_size_is_allowed():
    assert CellSpace(min_nodes=3, max_nodes=3).max_nodes == 3


def test_to_cell_names_the_tuples_and_the_state():
    cell, layout = to_cell(small(), state="s")
    assert cell.states == ("s",)
    assert [(t.name, t.L, t.R, t.b) for t in layout.tuples[:-1]] == [("t0", "L0", "R0", "b0"), ("t1", "L1", "R1", "b1")]
    assert layout.tuples[-1].identity and to_cell(small())[0].states == ("h",)


def test_from_cell_reads_one_state_and_without_a_layout_trains_every_tuple():
    cell, layout = to_cell(small())
    assert cell_hash(from_cell(cell.graphs[0], layout)) == cell_hash(small())
    every = from_cell(cell, None)
    assert all(kind(n) == "W" for n in every.internal_nodes())
    assert [n.tuple for n in every.internal_nodes()] == list(range(1, len(every.internal_nodes()) + 1))
    from cellgraph.targets import target
    with pytest.raises(CellGraphError, match="^a candidate has one state; this cell has 2$"):
        from_cell(target("lstm").cell, target("lstm").layout)


@pytest.mark.parametrize("node, reason", [
    (Node("mul", "tanh", 1, x, h), "op outside the space"),
    (Node("add", "sigmoid", 1, x, h), "activation outside the space"),
    (Node("add", "tanh", IDENTITY, x, h), "tuple kind outside the space"),
], ids=["op", "activation", "kind"])
def test_validate_names_nodes_outside_the_space(node, reason):
    space = CellSpace(ops=("add",), activations=("tanh",), kinds=("W",))
    assert validate(node, space) == reason
