"""``cellgraph distance PRED.json TARGET.json [--iso]``: the tree distance TD (Sec. 3.3)."""

from __future__ import annotations

import argparse

from cellgraph.errors import CellGraphError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "distance",
        help="tree distance TD(T_pred, T_target) of two cells with vectors (paper Sec. 3.3)",
        description="Print TD(T_pred, T_target) of the paper's Sec. 3.3 as one number (full float "
        "precision). Both documents (cellgraph.cell.tree or cellgraph.dag, docs/FORMAT.md) must carry a "
        "vector on every internal node, as 'cellgraph export RUN_DIR ... --format json' writes them. "
        "With --iso, the minimum of TD over Iso(T_target), the trees obtained by swapping the "
        "children of commutative nodes (the tree term of Eq. 5).",
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
    from cellgraph.export.jsonio import load_tree

    trees = []
    for path in (args.pred, args.target):
        tree = load_tree(path, args.state)
        _require_vectors(tree, path)
        trees.append(tree)
    print(repr(float((td_iso if args.iso else td)(*trees))))
    return 0


def _require_vectors(tree, path: str) -> None:
    """TD compares node vectors: a document without any says which command writes them."""
    internal = [t for _, t in tree.positions()]
    if internal and all(t.vector is None for t in internal):
        raise CellGraphError(
            f"{path} has no vectors on its nodes (a structure only, as 'cellgraph target' and "
            "'cellgraph trees --save' write); TD compares node vectors: 'cellgraph export RUN_DIR "
            "--sample I --t T --format json' writes a trained cell with them")
    tree.require_vectors(path)
