"""The recovery suite: does the discrete cell search find planted teachers, and at what cost?
(docs/discover.md, *The recovery suite*).

Every run is one ``cellgraph discover`` command (a subprocess) with its own ``RUN_DIR``,
``ROOT/TARGET-STRATEGY-sSEED`` (``random:0`` written ``random0``, ``random:4:4-7``
``random4-4to7``), its output in ``ROOT/NAME.log``; a run whose ``discovery.json`` records at
least the budget asked is kept, any other is started or resumed (the command resumes its study),
so the suite reruns. The
``rrnn-seeded`` arm first trains (or resumes, or keeps) its RRNN run ``ROOT/TARGET-rrnn-sSEED``
(:data:`RRNN`, on the planted classification task of the same teacher; its log
``ROOT/TARGET-rrnn-sSEED.log``, its record never copied: the search's ``seeds.json`` holds its
config and the forms kept and refused) and its search starts from that run's most frequent
cells (``--seed-run``); where none is a candidate, ``seeds.json`` says why, the run has ended,
and the table counts it under ``no seed``. With
``--identify`` each target's identifiability check runs too (``ROOT/identify-TARGET``, its
neighbours limited by ``--identify-limit``). Arguments after ``--`` go to every command (data
sizes, epochs, restarts, parsimony...).

    python -m cellgraph.benchmarks.recovery --root runs/recovery60 --records results/recovery60 --strategies rnn-motifs random --jobs 2 -- --fidelity 20,60

``--records DIR`` copies each ended run's small records (``discovery.json``, ``identify.json``,
``best/``, the log; never ``study.db``) to ``DIR``; ``--table`` runs nothing and prints, from
``--records`` (else ``--root``), per target and strategy: exact recoveries over seeds, the median
full-fidelity evaluations and CPU seconds up to the first recovery (over the seeds that recovered),
the median best objective, the duplicates reused (all seeds), the seeds whose search trained the
teacher at all (``trained``: proposed, if not kept as its best), the seeds whose RRNN run gave no
seed (``no seed``; ``-`` for an arm that seeds from no run), the runs' budgets and the target's identifiability
verdict (``PASS``/``FAIL``, ``-`` when not checked): a target that fails it cannot be recovered by
an objective that does not tell it from a neighbour, and is shown as such. ``--identify-table``
prints instead, from every finished check (an ``identify.json`` with its verdict) there, one row
per teacher: the structures it evaluated, the teacher's objective, the best other structure (its
change) and that one's objective, the GRU's objective (``-`` when the teacher is the GRU), the
best objective of the cells one removal leaves (``-`` when the check evaluated none), the
gap ``(best other - teacher) / |teacher|`` and the verdict at the margin the check recorded;
``--rescore PENALTY LAMBDA`` recomputes every row's objective from its recorded ``val_mse`` and
``complexity`` under another penalty (nothing retrains; ``--rescore-floor FLOOR`` also another
error floor), which is how docs/discover.md compares penalties on the same checks.

    python -m cellgraph.benchmarks.recovery --identify-table --records results/recovery
    python -m cellgraph.benchmarks.recovery --identify-table --records results/recovery --rescore absolute 1e-3
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cellgraph.benchmarks.recipe_ablation import run_one as train_one
from cellgraph.benchmarks.recipe_ablation import set_flags
from cellgraph.data.planted import teacher_folder
from cellgraph.experiment.config import paper_settings

__all__ = ["TARGETS", "ARMS", "STRATEGIES", "arm", "SEEDS", "RRNN", "RRNN_RUN", "run_name", "rrnn_run", "runs",
           "rrnn_runs", "run_one", "keep_record", "tied", "summarize", "table", "identifications", "identify_table", "main"]

TARGETS = ("gru", "mgu", "mut1", "mut2", "mut3", *(f"random:{k}" for k in range(5)))
#: What stands for the RRNN run's folder in :data:`ARMS`; :func:`runs` puts the folder of
#: :func:`rrnn_run` there.
RRNN_RUN = "RRNN_RUN"
#: The arms: a strategy, its moves and how it starts, as ``cellgraph discover`` flags (in the
#: order :func:`arm` writes them). ``evolution``, ``local`` and ``random`` start cold (random
#: cells) with single changes; ``evolution-motifs`` adds the motif moves; ``rnn-motifs`` is local
#: search with the motif moves from the one-node tanh RNN (target ``rnn``: a start that knows no
#: gate, so still cold), ``rnn-motifs-first`` the same with first improvement; ``gru-seeded``
#: (evolution) and ``gru-local`` (local search) start at the GRU (the discovery recipe's start,
#: never the teacher's); ``rrnn-seeded`` is local search with
#: the motif moves from the most frequent cells of an RRNN run (:data:`RRNN_RUN`); ``tpe``
#: (grouped multivariate TPE over the slot encoding) and ``enumerate`` (every cell of one and two
#: nodes, smallest first, then random cells) start cold; ``enumerate-grow`` follows the list with
#: local search that also inserts nodes, from the best listed cells; ``enumerate-expand-screen``
#: with every insertion into a listed cell, the listed cells best first, ``enumerate-expand-probe-screen``
#: best first by the first rung's ranking and the second's in turn (the first rung a probe:
#: give rungs such as ``--fidelity 1,5,20,60``), ``enumerate-expand2-probe-screen`` the same two levels
#: deep (``--depth 2``: the cells the expansion makes are expanded too, for teachers of
#: four nodes), ``enumerate-expand2-all-probe-screen`` with the parents also ranked at the later rungs they
#: reached (``--all-rungs``); ``-lean`` spares the deepest insertions, which no level ranks, the probe rungs
#: (``--probe-parents-only``); ``-screen`` proposes only
#: the cells the screen at initialisation keeps (docs/discover.md, *The screen*); ``-intensify``
#: races the answer over 3 training seeds (docs/discover.md, *Intensification*); ``-absorb`` keeps one
#: cell per function class where a trainable tuple absorbs the difference (docs/discover.md, *Space*).
ARMS: dict[str, tuple[str, ...]] = {
    "evolution": ("--strategy", "evolution"),
    "local": ("--strategy", "local"),
    "random": ("--strategy", "random"),
    "evolution-motifs": ("--strategy", "evolution", "--motifs"),
    "rnn-motifs": ("--strategy", "local", "--motifs", "--seed-target", "rnn"),
    "rnn-motifs-first": ("--strategy", "local", "--motifs", "--first-improvement", "--seed-target", "rnn"),
    "gru-seeded": ("--strategy", "evolution", "--seed-target", "gru"),
    "gru-local": ("--strategy", "local", "--seed-target", "gru"),
    "rrnn-seeded": ("--strategy", "local", "--motifs", "--seed-run", RRNN_RUN),
    "tpe": ("--strategy", "tpe"),
    "enumerate": ("--strategy", "enumerate"),
    "enumerate-grow": ("--strategy", "enumerate", "--grow"),
    "random-screen": ("--strategy", "random", "--screen"),
    "enumerate-screen": ("--strategy", "enumerate", "--screen"),
    "enumerate-grow-screen": ("--strategy", "enumerate", "--grow", "--screen"),
    "enumerate-expand-screen": ("--strategy", "enumerate", "--expand", "--screen"),
    "enumerate-expand-probe-screen": ("--strategy", "enumerate", "--expand", "--screen", "--probes", "1"),
    "enumerate-expand2-probe-screen": ("--strategy", "enumerate", "--expand", "--depth", "2", "--screen", "--probes",
                                       "1"),
    "enumerate-expand2-all-probe-screen": ("--strategy", "enumerate", "--expand", "--depth", "2", "--all-rungs",
                                           "--screen", "--probes", "1"),
    "enumerate-expand-probe-screen-lean": ("--strategy", "enumerate", "--expand", "--probe-parents-only", "--screen",
                                           "--probes", "1"),
    "enumerate-expand2-all-probe-screen-lean": ("--strategy", "enumerate", "--expand", "--depth", "2", "--all-rungs",
                                                "--probe-parents-only", "--screen", "--probes", "1"),
    "enumerate-screen-intensify": ("--strategy", "enumerate", "--screen", "--intensify", "3"),
    "enumerate-expand-screen-intensify": ("--strategy", "enumerate", "--expand", "--screen", "--intensify", "3"),
    "enumerate-expand-probe-screen-intensify": ("--strategy", "enumerate", "--expand", "--screen", "--probes", "1",
                                                "--intensify", "3"),
    "enumerate-expand2-all-probe-screen-intensify": ("--strategy", "enumerate", "--expand", "--depth", "2",
                                                     "--all-rungs", "--screen", "--probes", "1", "--intensify", "3"),
    "enumerate-screen-absorb": ("--strategy", "enumerate", "--screen", "--absorb"),
    "enumerate-expand-probe-screen-absorb": ("--strategy", "enumerate", "--expand", "--screen", "--probes", "1",
                                             "--absorb"),
    "enumerate-expand2-all-probe-screen-absorb": ("--strategy", "enumerate", "--expand", "--depth", "2",
                                                  "--all-rungs", "--screen", "--probes", "1", "--absorb"),
}
#: The ``cellgraph train`` settings of an ``rrnn-seeded`` arm's RRNN run, besides its task, teacher
#: and seed: the paper's RRNN (``model=rrnn`` with the paper's settings, not the discovery recipe,
#: which starts as the GRU and keeps its form), small: 4 epochs of the first 256 training
#: sequences, 64 validation and test sequences (the structure log's cells: 64 x 20 steps),
#: hidden size 16, scoring network 32, one thread (docs/discover.md, *Seeds from an RRNN run*).
RRNN: dict[str, Any] = {**paper_settings("rrnn"), "epochs": 4, "max_train": 256, "max_eval": 64, "hidden_size": 16,
                        "scoring_hidden": 32, "num_threads": 1}
STRATEGIES = tuple(ARMS)
SEEDS = 3
#: The full-fidelity evaluations of a run by default.
BUDGET = 200
#: What a run's record keeps (besides its log): small files, never the study's database.
RECORD = ("discovery.json", "seeds.json", "identify.json", "best")


def run_name(target: str, strategy: str | None = None, seed: int | None = None) -> str:
    """``TARGET-STRATEGY-sSEED``, or ``identify-TARGET`` without a strategy; ``TARGET`` as
    :func:`~cellgraph.data.planted.teacher_folder` writes it (``random:4:4-7``: ``random4-4to7``)."""
    plain = teacher_folder(target)
    return f"identify-{plain}" if strategy is None else f"{plain}-{strategy}-s{seed}"


def rrnn_run(target: str, seed: int) -> tuple[str, list[str]]:
    """``(TARGET-rrnn-sSEED, cellgraph train arguments)`` of the :data:`RRNN` run of the
    ``rrnn-seeded`` arm: the planted classification task labelled by teacher ``target``."""
    return run_name(target, "rrnn", seed), ["--task", "planted", "--model", "rrnn",
                                            *set_flags({"planted_teacher": target, "seed": seed, **RRNN})]


def rrnn_runs(targets: tuple[str, ...] = TARGETS, strategies: tuple[str, ...] = STRATEGIES,
              seeds: int = SEEDS) -> list[tuple[str, list[str]]]:
    """:func:`rrnn_run` of every target and seed when ``strategies`` has an arm that reads one."""
    reads = any(RRNN_RUN in ARMS[strategy] for strategy in strategies)
    return [rrnn_run(target, seed) for target in targets for seed in range(seeds)] if reads else []


def runs(targets: tuple[str, ...] = TARGETS, strategies: tuple[str, ...] = STRATEGIES, seeds: int = SEEDS,
         budget: float = BUDGET, extra: tuple[str, ...] = (), identify: bool = False,
         identify_limit: int | None = None, root: Path = Path("runs/recovery")
         ) -> list[tuple[str, list[str], float | None]]:
    """``(name, cellgraph discover arguments, budget or None for a check)`` of every run;
    :data:`RRNN_RUN` is the folder of :func:`rrnn_run` under ``root``."""
    out: list[tuple[str, list[str], float | None]] = []
    for target in targets:
        if identify:
            limit = [] if identify_limit is None else ["--limit", str(identify_limit)]
            out.append((run_name(target), ["--teacher", target, "--identify", *limit, *extra], None))
        for strategy in strategies:
            for seed in range(seeds):
                flags = [str(root / rrnn_run(target, seed)[0]) if f == RRNN_RUN else f for f in ARMS[strategy]]
                out.append((run_name(target, strategy, seed), ["--teacher", target, *flags, "--seed", str(seed),
                                                               "--budget", f"{budget:g}", *extra], budget))
    return out


def _done(folder: Path, budget: float | None) -> bool:
    """Whether the run in ``folder`` ended: a search whose ``discovery.json`` records ``budget``
    or more, or whose ``seeds.json`` says its run gave no seed; a check whose ``identify.json``
    has its verdict."""
    if budget is None:
        path = folder / "identify.json"
        return path.exists() and "verdict" in json.loads(path.read_text())
    path = folder / "discovery.json"
    return path.exists() and json.loads(path.read_text())["budget"] >= budget or _unseeded(folder) is not None


def _unseeded(folder: Path) -> dict[str, Any] | None:
    """The ``seeds.json`` of the search in ``folder`` when its ``--seed-run`` gave no seed, else None."""
    path = folder / "seeds.json"
    stored = json.loads(path.read_text()) if path.exists() else None
    return stored if stored is not None and not stored["seed_run"]["kept"] else None


def run_one(root: Path, name: str, args: list[str], budget: float | None, records: Path | None = None) -> str:
    """Run (or resume, or keep) one command; once it has ended, copy its record to ``records``."""
    folder = root / name
    if _done(folder, budget):
        line = f"{name}: done"
    else:
        cmd = [sys.executable, "-m", "cellgraph", "discover", *args, "--dir", str(folder)]
        with open(root / f"{name}.log", "a") as log:
            code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        line = f"{name}: exit {code}"
    if records is not None and _done(folder, budget):
        keep_record(root, name, records)
    return line


def keep_record(root: Path, name: str, records: Path) -> None:
    """Copy run ``name``'s :data:`RECORD` files and its log from ``root`` to ``records/name``."""
    dest = records / name
    dest.mkdir(parents=True, exist_ok=True)
    for item in RECORD:
        path = root / name / item
        if path.is_dir():
            shutil.rmtree(dest / item, ignore_errors=True)
            shutil.copytree(path, dest / item)
        elif path.is_file():
            shutil.copy2(path, dest / item)
    if (root / f"{name}.log").exists():
        shutil.copy2(root / f"{name}.log", dest / f"{name}.log")


