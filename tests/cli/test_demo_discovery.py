"""The demo's discovery step on tiny sizes: what it prints is what its searches returned, a rerun
resumes them, and without optuna it says so in one line."""

import sys
from dataclasses import replace

import pytest

from cellgraph.cli import demo_discovery
from cellgraph.discover import cell_from_json
from cellgraph.discover.show import candidate_form

pytest.importorskip("torch")
pytest.importorskip("optuna")


def run(folder):
    printed = []
    arms = demo_discovery.run_discovery(folder, seed=1, quick=True, log=printed.append)
    return arms, "\n".join(printed)


def test_a_search_started_at_the_teacher_recovers_it_at_evaluation_1_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLGRAPH_NO_PROGRESS", "1")
    # started at the teacher with a budget of one evaluation, local search's answer is the teacher
    monkeypatch.setattr(demo_discovery, "START", "mgu")
    monkeypatch.setattr(demo_discovery, "QUICK", replace(demo_discovery.QUICK, budget=1))
    arms, out = run(tmp_path)
    local, rand = arms
    assert [a.folder for a in arms] == [tmp_path / "discovery" / "local", tmp_path / "discovery" / "random"]
    assert local.result.target is not None and local.result.target.evaluations == 1
    assert "recovers mgu exactly: its best cell since evaluation 1 (trial #0" in out
    assert rand.result.target is None and "does not recover mgu" in out
    assert "data seed 1" in out and "h_t = (1 - f_t) \\odot h_{t-1} + f_t \\odot n_t" in out
    for arm in arms:
        assert arm.result.evaluations == 1 and arm.best[0]["trial"] == arm.result.best[0].trial
        assert (arm.folder / arm.best[0]["file"]).exists()
        assert f"best cell: objective {arm.best[0]['objective']:.4g}" in out
        assert candidate_form(cell_from_json(arm.result.best[0].cell)) in out
        assert arm.command in out and "--seed 1 --data-seed 1" in arm.command
    assert local.best[0]["recovers"] and not rand.best[0]["recovers"]
    assert (f"random search's best objective {rand.best[0]['objective']:.4g} against local search's "
            f"{local.best[0]['objective']:.4g}") in out
    assert f"--set cell={local.folder / local.best[0]['file']}" in out
    again, _ = run(tmp_path)  # a rerun resumes both searches: the budget is spent
    assert [a.result.trials for a in again] == [a.result.trials for a in arms]


def test_without_optuna_the_step_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    printed = []
    assert demo_discovery.run_discovery(tmp_path, quick=True, log=printed.append) == ()
    assert printed == ["  skipped: optuna is not installed: pip install 'cellgraph[hpo]'"]
