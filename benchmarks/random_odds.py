"""How often random search proposes a planted teacher at all: the odds behind the recovery
suite's random rows (docs/discover.md, *Random search's odds*).

Random search reads no history (:class:`~cellgraph.discover.strategies.RandomSearch`): what it
proposes does not depend on what it trained, so the chance that a random run ever proposes a
teacher is measured without training anything. This draws ``--draws`` candidates as the search
draws them (:func:`~cellgraph.discover.space.sample_cell` over the search's default space,
:class:`~cellgraph.discover.space.CellSpace`: 1 to 15 nodes) and counts those whose
:func:`~cellgraph.discover.cache.cell_hash` is a ``--targets`` teacher's. With ``--sized`` each
teacher's draws come from its own node count only: a random search told the teacher's size, the
fairer baseline.

The ``random-screen`` arm proposes only the cells the screen keeps
(:class:`~cellgraph.discover.screen.Screen`); the screen refuses cells and never a teacher that
passes it, so a screened proposal is the teacher with probability ``rate / kept``, ``kept`` the
share of the first ``--screen-sample`` draws it keeps (its own sampling error is not in the
bounds below). Per teacher: its nodes, whether it passes
the screen, draws, hits, the first hit's draw, the rate per draw and its 95% upper bound (the
Poisson bound of the hits: ``3/draws`` with none, the rule of three), the bound per screened
proposal, the screened proposals random search needs for an even chance of proposing the teacher
once (``ln 2 / rate``; with no hit, at least that of the bound) and, for each ``--proposals N``,
the bound on the chance that ``N`` screened proposals hold the teacher at all,
``1 - (1 - bound)^N``. Exact recovery needs the proposal first, so that chance bounds random
search's rate of recovery in a run that proposes ``N`` cells, whatever its training.
The record, ``DIR/random-odds[-sized].json`` (settings, versions, the screen's share, a row per
teacher), is written at the end and printed as a table.

    python -m cellgraph.benchmarks.random_odds --records results/landscape --targets minimal:0:2-3 minimal:5:2-3 --draws 100000
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from cellgraph.benchmarks.reach import structure
from cellgraph.cell.expr import Expr
from cellgraph.cli.commands.bench import positive_int
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.screen import Screen
from cellgraph.discover.space import CellSpace, sample_cell
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json
from cellgraph.progress import progress

__all__ = ["Draws", "poisson_upper", "kept_share", "odds", "table", "main"]

#: The confidence of the upper bounds.
CONFIDENCE = 0.95


class Draws:
    """``n`` draws of ``space`` from ``seed``: the hits of each of ``hashes`` (how many, and the
    first one's draw, from 1) and the first ``keep`` cells drawn (for the screen's share)."""

    def __init__(self, space: CellSpace, n: int, seed: int, hashes: set[str], keep: int, show: bool = True):
        rng, rejected = random.Random(seed), Counter()
        self.hits: Counter[str] = Counter()
        self.first: dict[str, int] = {}
        self.sample: list[Expr] = []
        bar = progress(n, f"random draws ({space.min_nodes}-{space.max_nodes} nodes)", show, unit="cells")
        for i in range(1, n + 1):
            cell = sample_cell(space, rng, rejected)
            if len(self.sample) < keep:
                self.sample.append(cell)
            found = cell_hash(cell)
            if found in hashes:
                self.hits[found] += 1
                self.first.setdefault(found, i)
            bar.update()
        bar.close()


def poisson_upper(hits: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper confidence limit of a Poisson mean that gave ``hits``: the ``mean``
    whose chance of ``hits`` or fewer is ``1 - confidence`` (2.996 for none, the rule of
    three), by bisection on the Poisson distribution function."""
    def below(mean: float) -> float:
        term = total = math.exp(-mean)
        for k in range(1, hits + 1):
            term *= mean / k
            total += term
        return total

    low, high = 0.0, hits + 10.0 * math.sqrt(hits + 1) + 10.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if below(middle) > 1 - confidence else (low, middle)
    return high


def kept_share(cells: list[Expr], screen: Screen) -> float:
    """The share of ``cells`` that ``screen`` keeps."""
    if not cells:
        raise CellGraphError("the screen's share needs at least one drawn cell (--screen-sample >= 1)")
    return sum(screen.problem(c) is None for c in cells) / len(cells)


