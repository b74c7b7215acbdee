"""Item 1 of ``cellgraph bench``: the literal Algorithm 2 (float64 numpy, every candidate
rebuilt every iteration, one sample at a time: :mod:`cellgraph.backends.numpy.search`)
against the batched incremental torch search (:mod:`cellgraph.backends.torch.algorithm2.search`,
hard mode, float64) on the same inputs; the trees of every sample are compared."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cellgraph.backends.numpy.eval import mlp_alpha
from cellgraph.backends.numpy.search import search as reference_search
from cellgraph.backends.torch.algorithm2.search import prepare, search
from cellgraph.benchmarks.measure import best_time
from cellgraph.cell.expr import h, x, zero
from cellgraph.cell.graph import CellGraph
from cellgraph.cell.layout import SearchSpace
from cellgraph.targets import GRU_U, OPS

__all__ = ["paper_space", "compare_search"]


def paper_space(n_iterations: int = 9, n_tuples: int = 3) -> SearchSpace:
    """The paper's search space (Sec. 5): ``n_tuples`` trainable tuples and the identity
    (the last index), U = {sigmoid, tanh, 1-x, id}, O = {+, *}, leaves x, h, 0."""
    return SearchSpace(tuple(range(n_tuples + 1)), GRU_U, OPS, (x,), (h,), (zero,), n_iterations)


def _inputs(space: SearchSpace, p: int, H: int, batch: int, seed: int):
    rng = np.random.default_rng(seed)
    n = len(space.tuples) - 1
    scale = p ** -0.5
    params = [(rng.uniform(-scale, scale, (p, p)), rng.uniform(-scale, scale, (p, p)),
               rng.uniform(-scale, scale, p)) for _ in range(n)]
    params.append((np.eye(p), np.eye(p), np.zeros(p)))
    alpha = (rng.uniform(-scale, scale, (H, p)), rng.uniform(-scale, scale, H),
             rng.uniform(-H ** -0.5, H ** -0.5, H), float(rng.uniform(-0.1, 0.1)))
    leaves = np.stack([rng.normal(size=(batch, p)), rng.normal(size=(batch, p)), np.zeros((batch, p))], 1)
    return params, alpha, leaves


def compare_search(p: int = 100, H: int = 256, batch: int = 16, n_iterations: int = 9,
                   repeat: int = 3, seed: int = 0, device: torch.device = torch.device("cpu")) -> dict[str, Any]:
    """Time both searches on one batch (the torch one on ``device``) and compare the trees
    sample by sample.

    The reference is timed once (it is the slow side, and deterministic); the torch search
    is the best of ``repeat``.
    """
    space = paper_space(n_iterations)
    params, alpha, leaves = _inputs(space, p, H, batch, seed)
    score = mlp_alpha(*alpha)
    refs: list = []

    def run_reference() -> None:
        refs.clear()
        refs.extend(reference_search(space, params, dict(zip(space.leaves, leaves[b])), score)
                    for b in range(batch))

    L, R, b = (torch.tensor(np.stack([t[i] for t in params]), device=device) for i in range(3))
    W1, b1, w2 = (torch.tensor(a, device=device) for a in alpha[:3])
    b2 = torch.tensor(alpha[3], dtype=torch.float64, device=device)
    leaves_t = torch.tensor(leaves, device=device)
    traces: list = []

    def run_torch() -> None:
        with torch.no_grad():
            traces[:] = [search(prepare(space, L, R, b, W1, b1, w2, b2), leaves_t, "hard")]

    reference_s = best_time(run_reference, repeat=1, warmup=0)
    torch_s = best_time(run_torch, repeat=repeat, device=device)
    trace = traces[0]
    same = [trace.graph(k) == CellGraph(refs[k].root, "h") for k in range(batch)]
    return {
        "config": {"p": p, "scoring_hidden": H, "batch": batch, "n_iterations": n_iterations,
                   "n_tuples": len(space.tuples), "activations": list(space.activations),
                   "ops": list(space.ops), "dtype": "float64", "mode": "hard"},
        "reference_s": reference_s,
        "torch_s": torch_s,
        "speedup": reference_s / torch_s,
        "trees_equal": sum(same),
        "trees_compared": batch,
        "all_trees_equal": all(same),
    }
