"""Item 6 of ``cellgraph bench``: the RRNN soft training step with the search compiled by
``torch.compile``, each time step's search one graph (``RRNN(compile=True)``, config key
``compile``), against the eager step, in the same run.

The first compiled step includes the compilation (shorter when inductor's on-disk cache
holds kernels from an earlier run); the step times are then the best of ``repeat`` rounds,
each round running the eager and the compiled step once. Where compilation fails the model
warns and runs eagerly: ``fell_back`` records it (the speed-up is then about 1).

``cellgraph bench`` runs it with torch.compile's default mode; ``python -m
cellgraph.benchmarks.compile_bench --mode reduce-overhead --device cuda --json OUT`` runs it
alone in another mode (``reduce-overhead`` records CUDA graphs on a GPU; ``gpu_check.sh``'s
part ``compile``) and prints one line.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from cellgraph.backends.torch.runtime.device import resolve_device, synchronize
from cellgraph.backends.torch.models.rrnn import RRNN
from cellgraph.benchmarks.measure import best_time
from cellgraph.benchmarks.step_bench import training_step
from cellgraph.files import writable_file, write_json

__all__ = ["compare_compile"]


def compare_compile(p: int = 100, batch: int = 16, steps: int = 20, n_iterations: int = 9,
                    scoring_hidden: int = 256, repeat: int = 2, seed: int = 0,
                    device: torch.device = torch.device("cpu"), **settings: Any) -> dict[str, Any]:
    """Compile time, eager and compiled step times (on ``device``) and the largest output
    difference; ``settings``: more :class:`~cellgraph.backends.torch.models.rrnn.RRNN` arguments
    (``candidate_norm="sample", tau_units="std"``: the setting of the full-RRNN runs of
    RESULTS.md)."""
    torch.manual_seed(seed)
    input = torch.randn(steps, batch, p).to(device)
    models, runs = {}, {}
    for compiled in (False, True):
        torch.manual_seed(seed)
        models[compiled] = RRNN(p, n_tuples=3, n_iterations=n_iterations, scoring_hidden=scoring_hidden,
                                mode="soft", return_traces=False, compile=compiled, **settings).to(device)
        runs[compiled] = training_step(models[compiled], input)
    runs[False]()  # warm-up of the eager step
    synchronize(device)
    start = time.perf_counter()
    runs[True]()
    synchronize(device)
    first = time.perf_counter() - start
    times = {False: float("inf"), True: float("inf")}
    for _ in range(repeat):
        for compiled, step in runs.items():
            times[compiled] = min(times[compiled], best_time(step, repeat=1, warmup=0, device=device))
    # with gradients on: only then does the model run its compiled search
    diff = (models[False](input)[0] - models[True](input)[0]).detach().abs().max().item()
    return {
        "config": {"p": p, "batch": batch, "steps": steps, "n_iterations": n_iterations,
                   "scoring_hidden": scoring_hidden, "mode": "soft", "dtype": "float32", **settings},
        "first_compiled_step_s": first,
        "eager_s": times[False],
        "compiled_s": times[True],
        "speedup": times[False] / times[True],
        "fell_back": models[True].cell.compiled.fell_back,
        "max_abs_output_difference": diff,
    }


#: ``--quick``: toy sizes, for a check of the command on the CPU.
QUICK = dict(p=8, batch=4, steps=3, n_iterations=2, scoring_hidden=8, repeat=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Item 6 of cellgraph bench alone, in a torch.compile mode.")
    parser.add_argument("--mode", default="reduce-overhead", help="torch.compile's mode (default reduce-overhead)")
    parser.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N (default cuda)")
    parser.add_argument("--json", type=writable_file, help="also write the result as JSON here")
    parser.add_argument("--quick", action="store_true", help="toy sizes (a check of the command)")
    args = parser.parse_args(argv)
    result = compare_compile(device=resolve_device(args.device), compile_mode=args.mode,
                             **(QUICK if args.quick else {}))
    result["device"] = args.device
    if args.json:
        write_json(args.json, result)
    print(f"compile_mode={args.mode} on {args.device}: first compiled step {result['first_compiled_step_s']:.1f} s, "
          f"eager {result['eager_s']:.4f} s, compiled {result['compiled_s']:.4f} s, "
          f"speed-up {result['speedup']:.2f}x, fell back: {result['fell_back']}")


if __name__ == "__main__":
    main()
