"""``cellgraph discover``: the discrete cell search on the planted regression task, and its
identifiability check, or on a training task (docs/discover.md, *The command line*, *On real
data*)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cellgraph.cli.commands import add_backend_flag
from cellgraph.discover.evaluator import ERROR_FLOOR
from cellgraph.discover.planted import FIT, SIZES

_DESCRIPTION = (
    "Search one-state cells for the structure of a planted teacher: the data are continuous inputs and "
    "the teacher's standardised readout (--teacher: rnn, mgu, mut1, mut2, mut3, gru, gru_torch, random:SEED, "
    "random:SEED:LOW-HIGH or minimal:SEED[:LOW-HIGH]), "
    "each candidate is trained from scratch (--restarts initialisations, the best one's validation MSE) and "
    "scored by val_mse * exp(PARSIMONY * complexity) (--penalty relative; complexity: generated nodes + "
    "trainable matrices). The search "
    "(--strategy) spends --budget full-fidelity evaluations; candidates are cached by structure, so no "
    "structure trains twice. RUN_DIR gets study.db (the search's state), discovery.json (result, settings, "
    "versions) and best/cell_K.json (cellgraph.dag documents, docs/FORMAT.md); the best cells are printed "
    "as forms and equations, each marked when it recovers the teacher. Rerun the same command to resume a "
    "killed search; a second process with the same flags and its own --worker joins it. With --identify, "
    "instead of searching, train the teacher's structure, the GRU and every single-change neighbour of the "
    "teacher once at full fidelity and say whether the teacher scores best by --margin (RUN_DIR/identify.json, "
    "written as results come; a rerun skips the done ones). With --task instead of --teacher, the search runs on a "
    "training task: each candidate is trained from scratch as cellgraph train --model cell trains a cell, on a "
    "cheap proxy of the task (the backend's defaults under --set KEY=VALUE, cellgraph train's settings), in a "
    "run folder under RUN_DIR/candidates, and scored by its validation bpc or perplexity * exp(PARSIMONY * "
    "complexity) (default PARSIMONY 0.01 relative); there is no teacher, so no recovery and no --identify."
)
_EXAMPLES = ("cellgraph discover --teacher mgu --budget 100 --fidelity 20,60 --strategy local --motifs --seed-target rnn",
             "cellgraph discover --teacher mgu --budget 100 --seed-target gru",
             "cellgraph discover --teacher mgu --budget 100 --strategy local --motifs --seed-run runs/rrnn-mgu",
             "cellgraph discover --teacher mgu --identify --limit 20",
             "cellgraph discover --task wiki5k --budget 50 --fidelity 2,6 --set device=cuda")
#: The rungs in epochs without --epochs or --fidelity: on planted values 20 epochs for every
#: candidate and 60 for the best third (at 20 epochs alone MGU's own structure is still at val_mse
#: 1e-3 and a variant that trains faster wins; docs/discover.md, *Fidelities*); on a task 20 epochs.
PLANTED_RUNGS, TASK_RUNGS = (20, 60), (20,)
#: The training tasks a search runs on: those whose validation metric is a loss.
_TASKS = ("wiki", "wiki5k", "ptb")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("discover", help="search cell structures on a planted teacher's values (exact recovery); "
                       "--identify: does the teacher's structure score best among its neighbours",
                       description=_DESCRIPTION, epilog="examples: " + "; ".join(_EXAMPLES))
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--teacher", metavar="NAME",
                        help="planted teacher: rnn, mgu, mut1, mut2, mut3, gru, gru_torch, random:SEED or "
                             "random:SEED:LOW-HIGH (a random cell of LOW-HIGH nodes; one-state cells); "
                             "minimal:SEED[:LOW-HIGH] (the first such cell that is minimal and well conditioned)")
    source.add_argument("--task", choices=_TASKS, default=None,
                        help="search on this training task instead (its validation metric is a loss)")
    p.add_argument("--identify", action="store_true",
                   help="run the identifiability check instead of the search")
    p.add_argument("--dir", metavar="RUN_DIR", default=None,
                   help="output folder (default discoveries/TEACHER-STRATEGY-sSEED or TASK-STRATEGY-sSEED, "
                        "discoveries/identify-TEACHER)")
    search = p.add_argument_group("search")
    search.add_argument("--strategy", choices=("evolution", "local", "random", "tpe", "enumerate"), default="evolution",
                        help="regularized evolution, local search over the one-change neighbourhood, random "
                             "search, grouped multivariate TPE over a slot encoding of cells, or every cell of 1 "
                             "to --nodes nodes, smallest first (default evolution)")
    search.add_argument("--budget", type=float, default=None, metavar="N",
                        help="full-fidelity evaluations for the whole study (required to search)")
    search.add_argument("--population", type=int, default=20, help="evolution's population (default 20)")
    search.add_argument("--sample", type=int, default=5, help="evolution's sample size (default 5)")
    search.add_argument("--starts", type=int, default=10,
                        help="local search without seed cells: random cells before it climbs; tpe: trials drawn "
                             "uniformly before TPE models them (default 10)")
    search.add_argument("--nodes", type=int, default=2,
                        help="enumerate: the largest cells listed, in generated nodes; then random cells (default 2)")
    search.add_argument("--grow", action="store_true",
                        help="enumerate: once every cell is listed, local search with first improvement from the "
                             "best listed cells, whose moves also insert a node, instead of random cells")
    search.add_argument("--expand", action="store_true",
                        help="enumerate: once every cell is listed, every insertion of a node into a listed cell, "
                             "the listed cells taken best first by their loss at the first rung, instead of random "
                             "cells")
    search.add_argument("--depth", type=int, default=1, metavar="D",
                        help="with --expand: insert up to D nodes, one at a time, the cells each insertion makes "
                             "expanded best first in turn with the list's (default 1: the list's insertions only)")
    search.add_argument("--all-rungs", action="store_true",
                        help="with --expand: rank the parents at every rung they reached, not only at the early "
                             "rungs every candidate trains (docs/discover.md, *One level deeper*)")
    search.add_argument("--probe-parents-only", action="store_true",
                        help="with --expand and --probes: the insertions no level ranks as parents (the deepest) skip "
                             "the probe rungs, so successive halving may stop them after their first rung "
                             "(docs/discover.md, *Probing the parents only*)")
    search.add_argument("--screen", type=int, nargs="?", const=3, default=None, metavar="DRAWS",
                        help="random, local and enumerate: propose only cells that pass the screen at "
                             "initialisation (bounded states that read their input and keep it, neither amplified nor "
                             "forgotten over 10 steps) "
                             "on at least one of DRAWS random weight draws (default 3; docs/discover.md, "
                             "*The screen*)")
    search.add_argument("--absorb", action="store_true",
                        help="one cell per function class where a trainable tuple absorbs the difference: refuse "
                             "one_minus on a trainable node (the identity, its tuple negated) and a trainable add of "
                             "one operand twice (one matrix); a teacher is recovered as its absorbed form "
                             "(docs/discover.md, *Space*)")
    search.add_argument("--motifs", action="store_true",
                        help="evolution and local search also make the moves that build gated cells in one "
                             "step: gate the update, gate an h operand, wrap an operand in an activation")
    search.add_argument("--first-improvement", action="store_true",
                        help="local search moves to a better neighbour as soon as one has reached full fidelity, "
                             "not after its centre's whole neighbourhood")
    search.add_argument("--seed-cells", nargs="+", default=[], metavar="FILE",
                        help="cell documents (cellgraph.dag or cellgraph.cell.tree JSON) to start evolution, "
                             "local search or tpe from")
    search.add_argument("--seed-target", action="append", default=[], metavar="NAME",
                        help="a target's cell to start evolution, local search or tpe from, e.g. rnn or gru "
                             "(repeatable)")
    search.add_argument("--seed-run", metavar="RUN_DIR", default=None,
                        help="a finished training run (e.g. cellgraph train --model rrnn) whose most frequent cells "
                             "of its last structure log start evolution, local search or tpe: those that are one-state "
                             "candidates of the space are kept, the others refused and counted by reason "
                             "(the search's seeds.json); an error when none is kept")
    search.add_argument("--seed-top", type=int, default=10, metavar="K",
                        help="--seed-run: the run's K most frequent forms are read (default 10)")
    search.add_argument("--storage", metavar="URL", default=None,
                        help="sqlite:///PATH, postgresql://... or journal:PATH (default RUN_DIR/study.db)")
    search.add_argument("--study", metavar="NAME", default="discover", help="study name (default discover)")
    search.add_argument("--worker", type=int, default=0, metavar="K",
                        help="this worker's number, distinct per process of one study (default 0)")
    search.add_argument("--keep", type=int, default=5, metavar="N", help="best cells to write and print (default 5)")
    train = p.add_argument_group("training of each candidate")
    train.add_argument("--epochs", type=int, default=None, metavar="E",
                       help="full fidelity in epochs, one rung (default: rungs 20,60 on --teacher, 20 on --task)")
    train.add_argument("--fidelity", default=None, metavar="E1,E2,...",
                       help="successive-halving rungs in epochs, the last full fidelity (instead of --epochs)")
    train.add_argument("--eta", type=int, default=3, help="successive halving's reduction factor (default 3)")
    train.add_argument("--probes", type=int, default=0, metavar="K",
                       help="the first K rungs prune nothing: every candidate trains them, and --expand takes its "
                            "parents from each such rung's ranking and the next rung's in turn (default 0)")
    train.add_argument("--intensify", type=int, default=1, metavar="S",
                       help="race each cell that reaches full fidelity against the best so far over S training "
                            "seeds (--seed, --seed + 1, ...), the answer the incumbent by its mean (default 1: "
                            "no race, the lowest objective)")
    for name, (kind, default) in FIT.items():
        train.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default, help=f"(default {default})")
    train.add_argument("--penalty", choices=("relative", "absolute"), default="relative",
                       help="how complexity enters the objective: relative, val_mse * exp(LAMBDA * complexity), "
                            "or absolute, val_mse + LAMBDA * complexity (default relative)")
    train.add_argument("--parsimony", type=float, default=None, metavar="LAMBDA",
                       help="weight of the complexity in the objective (default 0.1 relative, 1e-3 absolute; "
                            "with --task 0.01 relative, 1e-3 absolute)")
    train.add_argument("--error-floor", type=float, default=ERROR_FLOOR, metavar="FLOOR",
                       help=f"validation errors below FLOOR count as equal, so the simpler cell wins (default "
                            f"{ERROR_FLOOR:g}; 0: off, as searches before it; planted data only)")
    train.add_argument("--seed", type=int, default=0, help="training and proposal seed (default 0)")
    train.add_argument("--num-threads", type=int, default=1, metavar="N", help="torch threads (default 1)")
    add_backend_flag(train, "torch", "the backend plugin that trains the candidates (default torch)")
    task = p.add_argument_group("--task")
    task.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                      help="a training setting of the candidates' runs (cellgraph train's keys, repeatable), over "
                           "the proxy's defaults (docs/discover.md, On real data)")
    data = p.add_argument_group("planted data")
    data.add_argument("--data-seed", type=int, default=0, help="seed of the inputs and teacher weights (default 0)")
    for name, default in SIZES.items():
        data.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=f"(default {default})")
    data.add_argument("--weight-scale", type=float, default=2.0, help="teacher weight scale (default 2)")
    ident = p.add_argument_group("--identify")
    ident.add_argument("--limit", type=int, default=None, metavar="N",
                       help="evaluate N neighbours drawn by --seed (default all)")
    ident.add_argument("--margin", type=float, default=0.1,
                       help="PASS when the best other objective exceeds the teacher's by this fraction (default 0.1)")
    ident.add_argument("--top", type=int, default=10, help="rows of the table (default 10)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.errors import CellGraphError

    try:
        import optuna
    except ModuleNotFoundError:
        from cellgraph.cli.commands.tune import MISSING

        raise CellGraphError(MISSING) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    _check(args)
    try:
        return _identify(args) if args.identify else _search(args)
    except KeyboardInterrupt:
        print("interrupted: run the same command to resume", file=sys.stderr)
        return 130


def _check(args: argparse.Namespace) -> None:
    from cellgraph.errors import CellGraphError

    if args.epochs is not None and args.fidelity is not None:
        raise CellGraphError("give --epochs or --fidelity, not both")
    positive = {"--keep": args.keep, "--population": args.population, "--num-threads": args.num_threads,
                "--starts": args.starts, "--seed-top": args.seed_top, "--nodes": args.nodes,
                **{f"--{k.replace('_', '-')}": getattr(args, k) for k in SIZES}}
    bad = [f"{flag} {value}" for flag, value in positive.items() if value < 1]
    if bad:
        raise CellGraphError(f"must be >= 1: {', '.join(bad)}")
    if not args.identify and args.budget is None:
        raise CellGraphError("--budget N (full-fidelity evaluations) is required to search")
    if (args.seed_cells or args.seed_target or args.seed_run) and args.strategy in ("random", "enumerate"):
        raise CellGraphError("--seed-cells, --seed-target and --seed-run start evolution, local search or tpe, "
                             f"not {'random search' if args.strategy == 'random' else 'enumeration'}")
    if args.first_improvement and args.strategy != "local":
        raise CellGraphError(f"--first-improvement is a rule of local search, not of {args.strategy} search")
    for flag, on in (("--grow", args.grow), ("--expand", args.expand)):
        if on and args.strategy != "enumerate":
            raise CellGraphError(f"{flag} continues an enumeration, not {args.strategy} search")
    if args.grow and args.expand:
        raise CellGraphError("--grow and --expand are two ways to continue an enumeration: choose one")
    if args.depth != 1 and (not args.expand or args.depth < 1):
        raise CellGraphError(f"--depth D (>= 1) is how deep --expand inserts, got {args.depth}"
                             + ("" if args.expand else " without --expand"))
    if args.all_rungs and not args.expand:
        raise CellGraphError("--all-rungs ranks the parents of --expand; it needs --expand")
    if args.probe_parents_only and not (args.expand and args.probes):
        raise CellGraphError("--probe-parents-only spares the deepest insertions of --expand the probe rungs; it "
                             "needs --expand and --probes K")
    if args.screen is not None and args.strategy in ("evolution", "tpe"):
        raise CellGraphError(f"--screen filters random, local and enumerate proposals, not {args.strategy} search")
    if args.screen is not None and args.screen < 1:
        raise CellGraphError(f"--screen DRAWS must be >= 1, got {args.screen}")
    if args.motifs and args.strategy in ("random", "tpe", "enumerate"):
        raise CellGraphError(f"--motifs are moves of evolution and local search, not of {args.strategy} search")
    if args.task is not None:
        _check_task(args)
    elif args.set:
        raise CellGraphError("--set gives the training settings of a --task search; the planted fit's are flags "
                             "(--lr, --batch-size, ...)")


def _check_task(args: argparse.Namespace) -> None:
    """What does not apply to a search on a training task: the identifiability check (there is
    no teacher) and the planted data's and fit's flags (--set gives the training settings)."""
    from cellgraph.errors import CellGraphError

    if args.identify:
        raise CellGraphError(f"--identify checks a planted teacher's structure; --task {args.task} has no teacher "
                             "(search it with --budget, or give --teacher)")
    planted = {"data_seed": 0, "weight_scale": 2.0, "error_floor": ERROR_FLOOR, **SIZES,
               **{k: d for k, (_, d) in FIT.items()}}
    given = [f"--{k.replace('_', '-')}" for k, default in planted.items() if getattr(args, k) != default]
    if given:
        raise CellGraphError(f"{', '.join(given)}: planted-task flags; with --task give training settings as "
                             "--set KEY=VALUE (e.g. --set lr=1e-3)")


def _fidelity(args: argparse.Namespace):
    from cellgraph.discover import Fidelity
    from cellgraph.errors import CellGraphError

    if args.fidelity is None:
        rungs = (args.epochs,) if args.epochs is not None else TASK_RUNGS if args.task else PLANTED_RUNGS
        return Fidelity(rungs, args.eta, args.probes, args.intensify)
    try:
        rungs = tuple(int(e) for e in args.fidelity.split(","))
    except ValueError:
        raise CellGraphError(f"--fidelity {args.fidelity!r}: give increasing epochs such as 5,20") from None
    return Fidelity(rungs, args.eta, args.probes, args.intensify)


def _folder(args: argparse.Namespace) -> Path:
    """The search's output folder (``--dir``, else named by teacher or task, strategy and seed)."""
    from cellgraph.data.planted import teacher_folder

    name = args.task or teacher_folder(args.teacher)
    return Path(args.dir or Path("discoveries") / f"{name}-{args.strategy}-s{args.seed}")


