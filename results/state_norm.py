"""Mean norm of the recurrent state ``h_t`` of trained runs, over every step of the first 128
validation sequences (searched cells in the soft mixture), as RESULTS.md quotes it.

It reads the runs' checkpoints, which the records under ``results/runs/`` do not keep: run it
where the runs were made, e.g. ``python results/state_norm.py slice/gru-s0 slice/tdroot-s0``.
"""

from __future__ import annotations

import sys

import torch

from cellgraph.backends.torch.run import load_run


def state_norm(path: str, n: int = 128) -> tuple[int, float]:
    """``(epoch of the best checkpoint, mean ||h_t||)`` of the run folder ``path``."""
    run = load_run(path)
    tokens = run.tokens("val", range(min(n, len(run.dataset.splits["val"]))))
    with torch.no_grad(), run.model.choice_mode("soft"):
        h, _, _ = run.model.core(run.model.embedding(tokens.T))
    return run.epoch, float(h.norm(dim=-1).mean())


def main(paths: list[str]) -> None:
    print("| run | epoch | mean ‖h_t‖ |\n|---|---|---|")
    for path in paths:
        epoch, norm = state_norm(path)
        print(f"| {path} | {epoch} | {norm:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
