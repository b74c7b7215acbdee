"""``cellgraph diff RUN_DIR``: how the most frequent cells of a run depart from its target."""

from __future__ import annotations

import argparse

from cellgraph.cli.commands import add_structure_log_args

MATCHING = (
    "Nodes are matched by shape: a node's shape is its op, its activation, whether its tuple is "
    "trainable or the identity (which trainable tuple is not compared: the run's t0, t1, ... and "
    "the GRU's W_r, W_z, W_h are different layouts) and, recursively, the shapes of its operands, each "
    "with its matrix L_r or R_r (not told apart on the identity tuple; a commutative op's "
    "operands in either order). The distinct generated nodes of the cell and of the "
    "target (per state) are paired by equal shape; a node of the cell without a partner is new "
    "(+), a node of the target without one is missing (-, named as in the target's equations, "
    "printed first), the others are kept (unmarked). A change at one node makes every node above "
    "it new as well."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="show how a run's most frequent discovered cells depart from the target (GRU), as equations",
        description="For the most frequent cells of a run's structure log (last epoch unless "
        "--epoch), print each cell's share of the logged cells, which leaves its h_t reads, and "
        "its sympy equations marked against the target cell the run's config names (gru unless "
        "set; --target to choose another). A cell with the target's structure says so. " + MATCHING,
        epilog="example: cellgraph diff runs/rrnn-s0 --top 3",
    )
    add_structure_log_args(p, 3, "of the most frequent cells")
    p.add_argument("--target", metavar="NAME", default=None,
                   help="target to compare with: gru, gru_torch, lstm or lstm_torch (default: the run's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cellgraph.algorithms.reads import cell_reads
    from cellgraph.errors import CellGraphError
    from cellgraph.experiment.runlog import RunLog, reads_summary
    from cellgraph.export.diff import diff_lines
    from cellgraph.export.symbolic import equations, sstr
    from cellgraph.targets import target

    if args.top < 1:
        raise CellGraphError(f"--top must be at least 1, got {args.top}")
    log = RunLog.load(args.run)
    goal = target(args.target or log.config.get("target", "gru"))
    chosen = log.structure_log(args.epoch)
    total = max(1, chosen["n_cells"])
    print(f"epoch {chosen['epoch']}: {chosen['n_cells']} cells, {len(chosen['forms'])} distinct forms, "
          f"compared with {goal.name}")
    print(reads_summary(chosen))
    print(f"{goal.name}, whose nodes the '-' lines name:")
    for line in sstr(equations(goal.cell, goal.layout)).splitlines():
        print(f"    {line}")
    for k, form in enumerate(chosen["forms"][: args.top], 1):
        doc = _document(form, f"{args.run}, epoch {chosen['epoch']}, form {k}")
        print(f"\n#{k}: {form['count']} of {chosen['n_cells']} cells ({form['count'] / total:.1%}); "
              f"{cell_reads(doc.cell).describe()}")
        for line in diff_lines(doc.cell, doc.layout, goal):
            print(f"  {line}")
    return 0



def _document(form: dict, where: str):
    """The cell document a structure log's form holds, with its layout; errors name ``where``."""
    from cellgraph.errors import CellGraphError
    from cellgraph.export.jsonio import load_document

    if "cell" not in form:
        raise CellGraphError(f"{where}: the structure log holds no cell for this form")
    try:
        doc = load_document(form["cell"])
    except CellGraphError as err:
        raise CellGraphError(f"{where}: {err}") from None
    if doc.layout is None:
        raise CellGraphError(f"{where}: the cell has no layout, so identity tuples cannot be told apart")
    return doc
