"""The planted task: seeded data from a hidden teacher cell that reproduces its own targets."""

import dataclasses
import json

import networkx as nx
import numpy as np
import pytest

from cellgraph import CellGraph, CellGraphError, target
from cellgraph.backends.numpy.plugin import evaluate
from cellgraph.cell.expr import Leaf
from cellgraph.data.datasets import load_dataset
from cellgraph.data.planted import distinct_rows, load_planted, random_cell


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _lin(params, r, a, b):
    L, R, bias = params[r]
    return a @ L.T + b @ R.T + bias


def test_seeded_and_reproducible():
    a, b = load_planted(seed=3), load_dataset("planted", seed=3)
    c = load_planted(seed=4)
    for k in ("train", "val", "test"):
        assert (a.splits[k].inputs == b.splits[k].inputs).all()
        assert (a.splits[k].targets == b.splits[k].targets).all()
    assert all((x == y).all() for tx, ty in zip(a.teacher.params, b.teacher.params) for x, y in zip(tx, ty))
    assert not (a.train.inputs == c.train.inputs).all()
    assert not np.allclose(a.teacher.embedding, c.teacher.embedding)


_ACTS = {"sigmoid": _sigmoid, "tanh": np.tanh, "identity": lambda z: z, "one_minus": lambda z: 1 - z}


def _literal(expr, values, params):
    """``u(o(L_r c_i, R_r c_j) + b_r)`` node by node, from the definition (not the backend)."""
    if isinstance(expr, Leaf):
        return values[expr]
    L, R, b = params[expr.tuple]
    a, c = _literal(expr.left, values, params) @ L.T, _literal(expr.right, values, params) @ R.T
    return _ACTS[expr.act]((a + c if expr.op == "add" else a * c) + b)


def _literal_targets(teacher, tokens):
    """Each step's class: the readout's argmax on the output state, every state computed
    literally in the cell's state order (``current`` leaves see the states made before)."""
    n, steps = tokens.shape
    prev = {s: np.zeros((n, teacher.p)) for s in teacher.cell.states}
    classes = []
    for t in range(steps):
        values = {Leaf(s, "prev"): v for s, v in prev.items()}
        values.update({Leaf("x"): teacher.embedding[tokens[:, t]], Leaf("zero", "const"): np.zeros((n, teacher.p))})
        for g in teacher.cell:
            values[Leaf(g.state, "current")] = prev[g.state] = _literal(g.root, values, teacher.params)
        logits = prev[teacher.cell.output.state] @ teacher.readout.T + teacher.readout_bias
        classes.append(logits.argmax(-1))
    return np.stack(classes, 1)


@pytest.mark.parametrize("kind", ["gru", "lstm", "random"])
def test_targets_are_the_teachers_cell_computed_literally(kind):
    """Every target of every split is the class the teacher's cell gives, each node computed
    here from its definition; and the literal computation has teeth: a changed tuple changes
    some targets."""
    d = load_planted(n_train=200, n_val=50, n_test=50, teacher=kind, seed=1)
    assert (d.task, d.metric, d.per_step, d.n_classes) == ("tag", "accuracy", True, 4)
    assert [len(s) for s in d.splits.values()] == [200, 50, 50]
    for split in d.splits.values():
        assert split.targets.shape == split.inputs.shape == (len(split), 10)
        assert (_literal_targets(d.teacher, split.inputs) == split.targets).all()
    # the readout is standardised on train: every class occurs there
    assert (np.bincount(d.train.targets.ravel(), minlength=4) > 0).all()
    L, R, b = d.teacher.params[1]
    other = dataclasses.replace(d.teacher, params=(d.teacher.params[0], (L, R, b + 1.0), *d.teacher.params[2:]))
    assert (_literal_targets(other, d.train.inputs) != d.train.targets).any()


def test_gru_teacher_is_the_papers_gru():
    d = load_planted(n_train=20, n_val=5, n_test=5, seq_len=4, teacher="gru", seed=2)
    t = d.teacher
    P = t.params
    assert (P[3][0] == np.eye(t.p)).all() and (P[3][2] == 0).all()  # identity tuple fixed
    h = np.zeros((20, t.p))
    for step in range(4):
        x = t.embedding[d.train.inputs[:, step]]
        r, z = _sigmoid(_lin(P, 0, x, h)), _sigmoid(_lin(P, 1, x, h))
        htil = np.tanh(_lin(P, 2, x, r * h))
        h = z * h + (1 - z) * htil
    assert np.allclose(t.states(d.train.inputs)["h"][:, -1], h, atol=1e-12)
    logits = h @ t.readout.T + t.readout_bias
    assert (logits.argmax(-1) == d.train.targets[:, -1]).all()


