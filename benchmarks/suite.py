"""The ``cellgraph bench`` suite: items 1-8, the performance targets, a printed table and a
JSON document with the machine's description.

``quick`` runs items 1-5, 7 and 8 at toy sizes (seconds; for tests and smoke runs) and skips item 6
and item 8's compiled rows (compilation alone takes tens of seconds); ``items`` runs only the items named (the targets and
the table then hold theirs alone). The full run uses the paper's configuration
(``p = 100``, scoring hidden 256, ``N_bar = 9``, 4 tuples, batch 16, 20 steps). Item 7 (the soft
step data-parallel over ``threads`` one-thread processes) runs on the CPU with ``threads >= 2``.

``device`` (a ``device`` setting, ``cpu`` by default) is where the torch side of every item
runs; on a GPU the table gains its GPU rows (name, memory, and the float32 ``torch.matmul``
GFLOP/s of item 3, measured in the same run, with a large square shape added for the GPU's
peak). The literal reference of item 1 is numpy, on the CPU, wherever the torch side runs.
"""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from cellgraph.backends.torch.runtime.device import resolve_device
from cellgraph.benchmarks import (cell_bench, compile_bench, epoch_bench, flops_bench, parallel_bench, scaling_bench,
                                  search_bench, step_bench)
from cellgraph.benchmarks.measure import load_average, machine
from cellgraph.data.datadir import resolve_data_dir
from cellgraph.errors import CellGraphError

__all__ = ["SIZES", "ITEMS", "run", "targets", "table"]

GiB = 2 ** 30
#: matmul shapes added on a GPU (full runs): the small ones of the step do not reach its peak.
GPU_MATMUL_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))

#: Sizes of each item, full and quick.
SIZES: dict[bool, dict[str, Any]] = {
    False: {
        "search": dict(p=100, H=256, batch=16, n_iterations=9, repeat=3),
        "steps": dict(p=100, batch=16, steps=20, n_iterations=9, scoring_hidden=256, repeat=2),
        "matmul_shapes": ((2560, 100, 256), (2560, 256, 100), (1024, 1024, 1024)),
        "scaling": dict(base=dict(p=100, batch=16, n_iterations=9, scoring_hidden=256),
                        n_iterations=(4, 8, 12, 16), hidden=(32, 64, 128, 256), batch=(1, 16, 64, 256),
                        scoring_hidden=(8, 64, 256), steps=2, repeat=1),
        "epoch": dict(batches=3),
        "compile": dict(p=100, batch=16, steps=20, n_iterations=9, scoring_hidden=256, repeat=2),
        "parallel": dict(p=100, batch=16, steps=20, n_iterations=9, scoring_hidden=256, repeat=2),
        "cells": dict(p=100, batch=16, steps=20, repeat=10),
    },
    True: {
        "search": dict(p=4, H=6, batch=3, n_iterations=4, repeat=1),
        "steps": dict(p=6, batch=2, steps=3, n_iterations=3, scoring_hidden=8, repeat=1),
        "matmul_shapes": ((64, 32, 32),),
        "scaling": dict(base=dict(p=4, batch=2, n_iterations=3, scoring_hidden=6),
                        n_iterations=(2, 4), hidden=(4, 8), batch=(1, 2), scoring_hidden=(2, 6), steps=1,
                        repeat=1),
        "epoch": dict(batches=1, p=6, n_iterations=2, scoring_hidden=6),
        "compile": None,
        "parallel": dict(p=6, batch=4, steps=3, n_iterations=3, scoring_hidden=8, repeat=1),
        "cells": dict(p=6, batch=2, steps=3, repeat=1, compiled=False),  # compiling takes minutes
    },
}
#: The items in order (item 3 needs item 2).
ITEMS = ("search", "steps", "flops", "scaling", "epoch", "compile", "parallel", "cells")


