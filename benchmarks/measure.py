"""How the benchmarks measure: best-of-N wall time, peak tensor memory, the machine.

Other processes share the CPU, so a time is the *best* of ``repeat`` runs after a warm-up
(the least disturbed one), and every result carries the load average it was taken under. On a
GPU every timed call ends with a device synchronisation, so that the time covers the work the
call queued. As in :mod:`timeit`, Python's cyclic garbage collector runs before the timed calls
and not during them: a full collection of a process that has held the profiler's events takes
up to 1.3 s on this project's CPU, and landed inside single-call timings (item 4's ``p = 128``
row read 1.3-1.4 s instead of 0.1 s in eight runs).
Peak memory is the high-water mark of the bytes held by tensors allocated while the function
runs: on the CPU read from the torch profiler's allocation events (CPU torch has no allocator
statistics), ``max_t sum_{events <= t} nbytes``; on a GPU from CUDA's allocator statistics.
The operations a call dispatches are counted below autograd (forward and backward), each as a
view, an allocation or a compute operation: on a GPU each compute operation launches at least
one kernel, so their count times the per-launch cost bounds a step that is launch-bound.
"""

from __future__ import annotations

import gc
import itertools
import os
import platform
import time
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from cellgraph.backends.torch.runtime.device import synchronize

__all__ = ["best_time", "peak_memory", "dispatched_ops", "machine", "load_average", "allocator"]

CPU = torch.device("cpu")


def best_time(fn: Callable[[], Any], repeat: int = 3, warmup: int = 1, device: torch.device = CPU) -> float:
    """Smallest wall time in seconds of ``repeat`` calls of ``fn`` after ``warmup`` calls,
    each call's work on ``device`` finished before its time is taken; the garbage collector
    runs before the timed calls and is off during them (as in :mod:`timeit`)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            synchronize(device)
            best = min(best, time.perf_counter() - start)
    finally:
        if was_enabled:
            gc.enable()
    return best


def peak_memory(fn: Callable[[], Any], device: torch.device = CPU) -> int:
    """Peak bytes held by the tensors ``fn`` allocates on ``device`` (those alive before do
    not count)."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    return max(itertools.accumulate(n for _, n in events), default=0)


#: operations that allocate a tensor and launch nothing
ALLOCATIONS = frozenset(getattr(torch.ops.aten, name) for name in (
    "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"))
#: views that the schema does not mark as views (they alias their input)
UNMARKED_VIEWS = frozenset((torch.ops.aten._unsafe_view,))


class _OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while it is active, by kind."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = {"compute": 0, "views": 0, "allocations": 0}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        kind = ("views" if func.is_view or packet in UNMARKED_VIEWS
                else "allocations" if packet in ALLOCATIONS else "compute")
        self.counts[kind] += 1
        return func(*args, **(kwargs or {}))


def dispatched_ops(fn: Callable[[], Any], device: torch.device = CPU) -> dict[str, int]:
    """The ATen operations one call of ``fn`` dispatches, forward and backward (counted below
    autograd, so each is one kernel-level operation): ``compute`` (each launches at least one
    kernel on a GPU), ``views`` (metadata only) and ``allocations`` (memory only). The call is
    not timed: counting costs several microseconds an operation."""
    with _OpCounter() as counter:
        fn()
        synchronize(device)
    return dict(counter.counts)


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


#: shared-library name fragments of the malloc replacements a process may have preloaded
ALLOCATORS = (("tcmalloc", "libtcmalloc"), ("jemalloc", "libjemalloc"), ("mimalloc", "libmimalloc"))


def allocator(maps: str | None = None) -> str:
    """The malloc this process runs on: a replacement mapped into it (``LD_PRELOAD``), read from
    ``maps`` (the text of ``/proc/self/maps`` by default), else ``glibc`` on Linux; ``unknown``
    where there is no such file. It moves the CPU step by several percent (BENCHMARKS.md)."""
    if maps is None:
        try:
            with open("/proc/self/maps") as f:
                maps = f.read()
        except OSError:
            return "unknown"
    return next((name for name, library in ALLOCATORS if library in maps), "glibc")


def gpu(device: torch.device) -> dict[str, Any] | None:
    """The GPU of ``device`` (name, memory, compute capability, CUDA version, whether float32
    matmuls may use TF32), or None on the CPU."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    return {"name": props.name, "memory_gib": props.total_memory / 2 ** 30,
            "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}


def machine(device: torch.device = CPU) -> dict[str, Any]:
    """The machine a run measures: CPU, cores, torch threads, versions, malloc, load, the device
    the items run on and its GPU (None on the CPU)."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "allocator": allocator(),
        "load_average": load_average(),
        "device": str(device),
        "gpu": gpu(device),
    }
