"""``cellgraph train``: train RRNN, RRNN-GRU or a GRU/LSTM baseline into a run folder."""

from __future__ import annotations

import argparse

#: Flags that set one config key each (flag destination -> key).
_FLAG_KEYS = {"task": "task", "model": "model", "data": "data_dir", "glove": "glove", "teacher": "teacher"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model (rrnn, rrnn-gru, gru, lstm) on a task; resume a killed run",
        description="Train into the run folder --out: config.json, env.json, metrics.jsonl, "
        "structures/epoch_EEE.json (searched cells), checkpoints/{best,last}.pt, final.json. "
        "Settings are resolved as defaults <- --preset <- --config <- the flags below <- --set. "
        "--resume RUN_DIR continues a run from its last good checkpoint with its own settings. "
        "Under torchrun (torchrun --standalone --nproc_per_node N -m cellgraph train ...) the run "
        "is data-parallel over the processes, with the same global batches.",
        epilog="examples: cellgraph train --task planted --model rrnn-gru --set epochs=5 --out runs/p1; "
        "cellgraph train --preset paper-wiki10k-gru --data ../shared/data --out runs/gru; "
        "cellgraph train --resume runs/p1",
    )
    from cellgraph.commands import DEVICE_AUTO, add_device_flag
    from cellgraph.config import MODELS, TASKS

    p.add_argument("--task", choices=TASKS, default=None, help="data set / task")
    p.add_argument("--model", choices=MODELS, default=None, help="model")
    p.add_argument("--preset", metavar="NAME", default=None, help="a preset of the paper's settings")
    p.add_argument("--config", metavar="FILE.toml", default=None, help="settings from a TOML file")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="one setting (repeatable), e.g. --set epochs=3 --set lr=1e-3")
    p.add_argument("--data", metavar="DIR", default=None, help="data folder (default: ../shared/data)")
    p.add_argument("--glove", metavar="FILE", default=None, help="initialise embeddings from GloVe")
    p.add_argument("--teacher", metavar="RUN_DIR", default=None,
                   help="a finished gru run on the same task: its GRU gives the TD target vectors")
    p.add_argument("--out", metavar="RUN_DIR", default=None, help="the new run folder")
    p.add_argument("--resume", metavar="RUN_DIR", default=None, help="continue this run folder")
    add_device_flag(p, None, f"where to train: {DEVICE_AUTO} (default: the device setting, auto); "
                    "with --resume, moves the run to that device")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from cellgraph.config import load_run_config, parse_set, resolve_config
    from cellgraph.errors import CellGraphError

    given = [f"--{flag}" for flag in ("preset", "config", "out", *_FLAG_KEYS) if getattr(args, flag)]
    if args.set:
        given.append("--set")
    if args.resume:
        if given:
            raise CellGraphError(f"--resume continues a run with its own settings; drop {', '.join(given)}")
        from cellgraph.runs import RunDir

        run_dir = RunDir(args.resume)
        if not run_dir.file("config.json").exists():
            raise CellGraphError(f"{args.resume} is not a run folder (no config.json) to resume")
        config, out = load_run_config(run_dir.file("config.json")), args.resume
        if args.device:  # a machine choice, not a setting of the run: a resumed run may move
            config = resolve_config(base=config.to_dict(), overrides={"device": args.device})
    else:
        if not args.out:
            raise CellGraphError("--out RUN_DIR is required (or --resume RUN_DIR)")
        overrides = {key: getattr(args, flag) for flag, key in (*_FLAG_KEYS.items(), ("device", "device"))
                     if getattr(args, flag)}
        overrides.update(parse_set(args.set))
        config, out = resolve_config(args.preset, args.config, overrides), args.out
    from cellgraph.backends.torch_distributed import launched
    from cellgraph.backends.torch_train import train

    with launched(config.device) as dist:  # several processes under torchrun, else one
        train(config, out, resume=bool(args.resume), argv=sys.argv, dist=dist)
    return 0
