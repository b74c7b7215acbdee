"""Screening random planted teachers: which ``random:SEED[:LOW-HIGH]`` are worth an
identifiability check? (docs/discover.md, *Identifiability*).

For every teacher ``random:S`` (``--seeds N``: ``S = 0 .. N-1``; with ``--sizes LOW-HIGH``
``random:S:LOW-HIGH``; with ``--minimal`` ``minimal:S[:LOW-HIGH]``, the cells that pass the
filters of :mod:`cellgraph.data.minimal`) on the planted regression task of ``cellgraph discover --teacher``
(data seed 0, the command's sizes, ``--weight-scale``; :func:`~cellgraph.discover.planted.planted_search`
makes the data, the teacher's candidate and the evaluator), one record ``DIR/NAME.json``
(``NAME`` :func:`~cellgraph.data.planted.teacher_folder`: ``random4-4to7``), written when the
teacher is done, so a killed run resumes and skips the teachers done; a record made with other
settings is an error. Each holds the settings (``config``), the package versions and:

* ``nodes`` (the cell's generated nodes), ``complexity`` (:func:`~cellgraph.discover.space.complexity`
  of its candidate), ``form`` and ``draws`` (the sub-seeds drawn before a finite cell), and for
  a ``minimal`` teacher ``refused``: the cells drawn before it that the filters refused, by kind
  (:func:`~cellgraph.data.planted.refusals`);
* ``states`` (:func:`state_statistics`, numpy only): the standard deviation and the largest
  ``|h|`` of the teacher's states on the validation inputs, and the sensitivity profile
  ``s_t`` at ``t = 1, T/2, T``: the mean norm of the change of ``h_t`` per unit change of
  ``x_1``, a finite difference in float64. A chaotic teacher's profile grows with ``t`` (an
  input's effect is amplified), a forgetful one's vanishes (``h_T`` hardly depends on ``x_1``),
  and only a teacher in between makes targets whose structure a fit can find;
* ``fits``: the teacher's own structure and the GRU, each trained from scratch with the search's
  evaluator (``--epochs``, ``--restarts``, training seed ``--seed``): ``val_mse``, ``test_mse``,
  ``complexity``, ``seconds`` or an ``error``; ``ratio`` = own ``val_mse`` / the GRU's.

A teacher whose data cannot be made (not finite after the redraws, or not a candidate of the
search's space) is recorded with its ``error``. ``--table`` runs nothing and prints, one row per
teacher: spec, nodes, complexity, draws, h std, max ``|h|``, the three sensitivities, own and GRU
``val_mse``, their ratio and the identifiability verdict; then a summary: teachers drawn, finite,
and the candidates: those whose own structure beats the GRU by ``--factor`` (``ratio <= 1 /
factor``), and for minimal teachers the refusals summed by kind. ``--identify K`` then runs the identifiability check (``cellgraph discover --teacher
T --identify``, at ``--identify-fidelity`` and ``--identify-limit``, with the screening's data
flags; :func:`cellgraph.benchmarks.recovery.run_one`, in ``DIR/identify-NAME``) on the K
candidates of lowest ratio, whose verdicts the table shows.

    python -m cellgraph.benchmarks.random_teachers --records runs/random-teachers --seeds 20 --sizes 4-7 --weight-scale 1
    python -m cellgraph.benchmarks.random_teachers --records runs/random-teachers --seeds 20 --sizes 4-7 --weight-scale 1 --identify 5
    python -m cellgraph.benchmarks.random_teachers --table --records runs/random-teachers --seeds 20 --sizes 4-7
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from cellgraph.benchmarks.recovery import identifications, run_name, run_one
from cellgraph.data.minimal import sensitivity as input_sensitivity
from cellgraph.data.planted import RANDOM_SIZES, RandomSpec, random_sizes, random_spec, refusals, run_cell, teacher_folder
from cellgraph.data.planted_values import PlantedValues
from cellgraph.discover.planted import SIZES, planted_search
from cellgraph.discover.storage import differing_keys
from cellgraph.errors import CellGraphError
from cellgraph.files import read_json, write_json

__all__ = ["FIDELITY", "LIMIT", "specs", "sensitivity", "state_statistics", "screen_one", "screen", "records",
           "candidates", "identify_runs", "table", "main"]

#: The identifiability check's fidelity and neighbour limit by default.
FIDELITY, LIMIT = "20,60", 40


def specs(seeds: int, sizes: tuple[int, int] | None = None, minimal: bool = False) -> list[str]:
    """``random:S`` (``random:S:LOW-HIGH`` for ``sizes``; ``minimal:...`` when ``minimal``) for
    ``S = 0 .. seeds-1``."""
    return [str(RandomSpec(seed, sizes or RANDOM_SIZES, minimal)) for seed in range(seeds)]


def _val_states(data: PlantedValues, inputs: np.ndarray | None = None) -> np.ndarray:
    """The teacher's states ``h`` ``(n, T, p)`` over ``inputs`` (default the validation inputs)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return run_cell(data.cell, data.params, data.inputs["val"] if inputs is None else inputs)[
            data.cell.output.state]