def _setup_task(args: argparse.Namespace, folder: Path):
    """A --task search's data record, its (absent) teacher, the evaluator, training candidates
    in ``folder/candidates``, and the settings the losses depend on (the machine's left out,
    so a worker on another device may join)."""
    from cellgraph.backend import discover_backend
    from cellgraph.experiment.config import MACHINE_KEYS, parse_set

    settings = {"num_threads": args.num_threads, **parse_set(args.set)}
    evaluator = discover_backend(args.backend).task_evaluator(args.task, settings, folder / "candidates",
                                                              args.parsimony, args.penalty)
    train = {k: v for k, v in evaluator.settings().items() if k not in MACHINE_KEYS}
    return ({"task": args.task}, None, evaluator,
            {"task": args.task, "train": train, "parsimony": evaluator.parsimony, "penalty": args.penalty,
             "backend": args.backend})


def _setup(args: argparse.Namespace):
    """The planted data, the teacher's candidate, the evaluator and the settings they depend on."""
    from cellgraph.discover.planted import planted_search

    data, root, evaluator, settings = planted_search(
        args.teacher, args.data_seed, {k: getattr(args, k) for k in SIZES}, {k: getattr(args, k) for k in FIT},
        backend=args.backend, num_threads=args.num_threads, penalty=args.penalty, parsimony=args.parsimony,
        weight_scale=args.weight_scale, floor=args.error_floor)
    return data.info(), root, evaluator, settings


