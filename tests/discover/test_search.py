import json
import random
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest

from cellgraph.discover.cache import cell_from_json, cell_hash
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.ledger import is_evaluation
from cellgraph.discover.search import History, best_trials, discover
from cellgraph.discover.space import CellSpace, from_cell
from cellgraph.discover.storage import open_search_storage
from cellgraph.discover.strategies import RandomSearch, Record, RegularizedEvolution
from cellgraph.discover.synthetic import StructureEvaluator
from cellgraph.errors import CellGraphError
from tests.discover.cells import small
from tests.discover.test_ledger import _step
from tests.discover.worker import SMALL, LoggingEvaluator

ROOT = Path(__file__).resolve().parents[2]
optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_the_cache_trains_each_structure_once_and_counts_the_duplicates(tmp_path):
    evaluator = LoggingEvaluator(str(tmp_path / "log"), sleep=0)
    result = discover(SMALL, evaluator, RandomSearch(), 60, seed=1, show_progress=False)
    calls = Counter((tmp_path / "log").read_text().split())
    assert max(calls.values()) == 1  # fails without the cache: random draws in SMALL repeat
    assert result.duplicates > 0 and result.trained == len(calls) == 60
    assert result.evaluations == 60 and result.trials == 60 + result.duplicates


def test_successive_halving_spends_exactly_the_budget_and_prunes(tmp_path):
    evaluator = LoggingEvaluator(str(tmp_path / "log"), sleep=0)
    fidelity = Fidelity.successive_halving(1, 3, 3)
    result = discover(SMALL, evaluator, RandomSearch(), 10, fidelity=fidelity, show_progress=False, run_dir=tmp_path)
    study = optuna.load_study(study_name="discover", storage=f"sqlite:///{tmp_path / 'study.db'}")
    states = Counter(t.state.name for t in study.get_trials() if "duplicate_of" not in t.user_attrs)
    assert states["PRUNED"] > states["COMPLETE"] > 0
    assert result.evaluations == 10 == sum(t.user_attrs.get("spent", 0) for t in study.get_trials()) / 9
    assert json.loads((tmp_path / "result.json").read_text())["evaluations"] == 10
    recorded = json.loads((tmp_path / "discover.json").read_text())
    assert recorded["fidelity"]["epochs"] == [1, 3, 9] and "optuna" in recorded["versions"]


def test_probe_rungs_train_every_candidate_and_fill_its_early_losses(tmp_path):
    evaluator = LoggingEvaluator(str(tmp_path / "log"), sleep=0)
    fidelity = Fidelity((1, 3, 9), 3, probes=1)
    discover(SMALL, evaluator, RandomSearch(), 10, fidelity=fidelity, show_progress=False, run_dir=tmp_path)
    trials = [t for t in optuna.load_study(study_name="discover", storage=f"sqlite:///{tmp_path / 'study.db'}")
              .get_trials() if "duplicate_of" not in t.user_attrs and t.intermediate_values]
    # every candidate trains through the probe; successive halving prunes from the next rung on
    assert all(3 in t.intermediate_values for t in trials if t.user_attrs.get("budget") is None)
    assert 0 < sum(9 in t.intermediate_values for t in trials) < len(trials)
    records = [Record.from_trial(t, cell_from_json(t.user_attrs["cell"]), fidelity.early) for t in trials]
    assert all(r.early == (t.intermediate_values[1], t.intermediate_values[3]) for r, t in zip(records, trials)
               if t.user_attrs.get("budget") is None)


