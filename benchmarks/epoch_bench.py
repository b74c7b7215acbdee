"""Item 5 of ``cellgraph bench``: one training epoch of Wiki-5k with the full RRNN in the
paper's configuration (``p = 100``, 3 trainable tuples + identity, ``N_bar = 9``, scoring
hidden 256, soft mode, batch 16), as a character language model: embedding, RRNN, linear
head, per-step cross-entropy, Adam.

A full epoch can be longer than one bench run should take, so ``batches`` limits the
measured part: the epoch time is then *estimated* as the mean time of the measured batches
times the number of batches in the epoch, and the result says so (``estimated: true``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import Tensor, nn

from cellgraph.backends.torch.runtime.device import synchronize
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.data.datasets import load_dataset

__all__ = ["CharModel", "epoch_time"]


class CharModel(nn.Module):
    """``tokens (T, B)`` -> ``logits (T, B, vocab)``: embedding to ``p``, RRNN, linear head."""

    def __init__(self, vocab: int, rnn: RRNN) -> None:
        super().__init__()
        p = rnn.cell.hidden_size
        self.embed, self.rnn, self.head = nn.Embedding(vocab, p), rnn, nn.Linear(p, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.rnn(self.embed(tokens))[0])


def epoch_time(batches: int | None = None, batch: int = 16, p: int = 100, n_iterations: int = 9,
               scoring_hidden: int = 256, dataset: str = "wiki5k", seed: int = 0,
               device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """Train on the first ``batches`` batches of one epoch (all of them when ``None``) on
    ``device`` and give the measured or estimated epoch time."""
    data = load_dataset(dataset)
    inputs = torch.as_tensor(data.train.inputs, dtype=torch.long, device=device)
    targets = torch.as_tensor(data.train.targets, dtype=torch.long, device=device)
    n_batches = math.ceil(inputs.shape[0] / batch)
    measured = n_batches if batches is None else min(batches, n_batches)
    torch.manual_seed(seed)
    model = CharModel(len(data.vocab), RRNN(p, 3, n_iterations, scoring_hidden=scoring_hidden,
                                            mode="soft", return_traces=False)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(inputs.shape[0]).to(device)
    start = time.perf_counter()
    for k in range(measured):
        rows = order[k * batch:(k + 1) * batch]
        logits = model(inputs[rows].T)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), targets[rows].T.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    synchronize(device)
    elapsed = time.perf_counter() - start
    return {
        "config": {"dataset": dataset, "n_train": int(inputs.shape[0]), "seq_len": int(inputs.shape[1]),
                   "batch": batch, "p": p, "n_iterations": n_iterations,
                   "scoring_hidden": scoring_hidden, "mode": "soft"},
        "batches_per_epoch": n_batches,
        "batches_measured": measured,
        "measured_s": elapsed,
        "epoch_s": elapsed / measured * n_batches,
        "estimated": measured < n_batches,
    }
