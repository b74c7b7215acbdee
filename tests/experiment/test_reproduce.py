"""``cellgraph reproduce``: the Table 1 protocol's plan (equal budgets, seeds, teachers) and
its runner (subprocesses, resume, records, failures) on a tiny planted experiment."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from cellgraph.cli import main
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.jobs import Runner
from cellgraph.experiment.reproduce import PROTOCOL, SEEDS, TRIALS, Arm, Experiment, experiments, plan
from cellgraph.experiment.runs import RunDir


def _flag_values(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def _sets(argv) -> dict[str, str]:
    return dict(s.split("=", 1) for s in _flag_values(argv, "--set"))


def test_every_experiment_gives_both_models_the_same_budget_and_seeds(tmp_path):
    jobs = plan(tmp_path)
    by_name = {job.name: job for job in jobs}
    assert len(by_name) == len(jobs)
    for exp in PROTOCOL:
        searches = [by_name[f"{exp.name}/search-{arm.model}"] for arm in exp.arms if arm.ranges]
        if exp.name != "planted":
            assert {arm.model for arm in exp.arms} >= {"gru"} and len(searches) == 2
        drawn = [(_flag_values(s.steps[0], "--trials"), {k: v for k, v in _sets(s.steps[0]).items()
                                                          if k in exp.proxy}) for s in searches]
        assert all(d == ([str(TRIALS)], {k: str(v) for k, v in exp.proxy.items()}) for d in drawn)
        for arm in exp.arms:
            rows = ["preset" if arm.preset else "fixed"] + (["best"] if arm.ranges else [])
            for row in rows:
                runs = [by_name[f"{exp.name}/{row}-{arm.model}-s{seed}"] for seed in SEEDS]
                assert [_sets(r.steps[0])["seed"] for r in runs] == [str(s) for s in SEEDS]
                assert {_sets(r.steps[0])["epochs"] for r in runs} == {str(exp.full["epochs"])}
                if row == "best":  # the full data, not the proxy's share
                    assert all(_sets(r.steps[0]).get(k) == "0" for r in runs for k in exp.proxy if k.startswith("max_"))
    for job in jobs:
        assert all(need in by_name for need in job.needs)
        assert set(job.needs) <= {j.name for j in jobs[:jobs.index(job)]}  # planned before it
        teacher = _sets(job.steps[0]).get("teacher")
        if teacher:  # rrnn-gru's TD targets: the preset GRU of the same seed, trained first
            seed = _sets(job.steps[0]).get("seed", "0")
            assert teacher.endswith(f"preset-gru-s{seed}") and job.needs[-1] == f"{job.name.split('/')[0]}/preset-gru-s{seed}"


def test_the_full_rrnn_rows_fix_the_search_settings_and_search_our_ranges(tmp_path):
    jobs = {job.name: job for job in plan(tmp_path, experiments(["wiki5k"]))}
    search = jobs["wiki5k/search-rrnn"].steps[0]
    assert _flag_values(search, "--ranges") == ["wiki5k"]
    assert {"tau_units": "std", "candidate_norm": "sample"}.items() <= _sets(search).items()
    assert "lambda_margin" not in _sets(search)  # searched, not pinned
    assert _sets(jobs["wiki5k/preset-rrnn-s1"].steps[0])["tau_units"] == "std"
    with pytest.raises(CellGraphError, match="unknown experiment nope .*wiki5k"):
        experiments(["nope"])


def test_table1_rrnn_runs_and_trials_select_on_the_mixture(tmp_path):
    """Every RRNN run and search of a Table 1 experiment selects on the soft mixture (the search
    the paper's numbers measure; best rows inherit it from the search's best.toml); the GRU
    rows and planted (whose recovery reads the argmax cells) keep the default."""
    for job in plan(tmp_path):
        argv = job.steps[0]
        if "--config" in argv:  # a best row: its settings are the search's best.toml
            continue
        sets = _sets(argv)
        model = sets.get("model") or _flag_values(argv, "--model")[0]  # a run, or a search
        selects = sets.get("eval_mode")
        if model.startswith("rrnn") and job.experiment != "planted":
            assert selects == "soft", job.name
        else:
            assert selects is None, job.name


def test_dry_run_lists_jobs_and_runs_nothing(tmp_path, capsys):
    assert main(["reproduce", "--dry-run", "--only", "planted", "--dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert out.count("[to do] planted/fixed-") == 9 and "cellgraph train --set task=planted" in out
    assert not (tmp_path / "r").exists()
    assert main(["reproduce", "--jobs", "0", "--dir", str(tmp_path / "r")]) == 2


def test_dry_run_says_how_far_a_started_run_got(tmp_path, capsys):
    run = tmp_path / "r" / "planted" / "fixed-gru-s1"
    RunDir.create(run).write_config(TrainConfig(task="planted", epochs=8).to_dict(), None, 1, {})
    RunDir(run).append_metrics({"epoch": 1, "val_accuracy": 0.5})
    assert main(["reproduce", "--dry-run", "--only", "planted", "--dir", str(tmp_path / "r")]) == 0
    assert "[started: 1 of 8 epochs] planted/fixed-gru-s1\n" in capsys.readouterr().out


TINY = {"hidden_size": 8, "max_train": 48, "max_eval": 24, "batch_size": 16, "num_threads": 1, "seq_len": 8}


def _records(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_tiny_protocol_runs_resumes_and_keeps_its_records(tmp_path):
    """Two jobs at once; a search of 2 trials on the proxy, its best settings on the full
    data; records without checkpoints; every command's CPU time; a second run does nothing."""
    exp = Experiment("tiny", "planted", (Arm("gru", None, {}, "sst"), Arm("lstm", None, {})),
                     proxy={"epochs": 1}, full={"epochs": 2})
    root, records, lines = tmp_path / "t1", tmp_path / "records", []
    jobs = plan(root, [exp], seeds=(0,), trials=2, sets=TINY)
    assert [j.name for j in jobs] == ["tiny/fixed-lstm-s0", "tiny/search-gru", "tiny/best-gru-s0"]
    assert Runner(root, records, workers=2, echo=lines.append,
                  settled=lambda experiment: lines.append(f"settled {experiment}")).run(jobs) == []
    assert [line for line in lines if line.startswith("settled")] == ["settled tiny"]
    assert lines[-1] == "settled tiny"  # after its last job's "done" line
    assert _records(records) == ["commands.tsv", "tiny-best-gru-s0", "tiny-fixed-lstm-s0", "tiny-search-gru"]
    assert {"best.toml", "tiny-search-gru.log"} <= set(_records(records / "tiny-search-gru"))
    best = records / "tiny-best-gru-s0"
    assert {"config.json", "env.json", "final.json", "metrics.jsonl", "tiny-best-gru-s0.log"} <= set(_records(best))
    assert not any(best.rglob("*.pt"))
    config = json.loads((best / "config.json").read_text())
    assert (config["epochs"], config["model"]) == (2, "gru")  # the full settings over the proxy's
    with open(records / "commands.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["job"] for r in rows].count("tiny/search-gru") == 2  # search, then --best --export
    assert all(r["exit"] == "0" and float(r["cpu_s"]) >= 0 for r in rows) and len(rows) == 4
    again: list[str] = []
    assert Runner(root, records, workers=2, echo=again.append, settled=again.append).run(jobs) == []
    assert again == ["tiny"]  # nothing ran; the experiment is settled at once
    shutil.rmtree(records / "tiny-best-gru-s0")  # as if a runner was killed between the run's end and the copy
    third: list[str] = []
    assert Runner(root, records, workers=2, echo=third.append, settled=third.append).run(jobs) == []
    assert third == [f"done tiny/best-gru-s0, its records copied now -> {best}", "tiny"]
    assert {"config.json", "final.json", "tiny-best-gru-s0.log"} <= set(_records(best))


def test_a_failed_job_stops_what_needs_it_and_nothing_else(tmp_path):
    exp = Experiment("bad", "planted", (Arm("gru", None, {"no_such_key": 1}, "sst"), Arm("lstm", None, {})),
                     proxy={"epochs": 1}, full={"epochs": 1})
    lines: list[str] = []
    jobs = plan(tmp_path / "t1", [exp], seeds=(0,), trials=1, sets=TINY)
    settled: list[str] = []
    failed = Runner(tmp_path / "t1", tmp_path / "records", echo=lines.append, settled=settled.append).run(jobs)
    assert failed == ["bad/search-gru", "bad/best-gru-s0"]
    assert settled == ["bad"]  # once, after the failure and the skip
    assert any(line.startswith("FAILED bad/search-gru (exit 2)") for line in lines)
    assert "skip bad/best-gru-s0: needs bad/search-gru" in "\n".join(lines)
    assert (tmp_path / "records" / "bad-fixed-lstm-s0" / "final.json").is_file()
    log = (tmp_path / "t1" / "logs" / "bad-search-gru.log").read_text()
    assert "no_such_key" in log


def test_a_job_another_runner_holds_is_left_with_what_needs_it(tmp_path):
    """Two ``cellgraph reproduce`` on one root share the plan: a job whose lock another
    process holds (here: this one, through a second descriptor) is left to it, and so are the
    jobs that need it; the others run; nothing counts as failed."""
    from cellgraph.files import exclusive

    exp = Experiment("tiny", "planted", (Arm("gru", None, {}, "sst"), Arm("lstm", None, {})),
                     proxy={"epochs": 1}, full={"epochs": 1})
    root, lines = tmp_path / "t1", []
    jobs = plan(root, [exp], seeds=(0,), trials=1, sets=TINY)
    (root / "locks").mkdir(parents=True)
    with exclusive(root / "locks" / "tiny-search-gru.lock", "job", "test"):
        assert Runner(root, tmp_path / "records", echo=lines.append).run(jobs) == []
    text = "\n".join(lines)
    assert "leave tiny/search-gru: job tiny/search-gru is in use by another process" in text
    assert "leave tiny/best-gru-s0: it needs tiny/search-gru, which another runner runs" in text
    assert [j.name for j in jobs if j.done()] == ["tiny/fixed-lstm-s0"]


def test_a_run_that_fails_keeps_its_record_so_far(tmp_path):
    """A run that stops on an error (here: a stand-in that writes a run's first records and
    exits 2, as a diverged loss does) is FAILED, and its record goes to the records folder."""
    import sys

    from cellgraph.experiment.reproduce import Job

    folder = tmp_path / "runs" / "x-s0"
    job = Job("x/run-s0", folder, (("ignored",),), resume=("ignored",), record="x-run-s0")
    script = (f"import pathlib, sys; f = pathlib.Path({str(folder)!r}); f.mkdir(parents=True); "
              "(f / 'config.json').write_text('{}'); (f / 'metrics.jsonl').write_text('{\"epoch\": 1}\\n'); "
              "(f / 'checkpoints').mkdir(); (f / 'checkpoints' / 'last.pt').write_text('w'); sys.exit(2)")
    lines: list[str] = []
    runner = Runner(tmp_path, tmp_path / "records", echo=lines.append, program=(sys.executable, "-c", script))
    assert runner.run([job]) == ["x/run-s0"]
    assert lines[-1].startswith("FAILED x/run-s0 (exit 2)") and "its record so far ->" in lines[-1]
    assert _records(tmp_path / "records" / "x-run-s0") == ["config.json", "metrics.jsonl", "x-run-s0.log"]


def test_an_interrupted_command_is_stopped_not_failed_and_runs_again(tmp_path):
    """Ctrl-C (here: Runner.interrupt from another thread) reaches the running command, even
    one that ignores SIGINT, as the commands of a runner started in the background do; the
    job is reported stopped, and a second run starts it again."""
    import sys
    import threading

    from cellgraph.experiment.reproduce import Job

    job = Job("x/slow", tmp_path / "slow", (("ignored",),), resume=("ignored",), record="x-slow")
    lines: list[str] = []
    runner = Runner(tmp_path, tmp_path / "records", echo=lines.append,
                    program=(sys.executable, "-c", "import signal, time; "
                             "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"))
    threading.Timer(2.0, runner.interrupt).start()
    assert runner.run([job]) == ["x/slow"]
    assert lines[-1] == "stopped x/slow: interrupted (it resumes when the plan runs again)"


def test_the_report_writes_its_table_when_plots_cannot_be_drawn(tmp_path, monkeypatch, capsys):
    """The runs are done when the report runs: a missing matplotlib costs the plots, not the table."""
    from cellgraph.cli.commands.reproduce import _report
    from cellgraph.experiment import plots

    run = RunDir.create(tmp_path / "x-fixed-gru-s0")
    run.write_config({"task": "planted", "model": "gru", "seed": 0})
    run.write_final({"val_accuracy": 0.5, "test_accuracy": 0.5, "train_seconds": 1.0, "epochs_run": 1})

    def missing():
        raise CellGraphError("plots need matplotlib: pip install 'cellgraph[plot]'")

    monkeypatch.setattr(plots, "_pyplot", missing)
    _report("x", tmp_path)
    assert "| planted | x-fixed-gru | accuracy | 1 |" in (tmp_path / "x.md").read_text()
    assert "no plots: plots need matplotlib" in capsys.readouterr().err


def test_a_settled_experiment_writes_table1_and_the_end_prints_it(tmp_path, monkeypatch, capsys):
    """The runner's ``settled`` callback writes records/table1.md as each experiment ends;
    the command prints Table 1 once, at the end (the runner is stood in for: no training)."""
    from cellgraph.experiment.jobs import Runner

    def run(runner, jobs):
        assert not (runner.records / "table1.md").exists()
        runner.settled("wiki")
        assert (runner.records / "table1.md").is_file()
        return []

    monkeypatch.setattr(Runner, "run", run)
    records = tmp_path / "records"
    assert main(["reproduce", "--only", "wiki", "--dir", str(tmp_path / "t1"), "--records", str(records)]) == 0
    out = capsys.readouterr().out
    assert out.count("| experiment | model | row |") == 1 and "Searches:" in out
    assert (records / "table1.md").read_text(encoding="utf-8").splitlines()[0] in out
