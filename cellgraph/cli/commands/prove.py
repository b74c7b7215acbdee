"""``cellgraph prove [--only NAME] [--quick] [--json] [--seed S]``: check the paper's theorems by
construction (Lemma 1, Theorems GRU and LSTM, Lemma 2, the gradient theorems), with the
errata (docs/paper-notes.md, *Errata*) reproduced and their corrections checked (see
``proofs/README.md``)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from cellgraph.proofs.suite import QUICK, STATEMENTS

    p = sub.add_parser(
        "prove",
        help="check the paper's theorems by construction, errata included",
        description="Constructs the objects each statement talks about and measures them: the "
        "literal statement (with a counterexample where the paper is wrong, see "
        "docs/paper-notes.md, *Errata*) and the corrected one. Exit code 0 when every corrected "
        "statement holds and every listed erratum is reproduced.",
    )
    p.add_argument("--only", action="append", choices=tuple(STATEMENTS), metavar="NAME",
                   help=f"run only this statement (repeatable): {', '.join(STATEMENTS)}")
    sizes = "; ".join(f"{name} " + ", ".join(f"{k}={v}" for k, v in kw.items()) for name, kw in QUICK.items())
    p.add_argument("--quick", action="store_true",
                   help="every statement with every check (negative controls included) at reduced sizes, "
                   f"seconds instead of minutes: {sizes} (without --quick: the full sizes, which "
                   "proofs/README.md records)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.add_argument("--seed", type=seed, default=0, help="seed of every random draw, an integer >= 0 (default 0)")
    p.set_defaults(func=run)


def seed(text: str) -> int:
    """The ``--seed`` argument: numpy's generators take integers >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from cellgraph.proofs.report import exit_code, format_table, to_json
    from cellgraph.proofs.suite import run as run_statements

    results = run_statements(args.only, args.seed, quick=args.quick)
    print(to_json(results, args.seed) if args.json else format_table(results))
    return exit_code(results)
