"""How the benchmarks measure: best-of-N wall time, peak tensor memory, the machine.

Other processes share the CPU, so a time is the *best* of ``repeat`` runs after a warm-up
(the least disturbed one), and every result carries the load average it was taken under.
Peak memory is the high-water mark of the bytes held by tensors allocated while the function
runs, read from the torch profiler's allocation events (CPU torch has no allocator
statistics): ``max_t sum_{events <= t} nbytes``.
"""

from __future__ import annotations

import itertools
import os
import platform
import time
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["best_time", "peak_memory", "machine", "load_average"]


def best_time(fn: Callable[[], Any], repeat: int = 3, warmup: int = 1) -> float:
    """Smallest wall time in seconds of ``repeat`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes held by the tensors ``fn`` allocates (those alive before do not count)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    return max(itertools.accumulate(n for _, n in events), default=0)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """The machine a run measures: CPU, cores, torch threads, versions, load."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average": load_average(),
    }
