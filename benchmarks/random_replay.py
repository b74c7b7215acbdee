"""Random search replayed: whether a ``cellgraph discover --strategy random`` run can ever train
its teacher, decided without training (docs/discover.md, *Random search replayed*).

Random search reads no history (:class:`~cellgraph.discover.strategies.RandomSearch`), and its
worker draws every proposal from one ``random.Random`` seeded ``"SEED/WORKER/TRIALS"`` when it
starts (``TRIALS``: the trials its study already holds; 0 for a new run, more for a resumed one),
so the cells a one-worker run proposes are fixed by its seed and resume points, whatever its
training gives. :class:`Stream` draws them as the search does. A proposal whose hash the run has
seen is answered by the cache; a new one is trained, at least its first rung; and the run
proposes again while the epochs spent plus the first rung's fit the budget. So, with ``B`` the
budget in epochs, ``c_0`` the first rung's cost and ``C`` every rung's (:class:`Window`), a run
trains at most ``B / c_0`` distinct cells and at least ``(B - c_0) / C + 1``. A teacher that is
not among the first ``B / c_0`` distinct cells of the run's stream is never trained, so the run
cannot recover it: an exact verdict, ``never proposed``. A teacher within the first
``(B - c_0) / C + 1`` is trained for certain (``proposed``: its recovery needs the run), and
between the two it depends on training (``needs a run``).

Three uses. With ``--targets``, ``--budget`` and ``--seeds``, the new runs of the recovery
suite's random arms (one worker, no interruption) are replayed: per seed, one stream, walked
until the largest window or until every teacher has turned up; a record
``DIR/random-replay-RUNGS-sSEED.json`` per rungs and seed (``RUNGS`` as ``1-5-20-60``; a later
replay of the same rungs and seed replaces it). With ``RUN_DIR...``, existing runs are checked
trial by trial: every trial of the study must be the stream's proposal, from its start or from
a resume point (else an error names the first that is not), and a run that has not ended gets
the verdict of its continuation from its study (the same command resuming it once more); a
record ``DIR/random-replay-RUN.json`` per run. With ``--recorded``, kept records of random runs
(no study) are checked against their seeds' streams (:func:`check_record`;
``DIR/random-replay-record-RUN.json``). A long walk keeps its state in ``--work`` (default
``runs/random-replay``, not a records folder) every :data:`CHECKPOINT` cells and resumes from
it. ``--table`` prints the records.

    python -m cellgraph.benchmarks.random_replay --records results/landscape --targets minimal:1:2-3 minimal:25:4-7 --budget 800 1000 --fidelity 1,5,20,60 --seeds 0 1 2
    python -m cellgraph.benchmarks.random_replay --records results/landscape runs/recovery-small/minimal1-2to3-random-screen-s0
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterable

from cellgraph.benchmarks import run_records
from cellgraph.benchmarks.reach import structure
from cellgraph.benchmarks.subcells import load_search
from cellgraph.cli.commands.bench import positive_int
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.screen import Screen
from cellgraph.discover.search import IDLE_LIMIT
from cellgraph.discover.space import CellSpace
from cellgraph.discover.strategies import RandomSearch
from cellgraph.errors import CellGraphError
from cellgraph.files import write_json
from cellgraph.progress import progress

__all__ = ["Stream", "Window", "Walk", "reconstruct", "walk", "verdict", "fresh", "replay_run", "check_record", "table",
           "main"]

#: Distinct cells between two saves of a walk's state.
CHECKPOINT = 5000


class Stream:
    """The hashes random search proposes from trial ``start`` on, worker ``worker`` of a search
    seeded ``seed``, with ``screen`` (None: unscreened), over the default space."""

    def __init__(self, seed: int, start: int = 0, screen: Screen | None = None, worker: int = 0) -> None:
        self.rng = random.Random(f"{seed}/{worker}/{start}")
        self.search, self.space = RandomSearch(screen), CellSpace()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        return cell_hash(self.search.propose((), self.space, self.rng, Counter()).root)

    def state(self) -> list:
        """The generator's state, as JSON."""
        version, internal, gauss = self.rng.getstate()
        return [version, list(internal), gauss]

    def restore(self, state: list) -> None:
        """Continue from a :meth:`state`."""
        self.rng.setstate((state[0], tuple(state[1]), state[2]))


