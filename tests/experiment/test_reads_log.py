"""What the logged cells read in a run's structure logs: the fields, their shares weighted by
count, old logs (without them) computed from their cell dumps, and cellgraph trees / summarize
--reads / diff on a run folder whose log holds real cell dumps."""

from __future__ import annotations

import json

import pytest

from cellgraph.cell.expr import Node, h, x, zero
from cellgraph.cell.graph import CellGraph, MultiCell
from cellgraph.cli import main
from cellgraph.errors import FormatError
from cellgraph.experiment.runlog import RunLog, form_reads, read_shares, with_reads
from cellgraph.experiment.runs import RunDir
from cellgraph.export.jsonio import dump_cell
from cellgraph.targets import target

GRU = target("gru")
I = 3  # the GRU layout's identity tuple
CELLS = {  # name -> (cell, count): the GRU, an identity chain, a cell that never reads x
    "gru": (GRU.cell, 5),
    "chain": (MultiCell((CellGraph(Node("add", "identity", I, h, x), "h"),)), 3),
    "no_x": (MultiCell((CellGraph(Node("add", "tanh", 0, h, Node("mul", "sigmoid", 1, x, zero)), "h"),)), 2),
}


def _form(name: str, with_reads_fields: bool = True) -> dict:
    cell, count = CELLS[name]
    form = {"canonical": name, "count": count, "depth": 1, "n_internal": 1, "balance": 1.0,
            "is_target": name == "gru", "example": {"sample": 0, "t": 0}, "cell": dump_cell(cell, GRU.layout)}
    return {**form, **form_reads(cell, GRU.layout)} if with_reads_fields else form


def _log(epoch: int, with_reads_fields: bool = True) -> dict:
    forms = [_form(name, with_reads_fields) for name in ("gru", "chain", "no_x")]
    log = {"epoch": epoch, "n_cells": 10, "target": "gru", "target_share": 0.5, "forms": forms}
    return {**log, **read_shares(forms, 10)} if with_reads_fields else log


def _run(path, with_reads_fields: bool = True, finished: bool = True) -> RunDir:
    run = RunDir.create(path)
    run.write_config({"task": "planted", "model": "rrnn", "seed": 0})
    for epoch in (1, 2):
        run.append_metrics({"epoch": epoch, "train_accuracy": 0.5, "val_accuracy": 0.5})
        (run.path / "structures").mkdir(exist_ok=True)
        (run.path / "structures" / f"epoch_{epoch:03d}.json").write_text(json.dumps(_log(epoch, with_reads_fields)))
    if finished:
        run.write_final({"val_accuracy": 0.5, "test_accuracy": 0.5, "train_seconds": 1.0, "epochs_run": 2})
    return run


def test_shares_are_weighted_by_count():
    shares = _log(1)
    assert [f["reads"] for f in shares["forms"]] == [{"x": True, "h": True}, {"x": True, "h": True},
                                                     {"x": False, "h": True}]
    assert [f["identity_chain"] for f in shares["forms"]] == [False, True, False]
    assert shares["reads_input_share"] == 0.8 and shares["reads_state_share"] == 1.0
    assert shares["reads_both_share"] == 0.8 and shares["identity_chain_share"] == 0.3
    assert read_shares([{"count": 4, "reads_input": True}], 8) == {"reads_input_share": 0.5}  # the rest unknown


def test_an_old_log_gets_the_fields_from_its_cell_dumps():
    old = _log(1, with_reads_fields=False)
    assert "reads" not in old["forms"][0] and "reads_both_share" not in old
    assert with_reads(old) == _log(1)
    no_layout = {**old, "forms": [{**f, "cell": dump_cell(CELLS[f["canonical"]][0])} for f in old["forms"]]}
    filled = with_reads(no_layout)
    assert filled["reads_both_share"] == 0.8 and "identity_chain_share" not in filled  # needs a layout
    broken = {**old, "forms": [{**old["forms"][0], "cell": {"format": "x"}}, *old["forms"][1:]]}
    filled = with_reads(broken)
    assert "reads" not in filled["forms"][0] and "reads_input_share" not in filled
    recorded = {**_log(1), "reads_input_share": 0.25}  # what a log records is kept as recorded
    assert with_reads(recorded)["reads_input_share"] == 0.25


def test_a_structure_log_with_a_field_of_the_wrong_type_is_a_format_error(tmp_path):
    run = _run(tmp_path / "r")
    path = run.path / "structures" / "epoch_002.json"
    log = json.loads(path.read_text())
    log["forms"][1]["reads_input"] = "yes"
    path.write_text(json.dumps(log))
    with pytest.raises(FormatError, match=r"forms\[1\]\.reads_input: expected true or false"):
        RunLog.load(run.path).structure_log()
    log["forms"][1]["reads_input"], log["reads_both_share"] = True, "most"
    path.write_text(json.dumps(log))
    with pytest.raises(FormatError, match="reads_both_share: expected a number"):
        RunLog.load(run.path).structures()


