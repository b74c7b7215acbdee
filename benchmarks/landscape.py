"""The landscape around planted teachers: how well cells fit at each walk length from the
teacher, beside random cells of the space (docs/discover.md, *The landscape around a teacher*).

For each ``--targets`` teacher, on the planted regression task of ``cellgraph discover --teacher``
(data seed 0, its sizes, ``--weight-scale``: :func:`~cellgraph.discover.planted.planted_search`),
the teacher's structure, the GRU's and the cells of :func:`cellgraph.discover.landscape.around`
(``--per`` walks of each ``--lengths`` length, ``--random`` random cells, drawn from ``--seed``)
are each trained once with the search's evaluator for ``--epochs`` epochs, training seed
``--seed`` (:func:`cellgraph.discover.identify.evaluate`). Each teacher's record,
``DIR/landscape-NAME.json`` (``NAME``: :func:`~cellgraph.data.planted.teacher_folder`), is
written after every cell, so a killed run resumes; a record made with other settings is an
error. ``--table`` runs nothing and prints, per teacher and group (teacher, gru, each walk
length, random): the cells, their median and lowest ``val_mse``, and how many fit below the
GRU's structure.

    python -m cellgraph.benchmarks.landscape --records results/landscape --targets minimal:4:4-7 --weight-scale 1
    python -m cellgraph.benchmarks.landscape --table --records results/landscape --targets minimal:4:4-7
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from cellgraph.data.planted import teacher_folder
from cellgraph.discover.identify import Row, evaluate
from cellgraph.discover.landscape import around
from cellgraph.discover.planted import FIT, SIZES, planted_search
from cellgraph.discover.space import CellSpace, from_cell
from cellgraph.errors import CellGraphError
from cellgraph.files import read_json
from cellgraph.targets import target

__all__ = ["LENGTHS", "record_path", "run", "groups", "table", "main"]

#: The walk lengths sampled by default.
LENGTHS = (1, 2, 3, 4, 6)


def record_path(records: Path, teacher: str) -> Path:
    return records / f"landscape-{teacher_folder(teacher)}.json"


def run(teacher: str, records: Path, lengths: tuple[int, ...] = LENGTHS, per: int = 6, per_random: int = 10,
        epochs: int = 60, seed: int = 0, weight_scale: float = 2.0, num_threads: int = 1,
        sizes: dict[str, int] | None = None, restarts: int | None = None) -> list[Row]:
    """Evaluate the teacher, the GRU and :func:`around`'s cells; the rows in that order.
    ``sizes``: the planted data's (:data:`~cellgraph.discover.planted.SIZES`' keys, default
    theirs); ``restarts``: the fit's initialisations (None: the search's default)."""
    fit = None if restarts is None else {"restarts": restarts}
    _, root, evaluator, settings = planted_search(teacher, 0, sizes, fit, weight_scale=weight_scale,
                                                  num_threads=num_threads)
    gru = target("gru")
    chosen = [("teacher", root), ("gru", from_cell(gru.cell, gru.layout)),
              *around(root, lengths, per, per_random, CellSpace(), seed)]
    spec = {**settings, "epochs": epochs, "seed": seed}
    return evaluate(chosen, evaluator, epochs, seed, record_path(records, teacher), spec, label="landscape")


def _group(name: str) -> str:
    return name.split(" #")[0]


def groups(rows: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Each group's ``val_mse`` values (None for a failed fit), groups in the order met."""
    out: dict[str, list[float | None]] = {}
    for row in rows:
        out.setdefault(_group(row["name"]), []).append(row["details"].get("val_mse") if row["objective"] is not None
                                                       else None)
    return out


def table(records: Path, teachers: list[str]) -> str:
    """One block per teacher with a record: a row per group (module docstring)."""
    lines = [f"{'teacher':<16} {'group':<8} {'cells':>5} {'failed':>6} {'median':>10} {'lowest':>10} {'< gru':>6}"]
    for teacher in teachers:
        path = record_path(records, teacher)
        if not path.exists():
            lines.append(f"{teacher:<16} (no record)")
            continue
        found = groups(read_json(path)["rows"])
        gru = (found.get("gru") or [None])[0]
        for name, values in found.items():
            fitted = [v for v in values if v is not None]
            below = "" if gru is None or name in ("gru", "teacher") else str(sum(v < gru for v in fitted))
            lines.append(f"{teacher:<16} {name:<8} {len(values):>5} {len(values) - len(fitted):>6} "
                         + (f"{statistics.median(fitted):>10.3g} {min(fitted):>10.3g}" if fitted else f"{'':>21}")
                         + f" {below:>6}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="runs/landscape", metavar="DIR", help="a record per teacher (default %(default)s)")
    p.add_argument("--targets", nargs="+", required=True, metavar="TEACHER",
                   help="planted teachers (gru, mut1, minimal:4:4-7, ...)")
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS), metavar="L",
                   help="walk lengths (default %(default)s)")
    p.add_argument("--per", type=int, default=6, help="walks of each length (default %(default)s)")
    p.add_argument("--random", type=int, default=10, help="random cells of the space (default %(default)s)")
    p.add_argument("--epochs", type=int, default=60, help="epochs of each fit (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="draws the cells; the training seed (default 0)")
    p.add_argument("--weight-scale", type=float, default=2.0, help="teacher weight scale (default 2)")
    p.add_argument("--num-threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--restarts", type=int, default=FIT["restarts"][1], help="initialisations of each fit (default %(default)s)")
    for name, default in SIZES.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=f"(default {default})")
    p.add_argument("--table", action="store_true", help="run nothing: print the table")
    a = p.parse_args(argv)
    if min(a.per, a.random, a.seed) < 0 or min(*a.lengths, a.epochs, a.num_threads, a.restarts,
                                                  *(getattr(a, k) for k in SIZES)) < 1:
        p.error("--per, --random and --seed must be >= 0; --lengths, --epochs, --num-threads, --restarts and the "
                "data sizes >= 1")
    records = Path(a.records)
    try:
        if not a.table:
            for teacher in a.targets:
                run(teacher, records, tuple(a.lengths), a.per, a.random, a.epochs, a.seed, a.weight_scale,
                    a.num_threads, {k: getattr(a, k) for k in SIZES}, a.restarts)
        print(table(records, a.targets))
    except CellGraphError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")


if __name__ == "__main__":
    main()
