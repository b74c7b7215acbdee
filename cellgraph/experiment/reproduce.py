"""Table 1's protocol as data, and the plan of ``cellgraph reproduce``.

The protocol (docs/reproduce.md) gives every experiment of the paper's Table 1 (Sec. 5) the
same treatment for the RRNN model and the GRU beside it:

1. **Tuning with equal budgets**: a random search (``cellgraph tune``) of the same number of
   trials over each model's ranges (Appendix tables; :data:`~cellgraph.experiment.presets.SEARCH_RANGES`),
   every trial trained on the experiment's *proxy* (fewer epochs and a share of the training
   set, the same for both models).
2. **Best configuration**: the best trial's settings trained on the full data, one run per seed,
   up to the experiment's epoch cap (the same for both models; early stopping on validation).
3. **The paper's optimum**: the ``paper-*`` preset of each model, one run per seed, as a row of
   its own.

RRNN runs select their checkpoint on the soft mixture (:data:`MIXTURE`, the search the paper's
numbers measure) and record both search modes of it (``final.json``). RRNN-GRU takes its
TD targets from a teacher: the preset GRU run of the same seed (seed 0 for search trials).
The planted task (not in the paper) trains each model with fixed settings (the demo's, on all
of the task's data) and reports the share of cells that recover the teacher's shape.

Everything here is plain data and pure functions; :mod:`cellgraph.experiment.jobs` runs a plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cellgraph.errors import CellGraphError

__all__ = ["Arm", "Experiment", "Job", "MIXTURE", "PROTOCOL", "PLANTED", "PLANTED_MODELS", "SEEDS", "TRIALS",
           "plan", "experiments"]

#: Seeds of every row (Table 1: mean and sample std over them).
SEEDS = (0, 1, 2)
#: Trials of each model's search (the issue's minimum: at least 8, equal for both models).
TRIALS = 8

#: The planted experiment's settings for every model (``cellgraph demo`` trains them too).
PLANTED: dict[str, Any] = {"hidden_size": 16, "batch_size": 32, "lambda_td": 1e-2, "lambda_margin": 1e-3,
                           "lambda_l2": 1e-6, "log_structures": 32}
#: model -> settings on top of :data:`PLANTED`; for rrnn, those under which the argmax cells
#: agree with the trained mixture on planted (docs/results-history.md, "Temperature in units of the
#: score spread").
PLANTED_MODELS: dict[str, dict[str, Any]] = {
    "rrnn": {"n_iterations": 9, "scoring_hidden": 32, "mode": "soft", "lr": 3e-3,
             "candidate_norm": "sample", "tau_end": 0.01, "tau_units": "std", "lambda_margin": 0.1},
    "rrnn-gru": {"scoring_hidden": 16, "mode": "soft", "lr": 3e-3, "alternate_every": 2, "tau_end": 0.1},
    "gru": {"lr": 3e-3},
}

#: The full RRNN's search settings, which the paper does not give: candidates normalised per
#: sample, tau annealed to 0.01 in units of the score spread (docs/results-history.md, "Temperature
#: in units of the score spread"). Fixed in every full RRNN run; the loss weights stay the preset's or
#: the search's.
FULL_RRNN = {"candidate_norm": "sample", "tau_end": 0.01, "tau_units": "std"}

#: What selects an RRNN row's checkpoint (early stopping, the best epoch) and ranks its search's
#: trials: the soft mixture's validation metric. The paper's RRNN and RRNN-GRU numbers are those of
#: its authors' code, which mixes the candidates in validation as in training and never runs
#: Algorithm 2's argmax (docs/paper-notes.md, *Which search the paper's numbers measure*); the
#: argmax's metric of the same checkpoint is in the table beside it.
MIXTURE = {"eval_mode": "soft"}


@dataclass(frozen=True)
class Arm:
    """One model of an experiment.

    ``preset``: the paper's optimum (a row of its own), also the base of the search;
    ``settings``: on top of the preset in every run of this arm; ``ranges``: the task whose
    search table is used (``None``: the arm is not searched, its settings are the row)."""

    model: str
    preset: str | None
    settings: Mapping[str, Any] = field(default_factory=dict)
    ranges: str | None = None

    @property
    def own_row(self) -> str | None:
        """The record kind of the arm's own row: ``preset`` (the paper's optimum), ``fixed``
        (no preset: its settings are the row), or None for an arm that is only searched (no
        preset, ``ranges``). A searched arm also has the row ``best``."""
        if self.preset is None and self.ranges is not None:
            return None
        return "preset" if self.preset else "fixed"


@dataclass(frozen=True)
class Experiment:
    """A row pair of Table 1: ``arms`` trained on ``task``; ``proxy`` are the settings of every
    search trial, ``full`` those of every final run (both the same for every arm)."""

    name: str
    task: str
    arms: tuple[Arm, ...]
    proxy: Mapping[str, Any]
    full: Mapping[str, Any]


_GRU_PROXY = {"max_train": 2000, "max_eval": 300, "epochs": 2}

#: The experiments of Table 1 plus planted. Epoch caps are our compute, not the paper's (it
#: gives none); the proxies are a share of the training set for two epochs (one for full RRNN,
#: whose epoch costs tens of CPU-minutes on Wiki-5k).
PROTOCOL: tuple[Experiment, ...] = (
    Experiment("wiki5k", "wiki5k", (
        Arm("rrnn", "paper-wiki5k-rrnn", {**FULL_RRNN, **MIXTURE}, "wiki5k"),
        Arm("gru", "paper-wiki5k-gru", {}, "wiki"),
    ), proxy={"max_train": 1000, "max_eval": 300, "epochs": 1}, full={"epochs": 3}),
    Experiment("wiki", "wiki", (
        Arm("rrnn-gru", "paper-wiki10k-rrnn-gru", MIXTURE, "wiki"),
        Arm("gru", "paper-wiki10k-gru", {}, "wiki"),
    ), proxy=_GRU_PROXY, full={"epochs": 8}),
    Experiment("sst", "sst", (
        Arm("rrnn-gru", "paper-sst-rrnn-gru", MIXTURE, "sst"),
        Arm("gru", "paper-sst-gru", {}, "sst"),
    ), proxy=_GRU_PROXY, full={"epochs": 5}),
    Experiment("ptb", "ptb", (
        Arm("rrnn-gru", "paper-ptb-rrnn-gru", MIXTURE, "ptb"),
        Arm("gru", "paper-ptb-gru", {}, "ptb"),
    ), proxy=_GRU_PROXY, full={"epochs": 5}),
    Experiment("planted", "planted", tuple(Arm(model, None, {**PLANTED, **settings})
                                           for model, settings in PLANTED_MODELS.items()),
               proxy={}, full={"epochs": 8}),
)


@dataclass(frozen=True)
class Job:
    """One step of the plan: ``cellgraph`` commands run in order into ``folder``.

    ``steps`` start the job; ``resume`` continues one whose folder exists (``None``: run
    ``steps`` again, which resumes on its own, as ``cellgraph tune`` does). ``needs`` are the
    names of jobs that must be done first; ``record`` names the job's records folder."""

    name: str
    folder: Path
    steps: tuple[tuple[str, ...], ...]
    needs: tuple[str, ...] = ()
    resume: tuple[str, ...] | None = None
    record: str = ""

    @property
    def experiment(self) -> str:
        """The experiment the job belongs to: its name's first part (``wiki`` of ``wiki/best-gru-s0``)."""
        return self.name.split("/", 1)[0]

    @property
    def marker(self) -> Path:
        """The file that exists when the job is done (``final.json``, a search's ``best.toml``)."""
        return self.folder / ("best.toml" if self.resume is None else "final.json")

    def done(self) -> bool:
        return self.marker.is_file()

    def started(self) -> bool:
        return (self.folder / "config.json").is_file()

    def commands(self) -> tuple[tuple[str, ...], ...]:
        """What to run now: ``resume`` for a started run, else ``steps``."""
        return (self.resume,) if self.resume is not None and self.started() else self.steps