def _record(args: argparse.Namespace) -> dict[str, Any]:
    """The command's settings (every flag), seed and package versions."""
    from cellgraph.experiment.runs import package_versions

    return {"config": {k: v for k, v in vars(args).items() if k != "func"}, "seed": args.seed,
            "versions": package_versions()}


def _seeds(args: argparse.Namespace) -> tuple:
    from cellgraph.discover import cell_from_json, from_cell
    from cellgraph.errors import CellGraphError
    from cellgraph.files import read_json
    from cellgraph.targets import target

    seeds = []
    for path in args.seed_cells:
        try:
            seeds.append(cell_from_json(read_json(path)))
        except CellGraphError as err:
            raise CellGraphError(f"--seed-cells {path}: {err}") from None
    for name in args.seed_target:
        t = target(name)
        seeds.append(from_cell(t.cell, t.layout))
    return tuple(seeds)


def _run_seeds(args: argparse.Namespace, folder: Path) -> tuple[tuple, dict[str, Any]]:
    """``--seed-run``'s seeds (:func:`cellgraph.discover.seeding.seeding` of the run's last
    structure log) and their record: the run's folder and config, the forms kept and refused
    (``folder/seeds.json``, written first, also when none is kept; printed); an error that
    counts the refusals by reason when none is kept."""
    from cellgraph.discover import CellSpace
    from cellgraph.discover.seeding import seeding
    from cellgraph.discover.show import candidate_form
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.runlog import RunLog
    from cellgraph.files import write_json

    run = RunLog.load(args.seed_run)
    if run.final() is None:
        raise CellGraphError(f"--seed-run {args.seed_run}: the run has not finished (no final.json); give a "
                             "finished run")
    made = seeding(run.structure_log(), args.seed_top, CellSpace())
    record = {"run": str(args.seed_run), "config": run.config, **made.to_dict()}
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "seeds.json", {**_record(args), "seed_run": record})
    print(f"seeds from {args.seed_run}, {made.summary()}")
    for row in (r for r in made.rows if r.root is not None):
        print(f"  form {row.rank} ({row.count} cells): {candidate_form(row.root)}"
              + (" (tuple sharing dropped)" if row.shared else ""))
    if not made.seeds:
        raise CellGraphError(f"--seed-run {args.seed_run}: none of its {len(made.rows)} most frequent forms is a "
                             f"candidate of the search's space ({made.refused()}); {folder / 'seeds.json'} lists them")
    return made.seeds, record


