"""``cellgraph bench [--quick] [--json OUT] [--threads N] [--device D]``: the benchmark suite."""

from __future__ import annotations

import argparse
import json

from cellgraph.cli.commands import DEVICE_AUTO, add_device_flag
from cellgraph.files import atomic_write, writable_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark the cell search and the training step (needs torch)",
        description="Run the benchmark suite: (1) literal Algorithm 2 vs the optimized torch search, "
        "(2) one training step of RRNN, RRNN-GRU, the frozen gru target and torch's GRU, (3) achieved "
        "GFLOP/s against torch.matmul, (4) scaling in n_iterations, hidden size, batch and scoring width, (5) one "
        "Wiki-5k epoch, (6) the RRNN step with torch.compile vs eager (not with --quick), (7) the RRNN step "
        "data-parallel over --threads one-thread processes against one process (CPU, --threads >= 2), (8) the "
        "training step with Adam of model=cell's frozen cells (the gru target, a 14-node cell), eager and "
        "compiled (the compiled not with --quick), against torch.nn.GRU. --items runs some of them. "
        "Prints a table "
        "with the performance targets and the machine's description; on a GPU (--device cuda) also the "
        "GPU and its float32 matmul GFLOP/s.",
        epilog="example: cellgraph bench --json bench.json",
    )
    p.add_argument("--quick", action="store_true", help="toy sizes (a smoke run, seconds)")
    p.add_argument("--json", metavar="OUT", type=writable_file, default=None,
                   help="also write the results as JSON to OUT (rewritten after each item, with "
                   "\"partial\": true until the last)")
    p.add_argument("--items", type=items_list, default=None, metavar="A,B",
                   help="run only these items, comma-separated (search, steps, flops, scaling, epoch, compile, "
                   "parallel, cells; flops needs steps); default all")
    p.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads, >= 1 (default 2)")
    add_device_flag(p, "cpu", "where the torch side runs: cpu (default: a benchmark says what it "
                    f"measures), or {DEVICE_AUTO}")
    p.set_defaults(func=run)


def items_list(text: str) -> tuple[str, ...]:
    """``--items``: comma-separated item names (checked against the suite's when it runs)."""
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"expected item names separated by commas, got {text!r}")
    return items


def positive_int(text: str) -> int:
    """An argument that must be an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from cellgraph.benchmarks.suite import run as run_suite, table

    command = ("cellgraph bench" + (" --quick" if args.quick else "") + f" --threads {args.threads}"
               + f" --device {args.device}" + (f" --items {','.join(args.items)}" if args.items else ""))
    write = (lambda result: atomic_write(args.json, json.dumps(result, indent=2).encode())) if args.json else None
    partial = (lambda result: write({**result, "partial": True})) if write else None
    items = {"items": args.items} if args.items else {}
    result = run_suite(args.quick, args.threads, command, args.device, on_item=partial, **items)
    print(table(result))
    if write:
        write(result)
    return 0
