"""model = cell (a fixed cell trained from scratch), the planted teacher in the record, the
recoveries of final.json and cellgraph summarize, --resume with a machine setting, bench item 8."""

from __future__ import annotations

import json

import pytest
import torch

from cellgraph.backends.torch.models.freeze import FrozenRNN, freeze
from cellgraph.backends.torch.runs.train import CELL_FILE, train
from cellgraph.benchmarks import cell_bench, suite
from cellgraph.cli import main
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.cellspec import resolve_cell
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.runs import RunDir, load_run
from cellgraph.experiment.summary import summarize
from cellgraph.export.jsonio import dump_cell, load_document, save
from cellgraph.targets import target

TINY = dict(task="planted", hidden_size=8, max_train=32, max_eval=16, seq_len=5, epochs=2, batch_size=16,
            log_structures=4, num_threads=1)
CLI_TINY = [f"--set={k}={v}" for k, v in TINY.items() if k != "task"]


def tiny(**changes) -> TrainConfig:
    return TrainConfig(**{**TINY, **changes})


def quiet(_: str) -> None:
    pass


def test_planted_teacher_reaches_the_data(tmp_path):
    final = train(tiny(model="gru", planted_teacher="mgu", epochs=1), tmp_path, log=quiet)
    assert final["recovery"]["teacher_json"]["kind"] == "mgu"
    assert final["recovery"]["exact_recovery"] is False  # nn.GRU's cell is not MGU's


def test_a_cell_run_trains_the_frozen_cell_and_records_it(tmp_path):
    final = train(tiny(model="cell", cell="mut1", planted_teacher="mut1"), tmp_path, log=quiet)
    run = load_run(tmp_path)
    assert isinstance(run.model.core, FrozenRNN)
    assert run.model.core.cell.graphs == target("mut1").cell.graphs
    recorded = load_document(final["cell"]["document"])
    assert final["cell"]["spec"] == "mut1" and recorded.cell == target("mut1").cell
    assert json.loads((tmp_path / CELL_FILE).read_text()) == final["cell"]
    assert json.loads((tmp_path / "config.json").read_text())["cell"] == "mut1"
    rec = final["recovery"]
    assert rec["exact_recovery"] is True and rec["teacher_structure"] is True and rec["structure_recovery"] == 1.0
    # the embedding and output layer are the gru baseline's: the same parameters but the core's
    train(tiny(model="gru", epochs=1), tmp_path / "gru", log=quiet)
    gru = load_run(tmp_path / "gru")

    def outer(model):
        return {k: v.shape for k, v in model.state_dict().items() if not k.startswith("core.")}

    assert outer(run.model) == outer(gru.model)
    # the parameter counts docs/discover.md matches the baselines by: K tuples (2p^2 + p) against
    # nn.GRU's 6p^2 + 6p and nn.LSTM's 8p^2 + 8p, plus the embedding (V p) and the output layer (2p C + C) they share
    p, k = 8, len(target("mut1").layout.trainable_indices)
    shared = len(run.dataset.vocab) * p + 2 * p * run.dataset.n_classes + run.dataset.n_classes
    assert final["parameters"] == k * (2 * p * p + p) + shared
    assert json.loads((tmp_path / "gru" / "final.json").read_text())["parameters"] == 6 * p * p + 6 * p + shared
    lstm = train(tiny(model="lstm", epochs=1), tmp_path / "lstm", log=quiet)
    assert lstm["parameters"] == 8 * p * p + 8 * p + shared


def test_cell_from_an_exported_json_file_trains_resumes_and_exports(tmp_path, capsys):
    """The done-when commands: a JSON written by cellgraph export (--dag and the tree form),
    trained on MUT1's planted data, resumed with another thread count, exported."""
    first = tmp_path / "first"
    assert main(["train", "--task", "planted", "--model", "cell", "--set", "cell=mut1", "--set",
                 "planted_teacher=mut1", *CLI_TINY, "--out", str(first)]) == 0
    for form in ([], ["--dag"]):
        path = tmp_path / f"cell{len(form)}.json"
        assert main(["export", str(first), "--sample", "0", "--t", "2", "--format", "json", *form,
                     "-o", str(path)]) == 0
        assert load_document(str(path)).cell == target("mut1").cell
    out = tmp_path / "from-file"
    assert main(["train", "--task", "planted", "--model", "cell", "--set", f"cell={tmp_path / 'cell1.json'}",
                 "--set", "planted_teacher=mut1", *CLI_TINY, "--out", str(out)]) == 0
    final = RunDir(out).read_final()
    assert final["recovery"]["exact_recovery"] is True
    config = json.loads((out / "config.json").read_text())
    config["epochs"] = 3
    (out / "config.json").write_text(json.dumps(config))
    (tmp_path / "cell1.json").unlink()  # the run keeps its own copy
    assert main(["train", "--resume", str(out), "--set", "num_threads=2"]) == 0
    assert "resuming" in capsys.readouterr().out
    assert RunDir(out).read_final()["epochs_run"] == 3