def _search(args: argparse.Namespace) -> int:
    from cellgraph.discover import (CellSpace, EnumerationSearch, LocalSearch, RandomSearch, RegularizedEvolution,
                                    Screen, TPESearch, cell_hash, discover)
    from cellgraph.discover.space import absorbed
    from cellgraph.files import write_json

    fidelity = _fidelity(args)
    folder = _folder(args)
    seeds, seeded = _seeds(args), None
    if args.seed_run is not None:
        from_run, seeded = _run_seeds(args, folder)
        seeds += from_run
    screen = None if args.screen is None else Screen(args.screen)
    strategy = {"evolution": lambda: RegularizedEvolution(args.population, args.sample, seeds, args.motifs),
                "local": lambda: LocalSearch(args.starts, seeds, args.motifs, args.first_improvement, screen=screen),
                "random": lambda: RandomSearch(screen),
                "tpe": lambda: TPESearch(args.starts, seeds),
                "enumerate": lambda: EnumerationSearch(args.nodes, args.seed, args.grow, screen,
                                                       args.expand, args.depth, args.all_rungs,
                                                       args.probe_parents_only)}[args.strategy]()
    data, teacher, evaluator, settings = _setup_task(args, folder) if args.task else _setup(args)
    space = CellSpace(absorb=args.absorb)
    target = None if teacher is None else cell_hash(absorbed(teacher) if args.absorb else teacher)
    result = discover(space, evaluator, strategy, args.budget, fidelity=fidelity, storage=args.storage,
                      study=args.study, run_dir=folder, seed=args.seed, worker=args.worker,
                      target_hash=target, keep=args.keep, settings=settings)
    best = write_best(folder, result, target)
    planted = None if teacher is None else _teacher(args.teacher, teacher, args.absorb)
    write_json(folder / "discovery.json", {**_record(args), "budget": args.budget, "data": data, "teacher": planted,
                                           "evaluator": settings, "result": result.to_dict(), "best": best,
                                           **({} if seeded is None else {"seed_run": seeded})})
    _print_search(args, folder, teacher, result, best)
    return 0


