"""Reading run logs, the plot command and the trees command on a synthetic run folder."""

import json

from cellgraph.cli import main
from cellgraph.experiment.runlog import RunLog, structure_summary
from cellgraph.experiment.runs import RunDir
from cellgraph.files import write_json
from cellgraph.targets import target


def _fake_run(path, model="rrnn-gru"):
    run = RunDir.create(path)
    run.write_config({"task": "wiki", "model": model, "seed": 0})
    for e in range(1, 4):
        run.append_metrics({"epoch": e, "train_bpc": 3.0 - 0.2 * e, "val_bpc": 3.1 - 0.1 * e, "n_e": 100 // e})
        forms = [
            {"canonical": "gru-form", "count": 5 + e, "depth": 4, "n_internal": 9, "balance": 0.5,
             "is_target": True, "example": {"sample": 0, "t": 0}, "cell": {"format": "x"}},
            {"canonical": "other", "count": 3, "depth": 2, "n_internal": 3, "balance": 1.0,
             "is_target": False, "example": {"sample": 1, "t": 2}, "cell": {"format": "y"}},
        ]
        write_json(run.file(f"structures/epoch_{e:03d}.json"),
                   {"epoch": e, "n_cells": 8 + e, "target": "gru", "target_share": (5 + e) / (8 + e), "forms": forms})
    return run


def test_runlog_series(tmp_path):
    _fake_run(tmp_path / "a")
    log = RunLog.load(tmp_path / "a")
    assert log.metric == "bpc"
    assert log.series("n_e") == ([1, 2, 3], [100.0, 50.0, 33.0])
    assert [s["epoch"] for s in log.structures()] == [1, 2, 3]


def test_structure_summary_of_gru_target():
    s = structure_summary(target("gru").graph.unfold())
    assert s == {"depth": 5, "n_internal": 9, "balance": 2 / 5}


def test_plot_command_writes_png_and_svg(tmp_path, capsys):
    _fake_run(tmp_path / "a")
    _fake_run(tmp_path / "b", model="gru")
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "plots")]) == 0
    names = {p.name for p in (tmp_path / "plots").iterdir()}
    assert {"learning_curves.png", "learning_curves.svg", "n_e.png", "tree_shapes.svg"} <= names
    assert (tmp_path / "plots" / "n_e.png").stat().st_size > 1000


def _figures(monkeypatch) -> dict:
    """Capture the figures the plot functions would save, by name."""
    from cellgraph.experiment import plots

    seen = {}

    def keep(fig, out_dir, name):
        seen[name] = fig
        return [out_dir / f"{name}.png"]

    monkeypatch.setattr(plots, "_save", keep)
    return seen


def _metric_run(path, task, model, train, val):
    run = RunDir.create(path)
    run.write_config({"task": task, "model": model, "seed": 0})
    metric = {"wiki": "bpc", "ptb": "perplexity", "sst": "accuracy"}[task]
    for e, (a, b) in enumerate(zip(train, val), 1):
        run.append_metrics({"epoch": e, f"train_{metric}": a, f"val_{metric}": b})
    return run


