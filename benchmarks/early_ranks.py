"""Does a cheap first rung keep the teacher? Its rank among screened cells of its size at low
fidelities (docs/discover.md, *The screen*).

Successive halving drops a cell at a rung unless its loss is among the best ``1 / eta`` there,
so listing the screened cells of three nodes within a budget needs a cheap first rung and a
large ``eta``, and the teacher must survive each cut. For a planted teacher of ``k`` generated
nodes, this draws ``--cells N`` cells of ``k`` nodes that :class:`~cellgraph.discover.screen.Screen`
keeps (uniformly from the full list of :func:`~cellgraph.discover.enumeration.cells_of_size`,
seeded by ``--seed``; three nodes take minutes to list), trains each and the teacher from
scratch at each of ``--epochs E1,E2,...`` with the search's evaluator (``cellgraph discover
--teacher``'s defaults; ``--weight-scale``), and records per fidelity the teacher's objective
and its rank among the ``N + 1`` (1: the lowest; ties share the better rank). The record,
``DIR/early-ranks-TEACHER.json`` (the rows, the settings and the package versions), is written and
printed; ``--table`` prints the records in ``DIR`` and runs nothing.

With ``--sub-cells`` it ranks the teacher's sub-cells instead (what removing one of its nodes
leaves, :func:`cellgraph.benchmarks.subcells.sub_cells`, those of ``k - 1`` nodes the screen
keeps) among ``N`` screened cells of ``k - 1`` nodes: the parents a best-first expansion from
cells of ``k - 1`` nodes reaches the teacher from, and how early it would expand them. The row
of a fidelity carries each sub-cell's objective and rank and, as ``rank``, the best of them
(``DIR/early-ranks-sub-TEACHER.json``).

    python -m cellgraph.benchmarks.early_ranks --records results/early-ranks --teacher minimal:25:2-3 --cells 300 --epochs 1,5
    python -m cellgraph.benchmarks.early_ranks --records results/early-ranks --teacher minimal:15:4-7 --sub-cells
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any, Sequence

from cellgraph.benchmarks.subcells import removals
from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.enumeration import cells_of_size
from cellgraph.discover.evaluator import Evaluator, measure
from cellgraph.discover.planted import planted_search
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace, to_cell
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json

__all__ = ["screened_sample", "objectives", "rank", "early_ranks", "screened_sub_cells", "sub_cell_ranks", "table",
           "main"]


def screened_sample(k: int, n: int, seed: int, space: CellSpace = CellSpace(), screen: Screen = Screen()
                    ) -> list[Expr]:
    """``n`` cells of ``k`` nodes that ``screen`` keeps, drawn in the order ``seed`` shuffles
    the full list (fewer when fewer pass)."""
    cells = cells_of_size(k, space)
    random.Random(seed).shuffle(cells)
    kept: list[Expr] = []
    for cell in cells:
        if len(kept) == n:
            break
        if screen.problem(cell) is None:
            kept.append(cell)
    return kept


def objectives(cells: Sequence[Expr], evaluator: Evaluator, epochs: int, seed: int) -> list[float]:
    """Each cell's objective at ``epochs``, trained from scratch (a failed fit: infinity)."""
    out = []
    for root in cells:
        cell, layout = to_cell(root)
        loss = measure(evaluator, cell, layout, epochs, seed).loss
        out.append(float("inf") if loss is None else loss)
    return out


def rank(value: float, others: Sequence[float]) -> int:
    """1 + how many of ``others`` are strictly lower than ``value``."""
    return 1 + sum(v < value for v in others)


