"""The trainer, the task model and the train / eval / export commands on tiny runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cellgraph.algorithms.shape import shape_form
from cellgraph.backends.torch.runs.run import evaluate_run, export_cell
from cellgraph.backends.torch.runs.train import build_model, epoch_order, load_data, train
from cellgraph.backends.torch.training.trainstate import seed_everything
from cellgraph.algorithms.canonical import canonical_string
from cellgraph.cell.graph import MultiCell
from cellgraph import progress
from cellgraph.cli import main
from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import TrainConfig
from cellgraph.experiment.runlog import RunLog, structure_summary
from cellgraph.experiment.runs import load_run
from cellgraph.export.jsonio import load_document
from cellgraph.targets import target

TINY = dict(task="planted", hidden_size=8, n_iterations=3, scoring_hidden=8, max_train=32, max_eval=16,
            seq_len=5, epochs=2, batch_size=16, log_structures=4, num_threads=1)
MODELS = ("rrnn", "rrnn-gru", "gru", "lstm")
METRIC_KEYS = {"epoch", "train_accuracy", "val_accuracy", "loss_task", "loss_td", "loss_margin",
               "loss_l2", "time_s"}


def tiny(**changes) -> TrainConfig:
    return TrainConfig(**{**TINY, **changes})


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    out = {}
    for model in MODELS:
        path = tmp_path_factory.mktemp(model)
        out[model] = (path, train(tiny(model=model, alternate_every=1), path, log=lambda s: None))
    return out


@pytest.mark.parametrize("model", MODELS)
def test_each_model_writes_every_file(runs, model):
    path, final = runs[model]
    for name in ("config.json", "env.json", "metrics.jsonl", "final.json", "checkpoints/best.pt",
                 "checkpoints/last.pt"):
        assert (path / name).is_file(), name
    assert json.loads((path / "final.json").read_text()) == final
    assert {"val_accuracy", "test_accuracy", "best_epoch", "epochs_run", "train_seconds",
            "target_provider", "parameters"} <= final.keys()
    assert final["cpu_seconds"] > 0
    assert final["epochs_run"] == 2 and 1 <= final["best_epoch"] <= 2
    assert final["target_provider"] == ("self" if model.startswith("rrnn") else None)
    log = RunLog.load(path)
    assert [r["epoch"] for r in log.metrics] == [1, 2]
    for record in log.metrics:
        assert METRIC_KEYS <= record.keys()
        assert 0 <= record["val_accuracy"] <= 1 and record["time_s"] > 0
        assert (record["loss_td"] is None) == (model in ("gru", "lstm"))
    assert ("n_e" in log.metrics[0]) == (model == "rrnn-gru")
    assert len(log.structures()) == (3 if model.startswith("rrnn") else 0)  # epochs 0 (untrained), 1, 2
    if model.startswith("rrnn"):
        assert [s["epoch"] for s in log.structures()] == [0, 1, 2]
    assert log.config["model"] == model


@pytest.mark.parametrize("model", MODELS)
def test_each_epoch_validates_a_searching_model_in_both_searches(runs, model):
    """val_<metric> is the eval_mode's (hard here) and selects; _hard and _soft are both
    recorded for rrnn models, and the best epoch's equal what final.json scores its
    checkpoint with."""
    path, final = runs[model]
    metrics = RunLog.load(path).metrics
    if not model.startswith("rrnn"):
        assert not any("val_accuracy_hard" in r or "val_accuracy_soft" in r for r in metrics)
        return
    for record in metrics:
        assert record["val_accuracy_hard"] == record["val_accuracy"]
        assert 0 <= record["val_accuracy_soft"] <= 1
    best = metrics[final["best_epoch"] - 1]
    assert (best["val_accuracy_hard"], best["val_accuracy_soft"]) == (final["val_accuracy_hard"],
                                                                      final["val_accuracy_soft"])


def test_eval_mode_soft_selects_on_the_mixture(tmp_path):
    """With eval_mode=soft the mixture's validation metric selects the best checkpoint: the
    best epoch is the one whose soft metric is best, and final.json's val is that metric."""
    lines: list[str] = []
    final = train(tiny(model="rrnn", epochs=3, eval_mode="soft"), tmp_path, log=lines.append)
    metrics = RunLog.load(tmp_path).metrics
    assert [r["val_accuracy_soft"] for r in metrics] == [r["val_accuracy"] for r in metrics]
    soft = [r["val_accuracy_soft"] for r in metrics]
    assert final["best_epoch"] == 1 + soft.index(max(soft))
    assert final["val_accuracy"] == final["val_accuracy_soft"] == max(soft)
    assert any("hard search" in line for line in lines if line.startswith("epoch 1/3"))