def test_lstm_teacher_is_the_lstm():
    d = load_planted(n_train=10, n_val=5, n_test=5, seq_len=3, teacher="lstm", seed=5)
    t, P = d.teacher, d.teacher.params
    h = c = np.zeros((10, t.p))
    for step in range(3):
        x = t.embedding[d.train.inputs[:, step]]
        f, i = _sigmoid(_lin(P, 0, x, h)), _sigmoid(_lin(P, 1, x, h))
        g, o = np.tanh(_lin(P, 2, x, h)), _sigmoid(_lin(P, 3, x, h))
        c = c * f + i * g
        h = o * np.tanh(c)
    states = t.states(d.train.inputs)
    assert np.allclose(states["c"][:, -1], c, atol=1e-12) and np.allclose(states["h"][:, -1], h, atol=1e-12)


def test_random_cell_rules():
    gru = target("gru")
    space = gru.spaces[0]
    a = random_cell(space, gru.layout, np.random.default_rng(7))
    b = random_cell(space, gru.layout, np.random.default_rng(7))
    assert a.root == b.root
    for seed in range(10):
        g = random_cell(space, gru.layout, np.random.default_rng(seed))
        nodes = g.internal_nodes()
        assert len(nodes) == space.n_iterations and {Leaf("x"), Leaf("h")} <= set(g.leaves())
        for n in nodes:
            assert n.tuple in space.tuples and n.act in space.activations and n.op in space.ops
            assert n.left != n.right
    with pytest.raises(CellGraphError, match="random_cell: no cell with 8 distinct.*in 0 tries"):
        random_cell(space, gru.layout, np.random.default_rng(0), max_tries=0)


def test_random_cell_nodes_vary_and_differ():
    gru = target("gru")
    rng = np.random.default_rng(11)
    leaves = {Leaf("x"): rng.standard_normal((8, 5)), Leaf("h"): rng.standard_normal((8, 5))}
    params = [(rng.standard_normal((5, 5)), rng.standard_normal((5, 5)), rng.standard_normal(5))
              for _ in range(3)] + [(np.eye(5), np.eye(5), np.zeros(5))]
    for seed in range(10):
        g = random_cell(gru.spaces[0], gru.layout, np.random.default_rng(seed))
        values = evaluate(g.root, leaves, params)
        nodes = [np.broadcast_to(values[n], (8, 5)) for n in g.internal_nodes()]
        assert all(np.ptp(v, axis=0).max() > 1e-6 for v in nodes)
        assert all(np.abs(a - b).max() > 1e-6 for i, a in enumerate(nodes) for b in nodes[:i])
        assert all(np.abs(v - leaves[Leaf("h")]).max() > 1e-6 for v in nodes)


def test_teacher_json_round_trip():
    d = load_planted(n_train=20, n_val=5, n_test=5, teacher="random", seed=4)
    doc = json.loads(json.dumps(d.summary()))["teacher"]
    assert doc["kind"] == "random" and doc["p"] == 8 and len(doc["params"]) == 4
    graph = nx.node_link_graph(doc["cell"][0]["graph"], edges="edges")
    assert CellGraph.from_networkx(graph).root == d.teacher.cell.output.root
    assert np.array(doc["embedding"]).shape == (8, 8) and "random cell" in d.describe()


def test_distinct_rows_and_errors():
    rows = distinct_rows(np.random.default_rng(0), 16, 4, 2)
    assert len({r.tobytes() for r in rows}) == 16
    with pytest.raises(CellGraphError, match="17 distinct sequences need vocab_size \\*\\* seq_len >= 17"):
        distinct_rows(np.random.default_rng(0), 17, 4, 2)
    with pytest.raises(CellGraphError, match="unknown teacher 'rnn' \\(known: gru, gru_torch"):
        load_planted(teacher="rnn")
    with pytest.raises(CellGraphError, match="give both space and layout"):
        load_planted(teacher="random", space=target("gru").spaces[0])
    lstm = target("lstm")
    with pytest.raises(CellGraphError, match="only the previous state h"):
        load_planted(teacher="random", space=lstm.spaces[0], layout=lstm.layout)
    with pytest.raises(CellGraphError, match="has its own space and layout"):
        load_planted(teacher="gru", layout=lstm.layout)
