"""What a cell's output h_t reads (cellgraph.algorithms.reads) on hand-made cells: the GRU, an
identity chain, cells that never read x_t, LSTM-like two-state cells whose h_t reads through
the state c_t made earlier in the step."""

from __future__ import annotations

import pytest

from cellgraph.algorithms.reads import cell_reads, is_identity_chain, leaves_reached
from cellgraph.cell.expr import Leaf, Node, Role, c, h, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.errors import CellGraphError
from cellgraph.targets import target

GRU = target("gru")
I = 3  # the GRU layout's identity tuple
C_NOW = Leaf("c", Role.CURRENT)


def one(root) -> MultiCell:
    return MultiCell((CellGraph(root, "h"),))


def test_the_gru_reads_x_and_h_and_is_no_identity_chain():
    reads = cell_reads(GRU.cell)
    assert reads.flags() == {"x": True, "h": True}
    assert reads.reads_input and reads.reads_state
    assert not is_identity_chain(GRU.cell, GRU.layout)
    assert leaves_reached(GRU.cell) == {x, h, zero}
    assert reads.describe() == "h_t reads x_t, h_{t-1}"


def test_an_identity_chain_reads_what_it_sums():
    chain = one(Node("add", "identity", I, x, Node("add", "identity", I, h, x)))
    assert is_identity_chain(chain, GRU.layout)
    assert cell_reads(chain).flags() == {"x": True, "h": True}
    trained = one(Node("add", "identity", 0, x, h))  # a trainable tuple: no chain
    assert not is_identity_chain(trained, GRU.layout)


def test_a_cell_that_never_reads_x():
    only_h = one(Node("add", "tanh", 0, h, Node("mul", "sigmoid", 1, h, zero)))
    reads = cell_reads(only_h)
    assert reads.flags() == {"x": False, "h": True}  # "x" is listed though the cell has no x
    assert not reads.reads_input and reads.reads_state
    assert reads.describe() == "h_t reads h_{t-1}; not x_t"
    only_x = cell_reads(one(Node("add", "tanh", 0, x, zero)))
    assert only_x.reads_input and not only_x.reads_state


def test_a_product_with_the_zero_constant_reads_neither_operand():
    """u(L x ⊙ R 0 + b) = u(b): the x under it is not read; an add with zero still is."""
    cut = one(Node("add", "identity", I, h, Node("mul", "tanh", 0, x, zero)))
    assert cell_reads(cut).flags() == {"x": False, "h": True}
    assert leaves_reached(cut) == {h}
    kept = one(Node("add", "identity", I, h, Node("add", "tanh", 0, x, zero)))
    assert cell_reads(kept).flags() == {"x": True, "h": True}
    nothing = cell_reads(one(Node("mul", "sigmoid", 0, zero, h)))
    assert not nothing.reads_input and not nothing.reads_state
    assert nothing.describe() == "h_t reads none of its inputs; not x_t, h_{t-1}"


def test_lstm_like_cells_read_through_the_state_made_earlier_in_the_step():
    lstm = target("lstm")
    reads = cell_reads(lstm.cell)
    assert reads.flags() == {"x": True, "c": True, "h": True} and reads.state == "h"
    # h_t = tanh(c_t + 0) with c_t = c_{t-1} * sigma(W x + W' h): h_t reads x, c and h only through c_t
    ct = Node("mul", "identity", 4, c, Node("add", "sigmoid", 0, x, h))
    through = MultiCell((CellGraph(ct, "c"), CellGraph(Node("add", "tanh", 4, C_NOW, zero), "h")))
    assert cell_reads(through).flags() == {"x": True, "c": True, "h": True}
    assert leaves_reached(through, "c") == {x, h, c}
    # c_t = c_{t-1} + 0 reads no input: neither does h_t = tanh(c_t) ⊙ h_{t-1}
    carry = MultiCell((CellGraph(Node("add", "identity", 4, c, zero), "c"),
                       CellGraph(Node("mul", "identity", 4, Node("add", "tanh", 4, C_NOW, zero), h), "h")))
    reads = cell_reads(carry)
    assert reads.flags() == {"x": False, "c": True, "h": True} and not reads.reads_input
    # h_t that reads c_{t-1} itself but not h_{t-1}: reads_state is about h's own previous value
    other = cell_reads(MultiCell((CellGraph(Node("add", "identity", 4, c, x), "c"),
                                  CellGraph(Node("add", "tanh", 0, C_NOW, c), "h"))))
    assert other.flags() == {"x": True, "c": True, "h": False} and not other.reads_state


def test_errors_name_the_problem():
    with pytest.raises(CellGraphError, match=r"makes no state 'q' \(it makes h\)$"):
        leaves_reached(GRU.cell, "q")
    with pytest.raises(CellGraphError, match=r"\(it makes c, h\)$"):
        leaves_reached(target("lstm").cell, "q")
    clash = one(Node("add", "tanh", 0, Leaf("h", Role.DATA), h))
    with pytest.raises(CellGraphError, match="'h' names both a data leaf and a previous state"):
        cell_reads(clash)


def test_leaves_of_any_name_are_read_by_their_role():
    """Names without an implied role (``u`` a data leaf, ``s`` a previous state): what is read,
    and the sentence that says it."""
    u, s = Leaf("u", Role.DATA), Leaf("s", Role.PREV)
    cell = MultiCell((CellGraph(Node("add", "tanh", 0, u, zero), "s"),))
    reads = cell_reads(cell, data=("u",))
    assert reads.flags() == {"u": True, "s": False} and not reads.reads_state
    assert reads.describe() == "s_t reads u_t; not s_{t-1}"
    both = cell_reads(MultiCell((CellGraph(Node("add", "tanh", 0, u, s), "s"),)), data=("u",))
    assert both.flags() == {"u": True, "s": True}
    assert both.describe() == "s_t reads u_t, s_{t-1}"
