"""``benchmarks/gpu_check.sh``, the GPU check, run on the CPU at toy sizes (``DEVICE=cpu
QUICK=1``): every part runs and is recorded, a part past its limit fails the command and is
recorded as stopped, bad parts are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs_data import DATA, needs_data

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"


def _check(out: Path | str, *parts: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(out), *parts], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "DEVICE": "cpu", "QUICK": "1", "PYTHON": sys.executable, **env})

#: The epochs part's runs: the paper's presets, then the discovery recipe's.
EPOCHS = ("paper-wiki10k-rrnn-gru", "paper-wiki5k-rrnn", "recipe-rrnn-gru", "recipe-rrnn")


def test_every_part_runs_and_is_recorded(tmp_path):
    """Every part but ``compile`` (a minute of compilation even at toy sizes: the slow test
    below), and without the paper's data but ``epochs`` (one epoch of four presets on Wiki,
    which a machine without the data cannot run)."""
    parts = ("env", "tests", "bench", *(("epochs",) if DATA is not None else ()), "torchrun")
    done = _check(tmp_path, *parts)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    epochs = [("epochs", name) for name in EPOCHS] if DATA is not None else []
    assert [(s["part"], s["name"]) for s in summary] == [
        ("env", "env"), ("tests", "pytest"), ("bench", "bench"), *epochs, ("torchrun", "torchrun")]
    assert all(s["exit_code"] == 0 and s["seconds"] > 0 for s in summary)
    assert all(s["time_s"] > 0 for s in summary if s["part"] == "epochs")
    assert json.loads((tmp_path / "bench.json").read_text())["machine"]["device"] == "cpu"
    assert " passed" in (tmp_path / "tests.log").read_text()
    assert "best epoch" in (tmp_path / "torchrun.log").read_text()


def test_the_discover_part_measures_the_search_evaluator_with_4_and_32_restarts(tmp_path):
    pytest.importorskip("optuna")
    done = _check(tmp_path, "bench", "discover", BENCH_ITEMS="steps")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["name"] for s in summary] == ["bench", "discover", "discover-r32"]
    four, many = (json.loads((tmp_path / f"{name}.json").read_text())["fit"] for name in ("discover", "discover-r32"))
    assert (four["settings"]["restarts"], many["settings"]["restarts"]) == (4, 32)
    assert four["cells"]["gru"]["looped_s"] > 0 and many["cells"]["gru"]["looped_s"] is None
    bench = json.loads((tmp_path / "bench.json").read_text())
    assert "steps" in bench and "cells" not in bench  # BENCH_ITEMS reached the bench


@pytest.mark.slow
def test_the_compile_part_writes_item_6_in_the_reduce_overhead_mode(tmp_path):
    done = _check(tmp_path, "compile")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "compile.json").read_text())
    assert result["config"]["compile_mode"] == "reduce-overhead" and result["device"] == "cpu"
    assert result["compiled_s"] > 0 and not result["fell_back"]
    assert [s["part"] for s in json.loads((tmp_path / "summary.json").read_text())] == ["compile"]


def test_a_relative_out_is_taken_from_where_the_check_starts(tmp_path):
    done = _check("out", "env", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())[0]["part"] == "env"


def test_a_part_past_its_limit_fails_the_check(tmp_path):
    done = _check(tmp_path, "bench", LIMIT_BENCH="1")
    assert done.returncode == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(s["name"], s["exit_code"]) for s in summary] == [("bench", 124)]


def test_a_budget_cuts_the_limits_and_starts_no_part_once_spent(tmp_path):
    """BUDGET keeps the whole check inside a lease: bench (a quick run takes seconds) is stopped
    when the budget ends, and torchrun, with nothing left, never starts."""
    start = time.monotonic()
    done = _check(tmp_path, "bench", "torchrun", BUDGET="2")
    assert done.returncode == 1 and time.monotonic() - start < 20
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(s["name"], s["exit_code"]) for s in summary] == [("bench", 124), ("torchrun", 124)]
    assert summary[1]["seconds"] == 0
    assert "torchrun: not started, BUDGET=2 s spent" in (tmp_path / "torchrun.log").read_text()


@pytest.mark.parametrize("env, message", [({"PYTHON": "no-such-python"}, "no interpreter 'no-such-python'"),
                                          ({"BUDGET": "9m"}, "BUDGET must be whole seconds, got '9m'")])
def test_a_bad_interpreter_or_budget_is_refused(tmp_path, env, message):
    done = _check(tmp_path, "env", **env)
    assert done.returncode == 2 and message in done.stderr and not (tmp_path / "summary.json").exists()


@needs_data
def test_an_epoch_past_its_limit_is_recorded_without_a_time(tmp_path):
    done = _check(tmp_path, "epochs", LIMIT_EPOCH="1")
    assert done.returncode == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(s["name"], s["exit_code"], s["time_s"]) for s in summary] == [(name, 124, None) for name in EPOCHS]


def test_a_check_stopped_from_outside_keeps_the_parts_it_finished(tmp_path):
    check = subprocess.Popen(["bash", str(SCRIPT), str(tmp_path), "env", "bench"], start_new_session=True,
                             env={**os.environ, "DEVICE": "cpu", "QUICK": "1"}, stdout=subprocess.DEVNULL)
    summary = tmp_path / "summary.json"
    deadline = time.monotonic() + 60
    while not summary.exists() and time.monotonic() < deadline and check.poll() is None:
        time.sleep(0.1)
    os.killpg(check.pid, signal.SIGKILL)
    check.wait()
    assert [s["part"] for s in json.loads(summary.read_text())] == ["env"]


@pytest.mark.parametrize("args", [["bogus"], []])
def test_bad_arguments_are_refused(tmp_path, args):
    done = subprocess.run(["bash", str(SCRIPT), *([str(tmp_path)] if args else []), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert ("unknown part 'bogus'" if args else "usage: bash benchmarks/gpu_check.sh OUT") in done.stderr
