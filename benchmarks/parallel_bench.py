"""Item 7 of ``cellgraph bench``: the RRNN soft step of item 2 data-parallel on the CPU, ``W``
processes of one torch thread each (``DistributedDataParallel`` over gloo, each process a share
``batch[rank::W]`` of the batch), against one process of ``W`` threads, on the same ``W`` cores.

Why: item 4's batch-1 row shows a fixed cost per operation that a second thread does not
shorten (the search's Python loop and the dispatch of its many small tensor operations), so
threads inside one process leave it on the critical path, while processes run it side by side.
``cellgraph train`` under ``torchrun --nproc_per_node W ... --set num_threads=1`` trains that way
(:mod:`cellgraph.backends.torch.training.distributed`: the same global batch and the same gradient up to
float rounding).

Both sides take the best of ``repeat`` steps after a warm-up step. A data-parallel step is
timed on every process between two barriers (the gradient's all-reduce is inside DDP's backward
pass) and counts as long as its slowest process. The one-process step is measured in the same
item, just before the processes start, so that both are taken at the same hour. The gradients
of both sides are compared: ``max_abs_gradient_difference`` is the largest entry of their
difference, to be read against the gradient's scale (``max_abs_gradient``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import distributed as torch_dist
from torch import multiprocessing as mp
from torch import nn
from torch.multiprocessing.spawn import ProcessException

from cellgraph.backends.torch.training.distributed import Distributed, launched
from cellgraph.benchmarks.measure import best_time
from cellgraph.benchmarks.step_bench import models, training_step
from cellgraph.errors import CellGraphError

__all__ = ["compare_parallel"]

LOCALHOST = "127.0.0.1"


def compare_parallel(processes: int, p: int = 100, batch: int = 16, steps: int = 20, n_iterations: int = 9,
                     scoring_hidden: int = 256, repeat: int = 2, seed: int = 0,
                     timeout_s: float = 900.0) -> dict[str, Any]:
    """The step of ``processes`` one-thread processes against one process of ``processes``
    threads (times in seconds, best of ``repeat``), and the difference of their gradients.
    Processes still running after ``timeout_s`` seconds are stopped, with an error."""
    if processes < 2:
        raise CellGraphError(f"data parallelism needs at least 2 processes, got {processes}")
    if batch % processes:
        raise CellGraphError(f"batch {batch} does not split evenly over {processes} processes")
    sizes = dict(p=p, batch=batch, steps=steps, n_iterations=n_iterations, scoring_hidden=scoring_hidden,
                 repeat=repeat, seed=seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(processes)
    try:
        model, input = _model_and_input(sizes)
        one_process = best_time(training_step(model, input), repeat=repeat)
    finally:
        torch.set_num_threads(threads)
    reference = _gradient(model)
    with tempfile.TemporaryDirectory(prefix="cellgraph-bench-") as folder:
        _run_workers(processes, sizes, folder, timeout_s)
        result = json.loads((Path(folder) / "rank0.json").read_text())
    gradient = torch.tensor(result.pop("gradient"), dtype=reference.dtype)
    return {
        "config": {**{k: v for k, v in sizes.items() if k != "repeat"}, "processes": processes,
                   "threads_per_process": 1, "process_group": "gloo", "mode": "soft", "dtype": "float32"},
        "one_process_s": one_process,
        "parallel_s": result["parallel_s"],
        "speedup": one_process / result["parallel_s"],
        "max_abs_gradient_difference": (gradient - reference).abs().max().item(),
        "max_abs_gradient": reference.abs().max().item(),
    }


def _run_workers(processes: int, sizes: dict[str, Any], folder: str, timeout_s: float) -> None:
    """Start the ``processes`` workers and wait for them: an error names a worker that failed
    (its traceback printed by torch) or the time limit, and no worker outlives the call."""
    context = mp.start_processes(_worker, (processes, sizes, folder, _free_port()), nprocs=processes, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while not context.join(timeout=max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise CellGraphError(f"the {processes} data-parallel processes did not finish in {timeout_s:g} s")
    except ProcessException as err:
        raise CellGraphError(f"a data-parallel process failed: {err}") from err
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()


def _free_port() -> int:
    """A TCP port on this machine that no process listens on now (for the group's store)."""
    with socket.socket() as sock:
        sock.bind((LOCALHOST, 0))
        return sock.getsockname()[1]


def _model_and_input(sizes: dict[str, Any]) -> tuple[nn.Module, torch.Tensor]:
    """Item 2's ``rrnn_soft`` model and input for ``sizes``, from ``sizes["seed"]``."""
    torch.manual_seed(sizes["seed"])
    input = torch.randn(sizes["steps"], sizes["batch"], sizes["p"])
    torch.manual_seed(sizes["seed"])
    return models(sizes["p"], sizes["n_iterations"], sizes["scoring_hidden"])["rrnn_soft"](), input


def _gradient(model: nn.Module) -> torch.Tensor:
    """The gradients of ``model``'s parameters, flattened into one vector."""
    return torch.cat([param.grad.reshape(-1) for param in model.parameters() if param.grad is not None])


def _worker(rank: int, world_size: int, sizes: dict[str, Any], folder: str, port: int) -> None:
    """One process of the data-parallel step, in the trainer's process group (:func:`launched`,
    gloo on the CPU, as under ``torchrun``); rank 0 writes the step time (the slowest process's,
    best of ``repeat``) and its gradient."""
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      MASTER_ADDR=LOCALHOST, MASTER_PORT=str(port))
    with launched("cpu") as dist:
        best, gradient = _timed_steps(dist, sizes)
    if dist.writes:
        (Path(folder) / "rank0.json").write_text(json.dumps({"parallel_s": best, "gradient": gradient.tolist()}))


def _timed_steps(dist: Distributed, sizes: dict[str, Any]) -> tuple[float, torch.Tensor]:
    """This rank's share ``batch[rank::world_size]`` of the step, timed between barriers: the
    best of ``repeat`` steps, each as long as its slowest process, and the gradient. The DDP
    model lives in this call only, so that it is freed before :func:`launched` destroys the
    group (as the trainer's is): freed after, its reducer held the group's last reference, and
    the group's destructor, run with the interpreter lock held, joined a gloo thread waiting
    for that lock (a deadlock, torch 2.13)."""
    model, input = _model_and_input(sizes)
    # each process's loss is the mean over its equal share: DDP's average is the batch mean
    step = training_step(dist.wrap(model, find_unused=False), input[:, dist.rank::dist.world_size])
    step()  # warm-up
    best = float("inf")
    for _ in range(sizes["repeat"]):
        dist.barrier()
        start = time.perf_counter()
        step()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        torch_dist.all_reduce(elapsed, torch_dist.ReduceOp.MAX)
        best = min(best, elapsed.item())
    return best, _gradient(model)
