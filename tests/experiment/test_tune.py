"""``cellgraph tune``: random search with Optuna shared by several workers,
stale trials re-queued and resumed, failed trials recorded, ``--best --export``.

The tests of the shared storage run on SQLite and on a real PostgreSQL server (the
``postgres`` fixture of ``conftest.py``; skipped where PostgreSQL or psycopg is missing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason="optuna is an optional extra: pip install 'cellgraph[hpo]'")

from optuna.trial import TrialState  # noqa: E402

from cellgraph.cli import main  # noqa: E402
from cellgraph.errors import CellGraphError  # noqa: E402
from cellgraph.experiment import hpo  # noqa: E402
from cellgraph.experiment.config import TrainConfig, resolve_config  # noqa: E402
from cellgraph.experiment.presets import SEARCH_RANGES  # noqa: E402
from cellgraph.files import write_json  # noqa: E402

TINY = ["epochs=1", "max_train=32", "max_eval=16", "hidden_size=8", "num_threads=1", "lr=0.01"]
FLAGS = ["--task", "planted", "--model", "gru", "--ranges", "sst", "--heartbeat", "1", "--grace", "2",
         *(arg for item in TINY for arg in ("--set", item))]


STORAGES = ["sqlite", "postgresql"]


def _search(folder: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cellgraph", "tune", *FLAGS, "--dir", str(folder), *extra]


def _storage(request: pytest.FixtureRequest, folder: Path) -> str:
    """A new storage of the kind ``request.param``: SQLite in ``folder`` or a PostgreSQL database."""
    return request.getfixturevalue("postgres").database() if request.param == "postgresql" else hpo.sqlite_url(folder)


def _study(url: str, name: str = "planted-gru") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=url)


def _base(**changes) -> TrainConfig:
    sets = dict(item.split("=") for item in TINY)
    return resolve_config(None, None, {"task": "planted", "model": "gru", **sets, **changes})


@pytest.fixture(params=STORAGES)
def storage_url(request, tmp_path) -> str:
    """A new storage for one test: SQLite in ``tmp_path``, or a database on the PostgreSQL server."""
    return _storage(request, tmp_path)


@pytest.fixture(scope="module", params=STORAGES)
def shared(request, tmp_path_factory) -> tuple[Path, list[str], str]:
    """Two workers started together on one storage, 6 trials between them: the study folder,
    the workers' outputs and the storage URL."""
    folder = tmp_path_factory.mktemp("shared")
    url = _storage(request, folder)
    workers = [subprocess.Popen(_search(folder, "--trials", "6", "--storage", url), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        outputs.append(out)
    return folder, outputs, url


def test_two_workers_complete_every_slot_once(shared):
    folder, outputs, url = shared
    trials = _study(url).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6
    assert sorted(t.user_attrs["slot"] for t in trials) == list(range(6))
    # each slot's progress line is printed by exactly one worker
    lines = [line.split(":")[0] for out in outputs for line in out.splitlines() if line.startswith("slot ")]
    assert sorted(lines) == [f"slot {i}" for i in range(6)]
    assert all(0 <= t.value <= 1 for t in trials)
    assert all((folder / "trials" / f"slot-{i:04d}" / "final.json").is_file() for i in range(6))
    # lr was given with --set: fixed, not searched
    assert all(set(t.params) == {"batch_size", "lambda_l2"} for t in trials)
    assert "fixed by --set: lr=0.01" in outputs[0]
    workers = {t.user_attrs["worker"] for t in trials}
    assert len(workers) == 2, f"one worker ran every trial: {workers}"


def test_best_export_round_trips_through_resolve_config(shared, tmp_path, capsys):
    folder, _, url = shared
    toml = tmp_path / "best.toml"
    assert main(["tune", "--best", "--storage", url, "--export", str(toml)]) == 0
    printed = capsys.readouterr().out
    study = _study(url)
    best = study.best_trial
    assert best.value == max(t.value for t in study.get_trials())
    assert f"best: slot {best.user_attrs['slot']} (trial #{best.number})" in printed
    assert sum(line.split()[2:3] == ["COMPLETE"] for line in printed.splitlines()) == 6
    assert toml.read_text().startswith("# cellgraph tune --best: study planted-gru")
    exported = resolve_config(None, toml)
    assert exported == _base(num_threads=0).replace(**best.params)
    assert main(["train", "--config", str(toml), "--set", "num_threads=1", "--out", str(tmp_path / "run")]) == 0


def test_stale_trial_is_requeued_and_resumes_its_run(storage_url, tmp_path):
    """Slot 0 is claimed by a 'worker' that trains one of two epochs and dies: the next
    search re-queues it after the grace period and continues the run from its checkpoint."""
    from cellgraph.backends.torch.runs.train import train

    url = storage_url
    base = _base(epochs=2)
    space = hpo.search_space("gru", "sst", ["lr"])
    storage = hpo.open_storage(url, heartbeat=1, grace=2, retries=3)
    hpo.use_folder(tmp_path, "planted-gru")
    study = hpo.open_study(storage, "planted-gru", hpo.make_spec(base, space, 0), 2, out=lambda s: None)
    claimed = hpo._claim(storage, study.get_trials(states=(TrialState.WAITING,)))
    assert claimed.user_attrs["slot"] == 0
    config = base.replace(**claimed.params)
    run = tmp_path / "trials" / "slot-0000"
    train(config.replace(epochs=1), run, log=lambda s: None)
    write_json(run / "config.json", config.to_dict())  # killed after epoch 1 of 2
    (run / "final.json").unlink()

    done = subprocess.run(_search(tmp_path, "--set", "epochs=2", "--trials", "2", "--storage", url),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "slot 0: trial #0 had no heartbeat for 2 s and is queued again" in done.stdout
    trials = _study(url).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["slot"] for t in complete) == [0, 1]
    assert [t.params for t in trials if t.user_attrs["slot"] == 0][0] == claimed.params
    assert "resuming" in (run / "trial.log").read_text()
    epochs = [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2]


def test_failing_trials_are_recorded_and_the_search_goes_on(tmp_path, capsys):
    base = _base(task="sst", data_dir=str(tmp_path / "no-data"))
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path), heartbeat=1, grace=2)
    study = hpo.open_study(storage, "broken", hpo.make_spec(base, hpo.search_space("gru", "sst", []), 0), 2)
    hpo.work(study, storage, base, tmp_path, heartbeat=1)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] * 2
    assert all("no-data" in t.user_attrs["error"] for t in trials)
    assert "slot 1: failed" in capsys.readouterr().out
    assert hpo.summary(study) == "study broken: 2 slots, 2 fail"


