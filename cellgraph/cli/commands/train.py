"""``cellgraph train``: train RRNN, RRNN-GRU, a GRU/LSTM baseline or a given cell into a run folder."""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cellgraph.experiment.config import TrainConfig

#: Flags that set one config key each (flag destination -> key).
_FLAG_KEYS = {"task": "task", "model": "model", "data": "data_dir", "glove": "glove", "teacher": "teacher",
              "backend": "backend"}
#: Of those, the run's inputs: a run that has no checkpoint yet may be resumed with new ones.
_INPUT_FLAGS = ("data", "glove", "teacher")
#: Of those, the ones that change the model: a run with checkpoints refuses them on --resume.
#: (--data only says where this machine keeps the same data, so it may always be given.)
_MODEL_INPUT_FLAGS = ("glove", "teacher")

_DESCRIPTION = (
    "Train into the run folder --out: config.json, env.json, metrics.jsonl, structures/epoch_EEE.json "
    "(searched cells), checkpoints/{best,last}.pt, final.json. Settings are resolved as defaults <- "
    "--preset <- --config <- the flags below <- --set; the task and the model must be given by one of "
    "them, and the resolved settings are printed before training starts. Without --preset, rrnn and rrnn-gru "
    "train with cellgraph's discovery recipe (preset recipe-rrnn, recipe-rrnn-gru; docs/paper-notes.md), "
    "which first trains the gru run it starts from (RUN_DIR/teacher) unless --teacher names one. --model cell "
    "trains the fixed cell that --set cell=NAME|FILE names (a target such as mgu or mut1, random:SEED[:LOW-HIGH], "
    "minimal:SEED[:LOW-HIGH], or a cell JSON file from cellgraph export) from scratch, "
    "embedding and output layer as the gru baseline's; "
    "config.json records the setting, RUN_DIR/cell.json and final.json the cell. --resume RUN_DIR continues a "
    "run from its last good checkpoint with its own settings (--data may point to where this machine "
    "keeps the data, config.json recording the folder the run started on, and --set may change the "
    "machine's settings: num_threads, device, logger, data_dir); a run that has no checkpoint "
    "yet may be resumed with new inputs (--data, --glove, --teacher). Ctrl-C stops a run between two writes and "
    "prints the command that resumes it. Under torchrun (torchrun --standalone --nproc_per_node N -m "
    "cellgraph train ...) the run is data-parallel over the processes, with the same global batches."
)
_EXAMPLES = (
    "cellgraph train --task planted --model rrnn-gru --set epochs=5 --out runs/p1",
    "cellgraph train --preset paper-wiki10k-gru --out runs/gru",
    "cellgraph train --task planted --model cell --set cell=mgu --set planted_teacher=mgu --out runs/c1",
    "cellgraph train --task wiki5k --model cell --set cell=cell.json --out runs/c2",
    "cellgraph train --resume runs/p1 --set num_threads=1",
    "cellgraph presets",
)
_SETTINGS = ("settings (--set KEY=VALUE, a --config TOML file or a --preset; the lambda_* weigh the terms "
             "of the paper's Eq. 5):")


def _epilog() -> str:
    """The examples and every setting with its type, default, rule and help."""
    from cellgraph.experiment.config import key_table

    examples = "\n".join(f"  {line}" for line in _EXAMPLES)
    return f"examples:\n{examples}\n\n{textwrap.fill(_SETTINGS, 100)}\n{key_table()}"


def register(sub: argparse._SubParsersAction) -> None:
    from cellgraph.data.datadir import DATA_DIR_HELP
    from cellgraph.experiment.config import MODELS, TASKS

    p = sub.add_parser(
        "train",
        help="train a model (rrnn, rrnn-gru, gru, lstm, or a given cell) on a task; resume a killed run",
        description=textwrap.fill(_DESCRIPTION, 100),
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from cellgraph.cli.commands import DEVICE_AUTO, add_backend_flag, add_device_flag

    p.add_argument("--task", choices=TASKS, default=None, help="data set / task")
    p.add_argument("--model", choices=MODELS, default=None, help="model")
    p.add_argument("--preset", metavar="NAME", default=None,
                   help="a preset of the paper's settings (cellgraph presets lists them)")
    p.add_argument("--list-presets", action="store_true",
                   help="print the presets and exit (as cellgraph presets)")
    p.add_argument("--config", metavar="FILE.toml", default=None, help="settings from a TOML file")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="one setting (repeatable), e.g. --set epochs=3 --set lr=1e-3; the keys are "
                   "listed below")
    p.add_argument("--data", metavar="DIR", default=None, help=DATA_DIR_HELP)
    p.add_argument("--glove", metavar="FILE", default=None, help="initialise embeddings from GloVe")
    p.add_argument("--teacher", metavar="RUN_DIR", default=None,
                   help="a finished gru run on the same task: its GRU gives the TD target vectors")
    add_backend_flag(p, None, "the backend plugin that trains (default: the backend setting, torch)")
    p.add_argument("--out", metavar="RUN_DIR", default=None, help="the new run folder")
    p.add_argument("--resume", metavar="RUN_DIR", default=None, help="continue this run folder")
    add_device_flag(p, None, f"where to train: {DEVICE_AUTO} (default: the device setting, auto); "
                    "with --resume, moves the run to that device")
    p.set_defaults(func=run)