def write_best(folder: Path, result, teacher_hash: str | None) -> list[dict[str, Any]]:
    """Write ``result``'s best cells to ``folder/best/cell_K.json`` (K from 1, the best first);
    a row per cell: rank, trial, hash, objective, whether it recovers the teacher (left out
    without one: ``teacher_hash`` None), its file (relative to ``folder``), its objective per
    race seed and their mean when it raced (``fits``, ``mean``) and what the evaluator
    reported."""
    from statistics import mean

    from cellgraph.files import write_json

    best = []
    (folder / "best").mkdir(exist_ok=True)
    for rank, found in enumerate(result.best, 1):
        path = folder / "best" / f"cell_{rank}.json"
        write_json(path, found.cell)
        best.append({"rank": rank, "trial": found.trial, "hash": found.hash, "objective": found.loss,
                     **({} if teacher_hash is None else {"recovers": found.hash == teacher_hash}),
                     "file": str(path.relative_to(folder)),
                     **({"fits": found.fits, "mean": mean(found.fits.values())} if found.fits else {}),
                     **found.details})
    return best


def _teacher(name: str, root, absorb: bool = False) -> dict[str, Any]:
    """The teacher's record: name, hash, form and complexity, and with ``absorb`` its absorbed
    form's hash and form (what the search recovers)."""
    from cellgraph.discover import cell_hash
    from cellgraph.discover.show import candidate_form
    from cellgraph.discover.space import absorbed, complexity

    own = {"name": name, "hash": cell_hash(root), "form": candidate_form(root), "complexity": complexity(root)}
    if not absorb:
        return own
    plain = absorbed(root)
    return own | {"absorbed": {"hash": cell_hash(plain), "form": candidate_form(plain)}}