def arm(config: dict[str, Any]) -> str:
    """The arm of :data:`ARMS` a run's ``cellgraph discover`` settings make (its strategy's
    name when no arm has them)."""
    flags = ("--strategy", config["strategy"], *(("--grow",) if config.get("grow") else ()),
             *(("--expand",) if config.get("expand") else ()),
             *(("--depth", str(config["depth"])) if config.get("depth", 1) > 1 else ()),
             *(("--all-rungs",) if config.get("all_rungs") else ()),
             *(("--probe-parents-only",) if config.get("probe_parents_only") else ()),
             *(("--screen",) if config.get("screen") else ()),
             *(("--probes", str(config["probes"])) if config.get("probes") else ()),
             *(("--intensify", str(config["intensify"])) if config.get("intensify", 1) > 1 else ()),
             *(("--absorb",) if config.get("absorb") else ()),
             *(("--motifs",) if config.get("motifs") else ()),
             *(("--first-improvement",) if config.get("first_improvement") else ()),
             *(f for name in config.get("seed_target") or () for f in ("--seed-target", name)),
             *(("--seed-run", RRNN_RUN) if config.get("seed_run") else ()))
    return next((name for name, arm_flags in ARMS.items() if arm_flags == flags), config["strategy"])


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def tied(found: dict[str, Any]) -> bool:
    """Whether the run of ``discovery.json`` ``found`` kept the teacher among its best cells and
    a cell of another structure with the same objective beside it: the objective cannot single
    the teacher out (fits below the error floor count as equal, so exact equivalents of the same
    complexity tie), whatever the identifiability check of its neighbours says. A cell that
    scores better than the teacher is no tie: the run failed to recover it."""
    teacher = [b["objective"] for b in found["best"] if b["recovers"]]
    return bool(teacher) and any(math.isclose(b["objective"], teacher[0], rel_tol=1e-9)
                                 for b in found["best"] if not b["recovers"])


