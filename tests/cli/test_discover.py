"""``cellgraph discover``: a tiny search and identifiability check end to end, resumed, and bad input."""

import json
import math

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.cli.main import main
from cellgraph.discover.cache import cell_from_json, cell_hash
from cellgraph.discover.space import absorbed, from_cell
from cellgraph.discover.planted import planted_search
from cellgraph.export.jsonio import load_document
from cellgraph.targets import target
from tests.discover.cells import logged_form, structure_run

pytest.importorskip("torch")
pytest.importorskip("optuna")
SIZES = ["--n-train", "50", "--n-val", "20", "--n-test", "20", "--seq-len", "4", "--p", "4", "--n-out", "2"]
TINY = [*SIZES, "--epochs", "1", "--restarts", "2", "--num-threads", "1"]


def test_a_search_seeded_with_the_teacher_recovers_it_writes_its_cells_and_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["discover", "--teacher", "mgu", "--budget", "4", "--population", "2", "--sample", "1",
            "--seed-target", "mgu", "--keep", "2", "--dir", str(run), *TINY]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "teacher mgu: h = " in out and "c_1 = sigma(" in out
    record = json.loads((run / "discovery.json").read_text())
    mgu = target("mgu")
    assert record["teacher"]["hash"] == cell_hash(from_cell(mgu.cell, mgu.layout))
    # exact recovery is the search's answer: the teacher (trained first, as the seed) is its best cell, or not
    assert record["result"]["proposed"]["trial"] == 0
    recovered = record["best"][0]["hash"] == record["teacher"]["hash"]
    assert (record["result"]["target"] is not None) == recovered
    assert ("recovered the teacher (the best cell since trial #0" in out) == recovered
    assert ("(trained at trial #0, not the best)" in out) != recovered
    assert record["result"]["evaluations"] == 4 and record["config"]["penalty"] == "relative"
    assert record["evaluator"]["parsimony"] == 0.1 and record["evaluator"]["penalty"] == "relative"
    assert "torch" in record["versions"] and record["data"]["n_train"] == 50
    assert len(record["best"]) == 2 and {"val_mse", "test_mse", "complexity"} <= set(record["best"][0])
    for row in record["best"]:
        doc = load_document(run / row["file"])  # the cellgraph.dag document trees --save writes
        assert doc.kind == "dag" and cell_hash(cell_from_json(json.loads((run / row["file"]).read_text()))) == row["hash"]
        assert row["objective"] == pytest.approx(row["val_mse"] * math.exp(0.1 * row["complexity"]))
    assert any(row["recovers"] for row in record["best"]) == ("recovers mgu" in out)
    assert main(args) == 0  # the budget is spent: nothing more trains
    assert json.loads((run / "discovery.json").read_text())["result"]["trials"] == record["result"]["trials"]
    assert main([*args[:4], "5", *args[5:]]) == 0  # a larger budget goes on
    assert json.loads((run / "discovery.json").read_text())["result"]["evaluations"] == 5
    assert main([*args, "--parsimony", "0.5"]) == 2
    assert "other settings (evaluator" in capsys.readouterr().err
    assert record["evaluator"]["floor"] == 1e-5  # the default floor is one of the study's settings:
    assert main([*args, "--error-floor", "0"]) == 2  # a search without it (as before it) is another study
    assert "other settings (evaluator" in capsys.readouterr().err


def test_with_absorb_the_search_recovers_the_teachers_absorbed_form(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["discover", "--teacher", "minimal:4:4-7", "--weight-scale", "1", "--absorb", "--strategy", "random",
                 "--budget", "1", "--dir", str(run), *TINY]) == 0
    assert "recovered as its absorbed form: h = " in capsys.readouterr().out
    record = json.loads((run / "discovery.json").read_text())
    _, root, _, _ = planted_search("minimal:4:4-7", 0, None, weight_scale=1)
    assert record["teacher"]["hash"] == cell_hash(root) != record["teacher"]["absorbed"]["hash"]
    assert record["teacher"]["absorbed"]["hash"] == cell_hash(absorbed(root))
    spec = json.loads((run / "discover.json").read_text())
    assert spec["target_hash"] == cell_hash(absorbed(root)) and spec["space"]["absorb"] is True