def _worker(storage: str, worker: int, budget: int, log: Path, kill_at: int | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.discover.worker", storage, str(worker), str(budget), str(log)]
    return subprocess.Popen(args + ([str(kill_at)] if kill_at else []), cwd=ROOT)


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_two_workers_share_one_search_and_never_train_a_hash_twice(tmp_path, kind):
    storage = f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else f"journal:{tmp_path / 'study.log'}"
    discover(SMALL, LoggingEvaluator(str(tmp_path / "first")), RandomSearch(), 1, storage=storage,
             show_progress=False)  # create the study before the workers race on it
    log = tmp_path / "log"
    workers = [_worker(storage, w, 40, log) for w in (1, 2)]
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    calls = Counter(log.read_text().split())
    assert max(calls.values()) == 1 and sum(calls.values()) == 39


def test_a_worker_joining_a_study_keeps_its_files_in_a_folder_it_makes(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    discover(SMALL, LoggingEvaluator(str(tmp_path / "log"), sleep=0), RandomSearch(), 3, storage=storage,
             show_progress=False)
    joined = tmp_path / "workers" / "1"  # fails when only a run folder holding the study is made
    result = discover(SMALL, LoggingEvaluator(str(tmp_path / "log"), sleep=0), RandomSearch(), 6, storage=storage,
                      worker=1, run_dir=joined, show_progress=False)
    assert json.loads((joined / "discover.json").read_text())["worker"] == 1 and not (joined / "study.db").exists()
    assert json.loads((joined / "result.json").read_text())["evaluations"] == result.evaluations == 6


class Shown:
    """A progress line that records the epochs it was shown."""

    disable = False

    def __init__(self, total, desc, show=True, unit="steps", stream=None, initial=0):
        self.n = initial

    def update(self, n=1):
        self.n += n

    def set_postfix(self, **values):
        pass

    def close(self):
        pass


class Joining(LoggingEvaluator):
    """Worker 0's evaluator: while it trains its first cell, worker 1 runs the study to its end."""

    def __init__(self, log: str, storage: str, budget: int, fidelity: Fidelity) -> None:
        super().__init__(log, sleep=0)
        self.storage, self.budget, self.fidelity = storage, budget, fidelity

    def evaluate(self, cell, layout, epochs, seed):
        if self.calls == 0:
            discover(SMALL, LoggingEvaluator(self.log, sleep=0), RandomSearch(), self.budget, fidelity=self.fidelity,
                     storage=self.storage, worker=1, show_progress=False)
        return super().evaluate(cell, layout, epochs, seed)


def test_a_workers_progress_line_counts_every_workers_epochs(tmp_path, monkeypatch):
    bars = []
    monkeypatch.setattr("cellgraph.discover.search.progress", lambda *a, **k: bars.append(Shown(*a, **k)) or bars[-1])
    storage, fidelity = f"sqlite:///{tmp_path / 'study.db'}", Fidelity((1, 3))
    result = discover(SMALL, Joining(str(tmp_path / "log"), storage, 12, fidelity), RandomSearch(), 12,
                      fidelity=fidelity, storage=storage, show_progress=False)
    assert len(bars) == 2  # worker 1 ran inside worker 0's first rung
    assert bars[0].n == result.evaluations * fidelity.full == 36  # fails when it counts its own epochs alone


def test_a_killed_search_resumes_from_its_study_and_ends_with_exactly_the_budget(tmp_path):
    storage, log = f"sqlite:///{tmp_path / 'study.db'}", tmp_path / "log"
    assert _worker(storage, 0, 30, log, kill_at=12).wait(timeout=120) == -9
    before = len(log.read_text().split())
    assert before == 11
    result = discover(SMALL, LoggingEvaluator(str(log)), RandomSearch(), 30, storage=storage, show_progress=False)
    study = optuna.load_study(study_name="discover", storage=storage)
    stopped = [t for t in study.get_trials() if "stopped" in t.user_attrs]
    assert len(stopped) == 1 and stopped[0].state.name == "FAIL"
    assert result.evaluations == 30 and len(log.read_text().split()) == 30


def test_each_finished_trial_is_read_into_a_record_once(tmp_path, monkeypatch):
    read = Counter()
    from_trial = Record.from_trial.__func__

    def counted(cls, trial, *args):
        read[trial.number] += 1
        return from_trial(cls, trial, *args)

    monkeypatch.setattr(Record, "from_trial", classmethod(counted))
    result = discover(SMALL, LoggingEvaluator(str(tmp_path / "log"), sleep=0), RandomSearch(), 40, seed=1,
                      show_progress=False)
    assert result.trials > 40 and len(read) >= result.trials - 1  # every trial but the last was read
    assert set(read.values()) == {1}  # fails when each proposal reads the whole study again


def test_the_kept_history_is_the_records_of_every_finished_trial_in_order_as_trials_finish_out_of_order():
    rng, fidelity = random.Random(2), Fidelity((1, 5))
    study, running, history = optuna.create_study(), [], History(fidelity)
    for step in range(300):
        _step(study, running, rng)
        if step % 2:
            continue
        trials = study.get_trials(deepcopy=False)
        full = [Record.from_trial(t, cell_from_json(t.user_attrs["cell"]), fidelity.early, fidelity.epochs)
                for t in trials if t.state.is_finished() and (is_evaluation(t) or "duplicate_of" in t.user_attrs)]
        kept = history(trials)
        assert kept == full and [r.rungs for r in kept] == [r.rungs for r in full]  # fails when a late finisher is lost
    assert running and len(history.records) > 50
    with pytest.raises(CellGraphError, match="give it the study's trials"):
        history(study.get_trials()[:10])


def test_a_search_study_commits_to_a_write_ahead_log_without_waiting_for_the_disk(tmp_path):
    discover(SMALL, LoggingEvaluator(str(tmp_path / "log"), sleep=0), RandomSearch(), 3, show_progress=False,
             run_dir=tmp_path)
    with sqlite3.connect(tmp_path / "study.db") as connection:  # the mode is the file's, read by any reader
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    storage = open_search_storage(None, tmp_path)
    with storage.engine.connect() as connection:  # the search's own connections: synchronous=NORMAL (1)
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1


def test_a_worker_with_other_settings_is_refused(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    discover(SMALL, LoggingEvaluator(str(tmp_path / "log")), RandomSearch(), 2, storage=storage, show_progress=False)
    with pytest.raises(CellGraphError, match="other settings"):
        discover(CellSpace(), LoggingEvaluator(str(tmp_path / "log")), RandomSearch(), 2, storage=storage,
                 show_progress=False)


SPACE = CellSpace(max_nodes=6)
BUDGET = 150


def test_evolution_finds_better_cells_than_random_search_with_the_same_budget():
    """On the structural loss of a hidden 4-node cell, regularized evolution ends with a lower
    best loss than random search for each of 3 seeds."""
    target = small()
    key = cell_hash(target)
    for seed in range(3):
        best = {}
        for strategy in (RegularizedEvolution(20, 5), RandomSearch()):
            result = discover(SPACE, StructureEvaluator(target), strategy, BUDGET, seed=seed, target_hash=key,
                              show_progress=False)
            assert result.evaluations == BUDGET
            best[strategy.name] = result.best[0].loss
        assert best["evolution"] < best["random"], (seed, best)


def test_a_recovered_target_is_reported_with_its_cost():
    """Seeded with the target itself, evolution reports it as found at its first trial."""
    target = small()
    result = discover(SPACE, StructureEvaluator(target), RegularizedEvolution(4, 2, (target,)), 5,
                      target_hash=cell_hash(target), show_progress=False)
    assert result.target is not None and result.target.trial == 0 and result.target.evaluations == 1
    assert result.best[0].hash == cell_hash(target) == cell_hash(cell_from_json(result.best[0].cell))


class Reporting(StructureEvaluator):
    """Reports the epochs it was called with, as an evaluator's ``last_details``."""

    def evaluate(self, cell, layout, epochs, seed):
        self.last_details = {"epochs_seen": epochs, "raw": 1.5}
        return super().evaluate(cell, layout, epochs, seed)


def test_what_the_evaluator_reports_is_recorded_per_trial_and_carried_by_the_best(tmp_path):
    result = discover(SMALL, Reporting(small()), RandomSearch(), 4, fidelity=Fidelity((2,)), show_progress=False,
                      run_dir=tmp_path)
    assert result.best and all(f.details == {"epochs_seen": 2, "raw": 1.5} for f in result.best)
    study = optuna.load_study(study_name="discover", storage=f"sqlite:///{tmp_path / 'study.db'}")
    trained = [t for t in study.get_trials() if "duplicate_of" not in t.user_attrs]
    assert all(t.user_attrs["epochs_seen"] == 2 for t in trained)


def test_a_worker_with_other_evaluator_settings_is_refused(tmp_path):
    discover(SMALL, StructureEvaluator(small()), RandomSearch(), 2, run_dir=tmp_path, show_progress=False,
             settings={"parsimony": 0.001})
    with pytest.raises(CellGraphError, match="evaluator"):
        discover(SMALL, StructureEvaluator(small()), RandomSearch(), 3, run_dir=tmp_path, show_progress=False,
                 settings={"parsimony": 0.01})


def test_local_search_from_a_seed_climbs_through_neighbours_to_the_target():
    """One change from the seed is the target: local search proposes the seed, then neighbours of
    the best cell so far (each proposal one change from an earlier trial), and reaches the target
    (loss 0) within a few neighbourhoods; random search with the same budget does not."""
    import random

    from cellgraph.discover.mutations import neighbours
    from cellgraph.discover.strategies import LocalSearch, Record

    space, target_cell = CellSpace(max_nodes=6), small()
    start = next(child for name, child in neighbours(target_cell, space) if name.startswith("activation"))
    budget = 3 * len(neighbours(start, space))
    result = discover(space, StructureEvaluator(target_cell, noise=0.0), LocalSearch(seeds=(start,)), budget, seed=0,
                      show_progress=False, target_hash=cell_hash(target_cell))
    assert result.target is not None and result.target.evaluations <= budget
    assert cell_hash(cell_from_json(result.best[0].cell)) == cell_hash(target_cell)
    cold = discover(space, StructureEvaluator(target_cell, noise=0.0), RandomSearch(), budget, seed=0,
                    show_progress=False, target_hash=cell_hash(target_cell))
    assert cold.target is None
    # stateless: a history of the seed alone gives one of the seed's neighbours, its parent the seed
    around = {cell_hash(child) for _, child in neighbours(start, space)}
    proposal = LocalSearch(seeds=(start,)).propose([Record(0, start, cell_hash(start), 1.0, True)], space,
                                                   random.Random(0), Counter())
    assert cell_hash(proposal.root) in around and proposal.parent == 0


def test_local_search_starts_from_random_cells_then_climbs():
    import random

    from cellgraph.discover.strategies import LocalSearch, Record

    space, rng = CellSpace(max_nodes=6), random.Random(0)
    strategy = LocalSearch(starts=3)
    first = [strategy.propose([], space, rng, Counter()) for _ in range(2)]
    assert all(p.origin == "random" for p in first)
    history = [Record(k, p.root, cell_hash(p.root), float(k), True) for k, p in enumerate(first)]
    history.append(Record(2, first[0].root, "x", None, False))  # a failed trial counts as started
    climb = strategy.propose(history, space, rng, Counter())
    assert climb.parent == 0 and climb.origin != "random"  # the best record is the centre
    with pytest.raises(CellGraphError, match="starts must be >= 1"):
        LocalSearch(starts=0)


def test_local_search_with_motifs_tries_the_motif_moves_of_a_centre_before_its_single_changes():
    import random

    from cellgraph.discover.mutations import MOTIFS, neighbours
    from cellgraph.discover.strategies import LocalSearch, Record
    from cellgraph.targets import target

    rnn = target("rnn")
    seed = from_cell(rnn.cell, rnn.layout)
    space, rng, strategy = CellSpace(), random.Random(0), LocalSearch(seeds=(seed,), motifs=True)
    motifs = sum(1 for name, _ in neighbours(seed, space, True) if name.split()[0] in MOTIFS)
    history = [Record(0, seed, cell_hash(seed), 1.0, True)]
    origins = []
    for k in range(motifs + 2):
        proposal = strategy.propose(history, space, rng, Counter())
        origins.append(proposal.origin)
        history.append(Record(k + 1, proposal.root, cell_hash(proposal.root), 2.0, True))
    assert motifs >= 3 and set(origins[:motifs]) <= set(MOTIFS) and not set(origins[motifs:]) & set(MOTIFS)


def test_first_improvement_moves_the_centre_before_its_neighbourhood_is_scanned():
    import random

    from cellgraph.discover.mutations import neighbours
    from cellgraph.discover.strategies import LocalSearch, Record

    space, target_cell = CellSpace(max_nodes=6), small()
    start = next(child for name, child in neighbours(target_cell, space) if name.startswith("activation"))
    better = next(child for _, child in neighbours(start, space))
    history = [Record(0, start, cell_hash(start), 1.0, True), Record(1, better, cell_hash(better), 0.5, True)]
    around_better = {cell_hash(child) for _, child in neighbours(better, space)}
    first = LocalSearch(seeds=(start,), first_improvement=True).propose(history, space, random.Random(0), Counter())
    assert first.parent == 1 and cell_hash(first.root) in around_better
    scan = LocalSearch(seeds=(start,)).propose(history, space, random.Random(0), Counter())
    assert scan.parent == 0  # best improvement: the start's other neighbours first
    worse = [history[0], Record(1, better, cell_hash(better), 2.0, True)]
    assert LocalSearch(seeds=(start,), first_improvement=True).propose(worse, space, random.Random(0),
                                                                       Counter()).parent == 0


def test_local_search_settings_name_first_improvement_only_when_on_so_earlier_studies_resume():
    from cellgraph.discover.strategies import LocalSearch

    assert LocalSearch(motifs=True).to_dict() == {"name": "local", "starts": 10, "seeds": 0, "motifs": True}
    assert LocalSearch(first_improvement=True).to_dict()["first_improvement"] is True


def _trial(number, hash_, value, state=optuna.trial.TrialState.COMPLETE):
    trial = optuna.trial.create_trial(value=value if state == optuna.trial.TrialState.COMPLETE else None,
                                      state=state, user_attrs={"hash": hash_})
    trial.number = number
    return trial


def test_best_trials_keeps_one_trial_per_structure_lowest_objective_first_and_ties_to_the_earlier():
    trials = [_trial(0, "a", 3.0), _trial(1, "b", 1.0), _trial(2, "a", 3.0), _trial(3, "c", 2.0),
              _trial(4, "d", 0.5, optuna.trial.TrialState.PRUNED), _trial(5, "e", 1.0)]
    assert [t.number for t in best_trials(trials, 10)] == [1, 5, 3, 0]
    assert [t.number for t in best_trials(trials, 2)] == [1, 5]
