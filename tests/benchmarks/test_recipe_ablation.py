"""The discovery recipe's ablation (``benchmarks/recipe_ablation.py``): which runs it makes, and its summary."""

from __future__ import annotations

import json

from cellgraph.benchmarks.recipe_ablation import ARMS, main, runs, summarize
from cellgraph.experiment.presets import PRESETS


def _sets(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args[args.index("--set"):][1::2])


def test_every_arm_of_both_models_and_the_gru_for_three_seeds_on_the_slice():
    made = dict(runs("planted"))
    assert len(made) == 3 * (sum(len(arms) for arms in ARMS.values()) + 2)
    assert _sets(made["rrnn-paper-s0"])["max_train"] == "800" and _sets(made["gru-s2"])["seed"] == "2"


def test_a_warm_arm_trains_its_teacher_then_its_epochs_and_the_others_both():
    made = dict(runs("planted", teacher_epochs=3, epochs=5))
    warm, cold, gru = (_sets(made[name]) for name in ("rrnn-all-noaux-s1", "rrnn-gru-hard-s1", "gru-s1"))
    assert (warm["teacher_epochs"], warm["epochs"]) == ("3", "5")
    assert cold["epochs"] == gru["epochs"] == "8" and "teacher_epochs" not in cold
    continued = _sets(made["gru-warm-s1"])
    assert (continued["warm_start"], continued["teacher_epochs"], continued["epochs"]) == ("teacher", "3", "5")


def test_all_the_data_and_some_arms_only():
    made = dict(runs("planted", max_train=0, arms=("all-noaux",)))
    assert sorted(made) == sorted(f"{m}-s{s}" for s in range(3)
                                  for m in ("rrnn-all-noaux", "rrnn-gru-all-noaux", "gru", "gru-warm"))
    recipe = _sets(made["rrnn-all-noaux-s0"])
    assert (recipe["max_train"], recipe["max_eval"], recipe["lambda_td"], recipe["lambda_margin"]) == ("0", "0", "0.0", "0.0")
    assert recipe["mode"] == "straight-through" and recipe["warm_start"] == "teacher"


def test_wiki_runs_share_the_teachers_gru_preset_and_the_recipe_arm_is_the_recipe_preset():
    """On Wiki every run (teacher, arms, GRU) trains with its GRU preset's batch size, learning
    rate and L2, and ``recipe`` sets every key of the recipe's preset as the preset does."""
    made = dict(runs("wiki5k", max_train=0, arms=("recipe",), teacher_epochs=3, epochs=3))
    gru, recipe = _sets(made["gru-s0"]), _sets(made["rrnn-recipe-s0"])
    for key in ("batch_size", "lr", "lambda_l2"):
        assert gru[key] == recipe[key] == str(PRESETS["paper-wiki5k-gru"][key])
    assert gru["epochs"] == "6" and recipe["epochs"] == recipe["teacher_epochs"] == "3"
    for model in ("rrnn", "rrnn-gru"):
        arm = _sets(made[f"{model}-recipe-s0"])
        preset = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in PRESETS[f"recipe-{model}"].items()}
        assert {k: arm[k] for k in preset if k != "model"} == {k: v for k, v in preset.items() if k != "model"}
    assert _sets(dict(runs("wiki"))["gru-s0"])["max_train"] == "1000"


def test_the_summary_reads_a_straight_through_runs_mixture_from_its_soft_evaluation(tmp_path):
    def run(name: str, final: dict, soft: float | None = None) -> None:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "final.json").write_text(json.dumps({"metric": "accuracy", **final}))
        if soft is not None:
            (folder / "eval_test_soft.json").write_text(json.dumps({"test_accuracy": soft}))
    run("rrnn-all-noaux-s0", {"test_accuracy": 0.9}, soft=0.8)
    run("rrnn-all-noaux-s1", {"test_accuracy": 0.92})
    run("rrnn-paper-s0", {"test_accuracy": 0.7, "test_accuracy_hard": 0.6, "test_accuracy_soft": 0.75})
    table = summarize(tmp_path)
    assert table["rrnn-all-noaux"]["hard"] == [0.9, 0.92] and table["rrnn-all-noaux"]["soft"] == [0.8]
    assert table["rrnn-paper"]["hard"] == [0.6] and table["rrnn-paper"]["soft"] == [0.75]