@dataclass(frozen=True)
class Window:
    """How many new distinct cells a run with ``epochs`` of budget left can train at rungs
    ``fidelity`` (each trains from scratch: the planted evaluator does not resume): at most
    ``most``, at least ``sure`` (module docstring)."""

    epochs: int
    fidelity: Fidelity

    @property
    def most(self) -> int:
        return max(0, self.epochs // self.fidelity.cost(0, False))

    @property
    def sure(self) -> int:
        first = self.fidelity.cost(0, False)
        every = sum(self.fidelity.cost(k, False) for k in range(len(self.fidelity.epochs)))
        return 0 if self.epochs < first else (self.epochs - first) // every + 1


@dataclass
class Walk:
    """A stream walked: ``proposals`` made, ``distinct`` new cells among them, ``first`` (hash ->
    ``[proposal, distinct]``, 1-based) where each wanted hash first turned up, and whether it
    stopped at :data:`~cellgraph.discover.search.IDLE_LIMIT` duplicates in a row (``idle``)."""

    proposals: int = 0
    distinct: int = 0
    idle: int = 0
    first: dict[str, list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"proposals": self.proposals, "distinct": self.distinct, "idle": self.idle, "first": self.first or {}}


def reconstruct(hashes: list[str], seed: int, screen: Screen | None, worker: int = 0) -> list[int]:
    """The resume points (trial numbers, 0 first) at which ``hashes``, a run's trials in order,
    are random search's proposals; an error names the first trial that no stream proposes."""
    points, stream = [0], Stream(seed, 0, screen, worker)
    for number, key in enumerate(hashes):
        if next(stream) != key:
            stream = Stream(seed, number, screen, worker)
            if next(stream) != key:
                raise CellGraphError(f"trial {number} ({key[:12]}) is not random search's proposal from seed {seed}, "
                                     f"neither continuing nor resumed there: not a one-worker random run")
            points.append(number)
    return points


def walk(stream: Stream, wanted: set[str], most: int, seen: set[str], state: Path | None = None,
         show: bool = True) -> Walk:
    """Walk ``stream`` until ``most`` new distinct cells (not in ``seen``, which grows), every
    ``wanted`` hash found, or :data:`IDLE_LIMIT` duplicates in a row; with ``state``, save the walk
    there every :data:`CHECKPOINT` cells and resume from it when it exists."""
    done = Walk(first={})
    if state is not None and state.exists():
        saved = json.loads(state.read_text())
        if saved["wanted"] != sorted(wanted):
            raise CellGraphError(f"{state} was saved by a walk for other teachers: remove it to start over")
        stream.restore(saved["rng"])
        seen |= set(saved["seen"])
        done = Walk(**saved["walk"])
    bar = progress(most, "replay", show, unit="cells", initial=done.distinct)
    while done.distinct < most and not wanted <= done.first.keys():
        key = next(stream)
        done.proposals += 1
        if key in seen:
            done.idle += 1
            if done.idle >= IDLE_LIMIT:
                break
            continue
        done.idle = 0
        seen.add(key)
        done.distinct += 1
        bar.update()
        if key in wanted and key not in done.first:
            done.first[key] = [done.proposals, done.distinct]
        if state is not None and done.distinct % CHECKPOINT == 0:
            state.parent.mkdir(parents=True, exist_ok=True)
            write_json(state, {"rng": stream.state(), "seen": sorted(seen), "walk": done.to_dict(),
                               "wanted": sorted(wanted)})
    bar.close()
    if state is not None and state.exists():
        state.unlink()
    return done


def verdict(place: list[int] | None, window: Window, stopped_idle: bool = False) -> str:
    """``never proposed``, ``proposed`` or ``needs a run`` for a teacher first seen at ``place``
    (``[proposal, distinct]``, or None) in a walk of ``window`` (module docstring)."""
    if place is None or place[1] > window.most:
        return "never proposed"
    return "proposed" if place[1] <= window.sure and not stopped_idle else "needs a run"


def fresh(targets: list[str], budgets: list[float], rungs: tuple[int, ...], seed: int, screen: Screen | None,
          state: Path | None = None, show: bool = True) -> dict[str, Any]:
    """The record of a new run's replay at ``seed`` (module docstring, without versions): one
    stream walked to the largest of the targets' windows (``cpu_seconds``: this process's, so
    the last part's only when the walk resumed from a saved state)."""
    began, fidelity = time.process_time(), Fidelity(rungs)
    hashes = {t: cell_hash(structure(t)) for t in targets}
    windows = {t: Window(round(b * fidelity.full), fidelity) for t, b in zip(targets, budgets)}
    most = max(w.most for w in windows.values())
    done = walk(Stream(seed, 0, screen), set(hashes.values()), most, set(), state, show)
    rows = [{"teacher": t, "budget": b, "sure": windows[t].sure, "most": windows[t].most,
             "first": done.first.get(hashes[t]), "verdict": verdict(done.first.get(hashes[t]), windows[t],
                                                                    done.idle >= IDLE_LIMIT)}
            for t, b in zip(targets, budgets)]
    return {"kind": "fresh", "seed": seed, "rungs": list(rungs), "screen": screen and screen.to_dict(),
            "walk": done.to_dict(), "rows": rows, "cpu_seconds": round(time.process_time() - began, 1)}


def _trials(run_dir: Path) -> tuple[dict[str, Any], list]:
    """A random search's settings and its trials in order (:func:`~cellgraph.benchmarks.subcells.load_search`)."""
    spec, _, trials = load_search(run_dir)
    if spec["strategy"]["name"] != "random" or spec.get("worker", 0) != 0 or not spec.get("target_hash"):
        raise CellGraphError(f"{run_dir}: not worker 0 of a random search of a planted teacher "
                             f"(strategy {spec['strategy']['name']}, worker {spec.get('worker', 0)})")
    return spec, sorted(trials, key=lambda t: t.number)


def replay_run(run_dir: Path, state: Path | None = None, show: bool = True) -> dict[str, Any]:
    """The record of an existing run's replay (module docstring, without versions)."""
    began = time.process_time()
    spec, trials = _trials(run_dir)
    settings, target = spec["strategy"].get("screen"), spec["target_hash"]
    fidelity = Fidelity.from_dict(spec["fidelity"])
    screen = None if settings is None else Screen(**settings)
    hashes = [t.user_attrs["hash"] for t in trials]
    points = reconstruct(hashes, spec["seed"], screen)
    spent = sum(t.user_attrs.get("spent", 0) for t in trials)
    budget = round(spec["budget"] * fidelity.full)
    record = run_dir / "discovery.json"
    ended = record.is_file() and json.loads(record.read_text())["budget"] >= spec["budget"]
    out = {"kind": "run", "run": run_dir.name, "seed": spec["seed"], "budget": spec["budget"], "trials": len(trials),
           "resumed_at": points[1:], "spent_epochs": spent, "ended": ended,
           "proposed_at": next((n for n, key in enumerate(hashes) if key == target), None)}
    if not ended and out["proposed_at"] is None:
        window = Window(budget - spent, fidelity)
        done = walk(Stream(spec["seed"], len(trials), screen), {target}, window.most, set(hashes), state, show)
        out["continuation"] = {"sure": window.sure, "most": window.most, **done.to_dict(),
                               "verdict": verdict(done.first.get(target), window, done.idle >= IDLE_LIMIT)}
    return {**out, "cpu_seconds": round(time.process_time() - began, 1)}


def check_record(folder: Path) -> dict[str, Any]:
    """How a kept record of a one-worker random run (``folder/discovery.json``, the suite's
    records: no study) agrees with the stream of its seed: its trials replayed from the start,
    the distinct cells among them against those it trained, and its best cells' trial numbers
    and hashes against the replay's. A run that was resumed agrees only up to its first resume."""
    path = folder / "discovery.json"
    if not path.is_file():
        raise CellGraphError(f"{folder} holds no discovery.json")
    record = json.loads(path.read_text())
    config, result = record["config"], record["result"]
    if config["strategy"] != "random" or config["worker"] != 0:
        raise CellGraphError(f"{folder}: not worker 0 of a random search (strategy {config['strategy']})")
    screen = None if config.get("screen") is None else Screen(config["screen"])
    hashes = list(islice(Stream(record["seed"], 0, screen), result["trials"]))
    best = sum(hashes[b["trial"]] == b["hash"] for b in record["best"])
    return {"kind": "record", "run": folder.name, "trials": result["trials"], "trained": result["trained"],
            "distinct": len(set(hashes)), "best": [best, len(record["best"])],
            "agrees": len(set(hashes)) == result["trained"] and best == len(record["best"]),
            "teacher_replayed": record["teacher"]["hash"] in hashes, "teacher_trained": result["proposed"] is not None}


def table(records: Iterable[dict[str, Any]]) -> str:
    """A line per teacher and seed of the new runs' records, then one per checked run."""
    lines = [f"{'teacher':<16} {'seed':>4} {'budget':>6} {'sure':>6} {'most':>7} "
             f"{'first at (proposal, cell)':>26}  verdict"]
    runs, kept = [], []
    for r in records:
        if r["kind"] != "fresh":
            (runs if r["kind"] == "run" else kept).append(r)
            continue
        for row in r["rows"]:
            at = "-" if row["first"] is None else f"{row['first'][0]:,}, {row['first'][1]:,}"
            lines.append(f"{row['teacher']:<16} {r['seed']:>4} {row['budget']:>6g} {row['sure']:>6,} {row['most']:>7,} "
                         f"{at:>26}  {row['verdict']}")
    for r in runs:
        later = r.get("continuation")
        told = (f"teacher trained at trial {r['proposed_at']}" if r["proposed_at"] is not None
                else "ended, teacher never proposed" if r["ended"]
                else f"continuation: {later['verdict']} ({later['distinct']:,} of at most {later['most']:,} new cells)")
        lines.append(f"{r['run']}: {r['trials']:,} trials all proposals of seed {r['seed']} "
                     f"(resumed at {r['resumed_at'] or 'none'}); {told}")
    for r in kept:
        lines.append(f"{r['run']}: {'agrees' if r['agrees'] else 'DIFFERS'}: {r['trials']:,} trials replayed, "
                     f"{r['distinct']:,} distinct against {r['trained']:,} trained, best cells {r['best'][0]} of "
                     f"{r['best'][1]} at their trials; teacher replayed {r['teacher_replayed']}, trained "
                     f"{r['teacher_trained']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = run_records.parser(__doc__, "runs/landscape")
    p.add_argument("--targets", nargs="+", default=[], metavar="TEACHER", help="planted teachers of new runs")
    p.add_argument("--budget", type=float, nargs="+", default=[], metavar="N",
                   help="full-fidelity evaluations, one for all targets or one per target")
    p.add_argument("--fidelity", default="1,5,20,60", metavar="E1,E2,...", help="rungs in epochs (default %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], metavar="S",
                   help="the runs' seeds (default 0 1 2)")
    p.add_argument("--screen", type=positive_int, default=3, metavar="DRAWS", help="the screen's draws (default 3)")
    p.add_argument("--unscreened", action="store_true", help="replay the random arm without the screen")
    p.add_argument("--work", default="runs/random-replay", metavar="DIR",
                   help="where long walks keep their state (default %(default)s)")
    p.add_argument("--recorded", nargs="+", type=Path, default=[], metavar="RECORD_DIR",
                   help="check kept records of random runs (the suite's records/NAME) against their seeds' streams")
    a = p.parse_args(argv)
    folder, work = Path(a.records), Path(a.work)
    if a.table:
        print(table(run_records.read(folder, "random-replay")))
        return
    if sum(map(bool, (a.targets, a.runs, a.recorded))) != 1:
        p.error("give one of --targets (new runs), RUN_DIR... (existing runs) and --recorded")
    for kept in a.recorded:
        run_records.keep(p, folder, f"random-replay-record-{kept.name}", lambda: check_record(kept))
    screen = None if a.unscreened else Screen(a.screen)
    for run_dir in a.runs:
        run_records.keep(p, folder, f"random-replay-{run_dir.name}",
                         lambda: replay_run(run_dir, work / f"random-replay-{run_dir.name}.state.json"))
    if a.targets:
        if len(a.budget) not in (1, len(a.targets)):
            p.error(f"give one --budget or one per target ({len(a.targets)}), got {len(a.budget)}")
        try:
            rungs = tuple(int(e) for e in a.fidelity.split(","))
        except ValueError:
            p.error(f"--fidelity {a.fidelity!r}: give increasing epochs such as 1,5,20,60")
        budgets = a.budget * len(a.targets) if len(a.budget) == 1 else a.budget
        for seed in a.seeds:
            name = f"random-replay-{'-'.join(map(str, rungs))}-s{seed}" + ("-unscreened" if screen is None else "")
            run_records.keep(p, folder, name, lambda: fresh(a.targets, budgets, rungs, seed, screen,
                                                            work / f"{name}.state.json"))
    print(table(run_records.read(folder, "random-replay")))


if __name__ == "__main__":
    main()
