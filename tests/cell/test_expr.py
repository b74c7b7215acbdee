"""The core data model: immutable, structural nodes; DAG vs unfolded tree; validation."""

import pickle
import sys
import subprocess

import networkx as nx
import pytest

from cellgraph import CellGraph, CellGraphError, Leaf, MultiCell, Node, Role, Layout, TupleSpec
from cellgraph.cell.expr import h, x, zero
from cellgraph.cell.tree import Tree, unfold


def test_structural_equality_and_args_rebuild():
    a = Node("add", "sigmoid", 0, x, h)
    b = Node("add", "sigmoid", 0, Leaf("x"), Leaf("h"))
    assert a == b and hash(a) == hash(b) and a is not b
    assert a.func(*a.args) == a
    assert Node("add", "sigmoid", 1, x, h) != a
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.op = "mul"


@pytest.mark.parametrize(
    "args, message",
    [
        (("add", "foo", 0, x, h), "unknown activation 'foo'"),
        (("pow", "tanh", 0, x, h), "unknown operation 'pow'"),
        (("add", "tanh", -1, x, h), "tuple index must be an integer >= 0"),
        (("add", "tanh", 0, x, None), "missing right child"),
    ],
)
def test_invalid_nodes_name_the_rule(args, message):
    with pytest.raises(CellGraphError, match=message):
        Node(*args)


def test_leaf_roles():
    assert Leaf("x").role is Role.DATA and Leaf("zero").role is Role.CONST
    assert Leaf("e1", "const").role is Role.CONST
    with pytest.raises(CellGraphError, match="a role is required"):
        Leaf("w")
    with pytest.raises(CellGraphError, match="unknown role"):
        Leaf("w", "weird")


def test_dag_shares_nodes_and_unfold_duplicates_them():
    z = Node("add", "sigmoid", 1, x, h)
    root = Node("mul", "identity", 2, z, Node("add", "one_minus", 2, zero, z))
    assert len(root.internal_nodes()) == 3
    tree = unfold(root)
    assert tree.n_internal() == 4
    assert [label for label, _ in tree.positions()] == [1, 2, 3, 7]
    assert sorted(tree.leaf_depths()) == [2, 2, 2, 3, 3]


def test_tree_swap_keeps_edges_with_children():
    t = unfold(Node("add", "tanh", 0, x, h))
    s = t.swap()
    assert s.edges == ("R", "L") and s.children[0].expr == h
    assert s.swap().edges == ("L", "R")
    with pytest.raises(CellGraphError, match="cannot have children"):
        Tree(x, (t, t))


def test_tree_vectors_are_read_only_copies():
    import numpy as np

    v = np.array([1.0, 2.0])
    t = Tree(x, (), (), v)
    v[0] = 5.0  # the caller's array changes; the tree's does not
    assert t.vector[0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        t.vector[0] = 3.0
    assert Tree(x, (), (), t.vector).vector is t.vector  # a read-only vector is shared, not copied


def test_networkx_round_trip_and_validation():
    g = CellGraph(Node("mul", "identity", 0, Node("add", "tanh", 1, x, h), h))
    back = CellGraph.from_networkx(g.to_networkx())
    assert back == g
    bad = g.to_networkx()
    bad.add_edge(bad.graph["root"], 0, edge="L")  # a leaf with a child, and a cycle
    with pytest.raises(CellGraphError, match="cycle"):
        CellGraph.from_networkx(bad)
    leafy = nx.DiGraph(root=2)
    leafy.add_node(0, kind="leaf", name="x")
    leafy.add_node(1, kind="leaf", name="h")
    leafy.add_node(2, kind="leaf", name="zero")
    leafy.add_edge(0, 2, edge="L")
    with pytest.raises(CellGraphError, match="node 2: a leaf cannot have children"):
        CellGraph.from_networkx(leafy)
    unknown = g.to_networkx()
    unknown.nodes[unknown.graph["root"]]["act"] = "foo"
    with pytest.raises(CellGraphError, match="unknown activation 'foo'"):
        CellGraph.from_networkx(unknown)


def test_tuple_index_checked_against_layout():
    layout = Layout((TupleSpec("a"), TupleSpec.identity_tuple()))
    with pytest.raises(CellGraphError, match="tuple index 5 out of range for a layout of 2"):
        CellGraph(Node("add", "tanh", 5, x, h)).validate(layout)


def test_multicell_current_leaves_must_be_made_earlier():
    c_now = Leaf("c", Role.CURRENT)
    with pytest.raises(CellGraphError, match="no earlier run makes"):
        MultiCell((CellGraph(Node("add", "tanh", 0, c_now, x), "h"),))


def test_core_import_leaves_torch_unimported():
    code = "import cellgraph, cellgraph.targets, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)



def test_registry_refuses_a_taken_name_unless_replacing_and_scoped_undoes():
    from cellgraph.cell import registry

    with registry.scoped():
        act = registry.register_activation(registry.Activation("twice_x", lambda z: 2 * z))
        assert registry.activation("twice_x") is act
        with pytest.raises(CellGraphError, match="activation 'twice_x' is already registered"):
            registry.register_activation(registry.Activation("twice_x", lambda z: 2 * z))
        with pytest.raises(CellGraphError, match="operation 'add' is already registered"):
            registry.register_op(registry.Op("add", True, lambda a, b: a + b))
        with pytest.raises(CellGraphError, match="name must be an identifier"):
            registry.register_op(registry.Op("a-b", False, lambda a, b: a - b))
        again = registry.register_activation(registry.Activation("twice_x", lambda z: 3 * z), replace=True)
        assert registry.activation("twice_x") is again
    with pytest.raises(CellGraphError, match="unknown activation 'twice_x'"):
        registry.activation("twice_x")


def test_substitute_replaces_a_node_for_every_reader_and_keeps_the_rest():
    from cellgraph.cell.expr import substitute
    r = Node("add", "sigmoid", 0, x, h)
    n = Node("add", "tanh", 1, x, Node("mul", "identity", 3, r, h))
    root = Node("mul", "identity", 3, n, r)
    swapped = substitute(root, r, x)
    assert swapped == Node("mul", "identity", 3, Node("add", "tanh", 1, x, Node("mul", "identity", 3, x, h)), x)
    assert substitute(root, root, h) == h
    assert substitute(root, Node("add", "tanh", 2, x, h), x) == root       # a node root does not hold
    assert substitute(root, h, zero) == Node("mul", "identity", 3,
                                             Node("add", "tanh", 1, x, Node("mul", "identity", 3,
                                                                            Node("add", "sigmoid", 0, x, zero), zero)),
                                             Node("add", "sigmoid", 0, x, zero))
