"""Where a teacher's sub-cells rank in a search, finished or not: what an enumeration that grows can
start from (docs/discover.md, *Where a teacher's sub-cells rank*).

A sub-cell is what removing one node of the teacher leaves (the ``remove`` changes of
:func:`cellgraph.discover.mutations.hashed_neighbours`). A teacher of ``k`` nodes is one insertion away
from each of its sub-cells of ``k - 1`` nodes, so ``cellgraph discover --strategy enumerate
--grow`` finds it from any of them that reaches full fidelity and becomes a centre. For each run
folder (a ``cellgraph discover --teacher`` run with its SQLite study, finished or not), per rung
of its fidelity: how many cells reached the rung, the best loss there, and the rank (1: the
lowest loss among them) and loss of the teacher and of each sub-cell that did, and their ranks
among the cells of their size and among their siblings (one parent's insertions). The record,
``DIR/subcells-RUN.json`` (the run's name, its teacher, whether it had finished, the rows and
the package versions), is written and printed as a table; ``--table`` prints the records in
``DIR`` and runs nothing. A search with ``--expand`` also gets the teacher's place in its
best-first expansion; ``--interleave`` takes searches of one teacher and seed at different first
rungs (lists at 1 and at 5 epochs) and records the place when the expansion takes its parents
from each run's ranking in turn, the order a search with those rungs as probes follows
(``DIR/interleave-RUN+RUN.json``).

    python -m cellgraph.benchmarks.subcells --records results/recovery-small runs/recovery-small/minimal1-2to3-enumerate-grow-s0
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from optuna.trial import FrozenTrial

from cellgraph.benchmarks import run_records
from cellgraph.benchmarks.reach import structure
from cellgraph.cell.expr import Expr
from cellgraph.discover.cache import cell_from_json, cell_hash
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.mutations import hashed_neighbours
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace, absorbed
from cellgraph.discover.strategies import EnumerationSearch, Record
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json

__all__ = ["removals", "sub_cells", "rung_ranks", "records", "merged", "expansion_place", "absorbed_place",
           "pending_place", "interleaved", "interleave_table", "load_search", "search_space", "expansion_strategy",
           "subcells", "table", "main"]


def removals(teacher: Expr, space: CellSpace = CellSpace()) -> list[tuple[str, Expr, str]]:
    """(change, cell, hash): each structure one removal of a node of ``teacher`` leaves."""
    return [(change, child, key) for change, child, key in hashed_neighbours(teacher, space)
            if change.startswith("remove ")]


def sub_cells(teacher: Expr, space: CellSpace = CellSpace()) -> dict[str, str]:
    """hash -> name: the teacher (``teacher``) and each structure one removal leaves (its change
    and size, e.g. ``remove n2 keep right n1 (2 nodes)``)."""
    size = lambda n: f"{n} node" + ("s" if n != 1 else "")  # noqa: E731
    found = {key: f"{change} ({size(len(child.internal_nodes()))})" for change, child, key in removals(teacher, space)}
    return {cell_hash(teacher): "teacher", **found}


def rung_ranks(trials: Sequence[FrozenTrial], names: dict[str, str]) -> list[dict[str, Any]]:
    """Per rung (epochs, ascending): ``cells`` that reached it, the ``best`` loss there and
    ``ranked``, each of ``names``' cells among them with its ``rank`` (1: lowest loss; ties share
    the better rank) and ``loss``; where the trials carry their cells, also its rank among the
    cells of its size (``size_rank`` of ``size_cells``), and where they carry the parent a
    mutation or insertion came from, among that parent's children (``sibling_rank`` of
    ``siblings``): the rankings a best-first expansion takes its parents from."""
    sizes = {t.user_attrs["hash"]: len(cell_from_json(t.user_attrs["cell"]).internal_nodes()) for t in trials
             if "cell" in t.user_attrs}
    parents = {t.user_attrs["hash"]: t.user_attrs["parent"] for t in trials if t.user_attrs.get("parent") is not None}
    rows = []
    for epochs in sorted({e for t in trials for e in t.intermediate_values}):
        losses = {t.user_attrs["hash"]: t.intermediate_values[epochs] for t in trials
                  if epochs in t.intermediate_values and "hash" in t.user_attrs}
        ordered = sorted(losses.values())
        ranked = []
        for key, loss in ((key, loss) for key, loss in losses.items() if key in names):
            cell = {"name": names[key], "rank": _rank(loss, ordered), "loss": loss}
            if key in sizes:
                peers = [v for other, v in losses.items() if sizes.get(other) == sizes[key]]
                cell |= {"size_rank": _rank(loss, peers), "size_cells": len(peers)}
            if key in parents:
                peers = [v for other, v in losses.items() if parents.get(other) == parents[key]]
                cell |= {"sibling_rank": _rank(loss, peers), "siblings": len(peers)}
            ranked.append(cell)
        rows.append({"epochs": epochs, "cells": len(losses), "best": ordered[0],
                     "ranked": sorted(ranked, key=lambda r: r["rank"])})
    return rows


def _rank(loss: float, losses: Sequence[float]) -> int:
    """1 + how many of ``losses`` are lower than ``loss``."""
    return 1 + sum(v < loss for v in losses)


def records(trials: Sequence[FrozenTrial], early: Sequence[int], rungs: Sequence[int] = ()) -> list[Record]:
    """The search's records of ``trials`` (those with a cell), ``early`` the epochs of the rungs
    every candidate trains (:attr:`~cellgraph.discover.fidelity.Fidelity.early`), ``rungs``
    every rung's."""
    return [Record.from_trial(t, cell_from_json(t.user_attrs["cell"]), early, rungs) for t in trials
            if "cell" in t.user_attrs]


