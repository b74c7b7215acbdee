"""The random-replay benchmark: random search's proposals replayed without training."""

import json
from itertools import islice

import optuna
import pytest

from cellgraph.benchmarks import random_replay
from cellgraph.benchmarks.random_replay import Stream, Window, check_record, reconstruct, verdict, walk
from cellgraph.cli.commands.discover import write_best
from cellgraph.discover.cache import cell_hash
from cellgraph.discover.fidelity import Fidelity
from cellgraph.discover.screen import Screen
from cellgraph.discover.search import discover
from cellgraph.discover.space import CellSpace
from cellgraph.discover.strategies import RandomSearch
from cellgraph.discover.synthetic import StructureEvaluator
from cellgraph.errors import CellGraphError
from tests.discover.cells import small

RUNGS = Fidelity((1, 3), eta=2)
#: The planted teacher a run folder records (read by the replay of a run).
TEACHER = {"data": {"teacher": "rnn", "seed": 0, "weight_scale": 1.0}}


def _search(run_dir, budget, target=None):
    """A random search of the default space, screened, seed 5 (resumed when ``run_dir`` holds one)."""
    return discover(CellSpace(), StructureEvaluator(small()), RandomSearch(Screen()), budget, fidelity=RUNGS, seed=5,
                    run_dir=run_dir, target_hash=target, show_progress=False, settings=TEACHER)


def _trials(run_dir):
    study = optuna.load_study(study_name="discover", storage=f"sqlite:///{run_dir / 'study.db'}")
    return sorted(study.get_trials(), key=lambda t: t.number)


def test_a_run_is_its_seeds_stream_resumed_where_it_resumed_and_trains_within_its_window(tmp_path):
    planted = list(islice(Stream(5, 0, Screen()), 30))[1]
    _search(tmp_path, 4, planted)  # 12 epochs
    first = _trials(tmp_path)
    _search(tmp_path, 9, planted)  # resumed: the same command, a larger budget
    trials = _trials(tmp_path)
    hashes = [t.user_attrs["hash"] for t in trials]
    assert reconstruct(hashes, 5, Screen()) == [0, len(first)]
    assert hashes[:len(first)] == list(islice(Stream(5, 0, Screen()), len(first)))
    assert hashes[len(first):] == list(islice(Stream(5, len(first), Screen()), len(trials) - len(first)))
    with pytest.raises(CellGraphError, match="trial 0 .* not random search's proposal from seed 6"):
        reconstruct(hashes, 6, Screen())
    with pytest.raises(CellGraphError, match="not random search's proposal"):
        reconstruct(hashes, 5, None)
    window, trained = Window(9 * 3, RUNGS), len(set(hashes))
    assert (window.sure, window.most) == (7, 27) and window.sure <= trained <= window.most
    record = random_replay.replay_run(tmp_path, show=False)
    assert record["resumed_at"] == [len(first)] and record["trials"] == len(trials)
    assert record["proposed_at"] == hashes.index(planted) == 1 and "continuation" not in record


def test_an_unfinished_run_gets_its_continuations_verdict_and_the_continuation_is_what_the_run_does(tmp_path):
    _search(tmp_path, 3, "0" * 64)
    trials = _trials(tmp_path)
    spec = json.loads((tmp_path / "discover.json").read_text())
    coming = list(islice(Stream(5, len(trials), Screen()), 40))
    new = [k for k in dict.fromkeys(coming) if k not in {t.user_attrs["hash"] for t in trials}]
    spec.update(budget=30, target_hash=new[1])
    (tmp_path / "discover.json").write_text(json.dumps(spec))
    record = random_replay.replay_run(tmp_path, show=False)
    spent = sum(t.user_attrs["spent"] for t in trials)
    later = record["continuation"]
    assert record["proposed_at"] is None and record["spent_epochs"] == spent and not record["ended"]
    assert later["first"] == {new[1]: [coming.index(new[1]) + 1, 2]} and later["verdict"] == "proposed"
    assert (later["sure"], later["most"]) == (Window(90 - spent, RUNGS).sure, Window(90 - spent, RUNGS).most)
    _search(tmp_path, 30, new[1])  # the continuation, run: it trains that cell
    resumed = _trials(tmp_path)
    made = [t.user_attrs["hash"] for t in resumed[len(trials):]]
    assert made[:40] == coming[:len(made)]
    assert new[1] in {t.user_attrs["hash"] for t in resumed}


def test_a_walk_finds_a_hash_at_its_place_counting_repeats_once_and_stops_at_its_window():
    drawn = list(islice(Stream(7), 1500))
    distinct = list(dict.fromkeys(drawn))
    assert len(distinct) < len(drawn) - 40  # one-node cells repeat: the walk must count them once
    key = distinct[799]
    done = walk(Stream(7), {key}, 1000, set(), show=False)
    assert done.first == {key: [drawn.index(key) + 1, 800]} and done.distinct == 800
    assert done.proposals == drawn.index(key) + 1 and done.idle == 0
    short = walk(Stream(7), {key}, 500, set(), show=False)
    assert short.first == {} and short.distinct == 500 and short.proposals == drawn.index(distinct[499]) + 1
    seen = set(distinct[:5])
    assert walk(Stream(7), {key}, 1000, seen, show=False).first[key][1] == 795  # cells already seen are not new


