"""Item 3 of ``cellgraph bench``: achieved GFLOP/s of the RRNN training step against what
``torch.matmul`` reaches on this machine in the same run.

FLOPs of one run of the incremental Algorithm 2 for one sample (``n`` = ``n_leaves``,
``M = n + N`` nodes, ``P = C(M - 1, 2)`` pairs in all: iteration 1 builds ``C(n, 2)``,
iteration ``k >= 2`` the ``n + k - 2`` pairs with ``c_{k-1}*``):

* candidates: ``M - 1`` node projections ``L_r c``, ``R_r c`` (``2p * 2 n_r p`` each), then per
  ``(r, o, pair)`` the operation and bias (``2p``), per activation ``p``;
* scoring ``alpha``: ``2pH`` for ``W_1 v`` and ``2H`` for the output per candidate.

``nominal`` counts every candidate's ``W_1 v``; ``executed`` counts what
:mod:`cellgraph.backends.torch.algorithm2.search` runs: ``W_1 v`` only for the non-affine activations,
one ``W_1 z`` per ``(r, o, pair)`` of a non-additive op for all affine activations, and the
``W_1 L_r``/``W_1 R_r`` node projections that make the additive op free. A training step
is counted as 3 forward passes (the backward pass of a matmul is two matmuls).
"""

from __future__ import annotations

from math import comb
from typing import Any

import torch

from cellgraph.backends.torch.runtime import ops as torch_ops
from cellgraph.benchmarks.measure import best_time
from cellgraph.cell.layout import SearchSpace

__all__ = ["search_flops", "training_step_flops", "matmul_gflops", "achieved"]


def search_flops(space: SearchSpace, p: int, H: int) -> dict[str, int]:
    """Forward FLOPs of one run of the search for one sample (``nominal`` and ``executed``)."""
    n_r, n_o, n_u = len(space.tuples), len(space.ops), len(space.activations)
    M = len(space.leaves) + space.n_iterations
    pairs = comb(M - 1, 2)
    n_affine = sum(torch_ops.affine(u) is not None for u in space.activations)
    n_additive = sum(torch_ops.is_additive(o) for o in space.ops)
    shortcut = n_affine > 0 and n_additive > 0
    build = pairs * n_r * n_o * (2 * p + n_u * p)
    output = pairs * n_r * n_o * n_u * 2 * H
    projection = (M - 1) * 2 * p * 2 * n_r * p
    nominal = projection + build + pairs * n_r * n_o * n_u * 2 * p * H + output
    executed = (projection + (M - 1) * 2 * p * 2 * n_r * H * shortcut + build + output
                + pairs * n_r * n_o * (n_u - n_affine) * 2 * p * H
                + pairs * n_r * (n_o - n_additive) * 2 * p * H * (n_affine > 0))
    return {"nominal": nominal, "executed": executed}


def matmul_gflops(shapes: tuple[tuple[int, int, int], ...], repeat: int = 10,
                  device: torch.device = torch.device("cpu")) -> dict[str, float]:
    """Best GFLOP/s of ``torch.matmul`` (float32) on ``device`` for each ``(m, k, n)`` shape."""
    out = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k, device=device), torch.randn(k, n, device=device)
        seconds = best_time(lambda: torch.matmul(a, b), repeat=repeat, device=device)
        out[f"{m}x{k}x{n}"] = 2 * m * k * n / seconds / 1e9
    return out


def training_step_flops(space: SearchSpace, p: int, H: int, batch: int, steps: int) -> dict[str, int]:
    """FLOPs (``nominal`` and ``executed``) of a training step of ``batch`` sequences of
    ``steps`` time steps: 3 forward passes of the search per sample and step."""
    return {k: 3 * v * batch * steps for k, v in search_flops(space, p, H).items()}


def achieved(space: SearchSpace, p: int, H: int, batch: int, steps: int, step_s: float,
             shapes: tuple[tuple[int, int, int], ...], device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """GFLOP/s of a training step that took ``step_s`` seconds, against ``torch.matmul`` on
    the same ``device``."""
    train = training_step_flops(space, p, H, batch, steps)
    matmul = matmul_gflops(shapes, device=device)
    peak = max(matmul.values())
    gflops = {k: v / step_s / 1e9 for k, v in train.items()}
    return {
        "training_step_flops": train,
        "step_s": step_s,
        "gflops": gflops,
        "matmul_gflops": matmul,
        "matmul_peak_gflops": peak,
        "fraction_of_matmul": {k: v / peak for k, v in gflops.items()},
    }
