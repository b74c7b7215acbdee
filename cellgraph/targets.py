"""Symbolic target cells: GRU and LSTM as cell graphs (paper Eq. 1-4, Appendix
"Expressibility"; docs/paper-notes.md, *Target cells: GRU and LSTM*), and the gated cells
that the planted task can hide (docs/paper-notes.md, *Planted teachers*).

Each :class:`Target` carries its multi-state cell, the :class:`~cellgraph.cell.layout.Layout`
that says which weight tuple each node uses, and one :class:`~cellgraph.cell.layout.SearchSpace`
per run (the sets ``L, R, B, U, O, S_data, S_prev, S_aux`` and ``N_bar`` with which
Algorithm 2 can build it). Operands are ordered as Algorithm 2 orders them: the earlier
node of ``S_data, S_prev, S_aux, P_{k-1}`` is the left child and takes ``L_r``.

* ``gru``: the paper's GRU (reset before ``W_h'``, Cho et al.), 8 internal nodes,
  ``S_aux = {0}``, tuples ``(W_r,W_r',b_r), (W_z,W_z',b_z), (W_h,W_h',b_h), (I,I,0)``.
* ``gru_torch``: ``torch.nn.GRUCell`` (reset applied after the matrix, two biases):
  ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, 9 internal nodes, 5 tuples.
* ``lstm``: the paper's LSTM equations, built as erratum 2 (docs/paper-notes.md, *Errata*)
  corrects it: run 1 makes ``c_t`` (6 nodes), run 2 makes ``h_t = o_t * tanh(c_t)`` with its
  own tuple ``(W_o, W_o', b_o)``, sigmoid and ``N_bar = 3``.
* ``lstm_torch``: ``torch.nn.LSTMCell`` (the same graph; biases ``b_ih + b_hh``, gate rows
  in torch's order i, f, g, o).
* ``rnn``: Elman's tanh RNN, ``h_t = tanh(W x_t + U h_{t-1} + b)``, one node: the simplest
  cell that reads both leaves, where a cell search can start without knowing any gate.
* ``mgu``: the minimal gated unit (Zhou et al. 2016), a GRU whose one gate ``f`` is both
  reset and update gate, 7 internal nodes.
* ``mut1``, ``mut2``, ``mut3``: the three architectures found by Jozefowicz, Zaremba and
  Sutskever's search (2015), ``h_t = n_t * z_t + h_{t-1} * (1 - z_t)``, 9, 8 and 9 internal
  nodes. ``mut1``'s ``tanh(x)`` and ``mut2``'s ``x`` enter a gate with weight ``I``, which a
  trainable tuple cannot fix: the node uses a trainable tuple whose display name for that
  matrix is ``I`` (as ``gru_torch``'s ``n``), the nearest form the node algebra has.

A tuple part whose display name is ``I`` or ``0`` is that matrix in the planted task's teacher
(:mod:`cellgraph.data.planted`) and in :func:`torch_tuples`; trained, it is a free matrix,
unless ``model = cell`` runs with ``fixed_matrices`` (docs/training.md).

:func:`torch_tuples` maps a torch cell's weights (as numpy arrays) onto a target's tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from cellgraph.cell.expr import Expr, Leaf, Node, Role, c, h, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cell.layout import Layout, SearchSpace, TupleSpec
from cellgraph.errors import CellGraphError

__all__ = ["Target", "target", "target_names", "torch_tuples", "TARGETS"]

GRU_U = ("sigmoid", "tanh", "one_minus", "identity")
OPS = ("add", "mul")


@dataclass(frozen=True)
class Target:
    """A named target cell with its parameter layout and the search spaces that build it."""

    name: str
    cell: MultiCell
    layout: Layout
    spaces: tuple[SearchSpace, ...]
    equations: tuple[str, ...]
    description: str = ""

    def __post_init__(self) -> None:
        self.cell.validate(self.layout)
        if len(self.spaces) != len(self.cell):
            raise CellGraphError(f"target {self.name}: one search space per state is needed")
        for space, g in zip(self.spaces, self.cell):
            space.check(self.layout)
            n = len(g.internal_nodes())
            if n != space.n_iterations:
                raise CellGraphError(
                    f"target {self.name}: state {g.state} has {n} generated nodes but "
                    f"n_iterations={space.n_iterations}"
                )

    @property
    def graph(self) -> CellGraph:
        """The graph of the output state ``h_t``."""
        return self.cell.output


def _gru_gates(I: int) -> tuple[Node, Node, Node, Node]:
    """The nodes both GRU forms share (``I``: the identity tuple): ``r``, ``z`` on tuples 0
    and 1, ``1 - z`` and ``z * h``."""
    r = Node("add", "sigmoid", 0, x, h)
    z = Node("add", "sigmoid", 1, x, h)
    return r, z, Node("add", "one_minus", I, zero, z), Node("mul", "identity", I, h, z)


def _gru_shaped(name: str, ht: Node, specs: list[TupleSpec], equations: tuple[str, ...],
                description: str) -> Target:
    """A one-state target ``h_t = ht`` over ``x``, ``h`` and the zero constant with the GRU's
    activations; ``specs``: its trainable tuples (the identity tuple comes last). Algorithm 2
    builds it in as many iterations as it has nodes."""
    graph = CellGraph(ht, "h")
    layout = Layout((*specs, TupleSpec.identity_tuple()))
    space = SearchSpace(tuple(range(len(layout))), GRU_U, OPS, (x,), (h,), (zero,), len(graph.internal_nodes()))
    return Target(name, MultiCell((graph,)), layout, (space,), equations, description)


def _rnn() -> Target:
    return _gru_shaped(
        "rnn", Node("add", "tanh", 0, x, h), [TupleSpec("h", "W", "U", "b")],
        (r"h_t = \tanh(W x_t + U h_{t-1} + b)",),
        "Elman's tanh RNN: one node, no gate.",
    )


def _gru() -> Target:
    I = 3
    r, z, omz, zh = _gru_gates(I)
    rh = Node("mul", "identity", I, h, r)
    htil = Node("add", "tanh", 2, x, rh)
    omzh = Node("mul", "identity", I, omz, htil)
    return _gru_shaped(
        "gru", Node("add", "identity", I, zh, omzh),
        [TupleSpec(k, f"W_{k}", f"W_{k}'", f"b_{k}") for k in "rzh"],
        (
            r"r_t = \sigma(W_r x_t + W_r' h_{t-1} + b_r)",
            r"z_t = \sigma(W_z x_t + W_z' h_{t-1} + b_z)",
            r"\tilde h_t = \tanh(W_h x_t + W_h' (r_t \odot h_{t-1}) + b_h)",
            r"h_t = z_t \odot h_{t-1} + (1 - z_t) \odot \tilde h_t",
        ),
        "The paper's GRU (Eq. 1-4), reset applied before W_h' as Cho et al.",
    )


def _gru_torch() -> Target:
    I = 4
    r, z, omz, zh = _gru_gates(I)
    hn = Node("add", "identity", 2, h, zero)
    rhn = Node("mul", "identity", I, r, hn)
    n = Node("add", "tanh", 3, x, rhn)
    nomz = Node("mul", "identity", I, n, omz)
    return _gru_shaped(
        "gru_torch", Node("add", "identity", I, zh, nomz),
        [*(TupleSpec(k, f"W_i{k}", f"W_h{k}", f"b_i{k}+b_h{k}") for k in "rz"),
         TupleSpec("hn", "W_hn", "0", "b_hn"), TupleSpec("n", "W_in", "I", "b_in")],
        (
            r"r_t = \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr})",
            r"z_t = \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz})",
            r"n_t = \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn}))",
            r"h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}",
        ),
        "GRU as torch.nn.GRUCell computes it (reset after the matrix, two biases).",
    )


def _lstm(name: str, description: str, torch_names: bool) -> Target:
    f_, i_, g_, o_, I = 0, 1, 2, 3, 4
    c_now = Leaf("c", Role.CURRENT)
    f = Node("add", "sigmoid", f_, x, h)
    i = Node("add", "sigmoid", i_, x, h)
    g = Node("add", "tanh", g_, x, h)
    fc = Node("mul", "identity", I, c, f)
    ig = Node("mul", "identity", I, i, g)
    ct = Node("add", "identity", I, fc, ig)
    o = Node("add", "sigmoid", o_, x, h)
    tc = Node("add", "tanh", I, c_now, zero)
    ht = Node("mul", "identity", I, o, tc)
    if torch_names:
        specs = [TupleSpec(k, f"W_i{k}", f"W_h{k}", f"b_i{k}+b_h{k}") for k in "figo"]
    else:
        specs = [TupleSpec(k, f"W_{k}", f"W_{k}'", f"b_{k}") for k in "fico"]
    layout = Layout((*specs, TupleSpec.identity_tuple()))
    run1 = SearchSpace((f_, i_, g_, I), ("sigmoid", "tanh", "identity"), OPS, (x,), (h, c), (zero,), 6)
    run2 = SearchSpace((o_, I), ("sigmoid", "tanh", "identity"), OPS, (x,), (h, c, c_now), (zero,), 3)
    return Target(
        name, MultiCell((CellGraph(ct, "c"), CellGraph(ht, "h"))), layout, (run1, run2),
        (
            r"f_t = \sigma(W_f x_t + W_f' h_{t-1} + b_f)",
            r"i_t = \sigma(W_i x_t + W_i' h_{t-1} + b_i)",
            r"o_t = \sigma(W_o x_t + W_o' h_{t-1} + b_o)",
            r"c_t = c_{t-1} \odot f_t + i_t \odot \tanh(W_c x_t + W_c' h_{t-1} + b_c)",
            r"h_t = o_t \odot \tanh(c_t)",
        ),
        description,
    )


def _gated_update(gate: Node, n: Node, I: int) -> Node:
    """``h_t = gate * n + h_{t-1} * (1 - gate)`` on the identity tuple ``I``: the update of
    MGU and MUT1-3, built in the order Algorithm 2 can take (``gate``, ``n`` first)."""
    keep = Node("mul", "identity", I, h, Node("add", "one_minus", I, zero, gate))
    return Node("add", "identity", I, Node("mul", "identity", I, gate, n), keep)


def _mgu() -> Target:
    I = 2
    f = Node("add", "sigmoid", 0, x, h)
    n = Node("add", "tanh", 1, x, Node("mul", "identity", I, h, f))
    return _gru_shaped(
        "mgu", _gated_update(f, n, I),
        [TupleSpec(k, f"W_{k}", f"U_{k}", f"b_{k}") for k in "fn"],
        (
            r"f_t = \sigma(W_f x_t + U_f h_{t-1} + b_f)",
            r"n_t = \tanh(W_n x_t + U_n (f_t \odot h_{t-1}) + b_n)",
            r"h_t = (1 - f_t) \odot h_{t-1} + f_t \odot n_t",
        ),
        "Minimal gated unit (Zhou et al. 2016): one gate f resets and updates; exact.",
    )


#: ``h_t`` of MUT1-3 (Jozefowicz et al. 2015), after the gates' equations.
_MUT_UPDATE = r"h_t = n_t \odot z_t + h_{t-1} \odot (1 - z_t)"


def _mut(name: str, z: Node, n_left: Expr, n_spec: TupleSpec, specs: list[TupleSpec],
         equations: tuple[str, ...], description: str) -> Target:
    """MUT``k``: ``r`` on tuple 1, ``n = tanh(L_2 n_left + R_2 (r * h) + b_2)`` on tuple 2
    (``n_spec``), ``z`` (tuple 0) given; ``specs``: tuples 0 and 1."""
    I = 3
    r = Node("add", "sigmoid", 1, x, h)
    n = Node("add", "tanh", 2, n_left, Node("mul", "identity", I, h, r))
    return _gru_shaped(name, _gated_update(z, n, I), [*specs, n_spec], (*equations, _MUT_UPDATE),
                       description)


_W = {k: TupleSpec(k, f"W_{k}", f"U_{k}", f"b_{k}") for k in "zrh"}
_R_EQ = r"r_t = \sigma(W_r x_t + U_r h_{t-1} + b_r)"


def _mut1() -> Target:
    return _mut(
        "mut1", Node("add", "sigmoid", 0, x, zero), Node("add", "tanh", 3, x, zero),
        TupleSpec("h", "I", "U_h", "b_h"), [TupleSpec("z", "W_z", "0", "b_z"), _W["r"]],
        (r"z_t = \sigma(W_z x_t + b_z)", _R_EQ,
         r"n_t = \tanh(U_h (r_t \odot h_{t-1}) + \tanh(x_t) + b_h)"),
        "MUT1 (Jozefowicz et al. 2015); z reads x and the zero constant (R_z idle). Nearest form: "
        "n = tanh(L_h tanh(x) + U_h (r * h) + b_h) with L_h trainable (I in the planted teacher).",
    )


def _mut2() -> Target:
    return _mut(
        "mut2", Node("add", "sigmoid", 0, x, h), x, _W["h"], [_W["z"], TupleSpec("r", "I", "U_r", "b_r")],
        (r"z_t = \sigma(W_z x_t + U_z h_{t-1} + b_z)", r"r_t = \sigma(x_t + U_r h_{t-1} + b_r)",
         r"n_t = \tanh(W_h x_t + U_h (r_t \odot h_{t-1}) + b_h)"),
        "MUT2 (Jozefowicz et al. 2015). Nearest form: r = sigmoid(L_r x + U_r h + b_r) with L_r "
        "trainable (I in the planted teacher).",
    )


def _mut3() -> Target:
    tanh_h = Node("add", "tanh", 3, h, zero)
    return _mut(
        "mut3", Node("add", "sigmoid", 0, x, tanh_h), x, _W["h"], [_W["z"], _W["r"]],
        (r"z_t = \sigma(W_z x_t + U_z \tanh(h_{t-1}) + b_z)", _R_EQ,
         r"n_t = \tanh(W_h x_t + U_h (r_t \odot h_{t-1}) + b_h)"),
        "MUT3 (Jozefowicz et al. 2015); tanh(h) is a node on the identity tuple; exact.",
    )


TARGETS: dict[str, Callable[[], Target]] = {
    "gru": _gru,
    "gru_torch": _gru_torch,
    "lstm": lambda: _lstm(
        "lstm",
        "The paper's LSTM (Eq. LSTMeq1-5) as docs/paper-notes.md, *Errata*, item 2 corrects it: "
        "run 2 has (W_o, W_o', b_o), sigmoid and N=3.",
        torch_names=False,
    ),
    "lstm_torch": lambda: _lstm(
        "lstm_torch", "LSTM as torch.nn.LSTMCell computes it (biases b_ih + b_hh).", torch_names=True
    ),
    "rnn": _rnn,
    "mgu": _mgu,
    "mut1": _mut1,
    "mut2": _mut2,
    "mut3": _mut3,
}


def target_names() -> tuple[str, ...]:
    return tuple(TARGETS)


def target(name: str) -> Target:
    """The target cell ``name`` (``gru``, ``gru_torch``, ``lstm``, ``lstm_torch``, ``rnn``, ``mgu``,
    ``mut1``, ``mut2``, ``mut3``)."""
    try:
        builder = TARGETS[name]
    except (KeyError, TypeError):
        raise CellGraphError(f"unknown target {name!r} (known: {', '.join(TARGETS)})") from None
    return builder()


Tuples = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def torch_tuples(name: str, weight_ih, weight_hh, bias_ih, bias_hh) -> Tuples:
    """Map a ``torch.nn.GRUCell``/``LSTMCell``'s weights (numpy arrays, torch's row order)
    onto the tuples ``(L_r, R_r, b_r)`` of target ``gru_torch`` or ``lstm_torch``.

    Shapes: ``weight_ih`` and ``weight_hh`` are ``(G*p, p)``, biases ``(G*p,)`` with ``G = 3``
    (GRU rows r, z, n) or ``G = 4`` (LSTM rows i, f, g, o). The input size must equal ``p``.
    """
    w_ih, w_hh = np.asarray(weight_ih, float), np.asarray(weight_hh, float)
    b_ih, b_hh = np.asarray(bias_ih, float), np.asarray(bias_hh, float)
    gates = {"gru_torch": 3, "lstm_torch": 4}.get(name)
    if gates is None:
        raise CellGraphError(f"torch weights map only onto gru_torch or lstm_torch, not {name!r}")
    p = w_hh.shape[1]
    if w_ih.shape != (gates * p, p) or w_hh.shape != (gates * p, p):
        raise CellGraphError(
            f"{name}: expected weight_ih and weight_hh of shape ({gates * p}, {p}) "
            f"(input size = hidden size), got {w_ih.shape} and {w_hh.shape}"
        )
    rows = lambda a, k: a[k * p:(k + 1) * p]  # noqa: E731
    eye, zeros = np.eye(p), np.zeros(p)
    ident = (eye, eye.copy(), zeros)
    if name == "gru_torch":
        r, z = ((rows(w_ih, k), rows(w_hh, k), rows(b_ih, k) + rows(b_hh, k)) for k in (0, 1))
        hn = (rows(w_hh, 2), np.zeros((p, p)), rows(b_hh, 2))
        n = (rows(w_ih, 2), eye.copy(), rows(b_ih, 2))
        return [r, z, hn, n, ident]
    # torch LSTM rows i, f, g, o -> layout order f, i, g, o
    gate = {k: (rows(w_ih, j), rows(w_hh, j), rows(b_ih, j) + rows(b_hh, j)) for j, k in enumerate("ifgo")}
    return [gate["f"], gate["i"], gate["g"], gate["o"], ident]