def test_resume_refuses_a_setting_of_the_run(tmp_path, capsys):
    train(tiny(model="gru", epochs=1), tmp_path, log=quiet)
    assert main(["train", "--resume", str(tmp_path), "--set", "lr=0.1"]) != 0
    assert "may change only the machine's (data_dir, num_threads, device, logger), not lr" in capsys.readouterr().err


def test_resume_takes_the_new_thread_count(tmp_path, monkeypatch):
    train(tiny(model="gru", epochs=1), tmp_path, log=quiet)
    seen = []
    from cellgraph.backends.torch.plugin import TorchBackend

    monkeypatch.setattr(TorchBackend, "train", lambda self, config, *a, **k: seen.append(config.num_threads))
    assert main(["train", "--resume", str(tmp_path), "--set", "num_threads=2"]) == 0
    assert seen == [2]


@pytest.mark.parametrize("changes, message", [
    (dict(model="cell"), "model=cell trains the cell this setting names"),
    (dict(model="gru", cell="mgu"), "only model=cell trains a given cell"),
    (dict(model="rrnn-gru", fixed_matrices=True), "fixed_matrices: set for model rrnn-gru"),
])
def test_the_cell_setting_goes_with_model_cell(changes, message):
    with pytest.raises(FormatError, match=message):
        tiny(**changes)


def test_fixed_matrices_keep_gru_torchs_identity_through_training(tmp_path):
    """cell=gru_torch with fixed_matrices trains torch.nn.GRU's cell: n's R (named I) stays
    the identity, its parameter entries zero, through training, the record and a loaded run."""
    train(tiny(model="cell", cell="gru_torch", fixed_matrices=True), tmp_path, log=quiet)
    assert json.loads((tmp_path / "config.json").read_text())["fixed_matrices"] is True
    cell = load_run(tmp_path).model.core.cell
    layout = target("gru_torch").layout
    n = layout.index("n")
    assert not cell.weight_R[n].any() and cell.weight_L[n].abs().sum() > 0
    eye, p = torch.eye(8), 8
    params = [(cell.weight_L[k], eye if k == n else cell.weight_R[k], cell.bias[k])
              for k in layout.trainable_indices] + [(eye, eye, torch.zeros(p))]
    with torch.no_grad():
        x_t, h_0 = torch.randn(3, p), torch.randn(3, p)
        torch.testing.assert_close(cell(x_t, h_0), freeze(target("gru_torch"), params)(x_t, h_0))


def test_bad_cell_specs_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "cellgraph.dag"')
    two_inputs = tmp_path / "two.json"
    doc = dump_cell(target("gru").cell, target("gru").layout)
    doc["nodes"][0]["leaf"], doc["nodes"][0]["role"] = "y", "data"
    two_inputs.write_text(json.dumps(doc))
    for spec, message in (("nosuch", "not a target name"), (str(tmp_path / "missing.json"), "nor a cell JSON file"),
                          (str(bad), "not valid JSON"), ("random:x", "random:SEED"),
                          (str(two_inputs), "one data leaf, x")):
        with pytest.raises(CellGraphError, match=message) as err:
            resolve_cell(spec)
        assert "\n" not in str(err.value)


def test_multi_state_cells_train(tmp_path):
    lstm = tmp_path / "lstm.json"
    save(lstm, dump_cell(target("lstm").cell, target("lstm").layout))
    final = train(tiny(model="cell", cell=str(lstm), epochs=1), tmp_path / "run", log=quiet)
    assert final["recovery"]["exact_recovery"] is False and final["cell"]["spec"] == str(lstm)
    run = load_run(tmp_path / "run")
    assert run.model.core.cell.states == ("c", "h")
    cell, vectors = run.sample_cell("test", 0, 1)
    assert cell == target("lstm").cell and all(v.shape == (8,) for v in vectors.values())


def test_node_values_at_a_step_are_the_sequence_states():
    torch.manual_seed(0)
    from cellgraph.backends.torch.models.freeze import freeze

    rnn = FrozenRNN(freeze(target("mgu"), hidden_size=4))
    x = torch.randn(5, 3, 4)
    output = rnn(x)[0]
    root = target("mgu").cell.output.root
    for t in (0, 3):
        assert torch.allclose(rnn.node_values(x, t)[root], output[t])