def merged(runs: Sequence[Sequence[Record]]) -> list[Record]:
    """One record per cell that trained in every run of ``runs`` (searches of one teacher and
    seed at different first rungs), its early losses each run's first-rung loss in turn, its
    number the first run's: the records a search with those rungs as probes would have (the
    evaluator trains each rung from scratch with the same seed)."""
    losses = [{r.hash: r.early[0] for r in run if r.early} for run in runs]
    return [replace(r, early=tuple(run[r.hash] for run in losses)) for r in runs[0]
            if r.early and all(r.hash in run for run in losses)]


def expansion_place(history: Sequence[Record], teacher: Expr, strategy: EnumerationSearch,
                    space: CellSpace = CellSpace()) -> dict[str, Any] | None:
    """Where ``teacher`` comes in the best-first expansion of ``strategy``'s list
    (:meth:`~cellgraph.discover.strategies.EnumerationSearch.expansion_order`), given the
    list's early losses in ``history``: ``place`` (1: the first cell the expansion trains; the
    cells the list phase trained and repeats do not count), the sub-cell it comes from
    (``parent``: trial number, ``parent_rank``: its turn among the ``parents``, the listed
    cells that trained, 1 the first expanded); None while some listed cell has not trained, or
    when no listed cell is one removal from the teacher."""
    listed = {key for _, key in strategy.listed(space)}
    history = [r for r in history if r.hash in listed and r.early]
    if {r.hash for r in history} != listed:
        return None
    target, seen, turns = cell_hash(teacher), set(listed), {}
    for child, key, parent in strategy.expansion_order(history, listed, space):
        turns.setdefault(parent, len(turns) + 1)
        if key == target:
            return {"place": len(seen) - len(listed) + 1, "parent": parent, "parent_rank": turns[parent],
                    "parents": len(history)}
        seen.add(key)
    return None