def test_learning_curves_panels_scales_colours_and_legend(tmp_path, monkeypatch):
    """One panel per metric; log axis (said) where a curve spans decades; whole-number epoch
    ticks; a run's train (dashed) and val (solid) in one colour; each run named once."""
    from cellgraph.experiment.plots import learning_curves

    _metric_run(tmp_path / "a" / "p1", "ptb", "rrnn", [900.0, 9e4, 9e6], [1000.0, 1e5, 1e7])
    _metric_run(tmp_path / "b" / "p1", "ptb", "rrnn", [300.0, 200.0, 150.0], [320.0, 210.0, 160.0])
    _metric_run(tmp_path / "s", "sst", "gru", [0.5, 0.6, 0.7], [0.45, 0.5, 0.55])
    figures = _figures(monkeypatch)
    logs = [RunLog.load(tmp_path / p) for p in ("a/p1", "b/p1", "s")]
    assert learning_curves(logs, tmp_path)
    ppl, acc = figures["learning_curves"].axes
    assert ppl.get_yscale() == "log" and "log scale" in ppl.get_ylabel() and "perplexity" in ppl.get_ylabel()
    assert acc.get_yscale() == "linear" and acc.get_ylabel() == "accuracy"
    for ax, n_runs in ((ppl, 2), (acc, 1)):
        lines = [line for line in ax.get_lines() if len(line.get_xdata())]
        assert [line.get_linestyle() for line in lines] == ["--", "-"] * n_runs
        assert all(lines[k].get_color() == lines[k + 1].get_color() for k in range(0, len(lines), 2))
        assert len({line.get_color() for line in lines}) == n_runs
        assert all(float(t).is_integer() for t in ax.get_xticks())
    names = [t.get_text() for t in ppl.get_legend().get_texts()]
    assert names == ["rrnn (a/p1)", "rrnn (b/p1)", "train", "val"]  # folder names told apart


def test_seed_bands_mean_line_and_min_max_band_per_variant(tmp_path, monkeypatch):
    """Runs named VARIANT-s<seed> share one line (their mean) and one band (min to max) over
    the epochs every seed logged; another variant gets its own colour."""
    from cellgraph.experiment.plots import seed_bands

    _metric_run(tmp_path / "best-gru-s0", "wiki", "gru", [3.0, 2.0, 1.0], [3.0, 2.0, 1.0])
    _metric_run(tmp_path / "best-gru-s1", "wiki", "gru", [3.0, 2.0], [5.0, 4.0])
    _metric_run(tmp_path / "best-rrnn-gru-s0", "wiki", "rrnn-gru", [4.0, 3.0], [4.5, 3.5])
    figures = _figures(monkeypatch)
    logs = [RunLog.load(tmp_path / p) for p in ("best-gru-s0", "best-gru-s1", "best-rrnn-gru-s0")]
    assert seed_bands(logs, tmp_path)
    (ax,) = figures["seed_bands"].axes
    gru, rrnn = ax.get_lines()
    assert list(gru.get_xdata()) == [1, 2] and list(gru.get_ydata()) == [4.0, 3.0]  # epoch 3: one seed only
    assert list(rrnn.get_ydata()) == [4.5, 3.5] and gru.get_color() != rrnn.get_color()
    (band,) = ax.collections  # the one-seed variant has a line, no band
    assert band.get_paths()[0].vertices[:, 1].min() == 2.0 and band.get_paths()[0].vertices[:, 1].max() == 5.0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["best-gru (2 seeds)", "best-rrnn-gru (1 seed)"]
    assert ax.get_title().endswith("band = min to max over seeds (variants of 2 seeds or more)")


def test_seed_bands_of_single_seeds_promise_no_band(tmp_path, monkeypatch):
    from cellgraph.experiment.plots import seed_bands

    _metric_run(tmp_path / "gru", "wiki", "gru", [3.0, 2.0], [3.0, 2.0])
    _metric_run(tmp_path / "rrnn", "wiki", "rrnn", [4.0, 3.0], [4.5, 3.5])
    figures = _figures(monkeypatch)
    assert seed_bands([RunLog.load(tmp_path / p) for p in ("gru", "rrnn")], tmp_path)
    (ax,) = figures["seed_bands"].axes
    assert not ax.collections and "band" not in ax.get_title().replace("no band", "")
    assert ax.get_title() == "Validation bpc\none seed per variant: its values, no band"