def sensitivity(data: PlantedValues, steps: tuple[int, ...], seed: int = 0, states: np.ndarray | None = None
                ) -> list[float]:
    """The mean over the validation sequences of ``|h_t(x_1 + eps d) - h_t(x_1)| / eps`` at
    each step ``t`` of ``steps`` (1-based): :func:`cellgraph.data.minimal.sensitivity` of the
    first input, how much a unit change of it still moves the state at step ``t``. ``states``:
    the teacher's validation states when the caller has them (:func:`_val_states`), else they
    are computed."""
    change = input_sensitivity(lambda inputs: _val_states(data, inputs), data.inputs["val"], 1, seed, states)
    return [float(change[:, t - 1].mean()) for t in steps]


def state_statistics(data: PlantedValues) -> dict[str, Any]:
    """The teacher's states on the validation inputs: ``std`` and ``max_abs`` of ``h`` over
    every sequence, step and unit, and ``sensitivity`` (:func:`sensitivity`) at ``steps``
    ``1, T/2, T``."""
    h = _val_states(data)
    steps = h.shape[1]
    at = (1, max(1, steps // 2), steps)
    return {"std": float(h.std()), "max_abs": float(np.abs(h).max()), "steps": list(at),
            "sensitivity": sensitivity(data, at, states=h)}


def _fit(evaluator, root, epochs: int, seed: int) -> dict[str, Any]:
    """One evaluation of candidate ``root`` trained from scratch: the evaluator's details, or an error."""
    from cellgraph.discover.evaluator import measure
    from cellgraph.discover.space import to_cell

    outcome = measure(evaluator, *to_cell(root), epochs, seed)
    return {**outcome.details, **({"error": outcome.error} if outcome.error else {})}


def screen_one(spec: str, config: dict[str, Any]) -> dict[str, Any]:
    """The record of teacher ``spec`` (module docstring; ``config``: ``weight_scale``,
    ``epochs``, ``restarts``, ``seed``, ``data_seed`` and the data ``sizes``)."""
    from cellgraph.discover.show import candidate_form
    from cellgraph.discover.space import complexity, from_cell
    from cellgraph.experiment.runs import package_versions
    from cellgraph.targets import target

    record: dict[str, Any] = {"spec": spec, "config": config, "versions": package_versions()}
    try:
        data, root, evaluator, settings = planted_search(
            spec, config["data_seed"], config["sizes"], {"restarts": config["restarts"]},
            weight_scale=config["weight_scale"])
    except CellGraphError as err:
        return {**record, "error": str(err)}
    gru = target("gru")
    fits = {"teacher": _fit(evaluator, root, config["epochs"], config["seed"]),
            "gru": _fit(evaluator, from_cell(gru.cell, gru.layout), config["epochs"], config["seed"])}
    own, other = (fits[k].get("val_mse") for k in ("teacher", "gru"))
    chosen = random_spec(spec)
    refused = {"refused": refusals(chosen, data.draws)} if chosen is not None and chosen.minimal else {}
    return {**record, "evaluator": settings, "draws": data.draws, **refused, "nodes": len(data.cell.output.internal_nodes()),
            "complexity": complexity(root), "form": candidate_form(root), "states": state_statistics(data),
            "fits": fits, "ratio": own / other if own is not None and other else None}


def screen(teachers: list[str], folder: Path, config: dict[str, Any]) -> Iterator[str]:
    """Screen every teacher of ``teachers`` whose record is not in ``folder`` yet, writing each
    record as it is done; a line per teacher. A record made with another ``config`` is an error."""
    folder.mkdir(parents=True, exist_ok=True)
    for spec in teachers:
        path = folder / f"{teacher_folder(spec)}.json"
        if path.exists():
            stored = read_json(path)["config"]
            if stored != config:
                raise CellGraphError(f"{path} was screened with other settings "
                                     f"({', '.join(differing_keys(stored, config))}); use the "
                                     "same settings or another --records folder")
            yield f"{spec}: done"
            continue
        record = screen_one(spec, config)
        write_json(path, record)
        yield f"{spec}: " + (f"error: {record['error']}" if "error" in record else f"ratio {_number(record['ratio'])}")


def records(folder: Path, teachers: list[str]) -> list[dict[str, Any]]:
    """The records of ``teachers`` in ``folder``, in their order (those not screened left out)."""
    paths = (folder / f"{teacher_folder(spec)}.json" for spec in teachers)
    return [read_json(path) for path in paths if path.exists()]


def candidates(found: list[dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    """The records whose own structure beats the GRU by ``factor`` (``ratio <= 1 / factor``),
    the lowest ratio first."""
    kept = [r for r in found if r.get("ratio") is not None and r["ratio"] * factor <= 1]
    return sorted(kept, key=lambda r: r["ratio"])


def identify_runs(found: list[dict[str, Any]], count: int, factor: float, fidelity: str = FIDELITY,
                  limit: int = LIMIT) -> list[tuple[str, list[str], None]]:
    """``(identify-NAME, cellgraph discover arguments, None)`` of the identifiability check of
    each of the ``count`` best :func:`candidates`, with the data flags they were screened with."""
    out = []
    for record in candidates(found, factor)[:count]:
        config = record["config"]
        data = [a for key, value in config["sizes"].items() for a in (f"--{key.replace('_', '-')}", str(value))]
        out.append((run_name(record["spec"]), ["--teacher", record["spec"], "--identify", "--fidelity", fidelity,
                                               "--limit", str(limit), "--weight-scale", f"{config['weight_scale']:g}",
                                               "--data-seed", str(config["data_seed"]), *data], None))
    return out


def _number(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def table(folder: Path, teachers: list[str], factor: float) -> str:
    """One row per screened teacher of ``teachers`` in ``folder`` and the summary line
    (module docstring)."""
    found = records(folder, teachers)
    verdicts = {row["target"]: "PASS" if row["passed"] else "FAIL" for row in identifications(folder)}
    lines = [f"{'teacher':<18} {'nodes':>5} {'cplx':>4} {'draws':>5} {'h std':>8} {'max|h|':>8} {'s_1':>8} "
             f"{'s_T/2':>8} {'s_T':>8} {'own mse':>9} {'GRU mse':>9} {'ratio':>8} identify"]
    for r in found:
        if "error" in r:
            lines.append(f"{r['spec']:<18} error: {r['error']}")
            continue
        states, fits = r["states"], r["fits"]
        s_1, s_mid, s_end = states["sensitivity"]
        lines.append(f"{r['spec']:<18} {r['nodes']:>5} {r['complexity']:>4} {r['draws']:>5} "
                     f"{_number(states['std']):>8} {_number(states['max_abs']):>8} {_number(s_1):>8} "
                     f"{_number(s_mid):>8} {_number(s_end):>8} {_number(fits['teacher'].get('val_mse')):>9} "
                     f"{_number(fits['gru'].get('val_mse')):>9} {_number(r['ratio']):>8} "
                     f"{verdicts.get(r['spec'], '-')}")
    chosen = candidates(found, factor)
    checked = [verdicts[r["spec"]] for r in chosen if r["spec"] in verdicts]
    refused = Counter()
    for r in found:
        refused.update(r.get("refused", {}))
    lines.append(f"{len(found)} drawn, {sum('error' not in r for r in found)} finite, {len(chosen)} whose own "
                 f"structure beats the GRU by {factor:g}x (ratio <= {1 / factor:.3g})"
                 + (f"; {len(checked)} checked, {checked.count('PASS')} PASS" if checked else ""))
    if refused:
        lines.append(f"cells refused by the filters before them: {sum(refused.values())} ("
                     + ", ".join(f"{n} {kind}" for kind, n in refused.most_common()) + ")")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--records", default="runs/random-teachers", metavar="DIR",
                   help="a record per teacher and the identifiability checks (default %(default)s)")
    p.add_argument("--seeds", type=int, default=10, metavar="N", help="teachers random:0 .. N-1 (default %(default)s)")
    p.add_argument("--sizes", default=None, metavar="LOW-HIGH",
                   help=f"their generated nodes: random:SEED:LOW-HIGH (default {RANDOM_SIZES[0]}-{RANDOM_SIZES[1]}, "
                        "random:SEED)")
    p.add_argument("--minimal", action="store_true",
                   help="teachers minimal:SEED[:LOW-HIGH]: the cells drawn that pass the minimality and conditioning "
                        "filters")
    p.add_argument("--weight-scale", type=float, default=2.0, help="teacher weight scale (default 2)")
    p.add_argument("--epochs", type=int, default=20, help="epochs of each fit (default %(default)s)")
    p.add_argument("--restarts", type=int, default=2, help="initialisations of each fit (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    for name, default in SIZES.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=f"(default {default})")
    p.add_argument("--factor", type=float, default=10.0,
                   help="a candidate's own val_mse is at most the GRU's / FACTOR (default %(default)g)")
    p.add_argument("--identify", type=int, default=0, metavar="K",
                   help="run the identifiability check on the K candidates of lowest ratio (default 0)")
    p.add_argument("--identify-fidelity", default=FIDELITY, metavar="E1,E2", help="(default %(default)s)")
    p.add_argument("--identify-limit", type=int, default=LIMIT, metavar="N", help="(default %(default)s)")
    p.add_argument("--table", action="store_true", help="run nothing: print the table")
    a = p.parse_args(argv)
    if min(a.seeds, a.epochs, a.restarts, *(getattr(a, k) for k in SIZES)) < 1 or a.identify < 0 or a.seed < 0:
        p.error("--seeds, --epochs, --restarts and the data sizes must be >= 1, --identify and --seed >= 0")
    if not a.factor > 0 or not a.weight_scale > 0:
        p.error("--factor and --weight-scale must be > 0")
    try:
        teachers = specs(a.seeds, a.sizes and random_sizes(a.sizes, f"--sizes {a.sizes}"), a.minimal)
        folder = Path(a.records)
        if not a.table:
            config = {"weight_scale": a.weight_scale, "epochs": a.epochs, "restarts": a.restarts, "seed": a.seed,
                      "data_seed": 0, "sizes": {k: getattr(a, k) for k in SIZES}}
            for line in screen(teachers, folder, config):
                print(line, flush=True)
            for name, args, _ in identify_runs(records(folder, teachers), a.identify, a.factor,
                                               a.identify_fidelity, a.identify_limit):
                print(run_one(folder, name, args, None), flush=True)
    except CellGraphError as err:
        p.exit(2, f"error: {err}\n")
    print(table(folder, teachers, a.factor))


if __name__ == "__main__":
    main()
