"""The structure form (cellgraph.algorithms.shape): trainable tuples become ``W``, identity
tuples ``I`` written without edge labels, one ``state = form`` per run. The form is stored in
records (structure logs, recovery), so its text is pinned."""

from cellgraph.algorithms.shape import shape_form
from cellgraph.cell.expr import Node, h, x
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.targets import target

GRU, LSTM = target("gru"), target("lstm")


def test_identity_nodes_have_no_edge_labels_and_trainable_ones_do():
    cell = MultiCell((CellGraph(Node("add", "tanh", 3, x, Node("mul", "sigmoid", 0, h, x)), "h"),))
    assert shape_form(cell, GRU.layout) == "h = tanh[add_1](x, sigmoid[mul_0](R=x, L=h))"
    other_tuple = MultiCell((CellGraph(Node("add", "tanh", 3, x, Node("mul", "sigmoid", 2, h, x)), "h"),))
    assert shape_form(other_tuple, GRU.layout) == shape_form(cell, GRU.layout)


def test_every_run_of_a_multi_state_cell_in_order():
    runs = shape_form(LSTM.cell, LSTM.layout).split("; ")
    assert [r.split(" = ")[0] for r in runs] == ["c", "h"]
    assert runs[1] == "h = identity[mul_1](sigmoid[add_0](L=x, R=h), tanh[add_1](zero, c@current))"