def _planted_run(tmp_path, name, **changes):
    path = tmp_path / name
    RunDir.create(path).write_config(tiny(**changes).to_dict())
    return path


def test_summarize_scores_accuracy_recovery_against_the_teacher_structure_run(tmp_path):
    runs = {
        "ref": (dict(model="cell", cell="mgu", planted_teacher="mgu"), 0.90, True),
        "close": (dict(model="gru", planted_teacher="mgu"), 0.895, False),
        "far": (dict(model="lstm", planted_teacher="mgu"), 0.80, False),
        "other-seed": (dict(model="rrnn", planted_teacher="mgu", seed=1), 0.95, False),
    }
    for name, (changes, acc, teacher) in runs.items():
        path = _planted_run(tmp_path, name, **changes)
        RunDir(path).write_final({"metric": "accuracy", "val_accuracy": acc, "test_accuracy": acc, "epochs_run": 2,
                                  "recovery": {"exact_recovery": teacher, "teacher_structure": teacher,
                                               "structure_recovery": float(teacher)}})
    rows = {r["model"]: r for r in summarize([tmp_path / n for n in runs])}
    assert rows["cell"]["accuracy_recovery"][0] == 1.0 and rows["cell"]["exact_recovery"][0] == 1.0
    assert rows["gru"]["accuracy_recovery"][0] == 1.0
    assert rows["lstm"]["accuracy_recovery"][0] == 0.0 and rows["lstm"]["exact_recovery"][0] == 0.0
    assert rows["rrnn"]["accuracy_recovery"] is None  # seed 1 has no reference run
    assert main(["summarize", "--recoveries", *(str(tmp_path / n) for n in runs)]) == 0


def test_bench_item_8_quick(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--threads", "1", "--items", "cells", "--json", str(out)]) == 0
    assert "compiled rows (frozen_gru_compiled, frozen_large_compiled): not run with --quick" in capsys.readouterr().out
    result = json.loads(out.read_text())
    cells = result["cells"]
    assert set(cells["models"]) == {"torch_gru", "frozen_gru", "frozen_large"}
    assert cells["config"]["compiled"] is False and "compiled_large_per_node_vs_compiled_frozen_gru" not in cells
    assert 12 <= cells["models"]["frozen_large"]["nodes"] <= 15 and cells["models"]["frozen_gru"]["nodes"] == 8
    large, gru = cells["models"]["frozen_large"], cells["models"]["frozen_gru"]
    assert cells["large_per_node_vs_frozen_gru"] == pytest.approx(
        (large["time_s"] / large["nodes"]) / (gru["time_s"] / gru["nodes"]))
    assert [t["target"].split()[0] for t in result["targets"]] == ["frozen", "14-node"]
    assert "search" not in result
    assert main(["bench", "--quick", "--items", "nope"]) != 0


def test_bench_item_8_compiled_rows(monkeypatch):
    """The compiled rows beside the eager ones: compiled by the untimed first step (here by a
    compiler that returns the function), their per-node ratio and speed-up to the eager rows."""
    compiled = []

    def compile(fn, **kwargs):
        compiled.append(fn)
        return fn

    monkeypatch.setattr(torch, "compile", compile)
    cells = cell_bench.compare_cells(p=4, batch=2, steps=2, repeat=1)
    models = cells["models"]
    assert list(models) == ["torch_gru", "frozen_gru", "frozen_large", "frozen_gru_compiled", "frozen_large_compiled"]
    assert len(compiled) == 2  # once each, at the warm-up
    for name in ("frozen_gru", "frozen_large"):
        row, eager = models[f"{name}_compiled"], models[name]
        assert row["nodes"] == eager["nodes"] and row["compute_ops"] is None and eager["compute_ops"] > 0
        assert row["fell_back"] is False and row["first_step_s"] > 0
        assert row["speedup_over_eager"] == pytest.approx(eager["time_s"] / row["time_s"])
    large, gru = models["frozen_large_compiled"], models["frozen_gru_compiled"]
    assert cells["compiled_large_per_node_vs_compiled_frozen_gru"] == pytest.approx(
        (large["time_s"] / large["nodes"]) / (gru["time_s"] / gru["nodes"]))
    printed = suite.table({"command": "cellgraph bench", "date": "today", "quick": False,
                           "machine": {k: "?" for k in ("cpu", "cores", "torch", "torch_threads", "python",
                                                        "platform", "load_average")},
                           "load_average_after": [], "cells": cells, "targets": []})
    assert "| frozen_large_compiled | 14 |" in printed and "frozen_gru_compiled: " in printed
    assert "compiled large cell per node / compiled frozen gru per node: " in printed
