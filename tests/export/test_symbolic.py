"""The sympy/LaTeX export equals the paper's equations (Eq. 1-4, LSTMeq1-5; docs/paper-notes.md,
*Symbolic export and canonical forms*)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy import HadamardProduct, MatrixSymbol, OneMatrix
from sympy.matrices.expressions.applyfunc import ElementwiseApplyFunction

from cellgraph.cell.expr import Leaf, Node, x, h, one, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.errors import CellGraphError
from cellgraph.export import symbolic as S
from cellgraph.targets import target

p = S.P
sigma = sp.Function("sigma")
xt, ht1, ct1, ct = (MatrixSymbol(n, p, 1) for n in ("x_t", "h_{t-1}", "c_{t-1}", "c_t"))


def W(name: str) -> MatrixSymbol:
    return MatrixSymbol(name, p, p)


def b(name: str) -> MatrixSymbol:
    return MatrixSymbol(name, p, 1)


def gate(k: str, f=sigma):
    """Textbook ``f(W_k x_t + W_k' h_{t-1} + b_k)``, built with plain sympy."""
    return (W(f"W_{k}") * xt + W(f"W_{k}'") * ht1 + b(f"b_{k}")).applyfunc(f)


def gru_textbook():
    r, z = gate("r"), gate("z")
    htil = (W("W_h") * xt + W("W_h'") * HadamardProduct(r, ht1) + b("b_h")).applyfunc(sp.tanh)
    return r, z, HadamardProduct(z, ht1) + HadamardProduct(OneMatrix(p, 1) - z, htil)


# --- an evaluator independent of cellgraph: walks the sympy tree with numpy -------------
NUMERIC = {sigma: lambda a: 1 / (1 + np.exp(-a)), sp.tanh: np.tanh}


def evaluate(e: sp.Basic, values: dict[str, np.ndarray], n: int) -> np.ndarray:
    if isinstance(e, MatrixSymbol):
        return values[e.name]
    if isinstance(e, sp.ZeroMatrix):
        return np.zeros((n, 1))
    if isinstance(e, sp.OneMatrix):
        return np.ones((n, 1))
    if isinstance(e, sp.MatAdd):
        return sum(evaluate(a, values, n) for a in e.args)
    if isinstance(e, sp.MatMul):
        out = 1.0
        for a in e.args:
            v = float(a) if a.is_number else evaluate(a, values, n)
            out = out @ v if np.ndim(out) and np.ndim(v) else out * v
        return out
    if isinstance(e, HadamardProduct):
        return np.prod([evaluate(a, values, n) for a in e.args], axis=0)
    if isinstance(e, ElementwiseApplyFunction):
        body = e.function.expr
        return NUMERIC[body.func](evaluate(e.expr, values, n))
    raise AssertionError(f"unexpected {type(e).__name__}")


def test_gru_export_is_eq_1_to_4():
    gru = target("gru")
    r, z, h_t = gru_textbook()
    assert S.canonical(S.expression(gru.graph, gru.layout)) == S.canonical(h_t)
    eqs = S.equations(gru.cell, gru.layout)
    assert len(eqs) == 8 and eqs[-1].lhs == MatrixSymbol("h_t", p, 1)
    rhs = {S.canonical(e.rhs) for e in eqs}
    assert S.canonical(r) in rhs and S.canonical(z) in rhs


def test_canonical_tells_a_wrong_gru_apart():
    gru = target("gru")
    r, z, _ = gru_textbook()
    htil = (W("W_h") * xt + W("W_h'") * HadamardProduct(r, ht1) + b("b_h")).applyfunc(sp.tanh)
    swapped = HadamardProduct(z, htil) + HadamardProduct(OneMatrix(p, 1) - z, ht1)
    assert S.canonical(S.expression(gru.graph, gru.layout)) != S.canonical(swapped)


def test_gru_numeric_spot_check_against_numpy_textbook():
    gru = target("gru")
    n = 3
    rng = np.random.default_rng(0)
    expr = S.expression(gru.graph, gru.layout, p=n)
    values = {s.name: rng.normal(size=s.shape) for s in expr.atoms(MatrixSymbol)}
    assert set(values) == {"x_t", "h_{t-1}"} | {f"{m}_{k}{q}" for m in "W" for k in "rzh" for q in ("", "'")} | {
        f"b_{k}" for k in "rzh"}
    v = values
    sig = NUMERIC[sigma]
    r = sig(v["W_r"] @ v["x_t"] + v["W_r'"] @ v["h_{t-1}"] + v["b_r"])
    z = sig(v["W_z"] @ v["x_t"] + v["W_z'"] @ v["h_{t-1}"] + v["b_z"])
    htil = np.tanh(v["W_h"] @ v["x_t"] + v["W_h'"] @ (r * v["h_{t-1}"]) + v["b_h"])
    want = z * v["h_{t-1}"] + (1 - z) * htil
    np.testing.assert_allclose(evaluate(expr, values, n), want, rtol=1e-12)


def test_lstm_export_is_lstmeq_1_to_5():
    lstm = target("lstm")
    f, i, o = gate("f"), gate("i"), gate("o")
    c_want = HadamardProduct(ct1, f) + HadamardProduct(i, gate("c", sp.tanh))
    h_want = HadamardProduct(o, ct.applyfunc(sp.tanh))
    got = S.state_expressions(lstm.cell, lstm.layout)
    assert list(got) == ["c", "h"]
    assert S.canonical(got["c"]) == S.canonical(c_want)
    assert S.canonical(got["h"]) == S.canonical(h_want)
    assert S.canonical(got["h"]) != S.canonical(HadamardProduct(o, ct1.applyfunc(sp.tanh)))
    eqs = S.equations(lstm.cell, lstm.layout)
    assert [str(e.lhs) for e in eqs].index("c_t") < [str(e.lhs) for e in eqs].index("h_t")


def test_gru_torch_export_has_reset_after_the_matrix():
    g = target("gru_torch")
    r = (W("W_ir") * xt + W("W_hr") * ht1 + b("b_ir") + b("b_hr")).applyfunc(sigma)
    z = (W("W_iz") * xt + W("W_hz") * ht1 + b("b_iz") + b("b_hz")).applyfunc(sigma)
    n = (W("W_in") * xt + b("b_in") + HadamardProduct(r, W("W_hn") * ht1 + b("b_hn"))).applyfunc(sp.tanh)
    want = HadamardProduct(OneMatrix(p, 1) - z, n) + HadamardProduct(z, ht1)
    assert S.canonical(S.expression(g.graph, g.layout)) == S.canonical(want)


def test_export_keeps_the_cell_as_built():
    gru = target("gru")
    expr = S.expression(gru.graph, gru.layout)
    assert not expr.has(sp.Identity(p)) and not expr.has(sp.ZeroMatrix(p, 1))
    # z * h was built as mul(h, z): the export keeps that operand order
    eqs = S.equations(gru.cell, gru.layout)
    zh = next(e.rhs for e in eqs if isinstance(e.rhs, HadamardProduct) and e.rhs.args[0] == ht1)
    assert zh.args[1].name.startswith("c_")
    assert HadamardProduct(ht1, xt) != HadamardProduct(xt, ht1)
    assert S.canonical(HadamardProduct(ht1, xt)) == S.canonical(HadamardProduct(xt, ht1))


def test_without_layout_tuples_are_L_R_b():
    eqs = S.equations(Node("add", "tanh", 2, x, h))
    assert S.sstr(eqs) == "h_t = tanh(L_2*x_t + R_2*h_{t-1} + b_2)"


def test_constant_leaves_and_leaf_root():
    e3 = Leaf("e3", "const")
    expr = S.expression(Node("mul", "identity", 0, one, Node("add", "relu", 0, e3, zero)))
    assert expr.has(OneMatrix(p, 1)) and expr.has(MatrixSymbol("e_3", p, 1))
    assert S.sstr(S.equations(CellGraph(x, "h"))) == "h_t = x_t"


def test_text_and_latex_printing():
    gru = target("gru")
    eqs = S.equations(gru.cell, gru.layout)
    text = S.sstr(eqs).splitlines()
    assert len(text) == 8 and text[-1] == "h_t = c_2 + c_7"
    assert "sigma(W_r*x_t + W_r'*h_{t-1} + b_r)" in S.sstr(eqs)
    tex = S.latex(eqs)
    assert tex.startswith("\\begin{aligned}") and tex.count("&=") == 8
    assert r"\odot" in tex and r"\sigma\left(" in tex and r"\tanh\left(" in tex


def test_bad_input():
    with pytest.raises(CellGraphError, match="expected an Expr"):
        S.equations("h")
    gru = target("gru")
    with pytest.raises(CellGraphError, match="out of range"):
        S.tuple_matrices(9, gru.layout)
