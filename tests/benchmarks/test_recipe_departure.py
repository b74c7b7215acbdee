"""Whether the recipe's cell leaves the GRU (``benchmarks/recipe_departure.py``): which runs it
makes, the lead it reads from a checkpoint, and its table."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from cellgraph.backends.torch.runs.train import train
from cellgraph.benchmarks.recipe_ablation import keep_record
from cellgraph.benchmarks.recipe_departure import (
    GRU, MODELS, RATES, SEEDS, TEACHERS, against_gru, markdown, record_leads, runs, table,
)
from cellgraph.cell.expr import relabel
from cellgraph.export.jsonio import dump_cell
from cellgraph.experiment.config import resolve_config


def _sets(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args[1:] if "=" in a and not a.startswith("--"))


def test_each_teacher_gru_trains_before_the_recipe_runs_that_start_from_it():
    made = runs(root=Path("R"))
    assert len(made) == len(TEACHERS) * len(SEEDS) * (1 + len(MODELS) * len(RATES))
    names = [name for name, _ in made]
    for name, args in made:
        if name.startswith("teacher-"):
            assert args[args.index("--model") + 1] == "gru"
            continue
        teacher = args[args.index("--teacher") + 1]
        assert names.index(Path(teacher).name) < names.index(name) and Path(teacher).parent == Path("R")
        sets = _sets(args)
        model = args[args.index("--model") + 1]
        assert f"{sets['planted_teacher']}-{model}-slr{float(sets['structure_lr']):g}-s{sets['seed']}" == name
        assert "--preset" not in args and "lambda_td" not in sets  # the recipe as cellgraph train gives it


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    """A tiny planted teacher gru run and two recipe runs from it, at ``structure_lr`` 1 and 100,
    kept as the experiment keeps them."""
    root = tmp_path_factory.mktemp("runs")
    kept = root / "records"
    tiny = {"task": "planted", "planted_teacher": "mgu", "hidden_size": 8, "max_train": 16, "max_eval": 8,
            "seq_len": 4, "batch_size": 8, "log_structures": 2, "num_threads": 1, "epochs": 1, "seed": 0}
    train(resolve_config(None, None, {**tiny, "model": "gru"}), root / "teacher-mgu-s0", log=lambda s: None)
    keep_record(root, "teacher-mgu-s0", kept)
    for rate in (1.0, 100.0):
        name = f"mgu-rrnn-gru-slr{rate:g}-s0"
        config = resolve_config("recipe-rrnn-gru", None, {**tiny, "scoring_hidden": 4, "structure_lr": rate,
                                                          "teacher": str(root / "teacher-mgu-s0")})
        train(config, root / name, log=lambda s: None)
        keep_record(root, name, kept)
        record_leads(root, name, kept)
    return kept


def test_the_lead_left_is_the_warm_starts_less_what_the_steps_moved(records):
    """Two steps at lr 1e-3: at structure_lr 1 the lead log(99 * 4) of RRNN-GRU's warm start is
    nearly whole, at 100 each step moves each logit by about 0.1 (Adam's first steps), both ways."""
    rows = {row["structure_lr"]: row for row in table(records)}
    start = math.log(99 * 4)
    assert start - 0.01 < rows[1.0]["lead_left"] < start
    assert start - 0.45 < rows[100.0]["lead_left"] < start - 0.3  # the teacher's logit down, another up
    for row in rows.values():
        assert row["top_is_gru"] and row["top_vs_gru"] == "same" and row["left_at_epoch"] is None
        assert (row["teacher"], row["model"]) == ("mgu", "rrnn-gru")
        assert not row["exact_recovery"]  # RRNN-GRU's GRU cell is not MGU's structure
    assert markdown(list(rows.values())).count("\n") == 3


def test_the_first_epoch_off_the_gru_a_record_without_leads_and_a_stopped_run(records, tmp_path):
    copy = shutil.copytree(records, tmp_path / "records")
    run = copy / "mgu-rrnn-gru-slr1-s0"
    (run / "leads.json").unlink()
    log = json.loads((run / "structures" / "epoch_001.json").read_text())
    log["forms"][0]["is_target"] = False
    (run / "structures" / "epoch_001.json").write_text(json.dumps(log))
    row = next(r for r in table(copy) if r["structure_lr"] == 1.0)
    assert row["lead_left"] is None and row["left_at_epoch"] == 1 and "| 1 | - |" in markdown([row])
    stopped = copy / "mgu-rrnn-gru-slr100-s0"
    (stopped / "final.json").unlink()
    (stopped / "stopped.json").write_text(json.dumps({"epoch": 1, "reason": "non-finite"}))
    row = next(r for r in table(copy) if r["structure_lr"] == 100.0)
    assert row["test_accuracy"] is None and row["exact_recovery"] is None and row["stopped_at_epoch"] == 1
    assert "| - | yes (1.00) |" in markdown([row]) and "| stopped in epoch 1 (non-finite losses) |" in markdown([row])


def test_a_cell_that_left_the_gru_names_its_lowest_change():
    """The departure the experiment measured: ``1 - z`` moved from the identity tuple to a
    trainable one changes that node and the two above it (the product and the sum)."""
    (state,) = GRU.cell
    moved = relabel(state.root, lambda n: (n.op, n.act, 0 if n.act == "one_minus" else n.tuple))
    assert against_gru({"cell": dump_cell(state.root, GRU.layout)}) == "same"
    assert against_gru({"cell": dump_cell(moved, GRU.layout)}) == "3/3: one_minus[add, I] -> one_minus[add, W]"
