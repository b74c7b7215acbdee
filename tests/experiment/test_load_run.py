"""A trained run from Python (cellgraph.load_run, docs/training.md's snippet), exported cells with their
vectors (cellgraph export -> cellgraph distance) and the progress of cellgraph eval."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cellgraph
from cellgraph import progress
from cellgraph.algorithms.distance import td
from cellgraph.backends.torch.runs.run import export_cell
from cellgraph.backends.torch.runs.train import train
from cellgraph.cli import main
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig
from cellgraph.export.jsonio import load_document, load_tree

TINY = dict(task="planted", hidden_size=8, n_iterations=3, scoring_hidden=8, max_train=32, max_eval=16,
            seq_len=5, epochs=2, batch_size=16, log_structures=4, num_threads=1, eval_batch_size=4)
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "training.md"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    out = {}
    for model in ("rrnn", "gru"):
        path = tmp_path_factory.mktemp("runs") / model
        out[model] = (path, train(TrainConfig(**TINY, model=model), path, log=lambda s: None))
    return out


def test_load_run_gives_a_model_ready_for_tokens(runs):
    path, final = runs["rrnn"]
    run = cellgraph.load_run(path)
    assert run.epoch == final["best_epoch"] and run.checkpoint == "best" and run.config.model == "rrnn"
    assert not run.model.training and run.model.core.cell.mode == run.config.eval_mode
    tokens = run.tokens("test")
    with torch.no_grad():
        logits, traces = run.model(tokens)
    right = (logits.argmax(-1) == torch.from_numpy(run.dataset.test.targets)).float().mean()
    assert float(right) == pytest.approx(final["test_accuracy"])  # what the trainer measured
    cell = run.cell(traces, 3, 1)
    assert cell == export_cell(path, 1, 3)[0] and len(run.layout) >= 1
    assert cellgraph.load_run(path, checkpoint="last").epoch == 2
    assert run.encode(run.vocab[:2]).tolist() == [[0, 1]]
    assert "rrnn on planted, best checkpoint of epoch" in repr(run)


def test_load_run_errors(runs, tmp_path):
    with pytest.raises(CellGraphError, match="not a run folder"):
        cellgraph.load_run(tmp_path)
    path, _ = runs["rrnn"]
    with pytest.raises(CellGraphError, match="unknown checkpoint 'middle'"):
        cellgraph.load_run(path, checkpoint="middle")
    with pytest.raises(CellGraphError, match="backend 'numpy' evaluates cells but cannot train or load runs"):
        cellgraph.load_run(path, backend="numpy")
    run = cellgraph.load_run(path)
    with pytest.raises(CellGraphError, match="sample 99 is outside split test"):
        run.tokens("test", [0, 99])
    with pytest.raises(CellGraphError, match="not in the vocabulary"):
        run.encode(["no such token"])
    with pytest.raises(CellGraphError, match="no discovered cells"):
        cellgraph.load_run(runs["gru"][0]).sample_cell("test", 0, 0)


def test_a_bad_run_folder_fails_before_torch_is_imported(tmp_path):
    code = ("import sys, cellgraph\ntry:\n    cellgraph.load_run(sys.argv[1])\n"
            "except cellgraph.CellGraphError as err:\n    print(err)\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "not a run folder" in done.stdout, done.stderr


def test_the_guides_snippet_runs(runs, tmp_path, monkeypatch):
    """docs/training.md's 'Python: load a trained run' block, on a tiny run at the path it names."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Python: load a trained run"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    folder = re.search(r'load_run\("([^"]+)"\)', code).group(1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / folder).parent.mkdir(parents=True)
    (tmp_path / folder).symlink_to(runs["rrnn"][0])
    exec(compile(code, "docs/training.md", "exec"), {})
    written = [p for p in tmp_path.iterdir() if p.suffix == ".json"]
    assert written and all(load_tree(p).vector is not None for p in written)


def test_export_json_carries_the_vectors_distance_needs(runs, tmp_path, capsys):
    path, _ = runs["rrnn"]
    files = {}
    for name, (sample, extra) in {"tree": (1, []), "dag": (2, ["--dag"])}.items():
        files[name] = str(tmp_path / f"{name}.json")
        assert main(["export", str(path), "--sample", str(sample), "--t", "3", "--format", "json",
                     "-o", files[name], *extra]) == 0
    run = cellgraph.load_run(path)
    with torch.no_grad():
        _, traces = run.model(run.tokens("test", [1]))
    vectors = run.vectors(traces, 3, 0)
    tree = load_tree(files["tree"])
    tree.require_vectors()
    assert all(np.array_equal(t.vector, vectors[t.expr]) for t in tree.subtrees())
    capsys.readouterr()
    assert main(["distance", files["tree"], files["dag"]]) == 0
    assert float(capsys.readouterr().out) == td(tree, load_tree(files["dag"]))
    assert main(["distance", files["tree"], files["tree"]]) == 0
    assert float(capsys.readouterr().out) == 0.0


def test_distance_names_the_command_that_writes_vectors(runs, tmp_path, capsys):
    path, _ = runs["rrnn"]
    pred, gru = str(tmp_path / "pred.json"), str(tmp_path / "gru.json")
    assert main(["export", str(path), "--sample", "0", "--t", "1", "--format", "json", "-o", pred]) == 0
    assert main(["target", "gru", "--format", "json", "-o", gru]) == 0
    assert main(["trees", str(path), "--top", "1", "--save", str(tmp_path / "forms")]) == 0
    out = capsys.readouterr().out
    example = load_document(json.loads((path / "structures" / "epoch_002.json").read_text())["forms"][0]["cell"])
    assert "structures without vectors" in out and "cellgraph export" in out and example.kind == "dag"
    for symbolic in (gru, str(tmp_path / "forms" / "form_1.json")):
        assert main(["distance", pred, symbolic]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "has no vectors on its nodes" in err
        assert "cellgraph export RUN_DIR --sample I --t T --format json" in err


def test_eval_reports_progress_off_a_terminal(runs, monkeypatch, capsys):
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    monkeypatch.delenv(progress.ENV, raising=False)
    # the tiny runs evaluate 16 test sequences in batches of 4
    path, _ = runs["gru"]
    assert main(["eval", str(path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("test: 4/16 sequences (25%), ") and "ETA " in err[0]
    assert err[-1].startswith("test: done, 16 sequences in ")
    assert main(["eval", str(runs["rrnn"][0]), "--split", "val", "--mode", "soft"]) == 0
    assert capsys.readouterr().err.startswith("val, soft search: 4/16 sequences (25%)")


def test_structure_logs_record_what_each_cell_reads(runs, capsys):
    """The trainer's logs carry form_reads of every form's cell and the count-weighted shares;
    cellgraph diff reads the last of them."""
    from cellgraph.experiment.runlog import RunLog, SHARES, form_reads

    path, _ = runs["rrnn"]
    logs = RunLog.load(path).structures()
    assert [log["epoch"] for log in logs] == [0, 1, 2]
    for log in logs:
        for form in log["forms"]:
            doc = load_document(form["cell"])
            assert {k: form[k] for k in form_reads(doc.cell, doc.layout)} == form_reads(doc.cell, doc.layout)
            assert set(form["reads"]) == {"x", "h"}
        for key, flags in SHARES.items():
            counted = sum(f["count"] for f in log["forms"] if all(f[k] for k in flags))
            assert log[key] == pytest.approx(counted / log["n_cells"])
    assert main(["diff", str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "epoch 2:" in out and "compared with gru" in out and "#2: " in out and "h_t reads" in out