def test_a_tpe_search_runs_from_the_command_line_and_records_its_strategy(tmp_path, capsys, monkeypatch):
    """With the structural loss in place of training (the backend's planted evaluator replaced)."""
    import importlib
    import types

    from cellgraph.discover.synthetic import StructureEvaluator

    backend = types.SimpleNamespace(planted_evaluator=lambda data, *a, **k: StructureEvaluator(
        from_cell(data.cell, data.layout)))
    plugins = importlib.import_module("cellgraph.backend")  # the package exports a function of that name
    monkeypatch.setattr(plugins, "discover_backend", lambda name: backend)
    monkeypatch.chdir(tmp_path)
    args = ["discover", "--teacher", "mgu", "--strategy", "tpe", "--budget", "6", "--starts", "3", "--seed-target",
            "rnn", *SIZES, "--epochs", "1"]
    assert main(args) == 0
    record = json.loads((tmp_path / "discoveries" / "mgu-tpe-s0" / "discovery.json").read_text())
    assert record["config"]["strategy"] == "tpe" and record["result"]["evaluations"] == 6
    search = json.loads((tmp_path / "discoveries" / "mgu-tpe-s0" / "discover.json").read_text())
    assert search["strategy"] == {"name": "tpe", "starts": 3, "seeds": 1}
    assert "6 evaluations" in capsys.readouterr().out


def test_identify_reports_a_verdict_and_writes_every_row(tmp_path, capsys):
    folder = tmp_path / "id"
    assert main(["discover", "--teacher", "mgu", "--identify", "--limit", "2", "--dir", str(folder), *TINY]) == 0
    out = capsys.readouterr().out
    assert "structures at 1 epochs: the teacher, the GRU, 2 neighbours" in out
    assert out.count("\n") > 5 and ("PASS" in out) != ("FAIL" in out)
    stored = json.loads((folder / "identify.json").read_text())
    assert [r["name"] for r in stored["rows"]][:2] == ["teacher", "gru"] and len(stored["rows"]) == 4
    assert stored["verdict"]["margin"] == 0.1 and stored["verdict"]["passed"] == ("PASS" in out)


def test_a_sized_random_teacher_runs_in_a_folder_named_after_it(tmp_path, capsys, monkeypatch):
    """``random:1:2-3``'s default folders are ``random1-2to3`` (no colon), for a check and a search."""
    monkeypatch.chdir(tmp_path)
    assert main(["discover", "--teacher", "random:1:2-3", "--identify", "--limit", "0", *TINY]) == 0
    assert "teacher random:1:2-3: " in capsys.readouterr().out
    stored = json.loads((tmp_path / "discoveries" / "identify-random1-2to3" / "identify.json").read_text())
    assert stored["spec"]["data"]["teacher"] == "random:1:2-3"
    assert main(["discover", "--teacher", "random:1:2-3", "--budget", "1", "--strategy", "random", *TINY]) == 0
    assert (tmp_path / "discoveries" / "random1-2to3-random-s0" / "discovery.json").exists()