def _print_search(args: argparse.Namespace, folder: Path, teacher, result, best: list[dict]) -> None:
    from cellgraph.discover import cell_from_json
    from cellgraph.discover.show import candidate_equations, candidate_form
    from cellgraph.discover.space import absorbed

    if teacher is not None:
        print(f"teacher {args.teacher}: {candidate_form(teacher)}")
        if args.absorb:
            print(f"  recovered as its absorbed form: {candidate_form(absorbed(teacher))}")
        print(candidate_equations(teacher))
    print(f"{result.evaluations:g} evaluations, {result.trials} trials, {result.trained} cells trained, "
          f"{result.duplicates} duplicates reused, {result.skipped} skipped"
          + (f", {result.raced} race fits" if result.raced else "")
          + ("" if teacher is None else f"; {_recovery(result)}"))
    for row, found in zip(best, result.best):
        root = cell_from_json(found.cell)
        metric = row.get("metric", "mse")
        extra = ", ".join(f"{k} {row[k]:.4g}" for k in (f"val_{metric}", f"test_{metric}") if k in row)
        print(f"\n#{row['rank']} trial {row['trial']}: objective {row['objective']:.4g}"
              + (f" (mean {row['mean']:.4g} over {len(row['fits'])} training seeds)" if len(row.get("fits", ())) > 1
                 else "")
              + (f" ({extra}, complexity {row['complexity']})" if extra else "")
              + (f", recovers {args.teacher}" if row.get("recovers") else "") + f"; {folder / row['file']}")
        print(f"  {candidate_form(root)}")
        print(candidate_equations(root))
    print(f"\nwrote {folder / 'discovery.json'}")