@pytest.mark.parametrize("model", ("rrnn", "rrnn-gru"))
def test_recompute_trains_the_same_run(runs, model, tmp_path):
    """recompute=true (every step checkpointed, its search run again in the backward pass)
    reaches the core and changes memory, not results: every epoch's metrics and the final
    scores equal the run without it."""
    path, final = runs[model]
    model_ = build_model(tiny(model=model, recompute=True), load_data(tiny(model=model)))
    assert model_.core.recompute
    other = train(tiny(model=model, alternate_every=1, recompute=True), tmp_path, log=lambda s: None)
    assert {k: v for k, v in other.items() if "seconds" not in k} == {k: v for k, v in final.items()
                                                                        if "seconds" not in k}
    timeless = [[{k: v for k, v in r.items() if k != "time_s"} for r in RunLog.load(d).metrics] for d in (path, tmp_path)]
    assert timeless[0] == timeless[1]


def test_rrnn_gru_logs_n_e_and_alternates(runs):
    path, _ = runs["rrnn-gru"]
    first, second = RunLog.load(path).metrics
    assert first["n_e"] is None and isinstance(second["n_e"], int)
    n_choices = TINY["max_train"] * TINY["seq_len"] * 6  # flexible placement: 6 choosing nodes
    assert 0 <= second["n_e"] <= n_choices
    assert (first["phase"], second["phase"]) == ("tuples", "scoring")


def test_alternating_phase_freezes_the_other_parameters(tmp_path):
    config = tiny(model="rrnn-gru", alternate_every=1, epochs=1)
    seed_everything(config.seed)
    start = build_model(config, load_data(config))
    train(config, tmp_path, log=lambda s: None)
    state = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert torch.equal(state["core.cell.scoring.0.weight"], start.core.cell.scoring[0].weight)
    assert not torch.equal(state["core.cell.weight_L"], start.core.cell.weight_L)
    assert not torch.equal(state["output.weight"], start.output.weight)


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_structure_log_format(runs, model):
    path, final = runs[model]
    log = RunLog.load(path).structures()[-1]
    assert log["epoch"] == 2 and log["target"] == "gru"
    assert log["n_cells"] == TINY["log_structures"] * TINY["seq_len"]
    counts = [f["count"] for f in log["forms"]]
    assert counts == sorted(counts, reverse=True) and sum(counts) == log["n_cells"]
    share = sum(f["count"] for f in log["forms"] if f["is_target"]) / log["n_cells"]
    assert log["target_share"] == pytest.approx(share)
    form = log["forms"][0]
    doc = load_document(form["cell"])
    assert doc.kind == "dag" and form["depth"] >= 1 and 0 < form["balance"] <= 1
    if model == "rrnn-gru":  # the tree is GRU's; the weight placement (identity or not) is chosen
        gru = structure_summary(target("gru").graph.unfold())
        assert all({k: f[k] for k in gru} == gru for f in log["forms"])
        assert len(log["forms"]) > 1  # the flexible placement chose differently somewhere
    rec = final["recovery"]
    assert rec["n_cells"] == TINY["log_structures"] * TINY["seq_len"]
    assert 0 <= rec["structure_recovery"] <= 1 and rec["td_iso_teacher"] > 0



def test_shape_form_ignores_which_trainable_tuple_is_used():
    gru = target("gru")
    g = gru.graph
    swapped = {0: 1, 1: 0}
    from cellgraph.cell.expr import relabel
    from cellgraph.cell.graph import CellGraph

    other = MultiCell((CellGraph(relabel(g.root, lambda n: (n.op, n.act, swapped.get(n.tuple, n.tuple))), "h"),))
    assert shape_form(other, gru.layout) == shape_form(gru.cell, gru.layout)
    assert shape_form(target("lstm").cell, target("lstm").layout) != shape_form(gru.cell, gru.layout)


def test_epoch_order_is_a_pure_function_of_seed_and_epoch():
    a = epoch_order(3, 2, 50)
    assert np.array_equal(a, epoch_order(3, 2, 50)) and sorted(a) == list(range(50))
    assert not np.array_equal(a, epoch_order(3, 3, 50))
    assert not np.array_equal(a, epoch_order(4, 2, 50))


