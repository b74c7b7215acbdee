r"""The paper's random hyper-parameter search, run with Optuna by any number of workers.

The paper tunes its GRU and RRNN-GRU models by "a random search on hyperparameters"
(Sec. 5), keeping the configuration with the best validation metric, over the ranges of
its Appendix tables (:data:`cellgraph.experiment.presets.SEARCH_RANGES`): integers uniformly, rates,
loss weights, margins and clipping log-uniformly. One trial = one training run; its value
is the run's final validation metric (bpc and perplexity minimised, accuracy maximised:
:data:`cellgraph.experiment.runlog.METRICS`).

How several workers share one storage (SQLite file or PostgreSQL) without losing or
repeating a trial, written against optuna 5's storage API:

1. *Drawing.* A random search needs no feedback, so all ``N`` configurations are drawn up
   front. The worker whose ``optuna.create_study`` succeeds (every other one gets
   ``DuplicatedStudyError`` and loads the study) records the search's settings as the
   study's user attribute ``cellgraph``, draws ``N`` configurations with a
   :class:`optuna.samplers.RandomSampler` seeded ``search_seed`` and adds them as WAITING
   trials with user attribute ``slot`` = 0..N-1, then sets ``ready``. Other workers wait
   for ``ready`` and refuse to join when their settings differ from the study's (the data
   folder, thread count and logger may differ: :data:`MACHINE_KEYS`).
2. *Claiming.* A worker claims a WAITING trial with
   ``storage.set_trial_state_values(trial_id, RUNNING)``, which returns False when the
   trial is no longer WAITING. PostgreSQL reads the row ``FOR UPDATE``, so only one worker
   sees it WAITING. SQLite ignores ``FOR UPDATE`` and pysqlite opens a transaction only at
   the first write, so two workers could both read WAITING and both win (measured: 3 of 200
   trials claimed twice by two processes); :func:`open_storage` makes every SQLite
   transaction ``BEGIN IMMEDIATE`` (SQLAlchemy's pysqlite recipe), which takes the write
   lock before the read, and sets a connect timeout so that the others wait for the lock
   instead of failing on "database is locked". The file is kept in write-ahead-log mode
   with ``synchronous=NORMAL`` (SQLite's "WAL mode"): a commit appends to ``NAME-wal``
   without waiting for the disk, 0.92 ms a commit against the rollback journal's 7.14
   (``benchmarks/storage_bench.py``, ``results/bench-storage.json``), and a killed process
   loses no committed trial (only a power cut can lose the last commits); readers no longer
   wait for a writer.
   WAL needs the processes on one machine, as SQLite's locks do.
3. *Dead workers.* While a trial trains, a thread records its heartbeat every
   ``heartbeat`` seconds (``RDBStorage.record_heartbeat``; optuna's own heartbeat thread
   runs only inside ``Study.optimize``). Before each claim a worker calls
   :func:`optuna.storages.fail_stale_trials`: a RUNNING trial without a heartbeat for
   ``grace`` seconds is failed and :class:`optuna.storages.RetryHeartbeatStaleTrialCallback`
   adds a WAITING copy with the same parameters and slot (at most ``retries`` times). The
   run folder is ``STUDY_DIR/trials/slot-SSSS``, so the copy resumes that training run
   from its last checkpoint (``train(..., resume=True)``) when it runs on a machine that
   sees the folder. A worker stopped by Ctrl-C leaves its trial RUNNING, to be re-queued in
   the same way once ``grace`` has passed.
4. *Failures.* A trial whose training raises (a bad configuration, ``max_bad_steps``
   non-finite losses in a row) is told FAIL with its error as user attribute ``error`` and
   is not retried by the workers; :func:`requeue_failed` (``cellgraph tune
   --requeue-failed``) queues the failed slots again once their cause is fixed.
5. *Stopping.* A worker stops when no trial is WAITING or RUNNING: every slot is then
   finished, so re-running the same command resumes an interrupted search and returns
   when it is complete.

This module imports no torch: trials train through the backend plugin of their ``backend``
setting (:func:`cellgraph.backend.training_backend`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import re
import socket
import threading
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import optuna
import sqlalchemy
from optuna.distributions import BaseDistribution, FloatDistribution, IntDistribution
from optuna.exceptions import DuplicatedStudyError, ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import MACHINE_KEYS, TrainConfig, load_run_config
from cellgraph.experiment.presets import SEARCH_RANGES
from cellgraph.experiment.runlog import METRICS

__all__ = [
    "MACHINE_KEYS", "search_space", "make_spec", "draw", "sqlite_url", "open_storage", "use_folder", "check_name",
    "shown", "open_study", "only_study", "load_study", "work", "metric", "best_trial", "trial_config",
    "summary", "trials_table", "write_toml", "release_memory",
]

Out = Callable[[str], None]

SPEC_ATTR, READY_ATTR = "cellgraph", "ready"
READY_WAIT_S = 60.0  # how long a joining worker waits for the creator to queue the trials
SQLITE_TIMEOUT_S = 600.0  # how long a worker waits for SQLite's write lock
OPEN_ATTEMPTS = 3  # workers that create a storage at once race on its tables: the losers retry
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence optuna's warnings that heartbeats and stale-trial retries are experimental."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        yield


# --- what is searched ------------------------------------------------------------------


def search_space(model: str, task: str, fixed: Iterable[str]) -> dict[str, tuple[float, float, str]]:
    """The ranges for ``model`` in the table of ``task`` (the paper's, or ours for full RRNN)
    without the ``fixed`` keys."""
    if (model, task) not in SEARCH_RANGES:
        known = ", ".join(f"{m} on {t}" for m, t in SEARCH_RANGES)
        raise CellGraphError(f"there are no search ranges for {model} on {task} (there are {known}); "
                             "choose one of these tables with --ranges TASK")
    fixed = set(fixed)
    space = {key: spec for key, spec in SEARCH_RANGES[(model, task)].items() if key not in fixed}
    if not space:
        raise CellGraphError(f"--set fixes every searched key ({', '.join(SEARCH_RANGES[(model, task)])}): "
                             "nothing is left to search")
    return space


def make_spec(base: TrainConfig, space: dict[str, tuple[float, float, str]], search_seed: int) -> dict[str, Any]:
    """The settings every worker of a study must share, as stored in the study (JSON)."""
    base_values = {key: value for key, value in base.to_dict().items() if key not in MACHINE_KEYS}
    return json.loads(json.dumps({"base": base_values, "space": space, "search_seed": search_seed}))


def _distribution(low: float, high: float, scale: str) -> BaseDistribution:
    if scale == "int":
        return IntDistribution(int(low), int(high))
    if scale == "log":
        return FloatDistribution(float(low), float(high), log=True)
    raise CellGraphError(f"unknown search scale {scale!r} (int or log)")


def _distributions(space: dict[str, Any]) -> dict[str, BaseDistribution]:
    return {key: _distribution(*spec) for key, spec in space.items()}


def draw(space: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` configurations drawn by optuna's :class:`~optuna.samplers.RandomSampler`
    seeded ``seed`` (in a throw-away in-memory study): the same seed gives the same draws."""
    scratch = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    distributions = _distributions(space)
    return [scratch.ask(distributions).params for _ in range(n)]


# --- storage and study -----------------------------------------------------------------


def sqlite_url(folder: str | Path) -> str:
    """The default storage: ``study.db`` in the study folder."""
    return f"sqlite:///{(Path(folder) / 'study.db').resolve()}"


def shown(url: str) -> str:
    """``url`` without its password."""
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url


def _sqlite_settings(engine: sqlalchemy.engine.Engine) -> None:
    """Make every SQLite transaction take the write lock at once (module docstring, 2):
    pysqlite's own BEGIN is switched off and SQLAlchemy's ``begin`` event emits
    ``BEGIN IMMEDIATE`` (SQLAlchemy docs, "Serializable isolation / Savepoints /
    Transactional DDL" for pysqlite); each connection also puts the file in WAL mode with
    ``synchronous=NORMAL`` (SQLite docs, "Write-Ahead Logging" and "PRAGMA synchronous")."""

    @sqlalchemy.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @sqlalchemy.event.listens_for(engine, "begin")
    def _begin(connection: sqlalchemy.engine.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # drop the connections opened before the hooks


def _stale_callback(grace: int, retries: int, out: Out) -> Callable[[Study, FrozenTrial], None]:
    """What optuna calls for a trial without a heartbeat for ``grace`` seconds: say so, and
    queue it again up to ``retries`` times."""
    with _quiet():
        retry = RetryHeartbeatStaleTrialCallback(max_retry=retries)

    def callback(study: Study, trial: FrozenTrial) -> None:
        requeued = len(trial.system_attrs.get("retry_history", [])) < retries
        out(f"slot {trial.user_attrs.get('slot')}: trial #{trial.number} had no heartbeat for {grace} s "
            + ("and is queued again" if requeued else f"and has been retried {retries} times: given up"))
        retry(study, trial)

    return callback


def open_storage(url: str, heartbeat: int | None = None, grace: int | None = None, retries: int = 0,
                 out: Out = print) -> RDBStorage:
    """An :class:`optuna.storages.RDBStorage` at ``url``; with ``heartbeat``, trials without a
    heartbeat for ``grace`` seconds are re-queued up to ``retries`` times (module docstring, 3)."""
    if heartbeat:
        grace = grace or 2 * heartbeat  # optuna's default
    callback = _stale_callback(grace, retries, out) if heartbeat else None

    sqlite = url.startswith("sqlite:")
    engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if sqlite else {}
    for attempt in range(OPEN_ATTEMPTS):
        try:
            with _quiet():
                storage = RDBStorage(url, engine_kwargs, heartbeat_interval=heartbeat, grace_period=grace,
                                     heartbeat_stale_trial_callback=callback)
            break
        except sqlalchemy.exc.DBAPIError as err:  # e.g. "table trials already exists"
            if attempt + 1 == OPEN_ATTEMPTS:
                raise CellGraphError(f"cannot open storage {shown(url)}: {err.orig}") from None
            time.sleep(0.5)
        except (ImportError, ValueError, sqlalchemy.exc.SQLAlchemyError) as err:
            cause = f" ({err.__cause__})" if err.__cause__ else ""  # optuna's ImportError hides the module
            raise CellGraphError(f"cannot open storage {shown(url)}: {err}{cause}") from None
    if sqlite:
        _sqlite_settings(storage.engine)
    return storage


def use_folder(folder: str | Path, name: str) -> Path:
    """Create the study folder, or check that it is ``name``'s: the slot folders under
    ``trials/`` of two studies would collide. ``study.json`` names the owner."""
    from cellgraph.files import read_json, write_json

    folder = Path(folder)
    marker = folder / "study.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            write_json(marker, {"study": name})
    except OSError as err:
        raise CellGraphError(f"study folder {folder} cannot be written: {err}") from None
    owner = read_json(marker)
    owner_name = owner.get("study") if isinstance(owner, dict) else None
    if owner_name != name:
        raise CellGraphError(f"{folder} holds the runs of study {owner_name}, not {name}: choose another --dir")
    return folder


def check_name(name: str) -> str:
    """A study name, which also names its folder: letters, digits, ``.``, ``_``, ``-``."""
    if not _NAME.fullmatch(name):
        raise CellGraphError(f"study name {name!r}: use letters, digits, '.', '_' and '-' "
                             "(not starting with '.' or '-')")
    return name


def _direction(spec: dict[str, Any]) -> str:
    return "minimize" if METRICS[spec["base"]["task"]][1] else "maximize"


def open_study(storage: RDBStorage, name: str, spec: dict[str, Any], slots: int | None,
               out: Out = print) -> Study:
    """Create the study and queue its ``slots`` configurations, or join it (module docstring, 1)."""
    if slots is not None:
        try:
            study = optuna.create_study(storage=storage, study_name=name, direction=_direction(spec))
        except DuplicatedStudyError:
            pass
        else:
            study.set_user_attr(SPEC_ATTR, {**spec, "slots": slots})
            distributions = _distributions(spec["space"])
            study.add_trials(
                optuna.create_trial(state=TrialState.WAITING, params=params, distributions=distributions,
                                    user_attrs={"slot": slot})
                for slot, params in enumerate(draw(spec["space"], slots, spec["search_seed"]))
            )
            study.set_user_attr(READY_ATTR, True)
            out(f"study {name}: {slots} configurations drawn (search seed {spec['search_seed']}) and queued")
            return study
    study = load_study(storage, name)
    stored = study.user_attrs[SPEC_ATTR]
    mine = {**spec, "slots": stored["slots"] if slots is None else slots}
    differences = _differences(stored, mine)
    if differences:
        raise CellGraphError(f"study {name} was started with other settings ({'; '.join(differences)}); "
                             "run the same command (only --data, --device, num_threads and logger may differ) "
                             "or use another --study")
    return study


def load_study(storage: RDBStorage, name: str) -> Study:
    """The existing study ``name``, once its creator has queued its trials."""
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = optuna.get_all_study_names(storage)
        raise CellGraphError(f"no study {name} in {shown(storage.url)} "
                             f"(it has: {', '.join(names) or 'none'}); start it with --trials N") from None
    deadline = time.monotonic() + READY_WAIT_S
    while not study.user_attrs.get(READY_ATTR):
        if time.monotonic() > deadline:
            raise CellGraphError(
                f"study {name} exists but its trials were never queued (the worker that created it stopped "
                f"at once?): delete it with `optuna delete-study --study-name {name} --storage URL` and start again"
            )
        time.sleep(0.2)
    return study


def only_study(storage: RDBStorage, name: str | None) -> str:
    """``name``, or the name of the storage's only study."""
    if name:
        return name
    names = optuna.get_all_study_names(storage)
    if len(names) != 1:
        raise CellGraphError(f"{shown(storage.url)} holds {len(names)} studies ({', '.join(names) or 'none'}): "
                             "choose one with --study NAME")
    return names[0]


def _differences(stored: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """``key: value in the study, value here`` for each setting that differs; a setting the
    study predates has its default there (as its trials train with it)."""
    def flat(spec: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in spec.items() if k != "base"}, **spec["base"]}

    defaults = {k: v for k, v in TrainConfig().to_dict().items() if k not in MACHINE_KEYS}
    ours, theirs = flat(mine), {**defaults, **flat(stored)}
    return [f"{key}: {theirs.get(key)!r} in the study, {ours.get(key)!r} here"
            for key in sorted(ours.keys() | theirs.keys()) if ours.get(key) != theirs.get(key)]


# --- workers ---------------------------------------------------------------------------


def trial_config(study: Study, trial: FrozenTrial, base: TrainConfig | None = None) -> TrainConfig:
    """The training settings of ``trial``: ``base`` (default: the study's recorded settings)
    with the trial's drawn values."""
    if base is None:
        base = TrainConfig(**study.user_attrs[SPEC_ATTR]["base"])
    return base.replace(**trial.params)


def metric(study: Study) -> str:
    """The name of the study's validation metric."""
    return METRICS[study.user_attrs[SPEC_ATTR]["base"]["task"]][0]


def best_trial(study: Study) -> FrozenTrial | None:
    """The complete trial with the best value, or None before the first one."""
    try:
        return study.best_trial
    except ValueError:
        return None


def _claim(storage: RDBStorage, waiting: list[FrozenTrial]) -> FrozenTrial | None:
    """The first of ``waiting`` this worker sets RUNNING before any other (module docstring, 2).

    The heartbeat is recorded before the claim, so a worker that dies right after claiming
    still leaves a trial that goes stale; if the claim fails, the trial's own worker renews
    that heartbeat anyway."""
    for trial in sorted(waiting, key=lambda t: t.number):
        storage.record_heartbeat(trial._trial_id)
        try:
            if storage.set_trial_state_values(trial._trial_id, TrialState.RUNNING):
                return trial
        except UpdateFinishedTrialError:
            continue
    return None


@contextlib.contextmanager
def _heartbeat(storage: RDBStorage, trial_id: int, interval: int, out: Out) -> Iterator[None]:
    """Record the trial's heartbeat every ``interval`` seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            try:
                storage.record_heartbeat(trial_id)
            except Exception as err:  # a database hiccup must not end the trial
                out(f"warning: heartbeat of trial id {trial_id} not recorded: {err}")

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _check_same_run(run_dir: Path, config: TrainConfig) -> None:
    """A slot folder left by an earlier attempt must hold a run of the same settings."""
    recorded = load_run_config(run_dir / "config.json").to_dict()
    wanted = config.to_dict()
    differing = [key for key in wanted if key not in MACHINE_KEYS and recorded[key] != wanted[key]]
    if differing:
        raise CellGraphError(f"{run_dir} holds a run with other settings ({', '.join(differing)}), "
                             "left by another search: move it away")


def release_memory() -> bool:
    """Hand the heap memory a finished trial freed back to the system (glibc's
    ``malloc_trim``). Without it a worker keeps the peak of its largest trial resident while
    it trains the next ones: 20 GB after a batch-282 full-RRNN trial of the Wiki-5k search.
    False where the C library has no ``malloc_trim`` (not glibc)."""
    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    trim(0)
    return True


def _train_trial(config: TrainConfig, run_dir: Path, title: str) -> float:
    """Train ``config`` into ``run_dir`` (resuming the run an earlier attempt left there),
    logging to ``run_dir/trial.log``; return the final validation metric."""
    from cellgraph.backend import training_backend
    from cellgraph.progress import disabled

    resume = (run_dir / "config.json").exists()
    if resume:
        _check_same_run(run_dir, config)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "trial.log", "a", encoding="utf-8") as log_file:

        def log(line: str) -> None:
            log_file.write(line + "\n")
            log_file.flush()

        log(f"== {title} on {socket.gethostname()} (pid {os.getpid()}): {'resuming' if resume else 'new run'}")
        try:
            with disabled():  # the trial's log is its file: no progress on the worker's stderr
                final = training_backend(config.backend).train(config, run_dir, resume=resume, log=log)
        except Exception:
            log(traceback.format_exc())
            raise
        finally:
            release_memory()
    value = final[f"val_{final['metric']}"]
    if not math.isfinite(value):
        raise CellGraphError(f"the validation {final['metric']} is {value}")
    return value


def _tell(study: Study, storage: RDBStorage, trial: FrozenTrial, value: float | None, attrs: dict[str, Any]) -> bool:
    """Record the user attributes ``attrs`` and the result; False when the trial was declared
    stale meanwhile (its copy is queued or running)."""
    state = TrialState.FAIL if value is None else TrialState.COMPLETE
    try:
        for key, attr in attrs.items():
            storage.set_trial_user_attr(trial._trial_id, key, attr)
        told = study.tell(trial.number, value, state=state, skip_if_finished=True)
    except UpdateFinishedTrialError:
        return False
    return told.state == state


def _run(study: Study, storage: RDBStorage, trial: FrozenTrial, base: TrainConfig, folder: Path,
         heartbeat: int, out: Out) -> None:
    slot = trial.user_attrs["slot"]
    trial_id = trial._trial_id
    storage.set_trial_user_attr(trial_id, "worker", f"{socket.gethostname()}:{os.getpid()}")
    start = time.perf_counter()
    value: float | None = None
    attrs: dict[str, Any] = {}
    with _heartbeat(storage, trial_id, heartbeat, out):
        try:
            value = _train_trial(trial_config(study, trial, base), folder / "trials" / f"slot-{slot:04d}",
                                 f"study {study.study_name}, trial #{trial.number}, slot {slot}")
        except Exception as err:  # any failure of this configuration fails the trial only
            attrs["error"] = str(err) if isinstance(err, CellGraphError) else f"{type(err).__name__}: {err}"
    seconds = attrs["seconds"] = time.perf_counter() - start
    if not _tell(study, storage, trial, value, attrs):
        out(f"slot {slot}: trial #{trial.number} was declared stale while it ran; its result is dropped")
        return
    if value is None:
        out(f"slot {slot}: failed ({attrs['error']}); {seconds:.1f} s")
        return
    best = best_trial(study)
    out(f"slot {slot}: val {metric(study)} {value:.4f}; best {best.value:.4f} (slot {best.user_attrs['slot']}); "
        f"{seconds:.1f} s")


def work(study: Study, storage: RDBStorage, base: TrainConfig, folder: str | Path, heartbeat: int,
         out: Out = print) -> None:
    """Claim and train WAITING trials until none is WAITING or RUNNING (module docstring)."""
    waiting_for: list[int] = []
    while True:
        with _quiet():
            fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        claimed = _claim(storage, [t for t in trials if t.state == TrialState.WAITING])
        if claimed is not None:
            _run(study, storage, claimed, base, Path(folder), heartbeat, out)
            continue
        running = sorted(t.user_attrs["slot"] for t in trials if t.state == TrialState.RUNNING)
        if not running:
            return
        if running != waiting_for:
            out(f"waiting for slot{'s' if len(running) > 1 else ''} {', '.join(map(str, running))} "
                "to finish on other workers (or to go without a heartbeat)")
            waiting_for = running
        time.sleep(heartbeat)


# --- reports ---------------------------------------------------------------------------


def latest_trials(study: Study) -> dict[int, FrozenTrial]:
    """Each slot's latest trial (a slot's state is its latest trial's), by slot."""
    latest: dict[int, FrozenTrial] = {}
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        latest[t.user_attrs["slot"]] = t
    return dict(sorted(latest.items()))


def failed_trials(study: Study) -> list[FrozenTrial]:
    """The latest trial of each slot whose latest trial FAILED, by slot."""
    return [t for t in latest_trials(study).values() if t.state == TrialState.FAIL]


def requeue_failed(study: Study) -> list[int]:
    """Queue again every slot whose latest trial FAILED: a WAITING copy with the same
    parameters and slot, for when what failed it (a missing data set, a broken install) has
    been fixed. The slot's run folder is kept, so the copy resumes its run from the last
    checkpoint. Returns the slots queued."""
    failed = failed_trials(study)
    study.add_trials(
        optuna.create_trial(state=TrialState.WAITING, params=t.params, distributions=t.distributions,
                            user_attrs={"slot": t.user_attrs["slot"]})
        for t in failed
    )
    return [t.user_attrs["slot"] for t in failed]


def summary(study: Study) -> str:
    """One line: how many slots are in each state (a slot's state is its latest trial's) and the best."""
    counts = Counter(t.state.name.lower() for t in latest_trials(study).values())
    text = (f"study {study.study_name}: {study.user_attrs[SPEC_ATTR]['slots']} slots, "
            + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    best = best_trial(study)
    if best is not None:
        text += f"; best val {metric(study)} {best.value:.4f} (slot {best.user_attrs['slot']}, trial #{best.number})"
    return text


def _format(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def trials_table(study: Study) -> str:
    """Every trial: slot, trial number, state, value, seconds, drawn values and a note."""
    keys = list(study.user_attrs[SPEC_ATTR]["space"])
    head = ["slot", "trial", "state", f"val {metric(study)}", "seconds", *keys, "note"]
    rows = [head]
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: (t.user_attrs.get("slot", -1), t.number)):
        note = t.user_attrs.get("error", "")
        if t.state == TrialState.FAIL and not note:
            note = "its worker stopped (no heartbeat)"
        seconds = t.user_attrs.get("seconds")
        rows.append([str(t.user_attrs.get("slot", "-")), f"#{t.number}", t.state.name,
                     "-" if t.value is None else f"{t.value:.4f}", "-" if seconds is None else f"{seconds:.1f}",
                     *(_format(t.params[k]) if k in t.params else "-" for k in keys), note[:70]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _toml_value(value: Any) -> str:
    """One TOML scalar (TOML 1.0: basic strings escape ``"``, ``\\`` and control characters)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = "".join(
        "\\" + ch if ch in '"\\' else f"\\u{ord(ch):04X}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch
        for ch in str(value)
    )
    return f'"{text}"'


def write_toml(path: str | Path, config: TrainConfig, header: list[str]) -> None:
    """``config`` as a flat TOML file that ``cellgraph train --config`` reads, without the
    :data:`MACHINE_KEYS`, under ``header`` comment lines."""
    from cellgraph.files import atomic_write

    lines = [f"# {line}" for line in header]
    lines += [f"{key} = {_toml_value(value)}" for key, value in config.to_dict().items() if key not in MACHINE_KEYS]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))