def _recovery(result) -> str:
    """Whether, and when, a planted search recovered its teacher."""
    hit = result.target
    if hit:
        return (f"recovered the teacher (the best cell since trial #{hit.trial}, after {hit.evaluations:g} "
                f"evaluations, {hit.cpu_seconds:.1f} CPU s)")
    return "the teacher was not recovered" + (f" (trained at trial #{result.proposed.trial}, not the best)"
                                              if result.proposed else "")


def _identify(args: argparse.Namespace) -> int:
    from cellgraph.data.planted import teacher_folder
    from cellgraph.discover import CellSpace, from_cell
    from cellgraph.discover.identify import identify
    from cellgraph.targets import target

    full = _fidelity(args).full
    _, teacher, evaluator, settings = _setup(args)
    gru = target("gru")
    folder = Path(args.dir or Path("discoveries") / f"identify-{teacher_folder(args.teacher)}")
    spec = {**settings, "epochs": full, "seed": args.seed}
    found = identify(teacher, from_cell(gru.cell, gru.layout), CellSpace(), evaluator, full, args.seed,
                     folder / "identify.json", spec, limit=args.limit, margin=args.margin)
    _print_identify(args, teacher, found)
    print(f"wrote {folder / 'identify.json'}")
    return 0


def _print_identify(args: argparse.Namespace, teacher, found) -> None:
    from cellgraph.discover.show import candidate_form

    print(f"teacher {args.teacher}: {candidate_form(teacher)}")
    print(f"{len(found.rows)} structures at {_fidelity(args).full} epochs: the teacher, "
          + ("the GRU, " if found.row("gru") else "") + f"{len(found.rows) - 1 - bool(found.row('gru'))} neighbours")
    order = sorted(found.rows, key=lambda r: (r.objective is None, r.objective or 0.0))
    shown = [r for k, r in enumerate(order) if k < args.top or r.name in ("teacher", "gru")]
    print(f"{'rank':>4} {'objective':>10} {'val_mse':>10} {'cplx':>4}  structure")
    for r in shown:
        rank = order.index(r) + 1
        obj = "failed" if r.objective is None else f"{r.objective:.4g}"
        print(f"{rank:>4} {obj:>10} {r.details.get('val_mse', float('nan')):>10.4g} "
              f"{r.details.get('complexity', '-')!s:>4}  {r.name}" + (f" ({r.error})" if r.error else ""))
    other, gru = found.best_other, found.row("gru")
    gap = "-" if found.gap is None else f"{found.gap:+.1%}"
    print(f"teacher {_value(found.teacher)}; best other {other.name if other else '-'} {_value(other)}; "
          f"gru {_value(gru) if gru else '(the teacher)'}; margin {gap} (required {args.margin:.0%}): "
          + ("PASS" if found.passed else "FAIL"))


def _value(row) -> str:
    return "-" if row is None or row.objective is None else f"{row.objective:.4g}"