def test_legends_name_a_run_once_and_tree_shapes_label_and_scale_their_axes(tmp_path, monkeypatch):
    """A folder named after its model is its label alone (not 'rrnn (rrnn)'); tree_shapes
    labels every y axis, and its depth axis starts at 0, so that 0.3 of a level is not drawn
    as the panel's full height."""
    from cellgraph.experiment.plots import run_labels, tree_shapes

    for name, model in (("rrnn", "rrnn-gru"), ("p-rrnn-gru-s0", "rrnn-gru"), ("mine", "rrnn-gru")):
        _fake_run(tmp_path / name, model=model)
    logs = [RunLog.load(tmp_path / name) for name in ("rrnn", "p-rrnn-gru-s0", "mine")]
    assert run_labels(logs) == ["rrnn-gru (rrnn)", "p-rrnn-gru-s0", "rrnn-gru (mine)"]
    figures = _figures(monkeypatch)
    assert tree_shapes(logs, tmp_path)
    depth, balance, share = figures["tree_shapes"].axes
    assert all(ax.get_ylabel() for ax in (depth, balance, share))
    low, high = depth.get_ylim()
    assert low == 0 and high > 4  # the fake runs' mean depth is 3.2 to 3.4


def test_seed_bands_draw_both_searches_of_a_searching_variant(tmp_path, monkeypatch):
    """A variant whose every seed recorded val_<metric>_soft and _hard gets a panel per search,
    each with its own scale, in the variant's colour;
    the GRU, which has one metric, is drawn in both for scale."""
    from cellgraph.experiment.plots import seed_bands

    _metric_run(tmp_path / "preset-gru-s0", "wiki", "gru", [3.0, 2.0], [3.0, 2.0])
    for seed, hard in ((0, [5.0, 400.0]), (1, [4.0, 600.0])):
        run = _metric_run(tmp_path / f"preset-rrnn-gru-s{seed}", "wiki", "rrnn-gru", [4.0, 3.0], [3.6, 3.4])
        lines = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
        (run.path / "metrics.jsonl").write_text("".join(
            json.dumps({**r, "val_bpc_soft": r["val_bpc"], "val_bpc_hard": h}) + "\n" for r, h in zip(lines, hard)))
    figures = _figures(monkeypatch)
    logs = [RunLog.load(tmp_path / p) for p in ("preset-gru-s0", "preset-rrnn-gru-s0", "preset-rrnn-gru-s1")]
    assert seed_bands(logs, tmp_path)
    mixture, argmax = figures["seed_bands"].axes
    assert "soft mixture" in mixture.get_title() and "hard search" in argmax.get_title()
    gru, soft = mixture.get_lines()
    gru_again, hard = argmax.get_lines()
    # all solid: the searches have panels of their own, and dashes mean training in learning_curves
    assert [line.get_linestyle() for line in (gru, soft, gru_again, hard)] == ["-", "-", "-", "-"]
    assert soft.get_color() == hard.get_color() != gru.get_color() == gru_again.get_color()
    assert list(soft.get_ydata()) == [3.6, 3.4] and list(hard.get_ydata()) == [4.5, 500.0]
    assert mixture.get_yscale() == "linear" and argmax.get_yscale() == "log"  # the argmax's decades stay apart
    assert [t.get_text() for t in mixture.get_legend().get_texts()] == [
        "preset-gru (1 seed)", "preset-rrnn-gru, soft search (2 seeds)"]
    assert [t.get_text() for t in argmax.get_legend().get_texts()] == [
        "preset-gru (1 seed)", "preset-rrnn-gru, hard search (2 seeds)"]


def test_plot_says_what_it_did_not_draw(tmp_path, capsys):
    """A figure with nothing to show is left out with a note, never silently."""
    _metric_run(tmp_path / "g", "wiki", "gru", [3.0, 2.5], [3.1, 2.6])
    assert main(["plot", str(tmp_path / "g"), "-o", str(tmp_path / "plots")]) == 0
    out, err = capsys.readouterr()
    assert "learning_curves.png" in out and "n_e" not in out
    assert "n_e: not drawn" in err and "rrnn-gru run with two epochs or more" in err
    assert "tree_shapes: not drawn" in err and "seed_bands" in out
    assert not (tmp_path / "plots" / "n_e.png").exists()


