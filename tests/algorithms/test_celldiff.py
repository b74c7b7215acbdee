"""How a cell departs from a target (cellgraph.algorithms.celldiff, cellgraph.export.diff):
nodes paired by shape code, new / missing / kept, on hand-made variants of the GRU."""

from __future__ import annotations

from cellgraph.algorithms.celldiff import cell_diff
from cellgraph.algorithms.shape import shape_code, shape_form
from cellgraph.cell.expr import Node, h, relabel, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.export.diff import diff_lines
from cellgraph.targets import target

GRU = target("gru")
I = 3  # the GRU layout's identity tuple
#: A full-RRNN-like layout: four trainable tuples t0..t3, then the identity (index 4).
RUN = Layout(tuple(TupleSpec(f"t{i}", f"L_{i}", f"R_{i}", f"b_{i}") for i in range(4)) + (TupleSpec.identity_tuple(),))


def one(root) -> MultiCell:
    return MultiCell((CellGraph(root, "h"),))


def gru_nodes(htil_act: str = "tanh"):
    """The GRU's nodes over RUN (trainable tuples 0, 1, 2, identity 4), ``h~``'s activation given."""
    r, z = Node("add", "sigmoid", 0, x, h), Node("add", "sigmoid", 1, x, h)
    omz, zh = Node("add", "one_minus", 4, zero, z), Node("mul", "identity", 4, h, z)
    htil = Node("add", htil_act, 2, x, Node("mul", "identity", 4, h, r))
    omzh = Node("mul", "identity", 4, omz, htil)
    return {"r": r, "z": z, "omz": omz, "zh": zh, "htil": htil, "omzh": omzh,
            "root": Node("add", "identity", 4, zh, omzh)}


def diff_of(root):
    (d,) = cell_diff(one(root), RUN, GRU.cell, GRU.layout)
    return d


def test_the_gru_over_other_tuples_is_the_gru():
    """Which trainable tuple a node uses is not compared; commutative swaps are no change."""
    d = diff_of(gru_nodes()["root"])
    assert d.same and not d.new and not d.missing and len(d.kept) == 8
    swapped = relabel(gru_nodes()["root"], lambda n: (n.op, n.act, {0: 3, 1: 0, 2: 1}.get(n.tuple, n.tuple)))
    assert diff_of(swapped).same
    n = gru_nodes()
    mirrored = Node("add", "identity", 4, n["omzh"], n["zh"])  # identity add: operands in either order
    assert diff_of(mirrored).same
    assert diff_lines(one(mirrored), RUN, GRU) == ["the structure of gru: all 8 nodes kept, none new or missing"]


def test_a_changed_activation_makes_its_node_and_those_above_new():
    n = gru_nodes("sigmoid")
    d = diff_of(n["root"])
    assert not d.same
    assert set(d.new) == {n["htil"], n["omzh"], n["root"]}
    assert {str(m) for m in d.missing} == {str(m) for m in (GRU.graph.root, GRU.graph.root.right,
                                                             GRU.graph.root.right.right)}
    assert set(d.kept) == {n[k] for k in ("r", "z", "omz", "zh")} | {n["htil"].right}
    lines = diff_lines(one(n["root"]), RUN, GRU)
    assert lines[0] == "3 new, 3 missing, 5 kept (gru has 8 nodes)"
    assert "+ c_6 = sigma(L_2*x_t + R_2*c_5 + b_2)" in lines  # h~ with sigma for tanh
    assert "  c_5 = h_{t-1} ⊙ c_4" in lines  # r * h kept, unmarked
    assert lines[-1] == "- missing, as gru names them: c_6, c_7, h_t"


def test_gates_of_one_shape_pair_as_a_multiset():
    """r_t and z_t have one shape: a cell with a single such gate keeps one and misses one."""
    z = Node("add", "sigmoid", 1, x, h)
    root = Node("add", "identity", 4, Node("mul", "identity", 4, h, z), Node("add", "one_minus", 4, zero, z))
    d = diff_of(root)
    kept_shapes = sorted(shape_code(k, RUN) for k in d.kept)
    assert kept_shapes == sorted([shape_code(z, RUN), shape_code(root.left, RUN), shape_code(root.right, RUN)])
    assert d.new == (root,) and len(d.missing) == 5
    assert sum(shape_code(m, GRU.layout) == shape_code(z, RUN) for m in d.missing) == 1  # r_t or z_t, once


def test_a_cell_without_the_targets_nodes_and_a_state_only_one_side_makes():
    chain = Node("add", "identity", 4, h, x)
    d = diff_of(chain)
    assert d.new == (chain,) and len(d.missing) == 8 and not d.kept and not d.same
    leaf_root = diff_of(h)  # h_t = h_{t-1}: nothing generated, all of the GRU missing
    assert not leaf_root.new and len(leaf_root.missing) == 8 and not leaf_root.same
    lstm = target("lstm")
    c_diff, h_diff = cell_diff(lstm.cell, lstm.layout, GRU.cell, GRU.layout)
    assert c_diff.state == "c" and len(c_diff.new) == 6 and not c_diff.missing and not c_diff.kept
    assert h_diff.state == "h" and len(h_diff.kept) == 1  # o_t has the shape of the GRU's gates
    (back,) = [d for d in cell_diff(GRU.cell, GRU.layout, lstm.cell, lstm.layout) if d.state == "c"]
    assert len(back.missing) == 6 and not back.new  # a state only the target makes: all missing


def test_shape_form_ignores_which_trainable_tuple_each_node_uses():
    assert shape_form(one(gru_nodes()["root"]), RUN) == shape_form(GRU.cell, GRU.layout)
    assert shape_form(one(gru_nodes("sigmoid")["root"]), RUN) != shape_form(GRU.cell, GRU.layout)
