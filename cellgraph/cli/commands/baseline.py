"""Score the count baselines of data sets: what a predictor without recurrent state gets, as a
reference for the models. Language models: unigram and bigram tables of the training split
(add-a smoothing, a chosen on the validation split), in bits per character or perplexity over
every target; classification and tagging: the training split's most frequent label. Prints a
Markdown table of val / test; needs no torch."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cellgraph.data.datadir import DATA_DIR_HELP
    from cellgraph.data.text import WIKI_CLEANINGS
    from cellgraph.experiment.reproduce import PROTOCOL

    tasks = list(dict.fromkeys(exp.task for exp in PROTOCOL))  # the Table 1 protocol's data sets
    p = sub.add_parser("baseline", description=__doc__,
                       help="score count baselines (unigram, bigram, majority class) of data sets",
                       epilog="example: cellgraph baseline wiki5k sst")
    p.add_argument("tasks", nargs="*", metavar="TASK", default=tasks,
                   help=f"data sets (default: {' '.join(tasks)})")
    p.add_argument("--data", metavar="DIR", default=None, help=DATA_DIR_HELP)
    p.add_argument("--wiki-cleaning", choices=tuple(WIKI_CLEANINGS), default="wikifil",
                   help="the cleaning of enwik8 for wiki and wiki5k (default wikifil; see wiki_cleaning)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.data.count_baselines import baselines
    from cellgraph.data.datasets import load_dataset
    from cellgraph.experiment.summary import format_value

    print("| task | baseline | metric | val | test | smoothing a |")
    print("|---|---|---|---|---|---|")
    for task in args.tasks:
        options = {"wiki_cleaning": args.wiki_cleaning} if task in ("wiki", "wiki5k") else {}
        for row in baselines(load_dataset(task, args.data, **options)):
            alpha = "—" if row["alpha"] is None else f"{row['alpha']:g}"
            print(f"| {task} | {row['baseline']} | {row['metric']} | {format_value((row['val'], None), row['metric'])} "
                  f"| {format_value((row['test'], None), row['metric'])} | {alpha} |", flush=True)
    return 0
