import random
import socket
import sqlite3

import optuna
import pytest

from cellgraph.discover.cache import cell_hash
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.intensify import Board, Fit, Verdict, race_seeds
from cellgraph.discover.search import discover
from cellgraph.discover.space import from_cell, sample_cell
from cellgraph.discover.strategies import RegularizedEvolution
from cellgraph.errors import CellGraphError
from tests.discover.worker import SMALL

optuna.logging.set_verbosity(optuna.logging.WARNING)
COMPLETE, FAIL = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL


def _trial(number, value=None, state=COMPLETE, **attrs):
    trial = optuna.trial.create_trial(value=value if state == COMPLETE else None, state=state, user_attrs=attrs)
    trial.number = number
    return trial


def test_race_seeds_start_at_the_search_seed():
    assert race_seeds(4, 3) == (4, 5, 6) and race_seeds(0, 1) == (0,)
    with pytest.raises(CellGraphError, match="race seeds"):
        Fidelity((5,), seeds=0)
    assert Fidelity.from_dict(Fidelity((5, 20), 3, seeds=3).to_dict()).seeds == 3
    assert "seeds" not in Fidelity((5, 20), 3).to_dict()  # studies made before races resume


def test_the_board_reads_fits_the_incumbent_and_the_next_step_of_a_race():
    seeds = (0, 1, 2)
    trials = [_trial(0, 0.10, hash="t"), _trial(1, 0.0, fit_of=0, fit_seed=1), _trial(2, 0.2, fit_of=0, fit_seed=2),
              _trial(3, 0.05, hash="l"), _trial(4, state=FAIL, fit_of=3, fit_seed=1, stopped="worker gone")]
    board = Board(trials, {"spec": {}}, seeds)
    assert board.incumbent is None  # no verdict written yet
    assert board.fits == {0: {0: 0.10, 1: 0.0, 2: 0.2}, 3: {0: 0.05}}  # a stopped fit is not a fit
    assert board.next(0) == Verdict(0, True)  # no incumbent: the first with all S fits wins
    attrs = {"race:0": {"won": True, "end": 2}}
    board = Board(trials, attrs, seeds)
    assert board.incumbent == 0 and board.mean(0) == pytest.approx(0.1)
    assert board.next(3) == Fit(3, 1)  # 0.05 < 0.1: it races on, the stopped fit again
    trials.append(_trial(5, 0.4, fit_of=3, fit_seed=1))
    assert Board(trials, attrs, seeds).next(3) == Verdict(3, False)  # mean 0.225 >= 0.1
    trials[5] = _trial(5, state=FAIL, fit_of=3, fit_seed=1, error="nan")
    assert Board(trials, attrs, seeds).next(3) == Verdict(3, False)  # a failed fit counts as infinite
    trials[5] = _trial(5, 0.0, fit_of=3, fit_seed=1)
    trials.append(_trial(6, 0.1, fit_of=3, fit_seed=2))
    assert Board(trials, attrs, seeds).next(3) == Verdict(3, True)  # mean 0.05 < 0.1
    assert Board(trials, {**attrs, "race:3": {"won": True, "end": 6}}, seeds).incumbent == 3  # the last winner
    assert Board(trials, {"race:3": {"won": True, "end": 6}, **attrs, "race:9": {"won": False, "end": 9}},
                 seeds).incumbent == 3  # by the end of its race, not the order of the attributes
    assert Board(trials + [_trial(7, 0.0, hash="l", duplicate_of=3)], attrs, seeds).fits.keys() == {0, 3}


class Lucky:
    """Losses by training seed: the teacher 0.10 at seed 0 and 0 at the others, a lucky cell
    0.05 at seed 0 and 0.30 at the others, every other cell 1 or more."""

    def __init__(self, teacher, lucky):
        self.teacher, self.lucky = cell_hash(teacher), cell_hash(lucky)

    def evaluate(self, cell, layout, epochs, seed):
        key = cell_hash(from_cell(cell, layout))
        if key == self.teacher:
            return 0.10 if seed == 0 else 0.0
        if key == self.lucky:
            return 0.05 if seed == 0 else 0.30
        return 1 + int(key[:4], 16) / 65536


def _cells():
    rng = random.Random(3)
    teacher = sample_cell(SMALL, rng)
    lucky = next(c for c in iter(lambda: sample_cell(SMALL, rng), None) if cell_hash(c) != cell_hash(teacher))
    return teacher, lucky


@pytest.mark.parametrize("first_teacher", [True, False])
def test_racing_over_three_seeds_answers_the_teacher_where_one_seed_answers_the_lucky_cell(first_teacher):
    teacher, lucky = _cells()
    order = (teacher, lucky) if first_teacher else (lucky, teacher)
    run = lambda seeds: discover(SMALL, Lucky(teacher, lucky), RegularizedEvolution(4, 2, order), 12,  # noqa: E731
                                 fidelity=Fidelity((1,), seeds=seeds), target_hash=cell_hash(teacher),
                                 show_progress=False)
    one = run(1)
    assert one.target is None and one.best[0].hash == cell_hash(lucky) and one.raced == 0
    raced = run(3)
    assert raced.target is not None and raced.best[0].hash == cell_hash(teacher)  # fails without the race
    assert raced.best[0].fits == {0: 0.10, 1: 0.0, 2: 0.0} and raced.evaluations == 12
    # teacher first: its 2 fits, then the lucky cell (0.05, not below its mean 1/30) loses unfitted;
    # lucky first: its 2 fits (mean 0.217), then the teacher (0.1 < 0.217) races through 2 fits and wins
    assert raced.raced == (2 if first_teacher else 4)
    assert raced.target.evaluations == (3 if first_teacher else 6)  # counted at the end of its race


def test_a_race_the_budget_cut_short_is_finished_when_the_search_resumes(tmp_path):
    teacher, lucky = _cells()
    strategy = RegularizedEvolution(4, 2, (lucky, teacher))
    run = lambda budget: discover(SMALL, Lucky(teacher, lucky), strategy, budget,  # noqa: E731
                                  fidelity=Fidelity((1,), seeds=3), target_hash=cell_hash(teacher),
                                  run_dir=tmp_path, show_progress=False)
    cut = run(5)  # the lucky cell's race (3), the teacher's first fit: the budget ends its race
    assert cut.target is None and cut.best[0].hash == cell_hash(lucky) and cut.raced == 3
    study = optuna.load_study(study_name="discover", storage=f"sqlite:///{tmp_path / 'study.db'}")
    teacher_trial = next(t for t in study.get_trials() if t.user_attrs.get("hash") == cell_hash(teacher))
    assert f"race:{teacher_trial.number}" not in study.user_attrs
    with sqlite3.connect(tmp_path / "study.db") as db:  # as if the worker that trained it were gone
        db.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_id = ? AND key = 'worker'",
                   (f'"{socket.gethostname()}:999999999"', teacher_trial._trial_id))
    resumed = run(8)
    assert resumed.target is not None and resumed.best[0].hash == cell_hash(teacher)
    assert resumed.raced == 4 and resumed.best[0].fits == {0: 0.10, 1: 0.0, 2: 0.0}