def summarize(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(target, strategy) -> the table's columns, read from the runs' ``discovery.json`` and the
    targets' ``identify.json`` under ``folder``; a target that a run :func:`tied` is ``TIED``
    whatever its check said."""
    verdicts = {row["target"]: "PASS" if row["passed"] else "FAIL" for row in identifications(folder)}
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    unseeded: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*/discovery.json")):
        found = json.loads(path.read_text())
        grouped.setdefault((found["config"]["teacher"], arm(found["config"])), []).append(found)
        if tied(found):
            verdicts[found["config"]["teacher"]] = "TIED"
    for stored in filter(None, map(_unseeded, sorted(p.parent for p in folder.glob("*/seeds.json")))):
        key = (stored["config"]["teacher"], arm(stored["config"]))
        unseeded.setdefault(key, []).append(stored)
        grouped.setdefault(key, [])
    rows = {}
    for (target, strategy), found in sorted(grouped.items()):
        hits = [f["result"]["target"] for f in found if f["result"]["target"] is not None]
        failed = unseeded.get((target, strategy), [])
        rows[(target, strategy)] = {
            "recovered": len(hits), "seeds": len(found) + len(failed),
            "unseeded": len(failed) if RRNN_RUN in ARMS.get(strategy, ()) else None,
            "trained": sum(1 for f in found if f["result"].get("proposed") is not None),
            "evaluations": _median([h["evaluations"] for h in hits]),
            "cpu_s": _median([h["cpu_seconds"] for h in hits]),
            "best": _median([f["best"][0]["objective"] for f in found if f["best"]]),
            "duplicates": sum(f["result"]["duplicates"] for f in found),
            "budget": "/".join(sorted({f"{b:g}" for b in [*(f["budget"] for f in found),
                                                           *(u["config"]["budget"] for u in failed)]}, key=float)),
            "identifiable": verdicts.get(target, "-")}
    return rows


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(folder: Path) -> str:
    """The table of :func:`summarize`, one line per target and strategy."""
    rows = summarize(folder)
    wide = max([10, *(len(target) for target, _ in rows)])
    lines = [f"{'target':<{wide}} {'arm':<16} {'recovered':>9} {'evals':>8} {'CPU s':>8} {'best obj':>9} "
             f"{'dups':>5} {'trained':>7} {'no seed':>7} {'budget':>7} identifiable"]
    for (target, strategy), row in rows.items():
        lines.append(f"{target:<{wide}} {strategy:<16} {row['recovered']:>5}/{row['seeds']:<3} "
                     f"{_number(row['evaluations'], '.1f'):>8} {_number(row['cpu_s'], '.1f'):>8} "
                     f"{_number(row['best'], '.4g'):>9} {row['duplicates']:>5} {row['trained']:>7} "
                     f"{_number(row['unseeded'], 'd'):>7} {row['budget']:>7} {row['identifiable']}")
    return "\n".join(lines)


def identifications(folder: Path, penalty: tuple[str, float, float | None] | None = None) -> list[dict[str, Any]]:
    """The finished identifiability checks under ``folder`` (``identify-*/identify.json`` with a
    verdict), the :data:`TARGETS` first in their order: each its ``verdict`` (as
    :meth:`~cellgraph.discover.identify.Identification.to_dict` wrote it) with ``target`` and
    ``checked`` (the structures evaluated) added. ``penalty`` ``(name, weight, floor)``: every row
    rescored from its ``val_mse`` and ``complexity`` with
    :func:`~cellgraph.discover.evaluator.penalised` (``floor`` None: the error floor the check ran
    with, 0 where it recorded none), and the verdict recomputed at the file's margin."""
    found = []
    for path in sorted(folder.glob("identify-*/identify.json")):
        stored = json.loads(path.read_text())
        if "verdict" in stored:
            verdict = stored["verdict"] if penalty is None else _rescored(stored, *penalty)
            removals = [o for o in (_objective(stored, row, penalty) for row in stored["rows"]
                                    if row["name"].startswith("remove ")) if o is not None]
            found.append({**verdict, "target": stored["spec"]["data"]["teacher"], "checked": len(stored["rows"]),
                          "removal": min(removals, default=None)})
    order = {name: k for k, name in enumerate(TARGETS)}
    return sorted(found, key=lambda row: (order.get(row["target"], len(order)), row["target"]))


def _objective(stored: dict[str, Any], row: dict[str, Any],
               penalty: tuple[str, float, float | None] | None) -> float | None:
    """``row``'s objective, recomputed under ``penalty`` ``(name, weight, floor)`` when given
    (``floor`` None: the check's own)."""
    from cellgraph.discover.evaluator import penalised

    if penalty is None or row["objective"] is None:
        return row["objective"]
    name, weight, floor = penalty
    floor = stored["spec"].get("floor", 0.0) if floor is None else floor
    return penalised(row["details"]["val_mse"], row["details"]["complexity"], weight, name, floor)


def _rescored(stored: dict[str, Any], penalty: str, weight: float, floor: float | None = None) -> dict[str, Any]:
    """``stored``'s verdict with every row's objective recomputed under ``penalty``, ``weight``
    and ``floor`` (None: the check's own)."""
    from cellgraph.discover.identify import Identification, Row

    rows = [Row(**{**row, "objective": _objective(stored, row, (penalty, weight, floor))}) for row in stored["rows"]]
    teacher = next(r for r in rows if r.name == "teacher")
    return Identification((teacher, *(r for r in rows if r is not teacher)), stored["verdict"]["margin"]).to_dict()


def identify_table(folder: Path, penalty: tuple[str, float, float | None] | None = None) -> str:
    """The table of :func:`identifications`, one line per teacher, with the best objective of the
    cells one removal leaves (``removal``; ``-`` when the check evaluated none): the teacher's
    best stepping stone for a search that grows cells."""
    found = identifications(folder, penalty)
    wide = max([10, *(len(row["target"]) for row in found)])
    lines = [f"{'teacher':<{wide}} {'checked':>7} {'teacher obj':>11} {'best other':<32} {'its obj':>9} "
             f"{'GRU obj':>9} {'removal':>9} {'gap':>8} verdict"]
    for row in found:
        verdict = f"{'PASS' if row['passed'] else 'FAIL'} (margin {row['margin']:g})"
        lines.append(f"{row['target']:<{wide}} {row['checked']:>7} {_number(row['teacher'], '.4g'):>11} "
                     f"{row['best_other'] or '-':<32} {_number(row['best_other_objective'], '.4g'):>9} "
                     f"{_number(row['gru'], '.4g'):>9} {_number(row['removal'], '.4g'):>9} "
                     f"{_number(row['gap'], '.3f'):>8} {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="arguments after -- go to every cellgraph discover command")
    p.add_argument("--root", default="runs/recovery", help="where the runs go (default %(default)s)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="copy each ended run's records here; the table reads DIR (default: ROOT)")
    p.add_argument("--targets", nargs="+", default=list(TARGETS), metavar="NAME", help="default: %(default)s")
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    p.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..N-1 (default %(default)s)")
    p.add_argument("--budget", type=float, default=BUDGET,
                   help="full-fidelity evaluations per run (default %(default)s)")
    p.add_argument("--jobs", type=int, default=1, help="commands at a time (default 1)")
    p.add_argument("--identify", action="store_true", help="also run each target's identifiability check")
    p.add_argument("--identify-limit", type=int, default=None, metavar="N",
                   help="neighbours per check (default all)")
    p.add_argument("--table", action="store_true", help="run nothing: print the table")
    p.add_argument("--identify-table", action="store_true",
                   help="run nothing: print the identifiability checks' table")
    p.add_argument("--rescore", nargs=2, metavar=("PENALTY", "LAMBDA"), default=None,
                   help="with --identify-table: rescore every row under this penalty (relative or absolute) "
                        "and weight instead of the one the checks ran with")
    p.add_argument("--rescore-floor", type=float, default=None, metavar="FLOOR",
                   help="with --rescore: this error floor (default: the one each check ran with)")
    a = p.parse_args(own)
    if a.jobs < 1 or a.seeds < 1 or not a.budget > 0:
        p.error("--jobs and --seeds must be >= 1 and --budget > 0")
    root, records = Path(a.root), a.records and Path(a.records)
    if a.identify_table:
        print(identify_table(records or root, a.rescore and (a.rescore[0], float(a.rescore[1]), a.rescore_floor)))
        return
    if not a.table:
        root.mkdir(parents=True, exist_ok=True)
        todo = runs(tuple(a.targets), tuple(a.strategies), a.seeds, a.budget, tuple(extra), a.identify,
                    a.identify_limit, root)
        with ThreadPoolExecutor(a.jobs) as pool:
            for line in pool.map(lambda job: train_one(root, *job),
                                 rrnn_runs(tuple(a.targets), tuple(a.strategies), a.seeds)):
                print(line, flush=True)
            for line in pool.map(lambda job: run_one(root, *job, records), todo):
                print(line, flush=True)
    print(table(records or root))


if __name__ == "__main__":
    main()