@pytest.mark.parametrize("model", ["rrnn", "gru"])
def test_eval_reproduces_the_final_test_metric(runs, model, capsys):
    path, final = runs[model]
    assert evaluate_run(path)["test_accuracy"] == final["test_accuracy"]
    assert evaluate_run(path, "val")["val_accuracy"] == final["val_accuracy"]
    assert main(["eval", str(path), "--split", "test"]) == 0
    saved = json.loads((path / "eval_test.json").read_text())
    assert saved["test_accuracy"] == final["test_accuracy"] and saved["checkpoint"] == "best"
    assert f"test_accuracy {final['test_accuracy']:.6f}" in capsys.readouterr().out
    last = evaluate_run(path, checkpoint="last")
    assert last["epoch"] == 2


def test_eval_in_another_search_mode(runs, capsys):
    """--mode soft searches the run's cells softly: a new number, in its own file; the default
    mode (hard) is untouched."""
    path, final = runs["rrnn"]
    assert main(["eval", str(path), "--split", "val", "--mode", "soft"]) == 0
    soft = json.loads((path / "eval_val_soft.json").read_text())
    assert soft["mode"] == "soft" and soft["val_accuracy"] == evaluate_run(path, "val", mode="soft")["val_accuracy"]
    assert "soft search" in capsys.readouterr().out
    hard = evaluate_run(path, "val")
    assert hard["mode"] == "hard" and hard["val_accuracy"] == final["val_accuracy"]
    assert soft["nats"] != hard["nats"]


def test_eval_of_the_last_checkpoint_keeps_the_best_ones_file(runs):
    path, _ = runs["rrnn"]
    assert main(["eval", str(path), "--split", "val", "--mode", "soft"]) == 0
    best = (path / "eval_val_soft.json").read_text()
    assert main(["eval", str(path), "--split", "val", "--mode", "soft", "--checkpoint", "last"]) == 0
    assert (path / "eval_val_soft.json").read_text() == best
    assert json.loads((path / "eval_val_soft_last.json").read_text())["checkpoint"] == "last"


