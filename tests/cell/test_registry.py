"""The activation and operation registries (:mod:`cellgraph.cell.registry`, paper Sec. 3.1):
the built-in sets, the exact errors a user sees, replacing an operation, and the numeric and
symbolic forms of the built-ins that the exports and the numpy reference read."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from cellgraph.cell import registry
from cellgraph.errors import CellGraphError


def test_the_built_in_sets_in_registration_order():
    assert registry.activation_names()[:5] == ("sigmoid", "tanh", "one_minus", "identity", "relu")
    assert registry.op_names()[:2] == ("add", "mul")


def test_unknown_names_list_the_known_ones_sorted():
    known_acts = ", ".join(sorted(registry.activation_names()))
    with pytest.raises(CellGraphError, match=rf"^unknown activation 'gelu' \(known: {known_acts}\)$"):
        registry.activation("gelu")
    known_ops = ", ".join(sorted(registry.op_names()))
    with pytest.raises(CellGraphError, match=rf"^unknown operation 'sub' \(known: {known_ops}\)$"):
        registry.op("sub")


def test_a_bad_name_error_says_which_kind():
    with pytest.raises(CellGraphError, match=r"^activation name must be an identifier string, got 'a b'$"):
        registry.register_activation(registry.Activation("a b", lambda v: v))
    with pytest.raises(CellGraphError, match=r"^operation name must be an identifier string, got 3$"):
        registry.register_op(registry.Op(3, False, lambda a, b: a))  # type: ignore[arg-type]


def test_an_operation_can_be_replaced_inside_a_scope():
    with registry.scoped():
        mine = registry.register_op(registry.Op("mul", True, lambda a, b: a * b), replace=True)
        assert registry.op("mul") is mine
    assert registry.op("mul") is not mine


def test_numpy_sigmoid_is_float64_and_exact_on_both_sides_of_zero():
    sigmoid = registry.activation("sigmoid").numeric["numpy"]
    out = sigmoid(np.array([-800, -1, 0, 1, 800]))  # integer input
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [0.0, 1 / (1 + np.e), 0.5, 1 / (1 + np.exp(-1)), 1.0], rtol=1e-15, atol=0)


def test_symbolic_relu_and_sigmoid_keep_their_names():
    v = sympy.MatrixSymbol("v", 2, 1)
    assert str(registry.activation("relu").sympy(v)[0, 0]) == "relu(v[0, 0])"
    assert str(registry.activation("sigmoid").sympy(v)[0, 0]) == "sigma(v[0, 0])"