def test_a_stopped_walk_resumes_from_its_state_as_if_never_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(random_replay, "CHECKPOINT", 200)
    whole = walk(Stream(9), {"f" * 64}, 600, set(), show=False)
    assert whole.proposals > 610  # repeats: the resumed walk must know the cells seen before it stopped

    class Stopping(Stream):
        calls = 0

        def __next__(self):
            Stopping.calls += 1
            if Stopping.calls == 500:
                raise KeyboardInterrupt
            return super().__next__()

    state = tmp_path / "work" / "walk.json"  # the walk makes its folder when it first saves
    with pytest.raises(KeyboardInterrupt):
        walk(Stopping(9), {"f" * 64}, 600, set(), state, show=False)
    assert json.loads(state.read_text())["walk"]["distinct"] == 400
    again = walk(Stream(9), {"f" * 64}, 600, set(), state, show=False)
    assert again == whole and not state.exists()
    with pytest.raises(KeyboardInterrupt):
        Stopping.calls = 0
        walk(Stopping(9), {"f" * 64}, 600, set(), state, show=False)
    with pytest.raises(CellGraphError, match="other teachers"):
        walk(Stream(9), {"e" * 64}, 600, set(), state, show=False)


def test_the_verdicts():
    window = Window(100, Fidelity((1, 5, 20)))
    assert (window.sure, window.most) == (4, 100)
    assert verdict(None, window) == "never proposed" and verdict([300, 101], window) == "never proposed"
    assert verdict([9, 4], window) == "proposed" and verdict([9, 5], window) == "needs a run"
    assert verdict([400, 100], window) == "needs a run"
    assert verdict([9, 4], window, stopped_idle=True) == "needs a run"
    assert Window(0, Fidelity((1,))).sure == 0 and Window(0, Fidelity((1,))).most == 0


def test_new_runs_are_replayed_per_seed_and_bad_input_is_one_line(tmp_path, capsys):
    random_replay.main(["--records", str(tmp_path), "--work", str(tmp_path / "work"), "--targets", "rnn",
                        "minimal:25:4-7", "--budget", "20", "2", "--fidelity", "1,5", "--seeds", "0", "--unscreened"])
    record = json.loads((tmp_path / "random-replay-1-5-s0-unscreened.json").read_text())
    rnn, four = record["rows"]
    assert record["screen"] is None and record["versions"]["cellgraph"]
    assert (rnn["most"], rnn["sure"], four["most"], four["sure"]) == (100, 17, 10, 2)
    assert four["first"] is None and four["verdict"] == "never proposed"
    drawn = list(dict.fromkeys(islice(Stream(0), 400)))
    rnn_hash = cell_hash(random_replay.structure("rnn"))
    assert rnn["first"] is None if rnn_hash not in drawn[:100] else rnn["first"][1] == drawn.index(rnn_hash) + 1
    assert record["walk"]["distinct"] == 100
    out = capsys.readouterr().out
    assert "minimal:25:4-7      0      2" in out and "never proposed" in out
    assert not (tmp_path / "work").exists()  # a walk too short to save leaves no work folder
    _search(tmp_path / "evolution", 2)
    spec = json.loads((tmp_path / "evolution" / "discover.json").read_text())
    spec["strategy"] = {"name": "evolution"}
    (tmp_path / "evolution" / "discover.json").write_text(json.dumps(spec))
    for argv, message in ((["--targets", "rnn"], "one --budget or one per target"),
                          ([str(tmp_path), "--targets", "rnn"], "give one of --targets"),
                          ([str(tmp_path)], "not a search folder"),
                          ([str(tmp_path / "evolution")], "not worker 0 of a random search")):
        with pytest.raises(SystemExit):
            random_replay.main(["--records", str(tmp_path), "--work", str(tmp_path / "work"), *argv])
        assert message in capsys.readouterr().err


def test_a_kept_record_is_checked_against_its_seeds_stream(tmp_path):
    result = _search(tmp_path, 5)
    trials = _trials(tmp_path)
    teacher = trials[2].user_attrs["hash"]
    record = {"config": {"strategy": "random", "worker": 0, "screen": 3}, "seed": 5, "result": result.to_dict(),
              "best": write_best(tmp_path, result, teacher), "teacher": {"hash": teacher}}
    (tmp_path / "discovery.json").write_text(json.dumps(record))
    checked = check_record(tmp_path)
    assert checked["agrees"] and checked["trials"] == len(trials) and checked["distinct"] == result.trained
    assert checked["best"] == [len(result.best)] * 2 and checked["teacher_replayed"]
    record["seed"] = 6
    (tmp_path / "discovery.json").write_text(json.dumps(record))
    assert not check_record(tmp_path)["agrees"]
    record["seed"] = 5
    del record["config"]["screen"]  # records from before the screen option: unscreened runs
    (tmp_path / "discovery.json").write_text(json.dumps(record))
    assert not check_record(tmp_path)["agrees"]
    record["config"]["strategy"] = "evolution"
    (tmp_path / "discovery.json").write_text(json.dumps(record))
    with pytest.raises(CellGraphError, match="not worker 0 of a random search"):
        check_record(tmp_path)
