"""A search worker for the multi-process tests: ``python -m tests.discover.worker STORAGE
WORKER BUDGET LOG [KILL_AT]`` runs random search on a small space, appending each evaluated
hash to LOG; with KILL_AT it kills itself (SIGKILL) at that evaluation."""

import os
import signal
import sys
import time

from cellgraph.cell.expr import h, x
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.search import discover
from cellgraph.discover.space import CellSpace, from_cell
from cellgraph.discover.strategies import RandomSearch

#: A space of a few hundred structures (211 seen in 2,000 draws), so that random draws repeat.
SMALL = CellSpace(leaves=(x, h), ops=("add",), activations=("tanh",), min_nodes=2, max_nodes=3)


class LoggingEvaluator:
    def __init__(self, log: str, kill_at: int | None = None, sleep: float = 0.005) -> None:
        self.log, self.kill_at, self.sleep, self.calls = log, kill_at, sleep, 0

    def evaluate(self, cell, layout, epochs, seed):
        self.calls += 1
        if self.calls == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        key = cell_hash(from_cell(cell, layout))
        with open(self.log, "a") as f:
            f.write(key + "\n")
        time.sleep(self.sleep)
        return len(cell.output.internal_nodes()) + int(key[:4], 16) / 65536


if __name__ == "__main__":
    storage, worker, budget, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    kill_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    discover(SMALL, LoggingEvaluator(log, kill_at), RandomSearch(), budget, storage=storage, worker=worker,
             show_progress=False)