@pytest.mark.parametrize("fmt", ["json", "sympy", "latex", "form", "dot", "svg"])
def test_export_every_format(runs, tmp_path, fmt):
    path, _ = runs["rrnn"]
    out = tmp_path / f"cell.{fmt}"
    assert main(["export", str(path), "--sample", "1", "--t", "3", "--format", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    cell, layout = export_cell(path, 1, 3)
    if fmt == "json":
        doc = load_document(out)
        assert doc.trees["h"].expr == cell.output.root and len(doc.layout) == len(layout)
    elif fmt == "sympy":
        assert "h_t" in text and "=" in text
    elif fmt == "latex":
        assert "\\" in text
    elif fmt == "form":
        assert text == f"h = {canonical_string(cell.output, layout)}\n"
    elif fmt == "dot":
        assert text.lstrip().startswith("digraph")
    else:
        assert "<svg" in text


def test_export_is_the_cell_of_that_sample_and_step(runs):
    path, _ = runs["rrnn-gru"]
    cell, layout = export_cell(path, 0, 2, split="val")
    gru = target("gru").graph.unfold()
    assert structure_summary(cell.output.unfold()) == structure_summary(gru)  # GRU's tree, its own placement
    log = RunLog.load(path).structures()[-1]
    examples = {(f["example"]["sample"], f["example"]["t"]): f for f in log["forms"]}
    (sample, t), form = next(iter(examples.items()))
    assert load_document(form["cell"]).cell.output.root == export_cell(path, sample, t, "val")[0].output.root


def test_export_and_eval_errors(runs, capsys):
    gru, _ = runs["gru"]
    assert main(["export", str(gru), "--sample", "0", "--t", "0", "--format", "json"]) == 2
    assert "no discovered cells" in capsys.readouterr().err
    rrnn, _ = runs["rrnn"]
    assert main(["export", str(rrnn), "--sample", "999", "--t", "0", "--format", "json"]) == 2
    assert "outside split test" in capsys.readouterr().err
    assert main(["eval", str(rrnn.parent / "missing")]) == 2


def test_teacher_provider(runs, tmp_path):
    gru, _ = runs["gru"]
    final = train(tiny(model="rrnn-gru", epochs=1, teacher=str(gru)), tmp_path / "t", log=lambda s: None)
    assert final["target_provider"] == "teacher" and final["teacher"] == str(gru)
    assert RunLog.load(tmp_path / "t").metrics[0]["loss_td"] > 0
    lstm, _ = runs["lstm"]
    with pytest.raises(CellGraphError, match="must be a gru run"):
        train(tiny(model="rrnn", epochs=1, teacher=str(lstm)), tmp_path / "u", log=lambda s: None)


def test_cli_train_and_its_errors(tmp_path, capsys):
    sets = [a for k, v in TINY.items() if k not in ("task",) for a in ("--set", f"{k}={v}")]
    out = tmp_path / "run"
    assert main(["train", "--task", "planted", "--model", "gru", *sets, "--set", "epochs=1", "--out", str(out)]) == 0
    assert "best epoch 1" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "gru" and config["epochs"] == 1
    assert json.loads((out / "env.json").read_text())["seed"] == 0
    assert main(["train", "--task", "planted", "--model", "gru", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train", "--resume", str(out), "--model", "gru"]) == 2
    assert "drop --model" in capsys.readouterr().err
    assert main(["train", "--task", "planted"]) == 2
    assert main(["train", "--task", "planted", "--model", "gru", "--set", "epochs=0", "--out", str(tmp_path / "x")]) == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["train", "--task", "planted", "--model", "gru", *sets, "--set", "epochs=1",
                 "--out", str(blocker / "run")]) == 2
    assert "cannot be written" in capsys.readouterr().err


@pytest.mark.parametrize("task,metric", [("wiki", "bpc"), ("ptb", "perplexity"), ("sst", "accuracy")])
def test_real_data_slice(tmp_path, task, metric, small_data):
    """On the real formats (the small data folder), the reported test metric is the definition
    applied to the best checkpoint's outputs, recomputed here in float64: bpc = mean
    cross-entropy per character / ln 2, perplexity = exp(mean cross-entropy per word),
    accuracy = share of argmax hits per sentence."""
    final = train(tiny(task=task, model="rrnn-gru", epochs=1, max_train=16, max_eval=16),
                  tmp_path, log=lambda s: None)
    assert final["metric"] == metric
    run = load_run(tmp_path)
    split = run.dataset.splits["test"]
    with torch.no_grad():
        logits, _ = run.model(torch.from_numpy(split.inputs))
    logits = logits.double().numpy()
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    gold = split.targets
    ce = -np.take_along_axis(logp, gold[..., None], -1)[..., 0].mean()
    want = {"bpc": ce / np.log(2), "perplexity": np.exp(ce),
            "accuracy": (logits.argmax(-1) == gold).mean()}[metric]
    assert final[f"test_{metric}"] == pytest.approx(want, rel=1e-5)
    assert final[f"test_{metric}"] == final[f"test_{metric}_hard"]


def test_every_structure_log_shows_progress(tmp_path, capsys, monkeypatch):
    """The structure logs (the untrained cells of epoch 0 too, which take minutes at the
    defaults) and the planted task's structure recovery report progress on stderr like an
    epoch does (every step is reported here: no step counts as short)."""
    monkeypatch.setattr(progress, "QUIET_S", -1.0)
    train(tiny(model="rrnn"), tmp_path, log=lambda s: None)
    err = capsys.readouterr().err
    cells = TINY["log_structures"] * TINY["seq_len"]
    for step in ("structures, epoch 0", "structures, epoch 1", "structure recovery"):
        assert f"{step}: " in err and f"{step}: done, {cells} cells in " in err, err


def test_glove_initialises_the_embedding(tmp_path):
    rows = {"t0": [0.5] * 8, "t3": [-1.0] * 8}
    (tmp_path / "glove.test.8d.txt").write_text(
        "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in rows.items()))
    config = tiny(model="gru", glove=str(tmp_path))
    weight = build_model(config, load_data(config)).embedding.weight
    assert torch.equal(weight[0], torch.full((8,), 0.5)) and torch.equal(weight[3], torch.full((8,), -1.0))
    assert not torch.equal(weight[1], torch.full((8,), 0.5))


def test_tau_is_annealed_geometrically_and_recorded(tmp_path):
    from cellgraph.backends.torch.training.epoch import tau_at

    config = tiny(tau=1.0, tau_end=0.01, epochs=2)
    assert tau_at(config, 0.0) == 1.0 and tau_at(config, 1.0) == pytest.approx(0.01)
    assert tau_at(config, 0.5) == pytest.approx(0.1) and tau_at(config, 2.0) == pytest.approx(0.01)
    assert tau_at(tiny(tau=0.5), 0.7) == 0.5  # tau_end = 0: constant
    train(config.replace(model="rrnn"), tmp_path, log=lambda s: None)
    taus = [r["tau"] for r in RunLog.load(tmp_path).metrics]
    assert taus == pytest.approx([0.1, 0.01])


def test_outweighed_names_the_weight_to_lower():
    from cellgraph.backends.torch.runs.messages import outweighed

    record = {"epoch": 1, "loss_task": 40.0, "loss_td": 500.0, "loss_margin": -3.0, "loss_l2": None}
    assert "lower lambda_td" in outweighed(record) and "12x" in outweighed(record)
    assert outweighed({**record, "loss_td": 300.0}) is None
    assert "lower lambda_margin" in outweighed({**record, "loss_td": 1.0, "loss_margin": -401.0})
    assert outweighed({"epoch": 1, "loss_task": 40.0, "loss_td": None}) is None


def test_the_first_epoch_warns_once_when_an_auxiliary_term_swamps_the_task(tmp_path):
    lines: list[str] = []
    train(tiny(model="rrnn-gru", lambda_td=1e4, epochs=2), tmp_path, log=lines.append)
    warnings = [line for line in lines if line.startswith("warning: the weighted td term")]
    assert len(warnings) == 1 and "lower lambda_td" in warnings[0]


def test_hard_search_warning_compares_with_soft_and_uniform():
    from cellgraph.backends.torch.runs.messages import hard_search_warning

    ok = {"metric": "bpc", "val_bpc_hard": 3.5, "val_bpc_soft": 3.2}
    assert hard_search_warning(ok, 27) is None
    assert "hard search" in hard_search_warning({**ok, "val_bpc_hard": 4.5}, 27)  # > 1 bit off soft
    assert "uniform guessing: 4.75" in hard_search_warning({**ok, "val_bpc_hard": 88766.0}, 27)
    assert hard_search_warning({**ok, "val_bpc_hard": float("inf")}, 27) is not None
    accuracy = {"metric": "accuracy", "val_accuracy_hard": 0.2805, "val_accuracy_soft": 0.5}  # a planted run
    assert hard_search_warning(accuracy, 3) == (
        "warning: the hard search (Algorithm 2's argmax) gives val accuracy 0.2805 against 0.5 with the soft "
        "mixture: the argmax cells do not compute what training optimised; see candidate_norm, tau_end and "
        "mode=straight-through")
    assert hard_search_warning({**accuracy, "val_accuracy_hard": 0.41}, 3) is None  # within 0.1
    ppl = {"metric": "perplexity", "val_perplexity_hard": 600.0, "val_perplexity_soft": 500.0}
    assert hard_search_warning(ppl, 10000) is None


def test_num_threads_holds_for_its_run_only(tmp_path):
    """A search trains its trials one after the other in one process: a trial's num_threads
    must not become the next one's."""
    before = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(2)
        train(TrainConfig(**{**TINY, "model": "gru", "epochs": 1, "num_threads": 1}), tmp_path / "a",
              log=lambda line: seen.append(torch.get_num_threads()))
        assert seen and set(seen) == {1}  # inside the run
        assert torch.get_num_threads() == 2  # after it
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("l2_embedding", [False, True])
def test_the_l2_term_reaches_the_embedding_only_when_asked(l2_embedding):
    from cellgraph.backends.torch.training.epoch import Objective
    from cellgraph.backends.torch.runs.train import _loss

    config = tiny(model="gru", lambda_l2=0.5, l2_embedding=l2_embedding)
    data = load_data(config)
    model = build_model(config, data)
    split = data.train
    step = Objective(model, _loss(config), None, l2_embedding=l2_embedding)(
        torch.as_tensor(split.inputs[:4]), torch.as_tensor(split.targets[:4]), 1.0)
    squares = {name: float((p.detach().double() ** 2).sum()) for name, p in model.named_parameters()}
    want = sum(v for name, v in squares.items() if l2_embedding or not name.startswith("embedding."))
    assert squares["embedding.weight"] > 1.0  # the N(0, 1) table: leaving it out changes the term
    assert step.terms.l2.item() == pytest.approx(0.5 * want, rel=1e-5)


@pytest.mark.parametrize("model, setting, form", [("rrnn-gru", "auto", "root"), ("rrnn", "auto", "internal"),
                                                   ("rrnn-gru", "any", "any"), ("rrnn", "root", "root")])
def test_td_match_auto_is_the_authors_form_for_each_model(model, setting, form):
    from cellgraph.backends.torch.runs.train import _loss

    assert _loss(tiny(model=model, td_match=setting)).td_match == form
