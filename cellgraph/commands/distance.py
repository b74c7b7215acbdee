"""``cellgraph distance PRED.json TARGET.json [--iso]``: the tree distance TD (Sec. 3.3)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "distance",
        help="tree distance TD(T_pred, T_target) of two cells with vectors (paper Sec. 3.3)",
        description="Print TD(T_pred, T_target) of the paper's Sec. 3.3 as one number (full float "
        "precision). Both documents (cellgraph.tree or cellgraph.dag, docs/FORMAT.md) must carry a "
        "vector on every internal node. With --iso, the minimum of TD over Iso(T_target), the "
        "trees obtained by swapping the children of commutative nodes (the tree term of Eq. 5).",
        epilog="example: cellgraph distance predicted.json gru_teacher.json --iso",
    )
    p.add_argument("pred", metavar="PRED.json", help="the predicted tree T_pred")
    p.add_argument("target", metavar="TARGET.json", help="the target tree T_target")
    p.add_argument("--iso", action="store_true", help="minimum over Iso(T_target)")
    p.add_argument("--state", default=None,
                   help="state to compare in multi-state documents (default: the output state)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.algorithms.distance import td, td_iso
    from cellgraph.jsonio import load_tree

    trees = []
    for path in (args.pred, args.target):
        tree = load_tree(path, args.state)
        tree.require_vectors(path)
        trees.append(tree)
    print(repr(float((td_iso if args.iso else td)(*trees))))
    return 0
