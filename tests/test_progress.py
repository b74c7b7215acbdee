"""Progress of long steps: plain lines off a terminal, the switches that turn it off."""

from __future__ import annotations

import io
import threading
import time

import pytest

from cellgraph import progress
from cellgraph.progress import LineProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_steps(total: int, seconds_per_step: float, initial: int = 0) -> list[str]:
    clock, out = Clock(), io.StringIO()
    bar = LineProgress(total, "val", out, "sequences", clock=clock, initial=initial)
    for _ in range(total - initial):
        clock.now += seconds_per_step
        bar.update()
    bar.set_postfix(loss="0.5")
    bar.close()
    return out.getvalue().splitlines()


def test_a_line_per_tenth_with_count_rate_and_eta():
    lines = run_steps(100, 1.0)  # 100 s in all: the first 5 s are quiet
    assert lines[0] == "val: 10/100 sequences (10%), 1/s, ETA 1:30"
    assert [line.split()[1] for line in lines[:-1]] == [f"{k}0/100" for k in range(1, 10)]
    assert lines[-1] == "val: done, 100 sequences in 1:40, loss 0.5"


def test_a_line_every_30_seconds_when_tenths_are_slow():
    lines = run_steps(1000, 1.0)  # a tenth takes 100 s
    assert [line.split()[1] for line in lines[:4]] == ["30/1000", "60/1000", "90/1000", "100/1000"]
    assert run_steps(100, 20.0)[0] == "val: 2/100 sequences (2%), 20 s/sequence, ETA 32:40"


def test_a_resumed_step_counts_its_done_units_in_the_fraction_not_the_rate():
    lines = run_steps(100, 2.0, initial=60)  # 60 done before: 40 left at 2 s each
    assert lines[0] == "val: 70/100 sequences (70%), 2 s/sequence, ETA 1:00"
    assert lines[-1] == "val: done, 40 sequences in 1:20, loss 0.5"


def test_a_short_step_prints_nothing():
    assert run_steps(50, 0.05) == []


def test_off_a_terminal_lines_inside_disabled_nothing():
    out = io.StringIO()
    assert isinstance(progress.progress(10, "test", stream=out), LineProgress)
    assert not isinstance(progress.progress(10, "test", show=False, stream=out), LineProgress)
    with progress.disabled():
        assert not progress.enabled()
        assert not isinstance(progress.progress(10, "test", stream=out), LineProgress)
        seen = []
        worker = threading.Thread(target=lambda: seen.append(progress.enabled()))
        worker.start()
        worker.join()
        assert seen == [True]  # another thread is not switched off
    assert progress.enabled()  # nothing leaks out of the block


def test_environment_switch(monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV, "1")
    assert not progress.enabled()
    progress.note("compiling")
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(progress.ENV)
    progress.note("compiling")
    assert capsys.readouterr().err == "compiling\n"


@pytest.mark.parametrize("total", [0, 1])
def test_tiny_totals(total):
    assert run_steps(total, 10.0) == []  # nothing to report half-way


def test_a_slow_first_unit_is_not_silent():
    """The heartbeat's look: a step whose first unit takes minutes says it is alive every
    EVERY_S seconds, with no made-up rate; a step that has written a line recently, or has
    ended, says nothing."""
    clock, out = Clock(), io.StringIO()
    bar = LineProgress(1280, "structures, epoch 0", out, "cells", clock=clock)
    clock.now = 29.0
    bar.beat()
    assert out.getvalue() == ""
    clock.now = 31.0
    bar.beat()
    bar.beat()  # not due again until another 30 s have passed
    assert out.getvalue() == "structures, epoch 0: 0/1280 cells (0%), 0:31 so far\n"
    clock.now = 62.0
    bar.update(640)
    bar.close()
    clock.now = 200.0
    bar.beat()
    assert out.getvalue().splitlines()[1:] == ["structures, epoch 0: 640/1280 cells (50%), 10.3/s, ETA 1:02",
                                               "structures, epoch 0: done, 640 cells in 1:02"]


def test_the_heartbeat_writes_while_no_unit_ends(monkeypatch):
    monkeypatch.setattr(progress, "BEAT_S", 0.01)
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    out = io.StringIO()
    bar = progress.progress(10, "val", stream=out)
    deadline = time.monotonic() + 10
    while "so far" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    bar.close()
    assert out.getvalue().startswith("val: 0/10 steps (0%), 0:00 so far\n")
