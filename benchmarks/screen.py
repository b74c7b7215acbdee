"""What the screen at initialisation keeps (docs/discover.md, *The screen*).

For each variant of :class:`cellgraph.discover.screen.Screen` (the search's, ``conditioning``,
and ``ablations``, which adds the planted teachers' ablations), the number of the cells of one
and two nodes it keeps, the others counted by the kind of their first refusal, the verdict on
each named target and planted random teacher (``--targets``), and with ``--three N`` the share
kept of ``N`` cells of three nodes drawn by ``--seed`` from their full list (about five minutes
to list). The record, ``DIR/screen.json`` (every row, the settings and the package versions), is
written and printed as a table; ``--table`` prints the record in ``DIR`` and runs nothing.

    python -m cellgraph.benchmarks.screen --records results/screen --three 1000
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from cellgraph.benchmarks.reach import structure
from cellgraph.cell.expr import Expr
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace
from cellgraph.files import write_json

__all__ = ["VARIANTS", "TARGETS", "screened", "screen_record", "table", "main"]

#: The screens measured: name -> the screen.
VARIANTS = {"conditioning": Screen(), "ablations": Screen(ablations=True)}
#: The targets whose verdicts are recorded: the named ones and the planted random teachers.
TARGETS = ("rnn", "gru", "mgu", "mut1", "mut2", "mut3", "minimal:0:2-3", "minimal:5:2-3", "minimal:19:2-3",
           "minimal:1:2-3", "minimal:25:2-3", "minimal:4:4-7", "minimal:7:4-7", "minimal:15:4-7", "minimal:20:4-7",
           "minimal:25:4-7")


def screened(cells: Sequence[Expr], screen: Screen) -> dict[str, int]:
    """``kept`` and, for the others, the kind of their first refusal -> how many of ``cells``."""
    counts = Counter(screen.problem(cell) or "kept" for cell in cells)
    return dict(counts.most_common())


def screen_record(targets: Sequence[str], three: int = 0, seed: int = 0) -> dict[str, Any]:
    """The record of the module docstring, without versions."""
    space = CellSpace()
    small = [*cells_of_size(1, space), *cells_of_size(2, space)]
    sample = random.Random(seed).sample(cells_of_size(3, space), three) if three else []
    cells = {name: structure(name) for name in targets}
    rows = [{"variant": name, "draws": screen.draws, "small": screened(small, screen), "small_cells": len(small),
             "three": screened(sample, screen) if sample else None, "three_cells": len(sample),
             "targets": {t: screen.problem(cell) or "kept" for t, cell in cells.items()}}
            for name, screen in VARIANTS.items()]
    return {"rows": rows, "three": three, "seed": seed}


def table(record: dict[str, Any]) -> str:
    """Per variant: the small cells kept and refused by kind, the share of the three-node sample
    kept, and each target's verdict."""
    lines = []
    for row in record["rows"]:
        small = row["small"]
        refused = ", ".join(f"{n} {kind}" for kind, n in sorted(small.items(), key=lambda item: (-item[1], item[0]))
                            if kind != "kept")
        lines.append(f"{row['variant']} ({row['draws']} draws): keeps {small.get('kept', 0)} of {row['small_cells']} "
                     f"cells of one and two nodes (refused: {refused})")
        if row["three"]:
            kept = row["three"].get("kept", 0)
            lines.append(f"  three nodes: keeps {kept} of {row['three_cells']} drawn ({kept / row['three_cells']:.1%})")
        out = [f"{t} ({verdict})" for t, verdict in row["targets"].items() if verdict != "kept"]
        lines.append(f"  targets kept: {len(row['targets']) - len(out)} of {len(row['targets'])}"
                     + (f"; refused: {', '.join(out)}" if out else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="results/screen", metavar="DIR", help="where the record goes (default %(default)s)")
    p.add_argument("--targets", nargs="+", default=list(TARGETS), metavar="NAME", help="default: %(default)s")
    p.add_argument("--three", type=int, default=0, metavar="N", help="also screen N cells of three nodes (default 0)")
    p.add_argument("--seed", type=int, default=0, help="draws the three-node cells (default 0)")
    p.add_argument("--table", action="store_true", help="run nothing: print the record in DIR")
    a = p.parse_args(argv)
    path = Path(a.records) / "screen.json"
    if a.table:
        if not path.is_file():
            p.exit(2, f"{p.prog}: error: {path} does not exist: run without --table first\n")
        print(table(json.loads(path.read_text())))
        return
    if a.three < 0:
        p.exit(2, f"{p.prog}: error: --three must be >= 0, got {a.three}\n")
    record = {**screen_record(a.targets, a.three, a.seed), "versions": package_versions()}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)
    print(table(record))


if __name__ == "__main__":
    main()
