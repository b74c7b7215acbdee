"""Cells the discover tests share."""

from pathlib import Path

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, TupleSpec
from cellgraph.discover.space import from_cell
from cellgraph.experiment.runs import RunDir
from cellgraph.export.jsonio import dump_cell
from cellgraph.files import write_json
from cellgraph.targets import target


def gru() -> Node:
    """The paper's GRU as a candidate (8 nodes)."""
    g = target("gru")
    return from_cell(g.cell, g.layout)


def small() -> Node:
    """A 4-node gated cell: ``f = sigmoid(W[x, h])``, ``h' = f * h + tanh(W[x, f])``."""
    f = Node("add", "sigmoid", 1, x, h)
    return Node("add", "identity", 0, Node("mul", "identity", 0, f, h), Node("add", "tanh", 2, x, f))


def no_op() -> Node:
    """A cell with a no-op node (identity add of zero on the identity tuple)."""
    f = Node("add", "sigmoid", 1, x, h)
    return Node("mul", "identity", 0, Node("add", "identity", 0, f, zero), Node("add", "tanh", 2, x, h))


#: An RRNN's layout: three trainable tuples and the identity tuple (index 3).
RRNN_LAYOUT = Layout((*(TupleSpec(f"t{i}", f"L{i}", f"R{i}", f"b{i}") for i in range(3)), TupleSpec.identity_tuple()))


def logged_form(root: Node, count: int, layout: Layout = RRNN_LAYOUT) -> dict:
    """A structure log's form entry as the trainer writes it, with a dump of ``root``'s one-state cell."""
    return {"canonical": repr(root), "count": count, "depth": 1, "n_internal": len(root.internal_nodes()),
            "balance": 1.0, "cell": dump_cell(MultiCell((CellGraph(root, "h"),)), layout)}


def structure_run(path: Path, forms: list[dict], finished: bool = True) -> Path:
    """A planted RRNN run folder whose last structure log (epoch 2) lists ``forms``
    (:func:`logged_form`), with ``final.json`` when ``finished``."""
    run = RunDir.create(path)
    run.write_config({"task": "planted", "model": "rrnn", "planted_teacher": "mgu", "seed": 0, "epochs": 2})
    for epoch in (1, 2):
        write_json(run.file(f"structures/epoch_{epoch:03d}.json"),
                   {"epoch": epoch, "n_cells": sum(f["count"] for f in forms), "forms": forms})
    if finished:
        run.write_final({"test_accuracy": 0.5})
    return path
