import random

import optuna
from optuna.trial import TrialState

from cellgraph.discover.cache import Entry, ResultCache, cell_json
from cellgraph.discover.ledger import Ledger, is_evaluation
from tests.discover.cells import small

optuna.logging.set_verbosity(optuna.logging.WARNING)
CELL = cell_json(small())  # every trial's candidate (the ledger reads hashes, not cells)


def _full_reading(study: optuna.Study) -> tuple[int, int, dict, dict]:
    """What the ledger must agree with: the sums read from every trial."""
    trials = study.get_trials(deepcopy=False)
    spent = sum(t.user_attrs.get("spent", 0) for t in trials)
    epochs = sum(t.user_attrs.get("spent", 0) + (t.user_attrs.get("reserve", 0) if t.state == TrialState.RUNNING
                                                 else 0) for t in trials)
    cache = ResultCache((t.user_attrs["hash"], Entry(t.number, t.state == TrialState.RUNNING, t.user_attrs.get("loss"),
                                                     t.state == TrialState.COMPLETE))
                        for t in trials if is_evaluation(t))
    losses = {e: sorted(t.intermediate_values[e] for t in trials if e in t.intermediate_values) for e in (1, 5)}
    return spent, epochs, {h: cache.get(h) for h in "abcdef"}, losses


def _step(study: optuna.Study, running: list, rng: random.Random) -> None:
    """Start a trial, or move a running one on a rung, or finish one (any of them: workers
    finish out of order)."""
    if not running or rng.random() < 0.4:
        trial = study.ask()
        trial.set_user_attr("hash", rng.choice("abcdef"))
        trial.set_user_attr("cell", CELL)
        if rng.random() < 0.2:
            trial.set_user_attr("duplicate_of", 0)
        trial.set_user_attr("reserve", 1)
        running.append(trial)
        return
    trial = running[rng.randrange(len(running))]
    spent = trial.user_attrs.get("spent", 0) + trial.user_attrs["reserve"]
    loss = rng.random()
    trial.set_user_attr("spent", spent)
    trial.set_user_attr("loss", loss)
    trial.report(loss, 1 if spent == 1 else 5)
    trial.set_user_attr("reserve", 4 if spent == 1 else 0)
    if spent == 1 and rng.random() < 0.5:
        return
    running.remove(trial)
    state = rng.choice([TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL])
    if state == TrialState.FAIL and rng.random() < 0.5:
        trial.set_user_attr("error", "diverged")
    study.tell(trial, loss if state == TrialState.COMPLETE else None, state=state)


def test_the_ledger_agrees_with_a_reading_of_every_trial_as_trials_finish_out_of_order():
    rng = random.Random(0)
    study = optuna.create_study()
    ledger, running = Ledger(study), []
    for _ in range(300):
        _step(study, running, rng)
        if rng.random() < 0.5:
            continue
        ledger.read()
        spent, epochs, cache, losses = _full_reading(study)
        assert ledger.spent() == spent  # fails when a running trial's spent epochs are left out
        assert ledger.epochs() == epochs  # fails when a running trial's reserve or a late finisher is lost
        assert {h: ledger.entry(h) for h in cache} == cache
        assert {e: sorted(ledger.rung_losses(e)) for e in losses} == losses
    assert any(t.state == TrialState.RUNNING for t in study.get_trials()) and len(study.get_trials()) > 100


def test_a_finished_trial_is_folded_in_once_and_never_read_again(monkeypatch):
    folded = []
    fold = Ledger._fold

    def counted(self, t):
        done = fold(self, t)
        folded.extend([t.number] if done else [])
        return done

    monkeypatch.setattr(Ledger, "_fold", counted)
    rng = random.Random(1)
    study = optuna.create_study()
    ledger, running = Ledger(study), []
    for _ in range(200):
        _step(study, running, rng)
        ledger.read()
    finished = [t.number for t in study.get_trials() if t.state != TrialState.RUNNING]
    assert sorted(folded) == finished  # fails when the ledger folds a finished trial at every reading


def test_another_workers_running_evaluation_of_a_hash_is_found_but_not_ones_own():
    study = optuna.create_study()
    mine, theirs = study.ask(), study.ask()
    for trial in (mine, theirs):
        trial.set_user_attr("hash", "a")
    ledger = Ledger(study)
    ledger.read()
    assert ledger.entry("a", mine.number).number == theirs.number and ledger.entry("b", mine.number) is None
    theirs.set_user_attr("duplicate_of", 0)  # a reuse trains nothing
    ledger.read()
    assert ledger.entry("a", mine.number) is None
