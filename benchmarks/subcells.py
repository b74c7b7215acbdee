"""Where a teacher's sub-cells rank in a search, finished or not: what an enumeration that grows can
start from (docs/discover.md, *Where a teacher's sub-cells rank*).

A sub-cell is what removing one node of the teacher leaves (the ``remove`` changes of
:func:`cellgraph.discover.mutations.hashed_neighbours`). A teacher of ``k`` nodes is one insertion away
from each of its sub-cells of ``k - 1`` nodes, so ``cellgraph discover --strategy enumerate
--grow`` finds it from any of them that reaches full fidelity and becomes a centre. For each run
folder (a ``cellgraph discover --teacher`` run with its SQLite study, finished or not), per rung
of its fidelity: how many cells reached the rung, the best loss there, and the rank (1: the
lowest loss among them) and loss of the teacher and of each sub-cell that did. The record,
``DIR/subcells-RUN.json`` (the run's name, its teacher, whether it had finished, the rows and
the package versions), is written and printed as a table; ``--table`` prints the records in
``DIR`` and runs nothing.

    python -m cellgraph.benchmarks.subcells --records results/recovery-small runs/recovery-small/minimal1-2to3-enumerate-grow-s0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from optuna.trial import FrozenTrial

from cellgraph.benchmarks.reach import structure
from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_from_json, cell_hash
from cellgraph.discover.mutations import hashed_neighbours
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace
from cellgraph.discover.strategies import EnumerationSearch, Record
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json

__all__ = ["sub_cells", "rung_ranks", "expansion_place", "subcells", "table", "main"]


def sub_cells(teacher: Expr, space: CellSpace = CellSpace()) -> dict[str, str]:
    """hash -> name: the teacher (``teacher``) and each structure one removal leaves (its change
    and size, e.g. ``remove n2 keep right n1 (2 nodes)``)."""
    size = lambda n: f"{n} node" + ("s" if n != 1 else "")  # noqa: E731
    found = {key: f"{change} ({size(len(child.internal_nodes()))})"
             for change, child, key in hashed_neighbours(teacher, space) if change.startswith("remove ")}
    return {cell_hash(teacher): "teacher", **found}


def rung_ranks(trials: Sequence[FrozenTrial], names: dict[str, str]) -> list[dict[str, Any]]:
    """Per rung (epochs, ascending): ``cells`` that reached it, the ``best`` loss there and
    ``ranked``, each of ``names``' cells among them with its ``rank`` (1: lowest loss; ties share
    the better rank) and ``loss``."""
    rows = []
    for epochs in sorted({e for t in trials for e in t.intermediate_values}):
        losses = {t.user_attrs["hash"]: t.intermediate_values[epochs] for t in trials
                  if epochs in t.intermediate_values and "hash" in t.user_attrs}
        ordered = sorted(losses.values())
        ranked = [{"name": names[key], "rank": 1 + sum(v < loss for v in ordered), "loss": loss}
                  for key, loss in losses.items() if key in names]
        rows.append({"epochs": epochs, "cells": len(losses), "best": ordered[0],
                     "ranked": sorted(ranked, key=lambda r: r["rank"])})
    return rows


def expansion_place(trials: Sequence[FrozenTrial], teacher: Expr, strategy: EnumerationSearch, first: int,
                    space: CellSpace = CellSpace()) -> dict[str, Any] | None:
    """Where ``teacher`` comes in the best-first expansion of ``strategy``'s list
    (:meth:`~cellgraph.discover.strategies.EnumerationSearch.expansion_order`), given the
    list's losses after ``first`` epochs in ``trials``: ``place`` (1: the first cell the
    expansion trains; the cells the list phase trained and repeats do not count), the sub-cell
    it comes from (``parent``: trial number, ``parent_rank`` among the listed cells that
    trained, 1 the best); None while some listed cell has not trained, or when no listed cell
    is one removal from the teacher."""
    listed = {key for _, key in strategy.listed(space)}
    records = [Record(t.number, cell_from_json(t.user_attrs["cell"]), t.user_attrs["hash"], t.user_attrs.get("loss"),
                      False, {}, t.intermediate_values.get(first))
               for t in trials if t.user_attrs.get("hash") in listed and first in t.intermediate_values]
    if {r.hash for r in records} != listed:
        return None
    ranks = {r.number: k for k, r in enumerate(sorted(records, key=lambda r: (r.first, r.number)), 1)}
    target, seen = cell_hash(teacher), set(listed)
    for child, key, parent in strategy.expansion_order(records, listed, space):
        if key == target:
            return {"place": len(seen) - len(listed) + 1, "parent": parent, "parent_rank": ranks[parent],
                    "parents": len(ranks)}
        seen.add(key)
    return None


def expansion_size(strategy: EnumerationSearch, space: CellSpace = CellSpace()) -> int:
    """How many distinct cells the best-first expansion of ``strategy``'s list holds (every
    insertion into a listed cell that the screen keeps; the order does not change the count)."""
    everyone = [Record(k, cell, key, None, False, {}, 0.0) for k, (cell, key) in enumerate(strategy.listed(space))]
    return len({key for _, key, _ in strategy.expansion_order(everyone, {r.hash for r in everyone}, space)})


def subcells(run_dir: Path) -> dict[str, Any]:
    """The record of the module docstring (without versions) of the search in ``run_dir``,
    finished or not (``finished``: it wrote its ``discovery.json``)."""
    import optuna

    from cellgraph.discover.storage import open_search_storage

    path = run_dir / "discover.json"
    if not path.is_file() or not (run_dir / "study.db").is_file():
        raise CellGraphError(f"{run_dir} is not a search folder with its study (discover.json, study.db)")
    spec = json.loads(path.read_text())
    data = spec.get("evaluator", {}).get("data", {})
    if "teacher" not in data:
        raise CellGraphError(f"{run_dir} searched a task, not a planted teacher")
    root = structure(data["teacher"], data["seed"], data["weight_scale"])
    study = optuna.load_study(study_name=spec["study"], storage=open_search_storage(None, run_dir))
    trials = study.get_trials(deepcopy=False)
    out = {"run": run_dir.name, "teacher": data["teacher"], "nodes": len(root.internal_nodes()),
           "finished": (run_dir / "discovery.json").is_file(), "rungs": rung_ranks(trials, sub_cells(root))}
    settings = spec["strategy"]
    if settings.get("expand"):
        screen = settings.get("screen")
        strategy = EnumerationSearch(settings["nodes"], settings["seed"], screen=screen and Screen(**screen),
                                     expand=True)
        out["expansion"] = expansion_place(trials, root, strategy, spec["fidelity"]["epochs"][0])
    return out


def table(records: list[dict[str, Any]]) -> str:
    """A row per run, rung and ranked cell: the run, rung epochs, cells at the rung and the best
    loss there, the cell, its rank and loss (a rung none reached: ``-``)."""
    w = max([34, *(len(r["run"]) for r in records)])
    lines = [f"{'run':<{w}} {'epochs':>6} {'cells':>6} {'best':>10}  {'cell':<36} {'rank':>5} {'loss':>10}"]
    for record in records:
        for rung in record["rungs"]:
            head = f"{record['run']:<{w}} {rung['epochs']:>6} {rung['cells']:>6} {rung['best']:>10.4g}"
            lines += [f"{head}  {r['name']:<36} {r['rank']:>5} {r['loss']:>10.4g}" for r in rung["ranked"]] or \
                [f"{head}  {'-':<36} {'-':>5} {'-':>10}"]
    places = [(r["run"], r["expansion"]) for r in records if "expansion" in r]
    if places:
        lines += ["", f"{'run':<{w}} {'place':>6} {'parent rank':>12}   (the teacher in the best-first expansion)"]
        lines += [f"{run:<{w}} {'-':>6} {'-':>12}" if e is None else
                  f"{run:<{w}} {e['place']:>6} {e['parent_rank']:>5} of {e['parents']:<4}" for run, e in places]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN_DIR", help="cellgraph discover --teacher run folders, finished or not")
    p.add_argument("--records", default="runs/recovery", metavar="DIR", help="where the records go (default %(default)s)")
    p.add_argument("--table", action="store_true", help="run nothing: print the records in DIR")
    p.add_argument("--expansion-size", action="store_true",
                   help="count the cells of the best-first expansion of the screened list of one and two nodes "
                        "(about 10 minutes) into DIR/expansion-size.json")
    a = p.parse_args(argv)
    records = Path(a.records)
    if a.expansion_size:
        records.mkdir(parents=True, exist_ok=True)
        strategy = EnumerationSearch(2, screen=Screen(), expand=True)
        write_json(records / "expansion-size.json", {"strategy": strategy.to_dict(), "cells": expansion_size(strategy),
                                                     "versions": package_versions()})
    elif not a.table:
        if not a.runs:
            p.error("give RUN_DIR... or --table")
        records.mkdir(parents=True, exist_ok=True)
        for run_dir in a.runs:
            try:
                record = subcells(run_dir)
            except CellGraphError as err:
                p.exit(2, f"{p.prog}: error: {err}\n")
            write_json(records / f"subcells-{run_dir.name}.json", {**record, "versions": package_versions()})
    print(table([json.loads(f.read_text()) for f in sorted(records.glob("subcells-*.json"))]))
    size = records / "expansion-size.json"
    if size.is_file():
        print(f"\nthe best-first expansion of the screened list holds {json.loads(size.read_text())['cells']:,} cells")


if __name__ == "__main__":
    main()
