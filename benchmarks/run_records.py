"""The command line of the benchmarks that read search folders and keep one record per folder
(:mod:`cellgraph.benchmarks.subcells`, :mod:`cellgraph.benchmarks.refits`): ``RUN_DIR...``,
``--records DIR``, ``--table``; each record ``DIR/PREFIX-RUN.json`` with the package versions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from cellgraph.errors import CellGraphError
from cellgraph.files import write_json

__all__ = ["parser", "keep", "read", "runs_given"]


def parser(doc: str, default: str) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph with the run folders, ``--records`` (default
    ``default``) and ``--table``."""
    p = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN_DIR",
                   help="cellgraph discover --teacher run folders, finished or not")
    p.add_argument("--records", default=default, metavar="DIR", help="where the records go (default %(default)s)")
    p.add_argument("--table", action="store_true", help="run nothing: print the records in DIR")
    return p


def keep(p: argparse.ArgumentParser, folder: Path, name: str, make: Callable[[], dict[str, Any]]) -> None:
    """Write ``make()``'s record with the package versions as ``folder/name.json``; a
    :class:`~cellgraph.errors.CellGraphError` is ``p``'s one-line error."""
    from cellgraph.experiment.runs import package_versions

    folder.mkdir(parents=True, exist_ok=True)
    try:
        record = make()
    except CellGraphError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    write_json(folder / f"{name}.json", {**record, "versions": package_versions()})


def read(folder: Path, prefix: str) -> list[dict[str, Any]]:
    """The records ``folder/PREFIX-*.json``, by name."""
    return [json.loads(f.read_text()) for f in sorted(folder.glob(f"{prefix}-*.json"))]


def runs_given(p: argparse.ArgumentParser, runs: Sequence[Path], least: int = 1) -> None:
    """``p``'s error unless at least ``least`` run folders are given."""
    if len(runs) < least:
        p.error(f"give RUN_DIR... ({least} or more) or --table")