def test_failed_slots_are_queued_again_with_their_parameters(tmp_path, monkeypatch, capsys):
    base = _base()
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path), heartbeat=1, grace=2)
    study = hpo.open_study(storage, "fixed", hpo.make_spec(base, hpo.search_space("gru", "sst", []), 0), 3)
    folders = []

    def broken(config, run_dir, title):  # an install broken for every slot but slot 1
        folders.append(run_dir)
        if run_dir.name != "slot-0001":
            raise ImportError("cannot import name 'X'")
        return 2.0

    monkeypatch.setattr(hpo, "_train_trial", broken)
    hpo.work(study, storage, base, tmp_path, heartbeat=1)
    assert hpo.summary(study).startswith("study fixed: 3 slots, 1 complete, 2 fail")
    first = {t.user_attrs["slot"]: t.params for t in study.get_trials()}

    assert main(["tune", "--list", "--dir", str(tmp_path)]) == 0
    assert f"slots 0, 2 failed (the errors: --list); once what failed them is fixed, `cellgraph tune --dir " \
        f"{tmp_path} --requeue-failed` queues them again" in capsys.readouterr().out
    assert main(["tune", "--requeue-failed", "--dir", str(tmp_path)]) == 0
    assert "slots 0, 2 queued again" in capsys.readouterr().out
    monkeypatch.setattr(hpo, "_train_trial", lambda config, run_dir, title: folders.append(run_dir) or 1.0)
    hpo.work(study, storage, base, tmp_path, heartbeat=1)
    latest = hpo.latest_trials(study)
    assert [t.state for t in latest.values()] == [TrialState.COMPLETE] * 3
    assert {slot: t.params for slot, t in latest.items()} == first
    assert [f.name for f in folders[3:]] == ["slot-0000", "slot-0002"]  # the same folders: their runs resume
    assert hpo.requeue_failed(study) == []
    assert main(["tune", "--list", "--dir", str(tmp_path)]) == 0
    assert "requeue" not in capsys.readouterr().out


def test_the_old_name_search_runs_tune_and_says_so(tmp_path, capsys):
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path), heartbeat=1, grace=2)
    hpo.open_study(storage, "old", hpo.make_spec(_base(), hpo.search_space("gru", "sst", []), 0), 1)
    capsys.readouterr()
    assert main(["tune", "--list", "--dir", str(tmp_path)]) == 0
    listed = capsys.readouterr()
    assert listed.err == "" and "study old: 1 slot" in listed.out
    assert main(["search", "--list", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr() == (listed.out, "cellgraph search is the old name of cellgraph tune\n")


def test_each_trial_hands_its_freed_memory_back(tmp_path, monkeypatch):
    """The worker returns the heap a trial freed after every trial, failed ones too."""
    calls = []
    monkeypatch.setattr(hpo, "release_memory", lambda: calls.append(1))
    base = _base(task="sst", data_dir=str(tmp_path / "no-data"))
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path), heartbeat=1, grace=2)
    study = hpo.open_study(storage, "broken", hpo.make_spec(base, hpo.search_space("gru", "sst", []), 0), 2)
    hpo.work(study, storage, base, tmp_path, heartbeat=1)
    assert len(calls) == 2