def early_ranks(teacher: str, cells: int, epochs: Sequence[int], seed: int, weight_scale: float,
                sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The record of the module docstring, without versions (``sizes``: the planted data's, as
    :func:`~cellgraph.discover.planted.planted_search` takes them; default the search's)."""
    _, root, evaluator, settings = planted_search(teacher, seed, sizes, weight_scale=weight_scale)
    sample = screened_sample(len(root.internal_nodes()), cells, seed)
    rows = []
    for e in epochs:
        own, = objectives([root], evaluator, e, seed)
        others = objectives(sample, evaluator, e, seed)
        rows.append({"epochs": e, "teacher": own, "rank": rank(own, others), "cells": len(others) + 1,
                     "best_other": min(others, default=float("inf"))})
    return {"teacher": teacher, "nodes": len(root.internal_nodes()), "seed": seed, "weight_scale": weight_scale,
            "sample": len(sample), "rows": rows, "settings": settings}


def screened_sub_cells(root: Expr, space: CellSpace = CellSpace(), screen: Screen = Screen()
                       ) -> list[tuple[str, Expr]]:
    """(change, cell): each structure of one node fewer that removing a node of ``root`` leaves
    and ``screen`` keeps."""
    k = len(root.internal_nodes())
    return [(change, child) for change, child, _ in removals(root, space)
            if len(child.internal_nodes()) == k - 1 and screen.problem(child) is None]


def sub_cell_ranks(teacher: str, cells: int, epochs: Sequence[int], seed: int, weight_scale: float,
                   sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """The ``--sub-cells`` record of the module docstring, without versions."""
    _, root, evaluator, settings = planted_search(teacher, seed, sizes, weight_scale=weight_scale)
    subs = screened_sub_cells(root)
    if not subs:
        raise CellGraphError(f"teacher {teacher}: no sub-cell of one node fewer passes the screen")
    mine = {cell_hash(child) for _, child in subs}
    k = len(root.internal_nodes()) - 1
    sample = [c for c in screened_sample(k, cells + len(subs), seed) if cell_hash(c) not in mine][:cells]
    rows = []
    for e in epochs:
        others = objectives(sample, evaluator, e, seed)
        ranked = [{"change": change, "objective": value, "rank": rank(value, others)}
                  for (change, _), value in zip(subs, objectives([c for _, c in subs], evaluator, e, seed))]
        best = min(ranked, key=lambda r: r["rank"])
        rows.append({"epochs": e, "teacher": best["objective"], "rank": best["rank"], "cells": len(others) + 1,
                     "best_other": min(others, default=float("inf")), "sub_cells": ranked})
    return {"teacher": teacher, "ranked": "sub-cells", "nodes": k, "seed": seed, "weight_scale": weight_scale,
            "sample": len(sample), "rows": rows, "settings": settings}


def table(records: list[dict[str, Any]]) -> str:
    """A line per teacher and fidelity: the teacher's objective and rank (with ``--sub-cells``,
    ``TEACHER sub``: its best sub-cell's), the best other's."""
    lines = [f"{'teacher':<16} {'nodes':>5} {'epochs':>6} {'teacher obj':>11} {'rank':>9} {'share':>6} {'best other':>10}"]
    for record in records:
        for row in record["rows"]:
            name = record["teacher"] + (" sub" if record.get("ranked") == "sub-cells" else "")
            lines.append(f"{name:<16} {record['nodes']:>5} {row['epochs']:>6} {row['teacher']:>11.4g} "
                         f"{row['rank']:>4} of {row['cells']:<3} {row['rank'] / row['cells']:>6.1%} "
                         f"{row['best_other']:>10.4g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="results/early-ranks", metavar="DIR", help="default %(default)s")
    p.add_argument("--teacher", help="a planted teacher, e.g. minimal:25:2-3")
    p.add_argument("--cells", type=int, default=300, metavar="N", help="screened cells drawn (default 300)")
    p.add_argument("--epochs", default="1,5", metavar="E1,E2,...", help="fidelities (default 1,5)")
    p.add_argument("--seed", type=int, default=0, help="the data, training and draw seed (default 0)")
    p.add_argument("--weight-scale", type=float, default=1.0, help="the teacher's (default 1, the minimal teachers')")
    p.add_argument("--sub-cells", action="store_true",
                   help="rank the teacher's screened sub-cells among cells of one node fewer instead")
    p.add_argument("--table", action="store_true", help="run nothing: print the records in DIR")
    a = p.parse_args(argv)
    records = Path(a.records)
    if not a.table:
        try:
            epochs = [int(e) for e in a.epochs.split(",")]
        except ValueError:
            p.exit(2, f"{p.prog}: error: --epochs takes whole numbers, got {a.epochs!r}\n")
        if a.teacher is None or a.cells < 1 or min(epochs) < 1:
            p.exit(2, f"{p.prog}: error: give --teacher, and --cells and --epochs >= 1\n")
        try:
            ranks = sub_cell_ranks if a.sub_cells else early_ranks
            record = ranks(a.teacher, a.cells, epochs, a.seed, a.weight_scale)
        except CellGraphError as err:
            p.exit(2, f"{p.prog}: error: {err}\n")
        records.mkdir(parents=True, exist_ok=True)
        name = ("sub-" if a.sub_cells else "") + a.teacher.replace(":", "-")
        write_json(records / f"early-ranks-{name}.json", {**record, "versions": package_versions()})
    print(table([json.loads(f.read_text()) for f in sorted(records.glob("early-ranks-*.json"))]))


if __name__ == "__main__":
    main()
