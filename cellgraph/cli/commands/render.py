"""``cellgraph render FILE.json -o OUT``: draw a cell stored as JSON."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "render",
        help="draw a cell from a cellgraph JSON document (svg, png, pdf or dot)",
        description="Draw a cell stored as a cellgraph.cell.tree or cellgraph.dag document "
        "(docs/FORMAT.md) as in the paper's Figure 1. The suffix of -o picks the format: .svg, "
        ".png and .pdf need the Graphviz program 'dot'; .dot writes Graphviz source without it.",
        epilog="example: cellgraph render best_cell.json -o best_cell.svg --view dag",
    )
    p.add_argument("document", metavar="FILE.json", help="a cellgraph.cell.tree or cellgraph.dag document")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="output file: .svg, .png, .pdf, .dot or .gv")
    p.add_argument("--view", choices=("dag", "tree"), default=None,
                   help="draw the cell graph (shared nodes once) or the unfolded tree "
                   "(default: the document's own form)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.export.draw import render
    from cellgraph.export.jsonio import load_document

    doc = load_document(args.document)
    view = args.view or doc.kind
    print(render(doc.trees if view == "tree" else doc.cell, args.output, view=view, layout=doc.layout))
    return 0
