"""``cellgraph tune``: the paper's random hyper-parameter search with Optuna, on a
storage that several workers share; ``--best`` / ``--list`` report it and export the best
configuration as a TOML file for ``cellgraph train --config``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cellgraph.cli.commands import old_names

MISSING = "optuna is not installed: pip install 'cellgraph[hpo]'"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", aliases=old_names("tune"),
        help="random hyper-parameter search over the paper's ranges (Optuna; several workers may share it)"
        + "".join(f"; {old}: its old name" for old in old_names("tune")),
        description="Draw --trials configurations from the paper's search ranges (Appendix tables) and train "
        "one run per configuration into STUDY_DIR/trials/slot-SSSS; the value of a trial is the run's final "
        "validation metric. Start the same command on several machines or processes to share the work: "
        "they claim trials from one storage (default STUDY_DIR/study.db, SQLite; a postgresql:// URL for "
        "many machines). Re-running the command resumes an interrupted search; the trial of a worker that "
        "died is queued again after --grace seconds and continues its run from the last checkpoint. "
        "Settings: defaults <- --preset <- the drawn values; --set fixes a key (a searched key given with "
        "--set is not searched).",
        epilog="examples: cellgraph tune --task sst --model gru --trials 40; "
        "cellgraph tune --task planted --model gru --ranges sst --trials 6 --set epochs=1; "
        "cellgraph tune --best --study sst-gru --export best.toml",
    )
    from cellgraph.cli.commands import DEVICE_AUTO, add_backend_flag, add_device_flag
    from cellgraph.data.datadir import DATA_DIR_HELP
    from cellgraph.experiment.config import MODELS, TASKS

    p.add_argument("--task", choices=TASKS, default=None, help="data set / task")
    p.add_argument("--model", choices=MODELS, default=None, help="model")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="configurations to draw when the study is created (a joining worker may leave it out)")
    p.add_argument("--ranges", choices=TASKS, default=None, metavar="TASK",
                   help="use the ranges of this task's table (default: --task; the paper has tables for "
                   "wiki, sst and ptb; wiki5k holds our table for full RRNN)")
    p.add_argument("--study", metavar="NAME", default=None, help="study name (default TASK-MODEL)")
    p.add_argument("--dir", metavar="STUDY_DIR", default=None,
                   help="folder of the study's runs and default storage (default searches/NAME)")
    p.add_argument("--storage", metavar="URL", default=None,
                   help="Optuna storage URL, e.g. postgresql://user@host/db (default sqlite in STUDY_DIR)")
    p.add_argument("--preset", metavar="NAME", default=None, help="base settings from a preset")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="fix one setting for every trial (repeatable), e.g. --set epochs=3")
    p.add_argument("--data", metavar="DIR", default=None, help=DATA_DIR_HELP)
    add_device_flag(p, None, f"where this worker trains its trials: {DEVICE_AUTO} (default auto); "
                    "workers may differ")
    add_backend_flag(p, None, "the backend plugin that trains the trials (default: the backend setting, "
                     "torch)")
    p.add_argument("--search-seed", type=int, default=0, metavar="SEED",
                   help="seed of the random draws (default 0)")
    p.add_argument("--heartbeat", type=int, default=30, metavar="SECONDS",
                   help="a running trial records a heartbeat this often (default 30)")
    p.add_argument("--grace", type=int, default=120, metavar="SECONDS",
                   help="a running trial without a heartbeat for this long is queued again (default 120)")
    p.add_argument("--retries", type=int, default=3, metavar="N",
                   help="how often a trial whose worker died is queued again (default 3)")
    p.add_argument("--best", action="store_true", help="print every trial and the best one's settings")
    p.add_argument("--list", action="store_true", help="print every trial")
    p.add_argument("--requeue-failed", action="store_true",
                   help="queue again the slots whose latest trial failed (once what failed them is fixed) "
                   "and stop; the next run of the search command trains them, resuming their runs")
    p.add_argument("--export", metavar="FILE.toml", default=None,
                   help="with --best: write the best trial's settings for cellgraph train --config")
    p.set_defaults(func=run)


def _hpo():
    """:mod:`cellgraph.experiment.hpo`, or a clean error when optuna is missing."""
    from cellgraph.errors import CellGraphError

    try:
        from cellgraph.experiment import hpo
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in ("optuna", "sqlalchemy"):
            raise
        raise CellGraphError(MISSING) from None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return hpo


def run(args: argparse.Namespace) -> int:
    from cellgraph.errors import CellGraphError

    hpo = _hpo()
    if args.requeue_failed:
        return _requeue(args, hpo)
    if args.best or args.list:
        return _report(args, hpo)
    if args.export:
        raise CellGraphError("--export goes with --best")
    return _search(args, hpo)


def _search(args: argparse.Namespace, hpo) -> int:
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.config import parse_set, resolve_config
    from cellgraph.experiment.presets import SEARCH_RANGES

    if not (args.task and args.model):
        raise CellGraphError("--task and --model are required (or --best / --list to report a search)")
    if args.trials is not None and args.trials < 1:
        raise CellGraphError(f"--trials must be >= 1, got {args.trials}")
    if args.heartbeat < 1 or args.grace <= args.heartbeat:
        raise CellGraphError(f"need --heartbeat >= 1 and --grace > --heartbeat, got {args.heartbeat} and {args.grace}")
    if args.retries < 0:
        raise CellGraphError(f"--retries must be >= 0, got {args.retries}")
    fixed = parse_set(args.set)
    overrides = {"task": args.task, "model": args.model, **({"data_dir": args.data} if args.data else {}),
                 **({"device": args.device} if args.device else {}),
                 **({"backend": args.backend} if args.backend else {}), **fixed}
    base = resolve_config(args.preset, None, overrides)
    from cellgraph.backend import training_backend

    # a missing torch, a backend that cannot train or a missing GPU fails here, not every trial
    training_backend(base.backend).resolve_device(base.device)
    table = args.ranges or base.task
    space = hpo.search_space(base.model, table, fixed)
    pinned = sorted(set(fixed) & set(SEARCH_RANGES[(base.model, table)]))
    print(f"searching {', '.join(space)} over the {base.model} ranges of the {table} table"
          + (f"; fixed by --set: {', '.join(f'{k}={fixed[k]}' for k in pinned)}" if pinned else ""))
    name = hpo.check_name(args.study or f"{base.task}-{base.model}")
    folder = hpo.use_folder(args.dir or Path("searches") / name, name)
    storage = hpo.open_storage(args.storage or hpo.sqlite_url(folder), args.heartbeat, args.grace, args.retries)
    study = hpo.open_study(storage, name, hpo.make_spec(base, space, args.search_seed), args.trials)
    try:
        hpo.work(study, storage, base, folder, args.heartbeat)
    except KeyboardInterrupt:
        print("interrupted: the trial this worker ran is queued again once it has had no heartbeat for "
              f"{args.grace} s; run the same command to resume the search", file=sys.stderr)
        return 130
    print(hpo.summary(study))
    _hint_failed(args, study, hpo)
    return 0


def _hint_failed(args: argparse.Namespace, study, hpo) -> None:
    """Say how to run the failed slots again, if any."""
    failed = [t.user_attrs["slot"] for t in hpo.failed_trials(study)]
    if not failed:
        return
    where = (f"--storage {hpo.shown(args.storage)} --study {study.study_name}" if args.storage
             else f"--dir {args.dir}" if args.dir else f"--study {study.study_name}")
    print(f"slot{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))} failed (the errors: --list); "
          f"once what failed them is fixed, `cellgraph tune {where} --requeue-failed` queues them again")


def _existing(args: argparse.Namespace, hpo):
    """The study that --study / --dir / --storage name, and its storage URL."""
    from cellgraph.errors import CellGraphError

    name = args.study or (f"{args.task}-{args.model}" if args.task and args.model else None)
    folder = Path(args.dir) if args.dir else Path("searches") / name if name else None
    if args.storage:
        url = args.storage
    elif folder is not None:
        if not (folder / "study.db").is_file():
            raise CellGraphError(f"no search in {folder} (no study.db)")
        url = hpo.sqlite_url(folder)
    else:
        raise CellGraphError("say which search: --study NAME, --dir STUDY_DIR or --storage URL")
    storage = hpo.open_storage(url)
    return hpo.load_study(storage, hpo.only_study(storage, name)), url


def _requeue(args: argparse.Namespace, hpo) -> int:
    study, _ = _existing(args, hpo)
    slots = hpo.requeue_failed(study)
    print(f"study {study.study_name}: " + (f"slot{'s' if len(slots) > 1 else ''} {', '.join(map(str, slots))} "
          "queued again; run the search command to train them" if slots else "no failed slot to queue again"))
    print(hpo.summary(study))
    return 0


def _report(args: argparse.Namespace, hpo) -> int:
    from cellgraph.errors import CellGraphError

    study, url = _existing(args, hpo)
    print(hpo.summary(study))
    print(hpo.trials_table(study))
    _hint_failed(args, study, hpo)
    if not args.best:
        return 0
    best = hpo.best_trial(study)
    if best is None:
        raise CellGraphError(f"no trial of study {study.study_name} has completed yet")
    config = hpo.trial_config(study, best)
    print(f"best: slot {best.user_attrs['slot']} (trial #{best.number}), val {hpo.metric(study)} {best.value:.6g}")
    print("  drawn: " + ", ".join(f"{k}={v!r}" for k, v in best.params.items()))
    if args.export:
        hpo.write_toml(args.export, config, [
            f"cellgraph tune --best: study {study.study_name}, trial #{best.number} (slot "
            f"{best.user_attrs['slot']}), val {hpo.metric(study)} {best.value:.6g}",
            f"storage {hpo.shown(url)}",
            "data folder and thread count are not recorded: give cellgraph train --data DIR --set num_threads=N",
        ])
        print(f"wrote {args.export}: cellgraph train --config {args.export} --out RUN_DIR")
    return 0