@pytest.mark.parametrize("args, words", [
    (["--teacher", "lstm", "--budget", "2"], "lstm has 2 states"),
    (["--teacher", "nope", "--budget", "2"], "unknown target 'nope'"),
    (["--teacher", "random:4:7-4", "--budget", "2"], "teacher random:4:7-4: sizes 7-4: need 1 <= LOW <= HIGH <= 15"),
    (["--teacher", "random:4:7-4", "--identify"], "teacher random:4:7-4: sizes 7-4: need 1 <= LOW <= HIGH <= 15"),
    (["--teacher", "mgu"], "--budget N"),
    (["--teacher", "mgu", "--budget", "2", "--epochs", "2", "--fidelity", "1,2"], "not both"),
    (["--teacher", "mgu", "--budget", "2", "--fidelity", "3,1"], "increasing"),
    (["--teacher", "mgu", "--budget", "2", "--fidelity", "1,3", "--probes", "2"], "probes must be 0 to 1"),
    (["--teacher", "mgu", "--budget", "2", "--intensify", "0"], "the race seeds must be 1 or more"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "enumerate", "--depth", "2"], "without --expand"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "enumerate", "--expand", "--depth", "0"], "--depth D"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "enumerate", "--all-rungs"], "--all-rungs ranks the parents"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "enumerate", "--expand", "--probe-parents-only"],
     "needs --expand and --probes K"),
    (["--teacher", "mgu", "--budget", "2", "--seed-cells", "missing.json"], "missing.json"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "random", "--seed-target", "gru"], "not random search"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "tpe", "--motifs"], "not of tpe search"),
    (["--teacher", "mgu", "--budget", "2", "--first-improvement"], "not of evolution search"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "local", "--grow"], "not local search"),
    (["--teacher", "mgu", "--budget", "2", "--screen"], "not evolution search"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "random", "--expand"], "--expand continues an enumeration"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "enumerate", "--grow", "--expand"], "choose one"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "random", "--screen", "0"], "--screen DRAWS must be >= 1"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "tpe", "--starts", "0"], "must be >= 1: --starts 0"),
    (["--teacher", "mgu", "--budget", "0"], "budget must be a positive"),
    (["--teacher", "mgu", "--budget", "2", "--strategy", "random", "--seed-run", "r"], "not random search"),
    (["--teacher", "mgu", "--budget", "2", "--seed-run", "r", "--seed-top", "0"], "--seed-top 0"),
    (["--teacher", "mgu", "--budget", "2", "--seed-run", "nowhere"], "nowhere is not a run folder"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, words):
    assert main(["discover", *args, "--dir", str(tmp_path / "r"), *SIZES]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


#: Forms of an RRNN's structure log: a linear identity chain reading x and h (a candidate), one
#: that never reads x and one whose root is a no-op (neither is).
CHAIN = Node("add", "identity", 3, x, Node("add", "identity", 3, x, h))
NO_X = Node("add", "identity", 3, zero, h)
NO_OP = Node("add", "identity", 3, Node("add", "tanh", 0, x, h), zero)


def test_a_search_seeded_from_a_run_starts_at_its_valid_forms_and_records_the_refusals(tmp_path, capsys):
    run = structure_run(tmp_path / "rrnn", [logged_form(NO_X, 9), logged_form(CHAIN, 5), logged_form(NO_OP, 2)])
    folder = tmp_path / "search"
    assert main(["discover", "--teacher", "mgu", "--strategy", "local", "--motifs", "--seed-run", str(run),
                 "--budget", "1", "--dir", str(folder), *TINY]) == 0
    out = capsys.readouterr().out
    assert (f"seeds from {run}, epoch 2: read the 3 most frequent of 3 forms (16 cells): kept 1, refused 2 "
            "(1 does not read every data and state leaf, 1 no-op node (identity add of zero))") in out
    assert "  form 2 (5 cells): h = identity[add_0](x, identity[add_0](x, h))" in out
    record = json.loads((folder / "discovery.json").read_text())
    seeded = record["seed_run"]
    assert seeded["run"] == str(run) and seeded["config"]["model"] == "rrnn" and seeded["kept"] == 1
    assert [row.get("reason") for row in seeded["rows"]] == ["does not read every data and state leaf", None,
                                                            "no-op node (identity add of zero)"]
    assert record["best"][0]["hash"] == seeded["rows"][1]["hash"]  # one evaluation: the seed
    assert json.loads((folder / "seeds.json").read_text())["seed_run"] == seeded


def test_a_run_with_no_valid_form_is_a_one_line_error_and_recorded(tmp_path, capsys):
    run = structure_run(tmp_path / "rrnn", [logged_form(NO_X, 9), logged_form(NO_OP, 2), logged_form(CHAIN, 1)])
    folder = tmp_path / "search"
    assert main(["discover", "--teacher", "mgu", "--seed-run", str(run), "--seed-top", "2", "--budget", "1",
                 "--dir", str(folder), *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--seed-run {run}: none of its 2 most frequent forms is a candidate" in err
    assert "(1 does not read every data and state leaf, 1 no-op node (identity add of zero))" in err
    stored = json.loads((folder / "seeds.json").read_text())
    assert stored["seed_run"]["kept"] == 0 and stored["config"]["teacher"] == "mgu"
    assert stored["seed_run"]["refusals"] == {"does not read every data and state leaf": 1,
                                              "no-op node (identity add of zero)": 1}
    assert not (folder / "discovery.json").exists()


def test_an_unfinished_run_seeds_nothing(tmp_path, capsys):
    run = structure_run(tmp_path / "rrnn", [logged_form(CHAIN, 1)], finished=False)
    assert main(["discover", "--teacher", "mgu", "--seed-run", str(run), "--budget", "1",
                 "--dir", str(tmp_path / "search"), *TINY]) == 2
    assert "has not finished (no final.json)" in capsys.readouterr().err
    assert not (tmp_path / "search" / "seeds.json").exists()


def test_a_task_search_writes_best_cells_that_cellgraph_train_retrains(tmp_path, capsys, small_data):
    run = tmp_path / "wiki"
    args = ["discover", "--task", "wiki5k", "--budget", "2", "--strategy", "random", "--epochs", "1", "--keep", "2",
            "--set", "hidden_size=8", "--dir", str(run)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "teacher" not in out and "val_bpc" in out and "2 evaluations" in out
    record = json.loads((run / "discovery.json").read_text())
    assert record["teacher"] is None and record["data"] == {"task": "wiki5k"} and record["result"]["target"] is None
    assert record["evaluator"]["parsimony"] == 0.01 and record["evaluator"]["train"]["hidden_size"] == 8
    assert "num_threads" not in record["evaluator"]["train"] and len(record["best"]) == 2
    best = record["best"][0]
    assert "recovers" not in best and best["objective"] == pytest.approx(
        best["val_bpc"] * math.exp(0.01 * best["complexity"]))
    assert len(list((run / "candidates").glob("*-s0"))) == 2
    again = tmp_path / "again"
    assert main(["train", "--task", "wiki5k", "--model", "cell", "--set", f"cell={run / best['file']}",
                 "--set", "hidden_size=8", "--set", "epochs=1", "--set", "num_threads=1", "--out", str(again)]) == 0
    final = json.loads((again / "final.json").read_text())
    assert cell_hash(cell_from_json(final["cell"]["document"])) == best["hash"]


@pytest.mark.parametrize("args, words", [
    (["--task", "wiki5k", "--identify"], "--task wiki5k has no teacher"),
    (["--task", "wiki5k", "--budget", "2", "--lr", "0.1", "--n-train", "5"], "--n-train, --lr: planted-task flags"),
    (["--task", "ptb", "--budget", "2", "--set", "epochs=3"], "--set epochs: the search sets these"),
    (["--task", "ptb", "--budget", "2", "--set", "hidden_size"], "expected key=value"),
    (["--teacher", "mgu", "--budget", "2", "--set", "lr=0.1"], "--set gives the training settings of a --task"),
])
def test_bad_task_input_is_one_line(tmp_path, capsys, args, words):
    assert main(["discover", *args, "--dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


@pytest.mark.parametrize("args, words", [
    (["--budget", "2"], "one of the arguments --teacher --task is required"),
    (["--teacher", "mgu", "--task", "wiki5k", "--budget", "2"], "not allowed with argument --teacher"),
    (["--task", "sst", "--budget", "2"], "invalid choice: 'sst'"),
])
def test_a_search_needs_a_teacher_or_a_task_not_both(capsys, args, words):
    with pytest.raises(SystemExit) as stop:
        main(["discover", *args])
    assert stop.value.code == 2 and words in capsys.readouterr().err


def test_the_default_rungs_are_20_and_60_epochs_on_a_teacher_and_20_on_a_task():
    import argparse

    from cellgraph.cli.commands.discover import _fidelity

    def rungs(**flags):
        return _fidelity(argparse.Namespace(**{"fidelity": None, "epochs": None, "task": None, "eta": 3, "probes": 0,
                                               "intensify": 1,
                                               **flags})).epochs

    assert rungs() == (20, 60)
    assert rungs(task="wiki5k") == (20,)
    assert rungs(epochs=7) == (7,)
    assert rungs(fidelity="5,20") == (5, 20)