def _row(teacher: str, root: Expr, found: Draws, n: int, kept: float, screen: Screen,
         proposals: list[int]) -> dict[str, Any]:
    """A teacher's row of the record (module docstring)."""
    key = cell_hash(root)
    hits = found.hits[key]
    passes = screen.problem(root) is None
    bound = poisson_upper(hits) / n
    screened = bound / kept if passes else 0.0
    rate = hits / n / kept if passes else 0.0
    even = math.log(2) / (rate or screened) if screened else None
    return {"teacher": teacher, "nodes": len(root.internal_nodes()), "passes_screen": passes, "draws": n,
            "hits": hits, "first": found.first.get(key), "rate": hits / n, "rate_bound": bound,
            "screened_bound": screened, "even_odds": even,
            "chance_bound": {str(m): 1 - (1 - min(screened, 1.0)) ** m for m in proposals}}


def odds(targets: list[str], n: int, seed: int, sized: bool = False, screen_sample: int = 2000,
         proposals: tuple[int, ...] = (), show: bool = True) -> dict[str, Any]:
    """The record of the module docstring (without versions): one stream of draws over the default
    space for all ``targets``, or with ``sized`` one per node count among them."""
    began = time.process_time()
    roots = {t: structure(t) for t in targets}
    space, screen = CellSpace(), Screen()
    groups = ({len(r.internal_nodes()) for r in roots.values()} if sized else {None})
    rows, kept = [], {}
    for size in sorted(groups, key=lambda k: k or 0):
        members = {t: r for t, r in roots.items() if size is None or len(r.internal_nodes()) == size}
        stream = space if size is None else replace(space, min_nodes=size, max_nodes=size)
        found = Draws(stream, n, seed, {cell_hash(r) for r in members.values()}, screen_sample, show)
        share = kept_share(found.sample, screen)
        kept["all" if size is None else str(size)] = share
        rows += [_row(t, r, found, n, share, screen, list(proposals)) for t, r in members.items()]
    order = {t: i for i, t in enumerate(targets)}
    return {"config": {"draws": n, "seed": seed, "sized": sized, "screen_sample": screen_sample,
                       "proposals": list(proposals), "confidence": CONFIDENCE,
                       "space": space.to_dict(), "screen": screen.to_dict()},
            "kept": kept, "rows": sorted(rows, key=lambda r: order[r["teacher"]]),
            "cpu_seconds": round(time.process_time() - began, 1)}


def table(record: dict[str, Any]) -> str:
    """The screen's share, then a row per teacher (module docstring)."""
    lines = ["screen keeps " + ", ".join(f"{share:.1%} of the {'draws' if k == 'all' else k + '-node draws'}"
                                         for k, share in record["kept"].items()),
             f"{'teacher':<16} {'nodes':>5} {'screen':>6} {'draws':>10} {'hits':>5} {'first':>9} "
             f"{'per draw':>9} {'bound':>8} {'screened':>9} {'even odds':>10}"
             + "".join(f" {'in ' + format(m, ','):>10}" for m in record["config"]["proposals"])]
    for r in record["rows"]:
        even = "-" if r["even_odds"] is None else f"{'' if r['hits'] else '>'}{r['even_odds']:,.0f}"
        lines.append(f"{r['teacher']:<16} {r['nodes']:>5} {'pass' if r['passes_screen'] else 'FAIL':>6} "
                     f"{r['draws']:>10,} {r['hits']:>5} {r['first'] or '-':>9} {r['rate']:>9.2e} "
                     f"{r['rate_bound']:>8.1e} {r['screened_bound']:>9.1e} {even:>10}"
                     + "".join(f" {'< ' + format(c, '.1%'):>10}" for c in r["chance_bound"].values()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cellgraph.experiment.runs import package_versions

    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="runs/landscape", metavar="DIR", help="where the record goes (default %(default)s)")
    p.add_argument("--targets", nargs="+", required=True, metavar="TEACHER", help="planted teachers (gru, minimal:0:2-3, ...)")
    p.add_argument("--draws", type=positive_int, default=1_000_000, help="candidates drawn per stream (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the draws' seed (default %(default)s)")
    p.add_argument("--sized", action="store_true", help="draw each teacher's node count only")
    p.add_argument("--screen-sample", type=positive_int, default=2000, metavar="N",
                   help="draws the screen's share is measured on (default %(default)s)")
    p.add_argument("--proposals", type=positive_int, nargs="*", default=[], metavar="N",
                   help="numbers of screened proposals to bound the chance of a teacher proposal in")
    a = p.parse_args(argv)
    path = Path(a.records) / f"random-odds{'-sized' if a.sized else ''}.json"
    Path(a.records).mkdir(parents=True, exist_ok=True)
    try:
        record = odds(a.targets, a.draws, a.seed, a.sized, min(a.screen_sample, a.draws), tuple(a.proposals))
    except CellGraphError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    write_json(path, {**record, "versions": package_versions()})
    print(table(record))


if __name__ == "__main__":
    main()