def test_release_memory_shrinks_the_resident_set():
    """After a backward pass over a long chain of small tensors, freeing them leaves the heap
    resident; release_memory gives it back (glibc only)."""
    import torch

    def resident() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * 4096

    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc/self/statm: cannot read the resident set")
    start = resident()
    w = torch.randn(256, 256, requires_grad=True)
    h, states = torch.randn(64, 256), []
    for _ in range(1000):
        h = torch.tanh(h @ w + h * 0.5)
        states.append(h)
    sum(t.sum() for t in states[-10:]).backward()
    del h, states
    before = resident()
    if before < start + 100 * 2**20:
        pytest.skip("free() already returned the memory: nothing left to release")
    if not hpo.release_memory():
        pytest.skip("the C library has no malloc_trim")
    assert resident() < before - 50 * 2**20


def test_claims_are_exclusive(storage_url):
    """Two processes claiming as fast as they can never both win a trial (on SQLite, without
    BEGIN IMMEDIATE, pysqlite lets both read WAITING and both set RUNNING)."""
    url = storage_url
    study = hpo.open_study(hpo.open_storage(url), "race", hpo.make_spec(_base(), {"lr": (1e-3, 1e-1, "log")}, 0),
                           40, out=lambda s: None)
    script = (
        "import sys, time; from cellgraph.experiment import hpo; import optuna; from optuna.trial import TrialState\n"
        f"storage = hpo.open_storage({url!r}); study = optuna.load_study(study_name='race', storage=storage)\n"
        "won = []\n"
        "while True:\n"
        "    t = hpo._claim(storage, study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))\n"
        "    if t is None: break\n"
        "    won.append(t.number)\n"
        "print(' '.join(map(str, won)))\n"
    )
    workers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    won = [set(map(int, w.communicate(timeout=120)[0].split())) for w in workers]
    assert not won[0] & won[1]
    assert won[0] | won[1] == set(range(40))
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING] * 40


def test_draws_are_seeded_and_in_range():
    space = SEARCH_RANGES[("rrnn-gru", "ptb")]
    first, again, other = hpo.draw(space, 20, 3), hpo.draw(space, 20, 3), hpo.draw(space, 20, 4)
    assert first == again != other
    for params in first:
        for key, (low, high, scale) in space.items():
            assert low <= params[key] <= high
            assert isinstance(params[key], int) == (scale == "int")


def test_search_space_messages():
    assert set(hpo.search_space("gru", "wiki", ["lr", "epochs"])) == {"batch_size", "lambda_l2"}
    with pytest.raises(CellGraphError, match="no search ranges for gru on planted .*gru on sst"):
        hpo.search_space("gru", "planted", [])
    with pytest.raises(CellGraphError, match="nothing is left to search"):
        hpo.search_space("gru", "sst", ["lr", "batch_size", "lambda_l2"])


def test_joining_with_other_settings_is_refused(tmp_path):
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path))
    space = hpo.search_space("gru", "sst", [])
    hpo.open_study(storage, "s", hpo.make_spec(_base(), space, 0), 3, out=lambda s: None)
    elsewhere = _base(num_threads=2, data_dir="/elsewhere", device="cpu")
    joined = hpo.open_study(storage, "s", hpo.make_spec(elsewhere, space, 0), None)
    assert len(joined.trials) == 3
    with pytest.raises(CellGraphError, match="epochs: 1 in the study, 2 here"):
        hpo.open_study(storage, "s", hpo.make_spec(_base(epochs=2), space, 0), 3)
    with pytest.raises(CellGraphError, match="slots: 3 in the study, 4 here"):
        hpo.open_study(storage, "s", hpo.make_spec(_base(), space, 0), 4)


def test_a_study_that_predates_a_setting_is_joined_with_its_default(tmp_path):
    """A study created before the ``amp`` setting existed joins as ``amp=none``, not as a
    study with other settings."""
    storage = hpo.open_storage(hpo.sqlite_url(tmp_path))
    space = hpo.search_space("gru", "sst", [])
    older = hpo.make_spec(_base(), space, 0)
    del older["base"]["amp"]
    hpo.open_study(storage, "s", older, 2, out=lambda s: None)
    assert len(hpo.open_study(storage, "s", hpo.make_spec(_base(), space, 0), None).trials) == 2
    with pytest.raises(CellGraphError, match="amp: 'none' in the study, 'bf16' here"):
        hpo.open_study(storage, "s", hpo.make_spec(_base(amp="bf16"), space, 0), None)


def test_toml_strings_round_trip(tmp_path):
    config = TrainConfig(target='a "quoted" \\ path\twith\x7f\x01 and ünïcode 😀')
    path = tmp_path / "c.toml"
    hpo.write_toml(path, config, ["header"])
    assert resolve_config(None, path) == config


def test_missing_optuna_is_a_clean_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)
    import cellgraph

    monkeypatch.delitem(sys.modules, "cellgraph.experiment.hpo")
    monkeypatch.delattr(cellgraph.experiment, "hpo")
    assert main(["tune", "--task", "sst", "--model", "gru", "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert err == "cellgraph tune: error: optuna is not installed: pip install 'cellgraph[hpo]'\n"


def test_report_errors(tmp_path):
    assert main(["tune", "--list", "--dir", str(tmp_path)]) == 2
    assert main(["tune", "--export", "x.toml", "--task", "sst", "--model", "gru"]) == 2
    assert main(["tune", "--task", "sst", "--model", "gru", "--heartbeat", "5", "--grace", "5"]) == 2