def absorbed_place(history: Sequence[Record], teacher: Expr, strategy: EnumerationSearch,
                   space: CellSpace = CellSpace()) -> dict[str, Any] | None:
    """:func:`expansion_place` had the search's ``space`` absorbed (``absorb=True``,
    docs/discover.md, *Space*): the listed cells that stay keep their early losses in
    ``history`` (a cell trains alike in either space), the others and their insertions are
    gone, and the teacher is its absorbed form."""
    return expansion_place(history, absorbed(teacher), strategy, replace(space, absorb=True))


def pending_place(history: Sequence[Record], teacher: Expr, strategy: EnumerationSearch,
                  space: CellSpace = CellSpace()) -> dict[str, Any] | None:
    """Where ``teacher`` comes in ``strategy``'s best-first expansion as a search stands, finished
    or not, at any depth (``history``: every record so far): ``place`` (1: the next cell the
    expansion trains; the cells the history holds do not count), its parent (trial number) and
    the parent's turn (``parent_rank``, 1 the first parent of the order, whether expanded yet or
    not); None when the order holds no teacher (no sub-cell of it has trained). The order is
    the one the history gives now: the cells trained before the teacher's turn join it as
    parents and may move it, so this is the place were no new parent to rank above its own."""
    listed = {key for _, key in strategy.listed(space)}
    seen, target, fresh, turns = {r.hash for r in history}, cell_hash(teacher), set(), {}
    for child, key, parent in strategy.expansion_order(history, listed, space):
        turns.setdefault(parent, len(turns) + 1)
        if key == target:
            return {"place": len(fresh) + 1, "parent": parent, "parent_rank": turns[parent]}
        if key not in seen:
            fresh.add(key)
    return None


def expansion_size(strategy: EnumerationSearch, space: CellSpace = CellSpace()) -> int:
    """How many distinct cells the best-first expansion of ``strategy``'s list holds (every
    insertion into a listed cell that the screen keeps; the order does not change the count)."""
    everyone = [Record(k, cell, key, None, False, {}, (0.0,)) for k, (cell, key) in enumerate(strategy.listed(space))]
    return len({key for _, key, _ in strategy.expansion_order(everyone, {r.hash for r in everyone}, space)})


def load_search(run_dir: Path) -> tuple[dict[str, Any], Expr, list[FrozenTrial]]:
    """A teacher search's settings (``discover.json``), its teacher's structure (absorbed where
    the search's space absorbs, :func:`~cellgraph.discover.space.absorbed`) and its trials."""
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
    root = absorbed(root) if search_space(spec).absorb else root
    study = optuna.load_study(study_name=spec["study"], storage=open_search_storage(None, run_dir))
    return spec, root, study.get_trials(deepcopy=False)


def search_space(spec: dict[str, Any]) -> CellSpace:
    """The space a search's settings ran: the default one, absorbing where they say so."""
    return CellSpace(absorb=spec["space"].get("absorb", False))


def expansion_strategy(spec: dict[str, Any]) -> EnumerationSearch | None:
    """The best-first expansion a search's settings ran, or None when it ran none."""
    settings = spec["strategy"]
    if not settings.get("expand"):
        return None
    screen = settings.get("screen")
    return EnumerationSearch(settings["nodes"], settings["seed"], screen=screen and Screen(**screen), expand=True,
                             depth=settings.get("depth", 1), all_rungs=settings.get("all_rungs", False),
                             probe_parents_only=settings.get("probe_parents_only", False))