def _given(args: argparse.Namespace, flags: tuple[str, ...]) -> list[str]:
    """The flags among ``flags`` that the command line gives."""
    return [f"--{flag}" for flag in flags if getattr(args, flag)]


def _resumed_config(args: argparse.Namespace) -> TrainConfig:
    """The settings of the run folder ``--resume`` names, with new inputs where it has no
    checkpoint yet (it starts over, so they cannot mix with earlier work)."""
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.config import MACHINE_KEYS, load_run_config, parse_set, resolve_config
    from cellgraph.experiment.runs import RunDir

    settings = _given(args, ("preset", "config", "out", "task", "model", "backend"))
    if settings:
        raise CellGraphError(f"--resume continues a run with its own settings; drop {', '.join(settings)}")
    machine = parse_set(args.set)
    if other := [key for key in machine if key not in MACHINE_KEYS]:
        raise CellGraphError(f"--resume continues a run with its own settings; --set may change only the "
                             f"machine's ({', '.join(MACHINE_KEYS)}), not {', '.join(other)}")
    inputs = _given(args, _MODEL_INPUT_FLAGS)
    if inputs and RunDir(args.resume).has_checkpoint():
        raise CellGraphError(f"--resume {args.resume}: it has checkpoints, made with its recorded inputs; "
                             f"drop {', '.join(inputs)}")
    config_file = Path(args.resume) / "config.json"
    if not config_file.exists():
        raise CellGraphError(f"{args.resume} is not a run folder (no config.json) to resume")
    config = load_run_config(config_file)
    new_inputs = {_FLAG_KEYS[flag]: getattr(args, flag) for flag in _INPUT_FLAGS if getattr(args, flag)}
    if args.device:  # a machine choice, not a setting of the run: a resumed run may move
        new_inputs["device"] = args.device
    return resolve_config(base={**config.to_dict(), **new_inputs}, overrides=machine)


def _new_config(args: argparse.Namespace) -> TrainConfig:
    """The settings of a new run: defaults <- preset <- file <- flags <- ``--set``; the task
    and the model must be given. A preset made for another task or model is warned about."""
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.config import parse_set, preset_conflicts, resolve_config
    from cellgraph.experiment.presets import RECIPES

    if not args.out:
        raise CellGraphError("--out RUN_DIR is required (or --resume RUN_DIR)")
    overrides = {key: getattr(args, flag) for flag, key in (*_FLAG_KEYS.items(), ("device", "device"))
                 if getattr(args, flag)}
    overrides.update(parse_set(args.set))
    config = resolve_config(args.preset, args.config, overrides, require=("task", "model"), recipe=True)
    if not args.preset and config.model in RECIPES:
        print(f"cellgraph train: {config.model} trains with cellgraph's discovery recipe (preset recipe-{config.model}: "
              f"straight-through, structural term, warm start from a gru run); --preset paper-... or --set "
              f"mode=soft warm_start=none structure_term=false for the paper's")
    for warning in preset_conflicts(args.preset, config):
        print(f"cellgraph train: {warning}", file=sys.stderr)
    return config


def run(args: argparse.Namespace) -> int:
    if args.list_presets:
        from cellgraph.cli.commands.presets import run as list_presets

        return list_presets(args)
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.runs import RunDir

    config = _resumed_config(args) if args.resume else _new_config(args)
    out = args.resume or args.out
    try:
        _train(config, out, bool(args.resume))
    except KeyboardInterrupt:
        print(f"cellgraph train: {_interrupted(out)}", file=sys.stderr)
        return 130
    except (CellGraphError, OSError) as err:
        if args.resume and not RunDir(out).has_checkpoint():
            raise CellGraphError(f"{err} ({out} has no checkpoint yet, so nothing is lost by deleting it; "
                                 f"or start it over with new inputs: {_resume(out)} --data DIR)") from None
        raise
    return 0


def _resume(out: str) -> str:
    return f"cellgraph train --resume {shlex.quote(out)}"


def _interrupted(out: str) -> str:
    """What Ctrl-C left: nothing, a run to start over, or a run to continue, and the command."""
    from cellgraph.experiment.runs import RunDir

    run = RunDir(out)
    if not run.file("config.json").exists():
        return "interrupted before anything was written"
    state = "continue it" if run.has_checkpoint() else "start it over (it has no checkpoint yet)"
    return f"interrupted; to {state}: {_resume(out)}"


def _train(config: TrainConfig, out: str, resume: bool) -> None:
    """Print the resolved settings (once, under torchrun too), then train through the
    ``backend`` plugin."""
    from cellgraph.backend import training_backend
    from cellgraph.experiment.config import compact

    trainer = training_backend(config.backend)
    with trainer.launched(config.device) as dist:  # several processes under torchrun, else one
        if dist.writes:
            print(f"settings: {compact(config)}", flush=True)
        trainer.train(config, out, resume=resume, argv=sys.argv, dist=dist)
