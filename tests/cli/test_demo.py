"""`cellgraph demo --quick`: every step runs and reports where its output went; README shows
what its first step prints. The full demo (minutes) is in the slow suite (`pytest -m slow`)."""

import re
from pathlib import Path

import pytest

from cellgraph.cli import main
from cellgraph.cli.demo import run_demo
from cellgraph.proofs.suite import statement

README = Path(__file__).resolve().parents[2] / "README.md"


def assert_every_step_ran(out: str, folder) -> None:
    for step in range(1, 7):
        assert f"[{step}/6]" in out
    assert "rrnn-gru" in out and "val acc" in out
    for model in ("rrnn", "rrnn-gru", "gru"):
        assert (folder / "runs" / model / "final.json").exists()
    assert (folder / "plots" / "learning_curves.png").exists()
    assert any((folder / name).exists() for name in ("discovered_cell.svg", "discovered_cell.dot"))
    assert "c_1 = " in out or "h_t = " in out
    assert "negative control" in out  # step 1 runs the proofs' checks, controls included
    # step 6: the planted teacher's equations, both searches' best cells and whether they recover it
    assert "the planted teacher, mgu" in out and "f_t = \\sigma(W_f x_t" in out
    assert out.count("best cell: objective") == 2 and out.count("recover mgu") + out.count("recovers mgu") == 2
    assert "random search's best objective" in out and "cellgraph discover --teacher mgu --strategy local" in out
    for arm in ("local", "random"):
        assert (folder / "discovery" / arm / "study.db").exists() and (folder / "discovery" / arm / "best").is_dir()


def test_quick_demo_runs_every_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CELLGRAPH_NO_PROGRESS", "1")
    assert main(["demo", "--quick", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert_every_step_ran(out, tmp_path)
    # the models start from the teacher GRU, are compared with the GRU trained as long, and the
    # cell shown reads x_t and h_(t-1), beside the untrained search's and against the GRU
    assert (tmp_path / "runs" / "teacher-gru" / "final.json").exists()
    assert "the GRU trained as long" in out
    assert "before training (epoch 0)" in out and "that reads x_t and h_(t-1)" in out
    assert out.count("identity chain") >= 2 and "against gru_torch" in out


@pytest.mark.slow
def test_full_demo_runs_every_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CELLGRAPH_NO_PROGRESS", "1")
    assert main(["demo", "-o", str(tmp_path)]) == 0
    assert_every_step_ran(capsys.readouterr().out, tmp_path)


def test_readme_shows_what_the_demos_first_step_prints(tmp_path):
    """README's excerpt of the demo is what ``cellgraph demo`` (seed 0) prints up to step 2;
    the training steps, whose numbers change with the recipe, are described, not copied."""
    class Stop(Exception):
        pass

    printed = []

    def log(line: str) -> None:
        if line.lstrip().startswith("[2/6]"):
            raise Stop
        printed.append(line)

    with pytest.raises(Stop):
        run_demo((statement("gru"), statement("lstm")), tmp_path, log=log)
    section = README.read_text(encoding="utf-8").split("## What the demo prints", 1)[1]
    excerpt = re.search(r"```\n(.*?)```", section, re.S).group(1)
    assert excerpt == "\n".join(printed).lstrip("\n") + "\n"