def test_trees_command_lists_and_saves(tmp_path, capsys):
    _fake_run(tmp_path / "a")
    assert main(["trees", str(tmp_path / "a"), "--top", "1", "--save", str(tmp_path / "forms")]) == 0
    out = capsys.readouterr().out
    assert "epoch 3: 11 cells, 2 distinct forms" in out and "gru-form (target)" in out and "other" not in out
    assert json.loads((tmp_path / "forms" / "form_1.json").read_text()) == {"format": "x"}


def test_not_a_run_folder(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_summarize_groups_seeds(tmp_path, capsys):
    for seed, (val, test) in enumerate([(2.0, 2.2), (3.0, 3.2)]):
        run = RunDir.create(tmp_path / f"s{seed}")
        run.write_config({"task": "wiki", "model": "gru", "seed": seed})
        run.write_final({"val_bpc": val, "test_bpc": test, "train_seconds": 10.0 + seed, "epochs_run": 3})
    assert main(["summarize", str(tmp_path / "s0"), str(tmp_path / "s1"), "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "| wiki | gru | bpc | 2 | 2.500 ± 0.707 | 2.700 ± 0.707 | 3.0 | 10 ± 1 |" in out
    assert json.loads((tmp_path / "t.json").read_text())[0]["seeds"] == [0, 1]
    assert "soft" not in out
    for seed, value in enumerate([2.5, 3.5]):  # soft-search scores of both runs: two more columns
        for split in ("val", "test"):
            (tmp_path / f"s{seed}" / f"eval_{split}_soft.json").write_text(json.dumps({f"{split}_bpc": value}))
    assert main(["summarize", str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    out = capsys.readouterr().out
    assert "| val (soft) | test (soft) |" in out and "| 3.000 ± 0.707 | 3.000 ± 0.707 | 3.0 |" in out
    (tmp_path / "s1" / "eval_test_soft.json").unlink()  # one run without: no soft test number
    assert main(["summarize", str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    assert "| 3.000 ± 0.707 | — | 3.0 |" in capsys.readouterr().out
    (tmp_path / "s1" / "final.json").write_text(json.dumps({"val_bpc": 4e12, "test_bpc": 3.2, "train_seconds": 1.0}))
    assert main(["summarize", str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    assert "| 2e+12 ± 2.83e+12 |" in capsys.readouterr().out  # a diverged run in scientific notation
    (tmp_path / "s1" / "final.json").write_text(json.dumps({"val_bpc": float("inf"), "test_bpc": 3.2,
                                                            "train_seconds": 1.0}))
    assert main(["summarize", str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    assert "| 2 | inf | 2.700 ± 0.707 |" in capsys.readouterr().out  # an overflowed metric: no deviation
    RunDir.create(tmp_path / "unfinished").write_config({"task": "wiki", "model": "gru", "seed": 0})
    assert main(["summarize", str(tmp_path / "unfinished")]) == 2
    assert "no finished run" in capsys.readouterr().err


def test_summarize_skips_unfinished_runs_and_shows_one_seed_plainly(tmp_path, capsys):
    """`cellgraph summarize runs/*` mid-experiment: a note per folder left out, the table of
    the rest; one seed gives its value alone, never '± 0.000'."""
    run = RunDir.create(tmp_path / "done")
    run.write_config({"task": "wiki", "model": "gru", "seed": 0})
    run.write_final({"val_bpc": 2.0, "test_bpc": 2.25, "train_seconds": 12.0, "epochs_run": 3})
    RunDir.create(tmp_path / "p-rrnn").write_config({"task": "wiki", "model": "rrnn", "seed": 0})
    (tmp_path / "plots").mkdir()
    assert main(["summarize", *(str(tmp_path / name) for name in ("done", "p-rrnn", "plots"))]) == 0
    out, err = capsys.readouterr()
    assert "| wiki | gru | bpc | 1 | 2.000 | 2.250 | 3.0 | 12 |" in out and "±" not in out.splitlines()[2]
    assert "n=1" in out and "rrnn" not in out
    assert err.splitlines() == [
        f"cellgraph summarize: skipped {tmp_path / 'p-rrnn'} has no final.json: the run has not finished",
        f"cellgraph summarize: skipped {tmp_path / 'plots'}: not a run folder (no config.json)"]


def test_summarize_skips_a_run_whose_final_json_is_corrupt(tmp_path, capsys):
    """A final.json cut short (a full disk) or without the metric leaves that run out with a
    note; the others are still summarized."""
    for name in ("good", "cut", "empty"):
        run = RunDir.create(tmp_path / name)
        run.write_config({"task": "wiki", "model": "gru", "seed": 0})
        run.write_final({"val_bpc": 2.0, "test_bpc": 2.25, "train_seconds": 12.0, "epochs_run": 3})
    (tmp_path / "cut" / "final.json").write_text('{"val_bpc": 2.0, "te')
    (tmp_path / "empty" / "final.json").write_text("{}")
    assert main(["summarize", *(str(tmp_path / name) for name in ("good", "cut", "empty"))]) == 0
    out, err = capsys.readouterr()
    assert "| wiki | gru | bpc | 1 | 2.000 | 2.250 |" in out
    notes = err.splitlines()
    assert len(notes) == 2 and notes[0].startswith(f"cellgraph summarize: skipped {tmp_path / 'cut'}: ")
    assert "not valid JSON" in notes[0] and "val_bpc" in notes[1]
    assert main(["summarize", str(tmp_path / "cut")]) == 2  # nothing left: an error, in one line
    assert capsys.readouterr().err.count("\n") == 2


def test_summarize_by_name_reads_both_searches_and_the_loss_terms(tmp_path, capsys):
    """Variants of one model are rows of their own with --by name; final.json's hard and soft
    numbers fill both pairs of columns; --terms adds the last epoch's weighted terms."""
    for variant, base in (("flex", 3.0), ("gates", 4.0)):
        for seed in (0, 1):
            run = RunDir.create(tmp_path / f"{variant}-s{seed}")
            run.write_config({"task": "wiki", "model": "rrnn-gru", "seed": seed})
            run.append_metrics({"epoch": 1, "loss_task": 40.0 + seed, "loss_td": 2.0, "loss_margin": -1.0,
                                "loss_l2": None})
            run.write_final({"val_bpc": base + seed, "test_bpc": base, "val_bpc_hard": 9.0, "test_bpc_hard": 9.0,
                             "val_bpc_soft": base + seed, "test_bpc_soft": base, "train_seconds": 1.0})
    folders = [str(p) for p in sorted(tmp_path.iterdir())]
    assert main(["summarize", *folders]) == 0
    assert "| wiki | rrnn-gru | bpc | 4 |" in capsys.readouterr().out  # by model: one group
    assert main(["summarize", "--by", "name", "--terms", *folders]) == 0
    out = capsys.readouterr().out
    assert "| wiki | flex | bpc | 2 | 3.500 ± 0.707 | 3.000 ± 0.000 | 9.000 ± 0.000 | 9.000 ± 0.000 | 3.500 ± 0.707 |" in out
    assert "| wiki | gates | bpc | 2 |" in out and "| 40.5 / 2 / -1 / 0 |" in out


def test_summarize_recovery_column_where_every_run_has_it(tmp_path, capsys):
    """--recovery adds the planted structure recovery: mean ± std where every seed has it,
    '—' for a model that searches no cells (gru)."""
    for model, shares in (("rrnn-gru", (1.0, 0.5)), ("gru", (None, None))):
        for seed, share in enumerate(shares):
            run = RunDir.create(tmp_path / f"{model}-s{seed}")
            run.write_config({"task": "planted", "model": model, "seed": seed})
            run.write_final({"val_accuracy": 0.8, "test_accuracy": 0.8, "train_seconds": 1.0, "epochs_run": 2,
                             **({"recovery": {"structure_recovery": share}} if share is not None else {})})
    folders = [str(p) for p in sorted(tmp_path.iterdir())]
    assert main(["summarize", *folders]) == 0
    assert "recovery" not in capsys.readouterr().out
    assert main(["summarize", "--recovery", *folders]) == 0
    out = capsys.readouterr().out
    assert "| recovery | epochs |" in out.splitlines()[0]
    assert "| planted | rrnn-gru | accuracy | 2 | 0.800 ± 0.000 | 0.800 ± 0.000 | 0.750 ± 0.354 | 2.0 |" in out
    assert "| planted | gru | accuracy | 2 | 0.800 ± 0.000 | 0.800 ± 0.000 | — | 2.0 |" in out


def test_seed_bands_leave_out_epochs_where_a_seed_overflowed(tmp_path, monkeypatch):
    """An epoch where some seed's metric is inf (an overflowed perplexity) is not averaged:
    the line stops short of it, the legend says which epochs are missing, and a note names
    them, also for a search whose every epoch overflowed (not drawn at all)."""
    from cellgraph.experiment.plots import seed_bands

    _metric_run(tmp_path / "preset-gru-s0", "ptb", "gru", [300.0] * 3, [320.0, 310.0, 305.0])
    for seed, soft in ((0, [330.0, 300.0, 310.0]), (1, [340.0, 320.0, float("inf")])):
        run = _metric_run(tmp_path / f"best-rrnn-gru-s{seed}", "ptb", "rrnn-gru", [400.0] * 3, soft)
        lines = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
        (run.path / "metrics.jsonl").write_text("".join(
            json.dumps({**r, "val_perplexity_soft": r["val_perplexity"], "val_perplexity_hard": float("inf")}) + "\n"
            for r in lines))
    figures, notes = _figures(monkeypatch), []
    logs = [RunLog.load(tmp_path / p) for p in ("preset-gru-s0", "best-rrnn-gru-s0", "best-rrnn-gru-s1")]
    assert seed_bands(logs, tmp_path, notes.append)
    mixture, argmax = figures["seed_bands"].axes
    gru, soft = mixture.get_lines()
    assert list(soft.get_xdata()) == [1, 2] and list(soft.get_ydata()) == [335.0, 310.0]
    assert [t.get_text() for t in mixture.get_legend().get_texts()] == [
        "preset-gru (1 seed)", "best-rrnn-gru, soft search (2 seeds; not finite at epoch 3)"]
    assert [t.get_text() for t in argmax.get_legend().get_texts()] == ["preset-gru (1 seed)"]
    assert notes == ["seed_bands: best-rrnn-gru, soft search: epoch 3 left out: a seed's val perplexity is not finite",
                     "seed_bands: best-rrnn-gru, hard search: epoch 1-3 left out: a seed's val perplexity is not finite"]


def test_identity_chain_is_every_node_an_identity_addition():
    from cellgraph.cell.expr import Node, h, x, zero
    from cellgraph.cell.graph import CellGraph, MultiCell
    from cellgraph.experiment.runlog import is_identity_chain
    from cellgraph.targets import target

    gru = target("gru")
    identity = next(iter(gru.layout.identity_indices))
    chain = Node("add", "identity", identity, Node("add", "identity", identity, h, x), x)
    assert is_identity_chain(MultiCell((CellGraph(chain, "h"),)), gru.layout)
    for node in (Node("add", "tanh", identity, chain, zero), Node("mul", "identity", identity, chain, x),
                 Node("add", "identity", 0, chain, x)):
        assert not is_identity_chain(MultiCell((CellGraph(node, "h"),)), gru.layout)
    assert not is_identity_chain(gru.cell, gru.layout)