def test_the_summary_counts_a_stopped_run_by_its_seed_without_a_metric(tmp_path):
    done, stopped = tmp_path / "rrnn-all-noaux-s0", tmp_path / "rrnn-all-noaux-s2"
    for folder in (done, stopped, tmp_path / "rrnn-all-noaux-s1"):  # s1: still running, neither file
        folder.mkdir()
    (done / "final.json").write_text(json.dumps({"metric": "bpc", "test_bpc": 2.6}))
    (stopped / "stopped.json").write_text(json.dumps({"epoch": 2}))
    row = summarize(tmp_path)["rrnn-all-noaux"]
    assert row["hard"] == [2.6] and row["stopped"] == [2]


def test_summary_alone_trains_nothing_and_keeps_the_flags_the_runs_were_made_with(tmp_path, capsys):
    (tmp_path / "rrnn-frozen-s0").mkdir()
    (tmp_path / "rrnn-frozen-s0" / "final.json").write_text(json.dumps({"metric": "bpc", "test_bpc": 2.5}))
    made = {"task": "wiki5k", "max_train": 0, "teacher_epochs": 3, "epochs": 2}
    (tmp_path / "summary.json").write_text(json.dumps({**made, "table": {}}))
    main(["--root", str(tmp_path), "--summary"])  # the default flags: planted, the slice, 2 + 2
    written = json.loads((tmp_path / "summary.json").read_text())
    assert {key: written[key] for key in made} == made and written["table"]["rrnn-frozen"]["hard"] == [2.5]
    assert "rrnn-frozen" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rrnn-frozen-s0", "summary.json"]  # no run started


def _ended(folder, metric: float) -> None:
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.pt").write_bytes(b"weights")
    (folder / "final.json").write_text(json.dumps({"metric": "bpc", "test_bpc": metric}))


def test_records_keep_each_ended_run_its_teacher_and_its_log_but_no_checkpoint(tmp_path, capsys):
    root, records = tmp_path / "runs", tmp_path / "results"
    _ended(root / "rrnn-recipe-s0", 2.6)
    _ended(root / "rrnn-recipe-s0" / "teacher", 2.7)
    (root / "rrnn-recipe-s0.log").write_text("epoch 1: done\n")
    (root / "rrnn-recipe-s1" / "checkpoints").mkdir(parents=True)  # still running: not copied
    made = {"task": "wiki5k", "max_train": 1000, "teacher_epochs": 2, "epochs": 2}
    (root / "summary.json").write_text(json.dumps({**made, "table": {}}))
    main(["--root", str(root), "--records", str(records), "--summary"])
    kept = sorted(str(p.relative_to(records)) for p in records.rglob("*") if p.is_file())
    assert kept == ["rrnn-recipe-s0.log", "rrnn-recipe-s0/final.json", "rrnn-recipe-s0/teacher/final.json",
                    "summary.json"]
    written = json.loads((records / "summary.json").read_text())
    assert {key: written[key] for key in made} == made  # the flags of the runs, from ROOT's summary
    assert written["table"]["rrnn-recipe"]["hard"] == [2.6] and written["table"]["gru-teacher"]["hard"] == [2.7]


def test_a_blown_up_metric_is_shown_per_seed_not_as_a_mean():
    from cellgraph.benchmarks.recipe_ablation import _cell
    assert _cell([2.5, 2.7]) == "2.600 ± 0.141 (2)"
    assert _cell([74373.5, 3.0e15]) == "7.4e+04, 3e+15"
    assert _cell([]) == "-"
