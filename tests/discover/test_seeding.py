"""Seeds from a run's structure log: which forms are kept, which refused and why, counted."""

from collections import Counter

from cellgraph.cell.expr import Leaf, Node, h, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.discover.cache import cell_from_json, cell_hash
from cellgraph.discover.seeding import DUPLICATE, seeding
from cellgraph.discover.space import IDENTITY, from_cell, kind
from cellgraph.export.jsonio import dump_cell
from cellgraph.targets import target
from tests.discover.cells import RRNN_LAYOUT as LAYOUT
from tests.discover.cells import logged_form as _form


def _log(forms):
    return {"epoch": 4, "n_cells": sum(f["count"] for f in forms) + 5, "forms": forms}


CHAIN = Node("add", "identity", 3, x, Node("add", "identity", 3, x, h))  # an identity chain reading x and h
GATED = Node("mul", "identity", 3, Node("add", "sigmoid", 0, x, h), Node("add", "tanh", 1, x, h))
SHARED = Node("add", "identity", 3, Node("add", "tanh", 0, x, h), Node("mul", "sigmoid", 0, x, h))  # one tuple twice


def test_valid_forms_are_kept_the_others_refused_by_reason_and_counted():
    lstm = target("lstm")
    forms = [
        _form(CHAIN, 50),
        _form(Node("add", "identity", 3, zero, h), 20),  # reads no x
        _form(GATED, 10),
        _form(Node("mul", "identity", 3, Node("add", "sigmoid", 2, x, h), Node("add", "tanh", 0, x, h)), 8),
        {**_form(CHAIN, 7), "cell": dump_cell(lstm.cell, lstm.layout)},  # two states
        _form(Node("add", "tanh", 0, x, Node("add", "identity", 3, h, Leaf("one"))), 6),  # an aux leaf
        _form(Node("add", "identity", 3, Node("add", "identity", 3, zero, h), x), 5),  # a no-op node
        {key: value for key, value in _form(GATED, 4).items() if key != "cell"},
        {**_form(GATED, 3), "cell": {"format": "nonsense"}},
        _form(SHARED, 2),
        _form(CHAIN, 1),  # beyond top
    ]
    made = seeding(_log(forms), top=10)
    assert [r.rank for r in made.rows] == list(range(1, 11))
    assert [cell_hash(s) for s in made.seeds] == [cell_hash(from_cell(MultiCell((CellGraph(r, "h"),)), LAYOUT))
                                                 for r in (CHAIN, GATED, SHARED)]
    assert made.refusals == Counter({"does not read every data and state leaf": 1, DUPLICATE: 1,
                                     "2 states (a candidate has one)": 1, "leaf outside the space": 1,
                                     "no-op node (identity add of zero)": 1, "no cell dump in the log": 1,
                                     "unreadable cell dump": 1})
    assert [r.shared for r in made.rows if r.root is not None] == [False, False, True]
    record = made.to_dict()
    assert (record["read"], record["kept"], record["shared"], record["n_forms"]) == (10, 3, 1, 11)
    assert record["rows"][0]["candidate"].startswith("h = identity[add_0](x") and record["rows"][1]["reason"]
    line = made.summary()
    assert line.startswith("epoch 4: read the 10 most frequent of 11 forms (121 cells): kept 3 (1 with tuple "
                           "sharing dropped), refused 7 (")
    assert "1 2 states (a candidate has one)" in line and made.refused() in line


def test_a_kept_seed_is_the_candidate_of_its_cell_every_trainable_node_on_its_own_tuple():
    (kept,) = seeding(_log([_form(SHARED, 3)]), top=5).seeds
    assert sorted(kind(n) for n in kept.internal_nodes()) == ["I", "W", "W"]
    assert len({n.tuple for n in kept.internal_nodes() if n.tuple != IDENTITY}) == 2


def test_no_form_kept_leaves_no_seed_and_says_why():
    made = seeding(_log([_form(Node("add", "identity", 3, zero, h), 9)]), top=5)
    assert made.seeds == () and made.refused() == "1 does not read every data and state leaf"
    assert made.summary().endswith("kept 0, refused 1 (1 does not read every data and state leaf)")


def test_a_document_without_a_layout_makes_every_tuple_trainable():
    doc = dump_cell(MultiCell((CellGraph(GATED, "h"),)), None)
    assert "layout" not in doc
    assert [kind(n) for n in cell_from_json(doc).internal_nodes()] == ["W", "W", "W"]
