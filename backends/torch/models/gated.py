"""The recurrent baselines of the paper's experiments (Sec. 5): ``torch.nn.GRU`` / ``LSTM`` with
the RRNN call convention.

:class:`GRUBaseline` / :class:`LSTMBaseline` run one layer, input size = hidden size ``p``,
over ``(T, B, p)`` inputs (``batch_first`` gives ``(B, T, p)``) and return
``(output, final_state, None)`` like :class:`~cellgraph.backends.torch.models.rrnn.RRNN`; the LSTM's
state is the tuple ``(c, h)`` in state order. They always run in float32: under autocast
torch runs cuDNN's GRU and LSTM in float16 whatever dtype was asked for (bfloat16 included),
without the loss scaling float16 needs, so the recurrent layer runs outside autocast.
"""

from __future__ import annotations

from torch import Tensor, nn

from cellgraph.backends.torch.runtime.device import no_autocast

__all__ = ["GRUBaseline", "LSTMBaseline"]


class GRUBaseline(nn.Module):
    """``torch.nn.GRU`` (one layer, input size = hidden size) with the RRNN call convention:
    ``forward(input, state) -> (output, h_T, None)``; float32 under autocast (module docstring)."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.GRU(hidden_size, hidden_size, batch_first=batch_first)

    @no_autocast()
    def forward(self, input: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor, None]:
        output, h_n = self.rnn(input, None if state is None else state[None])
        return output, h_n[0], None


class LSTMBaseline(nn.Module):
    """``torch.nn.LSTM`` with the RRNN call convention; states in the order ``(c, h)``:
    ``forward(input, (c, h)) -> (output, (c_T, h_T), None)``; float32 under autocast (module
    docstring)."""

    def __init__(self, hidden_size: int = 100, batch_first: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(hidden_size, hidden_size, batch_first=batch_first)

    @no_autocast()
    def forward(self, input: Tensor, state: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor], None]:
        hc = None if state is None else (state[1][None], state[0][None])
        output, (h_n, c_n) = self.rnn(input, hc)
        return output, (c_n[0], h_n[0]), None