def run(quick: bool = False, threads: int = 2, command: str = "cellgraph bench",
        device: str = "cpu", on_item: Callable[[dict[str, Any]], None] | None = None,
        items: tuple[str, ...] = ITEMS) -> dict[str, Any]:
    """Run ``items`` (default all, 1-8) on ``device`` with ``threads`` torch CPU threads and
    evaluate the targets.

    ``on_item(result)``, where given, is called after each item with the items done so far (the
    CLI writes them to ``--json`` then, so a run stopped from outside keeps what it measured);
    each item's seconds are printed to stderr as it ends."""
    where = resolve_device(device)  # no GPU where one is asked for: an error before any work
    if unknown := [item for item in items if item not in ITEMS]:
        raise CellGraphError(f"unknown bench item {unknown[0]!r} (known: {', '.join(ITEMS)})")
    if "flops" in items and "steps" not in items:
        raise CellGraphError("bench item flops needs item steps")
    torch.set_num_threads(threads)
    result: dict[str, Any] = {
        "command": command,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(where),
    }
    for name, item in _items(quick, threads, where):
        if name not in items:
            continue
        start = time.perf_counter()
        result[name] = item(result)
        print(f"bench: {name} done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        if on_item is not None:
            on_item(result)
    result["load_average_after"] = load_average()
    result["targets"] = targets(result)
    return result


def _items(quick: bool, threads: int, where: torch.device) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """Items 1-8 in order, each a function of the results so far (item 3 reads item 2's step)."""
    sizes = SIZES[quick]

    def flops(result: dict[str, Any]) -> dict[str, Any]:
        cfg = result["steps"]["config"]
        shapes = sizes["matmul_shapes"] + (GPU_MATMUL_SHAPES if where.type == "cuda" and not quick else ())
        return flops_bench.achieved(
            search_bench.paper_space(cfg["n_iterations"]), cfg["p"], cfg["scoring_hidden"], cfg["batch"],
            cfg["steps"], result["steps"]["models"]["rrnn_soft"]["time_s"], shapes, where,
        )

    return [
        ("search", lambda result: search_bench.compare_search(**sizes["search"], device=where)),
        ("steps", lambda result: step_bench.compare_steps(**sizes["steps"], device=where)),
        ("flops", flops),
        ("scaling", lambda result: scaling_bench.scaling(**sizes["scaling"], device=where)),
        ("epoch", lambda result: _epoch(sizes["epoch"], where)),
        ("compile", lambda result: compile_bench.compare_compile(**sizes["compile"], device=where)
         if sizes["compile"] else None),
        ("parallel", lambda result: _parallel(sizes["parallel"], threads, where)),
        ("cells", lambda result: cell_bench.compare_cells(**sizes["cells"], device=where)),
    ]


def _epoch(sizes: dict[str, Any], where: torch.device) -> dict[str, Any]:
    """Item 5, or ``{"skipped": why}`` where the Wiki-5k data are missing (the other items
    need no data, and their work is not lost)."""
    try:
        resolve_data_dir(dataset="wiki5k")
    except CellGraphError as err:
        return {"skipped": f"no Wiki-5k data ({err})"}
    return epoch_bench.epoch_time(**sizes, device=where)


def _parallel(sizes: dict[str, Any], threads: int, where: torch.device) -> dict[str, Any]:
    """Item 7 over ``threads`` processes, or ``{"skipped": why}``: it splits the CPU's cores
    between processes, so it needs two of them and the CPU."""
    if where.type != "cpu":
        return {"skipped": f"a CPU item (device {where})"}
    if threads < 2:
        return {"skipped": "one thread: no second core for a second process"}
    return parallel_bench.compare_parallel(threads, **sizes)


#: The CPU step a GPU's RRNN soft step is compared with: the fastest 2-thread ``rrnn_soft`` of
#: item 2 in run N (``results/bench-2t-1125-n.json``, a 2-core AMD EPYC VM; docs/benchmarks-history.md,
#: *Runs K to N: 2026-11-25, commits `81d8577` and `46ecbcd` (what bounds the CPU step)*).
CPU_REFERENCE_STEP_S = 0.853
#: The batch of item 4 at which a GPU's RRNN step is held against its matmul rate.
GPU_LARGE_BATCH = 256


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The performance targets of the items ``result`` holds, each with its measured value,
    limit and whether it is met: the CPU's, or on a GPU its own for the soft step, its rate and
    the Wiki-5k epoch."""
    gpu = bool(result["machine"].get("gpu"))

    def target(name: str, value: float | None, limit: float, at_least: bool = False) -> dict[str, Any]:
        """``met`` is None where ``value`` was not measured."""
        met = None if value is None else value >= limit if at_least else value <= limit
        return {"target": name, "value": value, "limit": limit, "relation": ">=" if at_least else "<=",
                "met": met}

    out = []
    if "search" in result:
        out.append(target("optimized search speed-up over literal Algorithm 2 (x)", result["search"]["speedup"],
                          100, True))
    if "steps" in result:
        models = result["steps"]["models"]
        loop = models["gru_cell_loop"]["time_s"]
        if gpu:
            out.append(target(f"RRNN soft training step, speed-up over the 2-core CPU's {CPU_REFERENCE_STEP_S} s (x)",
                              CPU_REFERENCE_STEP_S / models["rrnn_soft"]["time_s"], 20, True))
        else:
            out.append(target("RRNN soft training step (s)", models["rrnn_soft"]["time_s"],  # half the step of b2bbb2f
                              1.05 if result["machine"]["torch_threads"] == 1 else 0.8))
        out.append(target("RRNN-GRU step / GRUCell loop (x)", models["rrnn_gru"]["time_s"] / loop, 5))
        out.append(target("frozen gru step / GRUCell loop (x)", models["frozen_gru"]["time_s"] / loop, 1.5))
    if "flops" in result:
        out.append(target(f"RRNN step at batch {GPU_LARGE_BATCH} GFLOP/s / torch.matmul GFLOP/s (executed FLOPs)",
                          _large_batch_fraction(result), 0.25, True) if gpu else
                   target("RRNN step GFLOP/s / torch.matmul GFLOP/s (executed FLOPs)",
                          result["flops"]["fraction_of_matmul"]["executed"], 0.4, True))
    if "epoch" in result:
        out.append(target("Wiki-5k RRNN epoch (s)", result["epoch"].get("epoch_s"), 60 if gpu else 600))
    if "steps" in result:
        out.append(target("peak memory of the RRNN soft step (GiB)",
                          result["steps"]["models"]["rrnn_soft"]["peak_bytes"] / GiB, 4))
    if "scaling" in result:
        out.append(target("growth exponent of the cost per cell in n_iterations",
                          result["scaling"]["n_iterations_exponent"], 2.5))
    if "cells" in result:
        cells = result["cells"]
        out.append(target("frozen gru training step (with Adam) / torch.nn.GRU's (x)",
                          cells["models"]["frozen_gru"]["time_vs_torch_gru"], 1.3))
        out.append(target(f"{cell_bench.LARGE_NODES}-node cell step per node / frozen gru's per node (x)",
                          cells["large_per_node_vs_frozen_gru"], 1.0))
    return out


def _large_batch_fraction(result: dict[str, Any]) -> float | None:
    """The executed GFLOP/s of item 4's soft step at batch :data:`GPU_LARGE_BATCH` over the
    best ``torch.matmul`` rate of item 3; None where item 4 has no such row."""
    scaling = result.get("scaling")
    if scaling is None:
        return None
    row = next((r for r in scaling["batch"] if r["batch"] == GPU_LARGE_BATCH), None)
    if row is None:
        return None
    base = scaling["base"]
    flops = flops_bench.training_step_flops(search_bench.paper_space(base["n_iterations"]), base["p"],
                                            base["scoring_hidden"], GPU_LARGE_BATCH, base["steps"])["executed"]
    return flops / row["time_s"] / 1e9 / result["flops"]["matmul_peak_gflops"]


def _gpu_rows(result: dict[str, Any]) -> list[str]:
    """The GPU of the run and its float32 matmul rate (item 3, same run); none on the CPU."""
    gpu = result["machine"].get("gpu")
    if not gpu:
        return []
    matmul = result["flops"]["matmul_gflops"]
    return [
        "", f"GPU ({result['machine']['device']}): float32 torch.matmul measured in this run "
        f"(TF32 {'on' if gpu['tf32_matmul'] else 'off'})",
        "| GPU | memory | compute capability | CUDA | matmul GFLOP/s, best shape | shape |",
        "|---|---|---|---|---|---|",
        f"| {gpu['name']} | {gpu['memory_gib']:.1f} GiB | {gpu['capability']} | {gpu['cuda']} | "
        f"{max(matmul.values()):.0f} | {max(matmul, key=matmul.get)} |",
    ]


def _epoch_line(e: dict[str, Any]) -> str:
    if "skipped" in e:
        return f"(5) one epoch of wiki5k, full RRNN: skipped: {e['skipped']}"
    how = (f"ESTIMATED from {e['batches_measured']} of {e['batches_per_epoch']} batches "
           f"({e['measured_s']:.1f} s measured)" if e["estimated"] else "measured over the full epoch")
    return (f"(5) one epoch of {e['config']['dataset']} ({e['config']['n_train']} sequences, batch "
            f"{e['config']['batch']}), full RRNN: {e['epoch_s']:.1f} s, {how}")


def _parallel_lines(r: dict[str, Any]) -> list[str]:
    if "skipped" in r:
        return [f"(7) the soft step data-parallel over one-thread processes: skipped: {r['skipped']}"]
    c = r["config"]
    n = c["processes"]
    return [
        f"(7) RRNN soft step (sizes of (2)) data-parallel: {n} one-thread processes (DDP over gloo, each "
        f"1/{n} of the batch) against one process of {n} threads, same cores, same hour; best of N",
        f"| one process, {n} threads (s) | {n} processes, 1 thread each (s) | speed-up "
        "| max gradient difference | max gradient |",
        "|---|---|---|---|---|",
        f"| {r['one_process_s']:.4f} | {r['parallel_s']:.4f} | {r['speedup']:.2f}x | "
        f"{r['max_abs_gradient_difference']:.2g} | {r['max_abs_gradient']:.2g} |",
    ]


def _fmt_bytes(n: float) -> str:
    return f"{n / 2 ** 20:.1f} MiB"


def _search_lines(s: dict[str, Any]) -> list[str]:
    c = s["config"]
    return [
        f"(1) literal Algorithm 2 vs optimized torch search (hard, float64; p={c['p']}, H={c['scoring_hidden']}, "
        f"batch {c['batch']}, N={c['n_iterations']}, {c['n_tuples']} tuples)",
        "| reference (s) | torch (s) | speed-up | trees equal |",
        "|---|---|---|---|",
        f"| {s['reference_s']:.3f} | {s['torch_s']:.4f} | {s['speedup']:.0f}x | "
        f"{s['trees_equal']}/{s['trees_compared']} |",
        "",
    ]


def _steps_lines(steps: dict[str, Any]) -> list[str]:
    c = steps["config"]
    lines = [
        f"(2) one training step, fwd+bwd (batch {c['batch']}, {c['steps']} steps, p={c['p']}, "
        f"N={c['n_iterations']}, scoring hidden {c['scoring_hidden']}; best of N)",
        "| model | time (s) | x torch.nn.GRU | peak memory | x torch.nn.GRU | compute ops | views "
        "| time per compute op (us) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in steps["models"].items():
        lines.append(f"| {name} | {row['time_s']:.4f} | {row['time_vs_torch_gru']:.1f} | "
                     f"{_fmt_bytes(row['peak_bytes'])} | {row['memory_vs_torch_gru']:.1f} | "
                     f"{row['ops']['compute']} | {row['ops']['views']} | {row['time_per_compute_op_us']:.2f} |")
    return lines + [""]


def _flops_lines(f: dict[str, Any]) -> list[str]:
    lines = [
        "(3) achieved GFLOP/s of the RRNN soft step (3 x forward FLOPs of candidates and scoring)",
        "| FLOPs counted | GFLOP per step | GFLOP/s | fraction of torch.matmul peak |",
        "|---|---|---|---|",
    ]
    for kind in ("executed", "nominal"):
        lines.append(f"| {kind} | {f['training_step_flops'][kind] / 1e9:.2f} | {f['gflops'][kind]:.1f} | "
                     f"{f['fraction_of_matmul'][kind]:.1%} |")
    lines.append("torch.matmul GFLOP/s: " + ", ".join(f"{k}: {v:.1f}" for k, v in f["matmul_gflops"].items()))
    return lines + [""]


def _scaling_lines(sc: dict[str, Any]) -> list[str]:
    lines = [f"(4) scaling of one RRNN soft training step from {sc['base']}"]
    for key in ("n_iterations", "p", "batch", "scoring_hidden"):
        lines += [f"| {key} | time (s) | time per cell (ms) | peak memory |", "|---|---|---|---|"]
        for row in sc[key]:
            lines.append(f"| {row[key]} | {row['time_s']:.3f} | {row['time_per_cell_s'] * 1e3:.2f} | "
                         f"{_fmt_bytes(row['peak_bytes'])} |")
        lines.append("")
    return lines + [f"growth exponent of the time per cell in n_iterations: {sc['n_iterations_exponent']:.2f}", ""]


def _compile_lines(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return ["(6) torch.compile of the search: skipped (quick run)", ""]
    return [
        "(6) RRNN soft step with the search compiled (torch.compile, one graph per time step) vs eager "
        "(sizes of (2); best of N rounds)",
        "| first compiled step, compilation included (s) | eager (s) | compiled (s) | speed-up "
        "| fell back to eager | max output difference |",
        "|---|---|---|---|---|---|",
        f"| {c['first_compiled_step_s']:.1f} | {c['eager_s']:.4f} | {c['compiled_s']:.4f} | "
        f"{c['speedup']:.2f}x | {'yes' if c['fell_back'] else 'no'} | {c['max_abs_output_difference']:.2g} |",
        "",
    ]


def _cells_lines(r: dict[str, Any]) -> list[str]:
    c = r["config"]
    lines = [
        f"(8) model=cell's training step, {c['step']} (batch {c['batch']}, {c['steps']} steps, p={c['p']}; "
        f"best of {c['repeat']} interleaved rounds)",
        "| model | generated nodes | time (s) | x torch.nn.GRU | time per node (ms) | compute ops |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in r["models"].items():
        per_node = f"{row['time_per_node_s'] * 1e3:.3f}" if "time_per_node_s" in row else "—"
        lines.append(f"| {name} | {row['nodes'] or '—'} | {row['time_s']:.4f} | {row['time_vs_torch_gru']:.2f} | "
                     f"{per_node} | {'—' if row['compute_ops'] is None else row['compute_ops']} |")
    lines.append(f"large cell per node / frozen gru per node: {r['large_per_node_vs_frozen_gru']:.2f}x")
    if not c["compiled"]:
        return lines + ["compiled rows (frozen_gru_compiled, frozen_large_compiled): not run with --quick "
                        "(each compiles for a minute or more)", ""]
    for name, row in r["models"].items():
        if "first_step_s" in row:
            lines.append(f"{name}: {row['speedup_over_eager']:.2f}x faster than eager; first step, compilation "
                         f"included: {row['first_step_s']:.1f} s{'; FELL BACK to eager' if row['fell_back'] else ''}")
    return lines + [f"compiled large cell per node / compiled frozen gru per node: "
                    f"{r['compiled_large_per_node_vs_compiled_frozen_gru']:.2f}x", ""]


#: Each item's lines in the printed table.
_SECTIONS: dict[str, Callable[[Any], list[str]]] = {
    "search": _search_lines, "steps": _steps_lines, "flops": _flops_lines, "scaling": _scaling_lines,
    "epoch": lambda e: [_epoch_line(e), ""], "compile": _compile_lines,
    "parallel": lambda r: [*_parallel_lines(r), ""], "cells": _cells_lines,
}


def table(result: dict[str, Any]) -> str:
    """The result as plain-text tables (Markdown-compatible), one per item it holds."""
    m = result["machine"]
    lines = [
        f"cellgraph bench{' --quick' if result['quick'] else ''}  {result['date']}",
        f"machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} with {m['torch_threads']} threads, "
        f"python {m['python']}, {m['platform']}, malloc: {m.get('allocator', 'not recorded')}",
        f"load average before: {m['load_average']}, after: {result['load_average_after']}",
        f"device: {m.get('device', 'cpu')}",
        "",
    ]
    for item in ITEMS:
        if item in result:
            lines += _SECTIONS[item](result[item])
    if "flops" in result and (gpu := _gpu_rows(result)):
        lines += gpu[1:] + [""]
    lines += ["targets", "| target | measured | limit | met |", "|---|---|---|---|"]
    for t in result["targets"]:
        if t["met"] is None:
            measured, met = "not measured", "—"
        else:
            measured, met = f"{t['value']:.3g}", "met" if t["met"] else "NOT met"
        lines.append(f"| {t['target']} | {measured} | {t['relation']} {t['limit']} | {met} |")
    return "\n".join(lines)
