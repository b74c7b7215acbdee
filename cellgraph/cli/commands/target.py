"""``cellgraph target NAME --format FMT``: export a target cell (GRU, LSTM, MGU, MUT1-3)."""

from __future__ import annotations

import argparse

TEXT_FORMATS = ("json", "sympy", "latex", "form")
#: The names of :func:`cellgraph.targets.target_names`, written out so that ``--help`` needs no import.
NAMES = "gru, gru_torch, lstm, lstm_torch, rnn, mgu, mut1, mut2, mut3"
DRAWING_FORMATS = ("dot", "svg", "png")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "target",
        help=f"export a target cell ({NAMES}) as JSON, sympy, LaTeX, its form or a drawing",
        description="Export a target cell. json: the unfolded tree as a cellgraph.cell.tree document "
        "(every state of a multi-state cell, with the layout; see docs/FORMAT.md): its structure, "
        "without vectors (cellgraph export writes a trained cell with them). sympy/latex: one "
        "equation per generated node, children first, then the expression of every state. form: "
        "one line per state in the notation in which cellgraph trees and the demo print discovered "
        "cells (docs/reading-cells.md explains it). dot/svg/png: a drawing as in the paper's "
        "Figure 1. Text formats go to stdout unless -o is given; drawings go to -o FILE, by default "
        "NAME.EXT. mgu and mut1-3 are the planted task's teachers (docs/paper-notes.md, Planted teachers).",
        epilog="examples: cellgraph target gru --format sympy; cellgraph target gru --format form; "
        "cellgraph target lstm --format json --dag -o lstm.json; "
        "cellgraph target gru --format svg -o docs/gru.svg; cellgraph target mgu --format form",
    )
    p.add_argument("name", metavar="NAME", help=f"target name: {NAMES}")
    p.add_argument("--format", "-f", required=True, choices=TEXT_FORMATS + DRAWING_FORMATS,
                   help="output format")
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="output file (default: stdout for json/sympy/latex/form, NAME.EXT for drawings)")
    p.add_argument("--dag", action="store_true",
                   help="the cell graph (shared nodes once) instead of the unfolded tree: the "
                   "cellgraph.dag JSON form, or the DAG view of a drawing")
    p.set_defaults(func=run)


def _text(args: argparse.Namespace, tgt) -> str:
    if args.format == "form":
        from cellgraph.algorithms.canonical import canonical_string
        from cellgraph.cell.names import as_multicell

        return "\n".join(f"{g.state} = {canonical_string(g, tgt.layout)}" for g in as_multicell(tgt.cell))
    if args.format == "json":
        import json

        from cellgraph.export import jsonio

        doc = jsonio.cell_document(tgt.cell, tgt.layout, getattr(tgt, "vectors", None), args.dag)
        return json.dumps(doc, indent=1)
    import sympy

    from cellgraph.export import symbolic

    eqs = symbolic.equations(tgt.cell, tgt.layout)
    states = [sympy.Eq(sympy.MatrixSymbol(f"{s}_t", symbolic.P, 1), e, evaluate=False)
              for s, e in symbolic.state_expressions(tgt.cell, tgt.layout).items()]
    if args.format == "latex":
        return (f"% {tgt.name}: one equation per generated node\n{symbolic.latex(eqs)}\n"
                f"% {tgt.name}: the states\n{symbolic.latex(states)}")
    return (f"# {tgt.name}: one equation per generated node\n{symbolic.sstr(eqs)}\n"
            f"# {tgt.name}: the states\n{symbolic.sstr(states)}")


def run(args: argparse.Namespace) -> int:
    from cellgraph.targets import target

    tgt = target(args.name)
    return emit(args, tgt, tgt.name)


def emit(args: argparse.Namespace, subject, stem: str) -> int:
    """Write ``subject`` (anything with ``cell``, ``layout``, ``name``; JSON also carries its
    ``vectors``, node -> vector, where it has them) in ``args.format``: a drawing to
    ``args.output`` (default ``STEM.FORMAT``), text to ``args.output`` or stdout."""
    if args.format in DRAWING_FORMATS:
        from cellgraph.export.draw import render

        print(render(subject.cell, args.output or f"{stem}.{args.format}",
                     view="dag" if args.dag else "tree", layout=subject.layout))
        return 0
    text = _text(args, subject)
    if args.output is None:
        print(text)
        return 0
    from cellgraph.files import atomic_write

    atomic_write(args.output, (text + "\n").encode())
    print(args.output)
    return 0