def subcells(run_dir: Path, absorb: bool = False, all_rungs: bool = False) -> dict[str, Any]:
    """The record of the module docstring (without versions) of the search in ``run_dir``,
    finished or not (``finished``: it wrote its ``discovery.json``); with ``absorb`` also the
    teacher's place in the expansion had the space absorbed (``absorbed``:
    :func:`absorbed_place`). A search that expands deeper than one node also gets the
    teacher's place as it stands (``pending``: :func:`pending_place`); with ``all_rungs`` the
    place (``expansion`` or ``pending``) had the expansion ranked its parents at every rung
    (``all_rungs``)."""
    spec, root, trials = load_search(run_dir)
    space = search_space(spec)
    out = {"run": run_dir.name, "teacher": spec["evaluator"]["data"]["teacher"], "nodes": len(root.internal_nodes()),
           "finished": (run_dir / "discovery.json").is_file(), "rungs": rung_ranks(trials, sub_cells(root, space))}
    strategy = expansion_strategy(spec)
    if strategy is not None:
        fidelity = Fidelity.from_dict(spec["fidelity"])
        history = records(trials, fidelity.early, fidelity.epochs)
        out["expansion"] = expansion_place(history, root, strategy, space)
        if absorb:
            out["absorbed"] = absorbed_place(history, root, strategy, space)
        place = pending_place if strategy.depth > 1 else expansion_place
        if strategy.depth > 1:
            out["pending"] = place(history, root, strategy, space)
        if all_rungs:
            out["all_rungs"] = place(history, root, replace(strategy, all_rungs=True), space)
    return out