@pytest.mark.parametrize("recorded", [True, False], ids=["new log", "old log"])
def test_trees_reports_what_the_cells_read(tmp_path, capsys, recorded):
    _run(tmp_path / "r", with_reads_fields=recorded)
    assert main(["trees", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "h_t reads x_t in 80.0% of the cells, h_{t-1} in 100.0%, both in 80.0%; identity chains in 30.0%" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[5] for row in rows] == ["h,x", "h,x", "h"]


def test_trees_says_when_reads_are_not_known(tmp_path, capsys):
    run = _run(tmp_path / "r", with_reads_fields=False)
    path = run.path / "structures" / "epoch_002.json"
    log = json.loads(path.read_text())
    log["forms"][0]["cell"] = {"format": "x"}
    path.write_text(json.dumps(log))
    assert main(["trees", str(run.path)]) == 0
    out = capsys.readouterr().out
    assert "what h_t reads is not known" in out and "identity chains: not known" in out
    assert [line.split()[5] for line in out.splitlines() if line.strip()[:1].isdigit()] == ["?", "h,x", "h"]


def test_summarize_reads_averages_the_last_logs_over_seeds(tmp_path, capsys):
    _run(tmp_path / "a-s0")
    run = _run(tmp_path / "a-s1")
    path = run.path / "structures" / "epoch_002.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "reads_both_share": 0.4}))
    gru = RunDir.create(tmp_path / "g")
    gru.write_config({"task": "planted", "model": "gru", "seed": 0})
    gru.write_final({"val_accuracy": 0.9, "test_accuracy": 0.9, "train_seconds": 1.0, "epochs_run": 2})
    assert main(["summarize", str(tmp_path / "a-s0"), str(tmp_path / "a-s1"), str(tmp_path / "g"), "--reads"]) == 0
    out = capsys.readouterr().out
    assert "| h_t reads x_t | reads h_{t-1} | reads both | identity chains |" in out
    assert "| 0.800 ± 0.000 | 1.000 ± 0.000 | 0.600 ± 0.283 | 0.300 ± 0.000 |" in out
    assert "| planted | gru | accuracy | 1 | 0.900 | 0.900 | — | — | — | — |" in out  # no structure log
    assert main(["summarize", str(tmp_path / "a-s0")]) == 0
    assert "reads" not in capsys.readouterr().out  # only when asked
    unlogged = RunDir.create(tmp_path / "a-s2")  # a seed of the group without structure logs
    unlogged.write_config({"task": "planted", "model": "rrnn", "seed": 2})
    unlogged.write_final({"val_accuracy": 0.5, "test_accuracy": 0.5, "train_seconds": 1.0, "epochs_run": 2})
    assert main(["summarize", str(tmp_path / "a-s0"), str(unlogged.path), "--reads"]) == 0
    assert "| 0.500 ± 0.000 | — | — | — | — |" in capsys.readouterr().out


def test_diff_shows_each_frequent_cell_against_the_gru(tmp_path, capsys):
    _run(tmp_path / "r")
    assert main(["diff", str(tmp_path / "r"), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "epoch 2: 10 cells, 3 distinct forms, compared with gru" in out
    assert "    c_6 = tanh(W_h*x_t + W_h'*c_5 + b_h)" in out  # the target's equations, once
    first, second, third = out.split("\n#")[1:]
    assert first.startswith("1: 5 of 10 cells (50.0%); h_t reads x_t, h_{t-1}")
    assert "the structure of gru: all 8 nodes kept, none new or missing" in first
    assert second.startswith("2: 3 of 10 cells (30.0%); h_t reads x_t, h_{t-1}")
    assert "1 new, 8 missing, 0 kept" in second and "+ h_t = h_{t-1} + x_t" in second
    assert "- missing, as gru names them: c_1, c_2, c_3, c_4, c_5, c_6, c_7, h_t" in second
    assert third.startswith("3: 2 of 10 cells (20.0%); h_t reads h_{t-1}; not x_t")
    assert main(["diff", str(tmp_path / "r"), "--epoch", "1", "--top", "1", "--target", "lstm"]) == 0
    out = capsys.readouterr().out
    assert "epoch 1:" in out and "compared with lstm" in out and "3 distinct forms" in out
    assert "#2" not in out and "h_t = c_6 ⊙ c_7" in out


@pytest.mark.parametrize("argv, message", [
    (["--epoch", "7"], "no structure log for epoch 7"),
    (["--target", "elman"], "unknown target 'elman'"),
    (["--top", "0"], "--top must be at least 1"),
])
def test_diff_errors_are_one_line(tmp_path, capsys, argv, message):
    _run(tmp_path / "r")
    assert main(["diff", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_diff_of_a_run_without_structure_logs_or_cell_dumps(tmp_path, capsys):
    gru = RunDir.create(tmp_path / "g")
    gru.write_config({"task": "planted", "model": "gru", "seed": 0})
    assert main(["diff", str(gru.path)]) == 2
    assert "has no structure log" in capsys.readouterr().err
    run = _run(tmp_path / "r")
    path = run.path / "structures" / "epoch_002.json"
    log = json.loads(path.read_text())
    for cell, message in ((None, "form 1: the structure log holds no cell for this form"),
                          (dump_cell(GRU.cell), "form 1: the cell has no layout"),
                          ({"format": "x"}, "epoch 2, form 1: ")):
        log["forms"][0].pop("cell", None)
        if cell is not None:
            log["forms"][0]["cell"] = cell
        path.write_text(json.dumps(log))
        assert main(["diff", str(run.path)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err