def experiments(only: Sequence[str] = ()) -> tuple[Experiment, ...]:
    """The experiments named in ``only`` (all when empty), in protocol order."""
    names = [e.name for e in PROTOCOL]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise CellGraphError(f"unknown experiment {', '.join(unknown)} (the protocol has {', '.join(names)})")
    return tuple(e for e in PROTOCOL if not only or e.name in only)


def _sets(*layers: Mapping[str, Any]) -> list[str]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return [arg for key, value in merged.items() for arg in ("--set", f"{key}={_text(value)}")]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class _Plan:
    """What every job of one plan shares: its root folder, the overrides and the data flag."""

    root: Path
    sets: Mapping[str, Any]
    data: tuple[str, ...]

    def train(self, exp: Experiment, run: str, base: tuple[str, ...], layers: Sequence[Mapping[str, Any]],
              needs: tuple[str, ...]) -> Job:
        folder = self.root / exp.name / run
        steps = (("train", *base, *_sets(*layers, self.sets), *self.data, "--out", str(folder)),)
        return Job(f"{exp.name}/{run}", folder, steps, needs, ("train", "--resume", str(folder), *self.data),
                   f"{exp.name}-{run}")

    def teacher(self, exp: Experiment, arm: Arm, seed: int) -> tuple[dict[str, str], tuple[str, ...]]:
        """The teacher setting of ``arm``'s run of ``seed`` and the job it needs: rrnn-gru
        learns TD from the preset GRU run of the same seed (where the experiment has one)."""
        if arm.model != "rrnn-gru" or not any(a.model == "gru" and a.preset for a in exp.arms):
            return {}, ()
        run = f"preset-gru-s{seed}"
        return {"teacher": str(self.root / exp.name / run)}, (f"{exp.name}/{run}",)

    def rows(self, exp: Experiment, arm: Arm, seeds: Sequence[int]) -> list[Job]:
        """The preset (or fixed-settings) row of ``arm``: one run per seed on the full data."""
        base = ("--preset", arm.preset) if arm.preset else ()
        jobs = []
        for seed in seeds:
            teacher, needs = self.teacher(exp, arm, seed)
            run = f"{arm.own_row}-{arm.model}-s{seed}"
            layers = [{"task": exp.task, "model": arm.model}, arm.settings, exp.full, {"seed": seed}, teacher]
            jobs.append(self.train(exp, run, base, layers, needs))
        return jobs

    def search(self, exp: Experiment, arm: Arm, seeds: Sequence[int], trials: int) -> list[Job]:
        """``arm``'s search on the proxy, then its best settings on the full data per seed."""
        folder, study = self.root / exp.name / f"search-{arm.model}", f"{exp.name}-{arm.model}"
        teacher, needs = self.teacher(exp, arm, 0)
        base = ("--preset", arm.preset) if arm.preset else ()
        search = ("tune", "--task", exp.task, "--model", arm.model, "--ranges", str(arm.ranges),
                  "--trials", str(trials), "--study", study, "--dir", str(folder), *base,
                  *_sets(arm.settings, exp.proxy, teacher, self.sets), *self.data)
        best = ("tune", "--study", study, "--dir", str(folder), "--best", "--export", str(folder / "best.toml"))
        jobs = [Job(f"{exp.name}/search-{arm.model}", folder, (search, best), needs,
                    record=f"{exp.name}-search-{arm.model}")]
        full = {key: 0 for key in exp.proxy if key.startswith("max_")} | dict(exp.full)
        for seed in seeds:
            teacher, needs = self.teacher(exp, arm, seed)
            jobs.append(self.train(exp, f"best-{arm.model}-s{seed}", ("--config", str(folder / "best.toml")),
                                   [full, {"seed": seed}, teacher], (jobs[0].name, *needs)))
        return jobs


def plan(root: str | Path, exps: Sequence[Experiment] = PROTOCOL, seeds: Sequence[int] = SEEDS,
         trials: int = TRIALS, sets: Mapping[str, Any] | None = None, data: str | None = None) -> list[Job]:
    """Every job of the protocol for ``exps`` under ``root``, GRU rows first (RRNN-GRU's
    teachers). ``sets`` override every run's settings (``num_threads``, ``device``, a smaller
    model in tests); ``data`` is the data folder passed to every command."""
    p = _Plan(Path(root), dict(sets or {}), ("--data", data) if data else ())
    jobs: list[Job] = []
    for exp in exps:
        for arm in sorted(exp.arms, key=lambda a: a.model != "gru"):
            if arm.own_row:
                jobs += p.rows(exp, arm, seeds)
        for arm in exp.arms:
            if arm.ranges is not None:
                jobs += p.search(exp, arm, seeds, trials)
    return jobs
