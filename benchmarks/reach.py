"""Which teachers a local search can reach: each teacher's move distance from the search's
start, beside how many structures lie within each distance (docs/discover.md, *The landscape
around a teacher*).

Breadth-first search from ``--start``'s structure (default ``rnn``, the one-node tanh RNN the
``rnn-motifs`` arms start at) through the local search's move graph
(:func:`cellgraph.discover.landscape.shells`: the single changes and, unless ``--no-motifs``, the
motif moves) to ``--depth`` moves (default 3); then each ``--targets`` teacher's distance, or
``> depth``. Structure only: nothing trains (each teacher's structure is drawn as its searches
draw it, :func:`structure`). The record,
``DIR/reach-START.json`` (the settings, package versions, the shells' sizes and each teacher's
distance), is written at the end and printed as a table. A distance is what a search must walk
when no move on the way lowers the fit; a search that evaluates ``B`` cells covers at most the
shells whose sizes sum to ``B``.

    python -m cellgraph.benchmarks.reach --records results/landscape --targets gru mgu mut1 mut3 minimal:0:2-3 minimal:4:4-7
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from cellgraph.cell.expr import Expr
from cellgraph.data.planted import teacher_folder
from cellgraph.data.planted_values import load_planted_values
from cellgraph.discover.landscape import distance, shells
from cellgraph.discover.space import CellSpace, from_cell
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json

__all__ = ["weight_scale", "structure", "reach", "table", "main"]


def weight_scale(teacher: str) -> float:
    """The weight scale ``teacher``'s searches ran at: 1 for the random teachers (the scale they
    are screened at; a random teacher not finite on its data is redrawn, so its structure may
    depend on it), 2 (``cellgraph discover``'s default) for the named ones."""
    return 1.0 if teacher.startswith(("minimal", "random")) else 2.0


def structure(teacher: str, data_seed: int = 0, scale: float | None = None) -> Expr:
    """``teacher``'s candidate, drawn as its searches draw it (data seed ``data_seed``, weight
    scale ``scale``, by default :func:`weight_scale`)."""
    scale = weight_scale(teacher) if scale is None else scale
    data = load_planted_values(teacher, data_seed, weight_scale=scale, n_train=2, n_val=2, n_test=2)
    return from_cell(data.cell, data.layout)


def reach(start: str, targets: list[str], depth: int, motifs: bool = True) -> dict[str, Any]:
    """The record of the module docstring (without versions)."""
    began = time.process_time()
    found = shells(structure(start), depth, CellSpace(), motifs)
    return {"config": {"start": start, "depth": depth, "motifs": motifs},
            "shells": [len(s) for s in found],
            "distances": {t: distance(found, structure(t)) for t in targets},
            "cpu_seconds": round(time.process_time() - began, 1)}


def table(record: dict[str, Any]) -> str:
    """The shells' sizes, then a row per teacher: its distance, or ``> depth``."""
    sizes, depth = record["shells"], record["config"]["depth"]
    lines = [f"structures at each distance from {record['config']['start']}: "
             + ", ".join(f"{d}: {n:,}" for d, n in enumerate(sizes))
             + f" (within {depth}: {sum(sizes):,})", f"{'teacher':<16} distance"]
    for teacher, d in record["distances"].items():
        lines.append(f"{teacher:<16} {'> ' + str(depth) if d is None else d}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="runs/landscape", metavar="DIR", help="where the record goes (default %(default)s)")
    p.add_argument("--targets", nargs="+", required=True, metavar="TEACHER", help="planted teachers (gru, minimal:0:2-3, ...)")
    p.add_argument("--start", default="rnn", help="the search's start (default %(default)s)")
    p.add_argument("--depth", type=int, default=3, help="moves searched (default %(default)s)")
    p.add_argument("--no-motifs", action="store_true", help="single changes only")
    a = p.parse_args(argv)
    if a.depth < 0:
        p.error("--depth must be >= 0")
    try:
        record = reach(a.start, a.targets, a.depth, not a.no_motifs)
    except CellGraphError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    Path(a.records).mkdir(parents=True, exist_ok=True)
    path = Path(a.records) / f"reach-{teacher_folder(a.start)}{'' if not a.no_motifs else '-nomotifs'}.json"
    write_json(path, {**record, "versions": package_versions()})
    print(table(record))


if __name__ == "__main__":
    main()