def interleaved(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """The teacher's place when the expansion ranks the list at the first rung of each of
    ``run_dirs`` in turn (:func:`merged`): best-first expansion searches of one teacher, data,
    strategy and seed whose first rungs differ, their lists done. The record: the ``runs``,
    ``teacher``, each run's first rung (``epochs``) and the ``expansion`` place."""
    loaded = [load_search(d) for d in run_dirs]
    spec = loaded[0][0]
    same = ("evaluator", "strategy", "seed", "space")
    for run_dir, (other, _, _) in zip(run_dirs[1:], loaded[1:]):
        differ = [key for key in same if other.get(key) != spec.get(key)]
        if differ:
            raise CellGraphError(f"{run_dir} is not the search of {run_dirs[0]} at another rung "
                                 f"({', '.join(differ)} differ)")
    strategy = expansion_strategy(spec)
    if strategy is None:
        raise CellGraphError(f"{run_dirs[0]} ran no best-first expansion (--expand)")
    epochs = [Fidelity.from_dict(s["fidelity"]).epochs[0] for s, _, _ in loaded]
    history = merged([records(trials, (first,)) for first, (_, _, trials) in zip(epochs, loaded)])
    return {"runs": [d.name for d in run_dirs], "teacher": spec["evaluator"]["data"]["teacher"], "epochs": epochs,
            "expansion": expansion_place(history, loaded[0][1], strategy, search_space(spec))}


def table(records: list[dict[str, Any]]) -> str:
    """A row per run, rung and ranked cell: the run, rung epochs, cells at the rung and the best
    loss there, the cell, its rank and loss, its rank among the cells of its size and among its
    siblings (a rung none reached: ``-``)."""
    w = max([34, *(len(r["run"]) for r in records)])
    lines = [f"{'run':<{w}} {'epochs':>6} {'cells':>6} {'best':>10}  {'cell':<36} {'rank':>5} {'loss':>10} "
             f"{'of its size':>12} {'of siblings':>12}"]
    for record in records:
        for rung in record["rungs"]:
            head = f"{record['run']:<{w}} {rung['epochs']:>6} {rung['cells']:>6} {rung['best']:>10.4g}"
            lines += [f"{head}  {r['name']:<36} {r['rank']:>5} {r['loss']:>10.4g} "
                      f"{_of(r, 'size_rank', 'size_cells'):>12} {_of(r, 'sibling_rank', 'siblings'):>12}"
                      for r in rung["ranked"]] or \
                [f"{head}  {'-':<36} {'-':>5} {'-':>10}"]
    places = [r for r in records if "expansion" in r]
    if places:
        lines += ["", f"{'run':<{w}} {'place':>6} {'parent rank':>12} {'absorbed':>9} {'pending':>8} {'all rungs':>9}"
                      "   (the teacher in the best-first expansion; absorbed: had the space absorbed; pending: "
                      "cells to train first as the search stands; all rungs: parents ranked at every rung)"]
        lines += [f"{r['run']:<{w}} {_place(r['expansion'])} {_cells(r.get('absorbed')):>9} "
                  f"{_cells(r.get('pending')):>8} {_cells(r.get('all_rungs')):>9}" for r in places]
    return "\n".join(lines)


def _cells(e: dict[str, Any] | None) -> str:
    """A place's cell count, ``-`` for none."""
    return "-" if e is None else f"{e['place']:,}"


def _place(e: dict[str, Any] | None) -> str:
    """An expansion place and its parent's rank, ``-`` for none."""
    return f"{'-':>6} {'-':>12}" if e is None else f"{e['place']:>6} {e['parent_rank']:>5} of {e['parents']:<4}"


def _of(cell: dict[str, Any], rank: str, among: str) -> str:
    """``RANK/AMONG`` of a ranked cell, ``-`` where its record has none (older records, no parent)."""
    return f"{cell[rank]}/{cell[among]}" if rank in cell else "-"


def interleave_table(records: list[dict[str, Any]]) -> str:
    """A row per interleaving record: its runs, their first rungs, the place and parent's turn."""
    lines = [f"{'runs, ranked in turn':<60} {'epochs':>8} {'place':>6} {'parent turn':>12}"]
    for record in records:
        e, epochs = record["expansion"], ",".join(map(str, record["epochs"]))
        tail = f"{'-':>6} {'-':>12}" if e is None else f"{e['place']:>6} {e['parent_rank']:>5} of {e['parents']:<4}"
        lines.append(f"{' + '.join(record['runs']):<60} {epochs:>8} {tail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = run_records.parser(__doc__, "runs/recovery")
    p.add_argument("--interleave", action="store_true",
                   help="one record of the RUN_DIRs together (best-first expansion searches of one teacher and seed "
                        "whose first rungs differ): the teacher's place when the expansion ranks the list by each "
                        "run's first rung in turn, as a search with those rungs as probes would")
    p.add_argument("--absorbed", action="store_true",
                   help="also the teacher's place in the expansion had the search's space absorbed (--absorb): the "
                        "listed cells that stay keep their losses")
    p.add_argument("--all-rungs", action="store_true",
                   help="also the teacher's place had the expansion ranked its parents at every rung they reached "
                        "(discover --all-rungs): in the expansion, or as the search stands when it expands deeper")
    p.add_argument("--expansion-size", action="store_true",
                   help="count the cells of the best-first expansion of the screened list of one and two nodes "
                        "(about 10 minutes) into DIR/expansion-size.json")
    a = p.parse_args(argv)
    folder = Path(a.records)
    if a.expansion_size:
        folder.mkdir(parents=True, exist_ok=True)
        strategy = EnumerationSearch(2, screen=Screen(), expand=True)
        write_json(folder / "expansion-size.json", {"strategy": strategy.to_dict(), "cells": expansion_size(strategy),
                                                    "versions": package_versions()})
    elif not a.table:
        run_records.runs_given(p, a.runs, 1 + a.interleave)
        if a.interleave:
            run_records.keep(p, folder, f"interleave-{'+'.join(d.name for d in a.runs)}", lambda: interleaved(a.runs))
        for run_dir in [] if a.interleave else a.runs:
            run_records.keep(p, folder, f"subcells-{run_dir.name}", lambda: subcells(run_dir, a.absorbed, a.all_rungs))
    singles, mixed = run_records.read(folder, "subcells"), run_records.read(folder, "interleave")
    print("\n\n".join([table(singles)] * bool(singles) + [interleave_table(mixed)] * bool(mixed)))
    size = folder / "expansion-size.json"
    if size.is_file():
        print(f"\nthe best-first expansion of the screened list holds {json.loads(size.read_text())['cells']:,} cells")


if __name__ == "__main__":
    main()
