"""What the target cells (:mod:`cellgraph.targets`) show a user: their names, the weight
tuples' display names (which the symbolic export prints, see docs/paper-notes.md) and the
textbook equations and description that ``cellgraph target`` prints beside the cell."""

from __future__ import annotations

import numpy as np
import pytest

from cellgraph.targets import target, target_names

PAPER_LSTM = (r"f_t = \sigma(W_f x_t + W_f' h_{t-1} + b_f)",
              r"i_t = \sigma(W_i x_t + W_i' h_{t-1} + b_i)",
              r"o_t = \sigma(W_o x_t + W_o' h_{t-1} + b_o)",
              r"c_t = c_{t-1} \odot f_t + i_t \odot \tanh(W_c x_t + W_c' h_{t-1} + b_c)",
              r"h_t = o_t \odot \tanh(c_t)")

PAPER_GRU = (r"r_t = \sigma(W_r x_t + W_r' h_{t-1} + b_r)", r"z_t = \sigma(W_z x_t + W_z' h_{t-1} + b_z)",
             r"\tilde h_t = \tanh(W_h x_t + W_h' (r_t \odot h_{t-1}) + b_h)",
             r"h_t = z_t \odot h_{t-1} + (1 - z_t) \odot \tilde h_t")

TORCH_GRU = (r"r_t = \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr})",
             r"z_t = \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz})",
             r"n_t = \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn}))",
             r"h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}")

MUT_UPDATE = r"h_t = n_t \odot z_t + h_{t-1} \odot (1 - z_t)"

EXPECTED = {
    "gru": (
        [(k, f"W_{k}", f"W_{k}'", f"b_{k}") for k in "rzh"], PAPER_GRU,
        "The paper's GRU (Eq. 1-4), reset applied before W_h' as Cho et al."),
    "gru_torch": (
        [("r", "W_ir", "W_hr", "b_ir+b_hr"), ("z", "W_iz", "W_hz", "b_iz+b_hz"), ("hn", "W_hn", "0", "b_hn"),
         ("n", "W_in", "I", "b_in")], TORCH_GRU,
        "GRU as torch.nn.GRUCell computes it (reset after the matrix, two biases)."),
    "lstm": (
        [("f", "W_f", "W_f'", "b_f"), ("i", "W_i", "W_i'", "b_i"), ("c", "W_c", "W_c'", "b_c"),
         ("o", "W_o", "W_o'", "b_o")],
        PAPER_LSTM,
        "The paper's LSTM (Eq. LSTMeq1-5) as docs/paper-notes.md, *Errata*, item 2 corrects it: run 2 has "
        "(W_o, W_o', b_o), sigmoid and N=3."),
    "lstm_torch": (
        [(k, f"W_i{k}", f"W_h{k}", f"b_i{k}+b_h{k}") for k in "figo"],
        PAPER_LSTM,
        "LSTM as torch.nn.LSTMCell computes it (biases b_ih + b_hh)."),
    "rnn": (
        [("h", "W", "U", "b")],
        (r"h_t = \tanh(W x_t + U h_{t-1} + b)",),
        "Elman's tanh RNN: one node, no gate."),
    "mgu": (
        [("f", "W_f", "U_f", "b_f"), ("n", "W_n", "U_n", "b_n")],
        (r"f_t = \sigma(W_f x_t + U_f h_{t-1} + b_f)", r"n_t = \tanh(W_n x_t + U_n (f_t \odot h_{t-1}) + b_n)",
         r"h_t = (1 - f_t) \odot h_{t-1} + f_t \odot n_t"),
        "Minimal gated unit (Zhou et al. 2016): one gate f resets and updates; exact."),
    "mut1": (
        [("z", "W_z", "0", "b_z"), ("r", "W_r", "U_r", "b_r"), ("h", "I", "U_h", "b_h")],
        (r"z_t = \sigma(W_z x_t + b_z)", r"r_t = \sigma(W_r x_t + U_r h_{t-1} + b_r)",
         r"n_t = \tanh(U_h (r_t \odot h_{t-1}) + \tanh(x_t) + b_h)", MUT_UPDATE),
        "MUT1 (Jozefowicz et al. 2015); z reads x and the zero constant (R_z idle). Nearest form: "
        "n = tanh(L_h tanh(x) + U_h (r * h) + b_h) with L_h trainable (I in the planted teacher)."),
    "mut2": (
        [("z", "W_z", "U_z", "b_z"), ("r", "I", "U_r", "b_r"), ("h", "W_h", "U_h", "b_h")],
        (r"z_t = \sigma(W_z x_t + U_z h_{t-1} + b_z)", r"r_t = \sigma(x_t + U_r h_{t-1} + b_r)",
         r"n_t = \tanh(W_h x_t + U_h (r_t \odot h_{t-1}) + b_h)", MUT_UPDATE),
        "MUT2 (Jozefowicz et al. 2015). Nearest form: r = sigmoid(L_r x + U_r h + b_r) with L_r "
        "trainable (I in the planted teacher)."),
    "mut3": (
        [("z", "W_z", "U_z", "b_z"), ("r", "W_r", "U_r", "b_r"), ("h", "W_h", "U_h", "b_h")],
        (r"z_t = \sigma(W_z x_t + U_z \tanh(h_{t-1}) + b_z)", r"r_t = \sigma(W_r x_t + U_r h_{t-1} + b_r)",
         r"n_t = \tanh(W_h x_t + U_h (r_t \odot h_{t-1}) + b_h)", MUT_UPDATE),
        "MUT3 (Jozefowicz et al. 2015); tanh(h) is a node on the identity tuple; exact."),
}


def test_every_target_is_described():
    assert sorted(EXPECTED) == sorted(target_names())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_target_names_tuples_equations_and_description(name):
    tuples, equations, description = EXPECTED[name]
    t = target(name)
    assert t.name == name
    assert [(s.name, s.L, s.R, s.b) for s in t.layout.tuples if not s.identity] == tuples
    assert [(s.name, s.L, s.R, s.b) for s in t.layout.tuples if s.identity] == [("id", "I", "I", "0")]
    assert t.equations == equations
    assert t.description == description


def test_torch_weights_are_read_as_floats_and_checked_by_name_and_shape():
    from cellgraph.errors import CellGraphError
    from cellgraph.targets import torch_tuples

    p = 2
    ints = torch_tuples("gru_torch", [[1] * p] * (3 * p), [[1] * p] * (3 * p), [1] * (3 * p), [1] * (3 * p))
    assert all(np.asarray(a).dtype == np.float64 for tup in ints for a in tup)
    with pytest.raises(CellGraphError, match=r"^torch weights map only onto gru_torch or lstm_torch, not 'gru'$"):
        torch_tuples("gru", np.ones((6, p)), np.ones((6, p)), np.ones(6), np.ones(6))
    with pytest.raises(CellGraphError, match=r"^gru_torch: expected weight_ih and weight_hh of shape \(6, 2\)"):
        torch_tuples("gru_torch", np.ones((5, p)), np.ones((6, p)), np.ones(6), np.ones(6))
