"""JSON interchange (docs/FORMAT.md): round trips, path-precise errors, fuzzed documents."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellgraph.cell.expr import Expr, Leaf, Node, Role, x
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.export import jsonio as J
from cellgraph.targets import target


def vectors_of(root: Expr, p: int = 4, seed: int = 0) -> dict[Expr, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {e: rng.normal(size=p) for e in root.walk()}


def gru_tree_with_vectors():
    gru = target("gru")
    tree = gru.graph.unfold().with_vectors(vectors_of(gru.graph.root))
    return gru, tree.swap()  # the root's children swapped with their edges


def same_tree(a, b) -> bool:
    if a.expr != b.expr or a.edges != b.edges or len(a.children) != len(b.children):
        return False
    if (a.vector is None) != (b.vector is None) or (a.vector is not None and not np.array_equal(a.vector, b.vector)):
        return False
    return all(same_tree(c, d) for c, d in zip(a.children, b.children))


def test_tree_round_trip_through_a_file_keeps_order_edges_and_vectors(tmp_path):
    gru, tree = gru_tree_with_vectors()
    path = J.save(tmp_path / "t.json", J.dump_tree(tree, gru.layout))
    doc = json.loads(path.read_text())
    assert doc["format"] == "cellgraph.cell.tree" and doc["version"] == 1 and doc["tree"]["edges"] == ["R", "L"]
    assert same_tree(J.load_tree(path), tree)
    assert J.load_layout(path) == gru.layout
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed


def test_bare_nested_tree_is_accepted():
    bare = {"op": "add", "act": "tanh", "tuple": 0,
            "children": [{"leaf": "x", "vector": [1, 2]}, {"leaf": "e1", "role": "const"}],
            "vector": [0.5, -0.25]}
    t = J.load_tree(bare)
    assert t.expr == Node("add", "tanh", 0, x, Leaf("e1", Role.CONST))
    assert t.vector.tolist() == [0.5, -0.25] and t.children[1].vector is None
    assert J.tree_json(t) == bare


def test_dag_round_trip_of_a_multi_state_cell_with_vectors():
    lstm = target("lstm")
    values = {}
    for g in lstm.cell:
        values.update(vectors_of(g.root, seed=len(values)))
    doc = J.dump_cell(lstm.cell, lstm.layout, values)
    assert doc["format"] == "cellgraph.dag" and [s["state"] for s in doc["states"]] == ["c", "h"]
    loaded = J.load_document(json.loads(json.dumps(doc)))
    assert loaded.kind == "dag" and loaded.cell == lstm.cell and loaded.layout == lstm.layout
    for state, tree in loaded.trees.items():
        for _, pos in tree.positions():
            assert np.array_equal(pos.vector, values[pos.expr])
    assert loaded.tree() is loaded.trees["h"]  # the output state by default


def test_dag_shares_nodes_and_unfolds():
    gru = target("gru")
    doc = J.dump_cell(gru.cell)
    assert sum("op" in n for n in doc["nodes"]) == 8
    assert J.load_tree(doc).n_internal() == 9
    assert J.load_cell(J.dump_tree({g.state: g.unfold() for g in gru.cell})) == gru.cell


def bare_tree_doc():
    return {"op": "add", "act": "sigmoid", "tuple": 0, "vector": [1.0, 2.0, 3.0, 4.0],
            "children": [{"leaf": "x", "vector": [1, 2, 3, 4]},
                         {"op": "mul", "act": "tanh", "tuple": 1, "children": [{"leaf": "h"}, {"leaf": "zero"}]}]}


def dag_doc():
    return {"format": "cellgraph.dag", "version": 1, "state": "h", "root": 3,
            "nodes": [{"id": 0, "leaf": "x"}, {"id": 1, "leaf": "h"},
                      {"id": 2, "op": "add", "act": "tanh", "tuple": 0, "children": [0, 1]},
                      {"id": 3, "op": "mul", "act": "identity", "tuple": 1, "children": [2, 1]}]}


def edit(doc, fn):
    doc = copy.deepcopy(doc)
    fn(doc)
    return doc


BAD = [
    (edit(bare_tree_doc(), lambda d: d["children"][1].update(act="foo")), r"^children\[1\]\.act: unknown activation 'foo'"),
    (edit(bare_tree_doc(), lambda d: d["children"][0]["vector"].__setitem__(3, float("inf"))),
     r"^children\[0\]\.vector\[3\]: not a finite number"),
    (edit(bare_tree_doc(), lambda d: d["children"][0]["vector"].__setitem__(1, "2")), r"^children\[0\]\.vector\[1\]: not a finite"),
    (edit(bare_tree_doc(), lambda d: d["children"][0].update(vector=[1, 2])), r"^children\[0\]\.vector: length 2 differs from length 4"),
    (edit(bare_tree_doc(), lambda d: d["children"][0].update(children=[])), r"^children\[0\]\.children: a leaf cannot have children"),
    (edit(bare_tree_doc(), lambda d: d["children"][0].update(leaf="w")), r"^children\[0\]\.leaf: leaf 'w': a role is required"),
    (edit(bare_tree_doc(), lambda d: d["children"][1]["children"].pop()), r"^children\[1\]\.children: .*two children"),
    (edit(bare_tree_doc(), lambda d: d.update(edges=["L", "L"])), r"^edges: expected"),
    (edit(bare_tree_doc(), lambda d: d.update(tuple=-1)), r"^tuple: expected an integer >= 0"),
    (edit(bare_tree_doc(), lambda d: d.update(colour="red")), r"^colour: unknown field"),
    (edit(bare_tree_doc(), lambda d: d.update(leaf="x")), r"^\(document\): .*either 'leaf' or 'op'"),
    ({"format": "cellgraph.cell.tree", "version": 2, "tree": {"leaf": "x"}}, r"^version: unsupported version 2"),
    ({"format": "cellgraph.cell.graph", "version": 1}, r"^format: unknown format"),
    ({"format": "cellgraph.cell.tree", "version": 1, "layout": [{"name": "r"}], "tree": bare_tree_doc()},
     r"^tree\.children\[1\]\.tuple: tuple index 1 out of range"),
    ({"format": "cellgraph.cell.tree", "version": 1, "states": [{"state": "h", "tree": {"leaf": "c", "role": "current"}}]},
     r"^states: .*no earlier run makes"),
    ({"format": "cellgraph.cell.tree", "version": 1, "states": [{"state": "h", "tree": {"leaf": "x"}}] * 2},
     r"^states\[1\]\.state: state 'h' appears twice"),
    (edit(dag_doc(), lambda d: d["nodes"][2].update(children=[0, 3])), r"^nodes\[2\]\.children\[1\]: .*cycle"),
    (edit(dag_doc(), lambda d: d["nodes"][3].update(children=[3, 1])), r"^nodes\[3\]\.children\[0\]: .*cycle"),
    (edit(dag_doc(), lambda d: d["nodes"][3].update(children=[2, 9])), r"^nodes\[3\]\.children\[1\]: unknown node id 9"),
    (edit(dag_doc(), lambda d: d["nodes"][1].update(id=0)), r"^nodes\[1\]\.id: duplicate node id 0"),
    (edit(dag_doc(), lambda d: d.update(root=7)), r"^root: unknown node id 7"),
    (edit(dag_doc(), lambda d: d["nodes"].append({"id": 4, "leaf": "zero"})), r"^nodes\[4\]: not reachable"),
    (edit(dag_doc(), lambda d: d["nodes"][0].update(children=[1, 1])), r"^nodes\[0\]\.children: a leaf cannot have children"),
    ({"what": 1}, r"^format: missing"),
    ([1, 2], r"expected a JSON object, got a list"),
]


@pytest.mark.parametrize("doc, message", BAD)
def test_bad_documents_name_the_field(doc, message):
    with pytest.raises(FormatError, match=message):
        J.load_document(doc)


def test_files(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CellGraphError, match="not valid JSON"):
        J.load_tree(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        J.load_tree(tmp_path / "missing.json")
    (tmp_path / "nan.json").write_text('{"leaf": "x", "vector": [NaN]}')
    with pytest.raises(FormatError, match=r"nan\.json: vector\[0\]: not a finite number"):
        J.load_tree(tmp_path / "nan.json")
    with pytest.raises(CellGraphError, match="no state 'q'"):
        J.load_tree(J.dump_cell(target("lstm").cell), state="q")
    with pytest.raises(CellGraphError, match="non-finite"):
        J.dump_tree(target("gru").graph.unfold().with_vectors(lambda e: [np.nan]))


# --- fuzzing: mutations of valid documents raise nothing but CellGraphError ------------
KEYS = ["leaf", "op", "act", "tuple", "children", "vector", "id", "role", "edges", "state",
        "states", "nodes", "root", "format", "version", "layout", "tree", "name", "identity"]
WORDS = ["x", "h", "c", "zero", "e2", "add", "mul", "tanh", "foo", "L", "R", "current", "const",
         "cellgraph.cell.tree", "cellgraph.dag", "h"]
scalars = (st.none() | st.booleans() | st.integers(-2, 12) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(WORDS) | st.text(max_size=3))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=6,
)


def valid_documents():
    gru, tree = gru_tree_with_vectors()
    lstm = target("lstm")
    return [
        J.dump_tree(tree, gru.layout),
        J.dump_cell(lstm.cell, lstm.layout, {**vectors_of(lstm.cell.graphs[0].root), **vectors_of(lstm.graph.root)}),
        J.dump_tree({g.state: g.unfold() for g in lstm.cell}),
        bare_tree_doc(),
        dag_doc(),
    ]


DOCS = valid_documents()


def slots(value, out):
    """Every (container, key) pair of a JSON document."""
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((value, k))
            slots(v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((value, i))
            slots(v, out)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_documents_raise_only_format_errors(data):
    doc = copy.deepcopy(data.draw(st.sampled_from(DOCS)))
    for _ in range(data.draw(st.integers(1, 3))):
        container, key = data.draw(st.sampled_from(slots(doc, [])))
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            container[key] = data.draw(json_values)
        elif action == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[data.draw(st.sampled_from(KEYS))] = data.draw(json_values)
        else:
            container.insert(key, data.draw(json_values))
    try:
        loaded = J.load_document(doc)
    except CellGraphError:
        return
    assert loaded.trees and loaded.kind in ("tree", "dag")


@settings(max_examples=100, deadline=None)
@given(value=json_values.filter(lambda v: not isinstance(v, str)))  # a string is a path
def test_random_values_raise_only_format_errors(value):
    try:
        J.load_document(value)
    except CellGraphError:
        pass
