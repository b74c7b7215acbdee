"""Reading settings (:mod:`cellgraph.experiment.config`): how each kind of value is read from
text, the exact one-line errors a user sees (naming the layer that set a bad value), the key
table of ``--help``, and the helpers the trainer and the command line use."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest

from cellgraph.errors import FormatError
from cellgraph.experiment.config import (
    TrainConfig, dataset_options, key_table, load_run_config, load_toml, paper_settings, parse_set,
    preset_conflicts, resolve_config, resolved_td_match,
)
from cellgraph.experiment.presets import RECIPES


@pytest.mark.parametrize("text, value", [("true", True), ("YES", True), ("1", True),
                                         ("False", False), ("no", False), ("0", False)])
def test_booleans_are_read_from_their_six_words(text, value):
    assert resolve_config(overrides={"identity_trainable": text}).identity_trainable is value


@pytest.mark.parametrize("key, value, kind", [("identity_trainable", "maybe", "bool"), ("identity_trainable", 1, "bool"),
                                              ("epochs", "2.5", "int"), ("epochs", True, "int"),
                                              ("lr", "fast", "float"), ("lr", "inf", "float"), ("lr", True, "float"),
                                              ("lr", float("nan"), "float"), ("task", 3, "str")])
def test_a_value_of_the_wrong_kind_names_the_layer_key_and_kind(key, value, kind):
    with pytest.raises(FormatError, match=rf"^--set: {key}: expected a {kind}, got {value!r}$"):
        resolve_config(overrides={key: value})


def test_numbers_widen_and_parse():
    config = resolve_config(overrides={"lr": 1, "epochs": "3", "clip": "0.5"})
    assert (config.lr, config.epochs, config.clip) == (1.0, 3, 0.5) and type(config.lr) is float


def test_unknown_and_renamed_keys_name_the_layer():
    with pytest.raises(FormatError, match=r"^--set: lamda_td: unknown setting; did you mean lambda_td, lambda_task or "
                                          r"lambda_l2\?$"):
        resolve_config(overrides={"lamda_td": "1"})
    with pytest.raises(FormatError, match=r"^--set: zzzz: unknown setting \(cellgraph train --help lists every "
                                          r"setting\)$"):
        resolve_config(overrides={"zzzz": "1"})
    with pytest.raises(FormatError, match=r"^arguments: lambda1: this setting was renamed: use lambda_task$"):
        resolve_config(base={"lambda1": 1.0})


def test_close_misspellings_list_up_to_three_settings():
    with pytest.raises(FormatError) as err:
        resolve_config(overrides={"lambda_": "1"})
    suggested = str(err.value).split("did you mean ")[1].rstrip("?").replace(" or ", ", ").split(", ")
    assert len(suggested) == 3 and all(s.startswith("lambda") for s in suggested)


def test_a_rule_broken_by_a_layer_names_that_layer(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("epochs = 0\n")
    with pytest.raises(FormatError, match=rf"^{toml}: epochs: invalid value 0: must be >= 1$"):
        resolve_config(config_file=toml)
    with pytest.raises(FormatError, match=r"^--set: amp: bf16 applies to gru, lstm and rrnn-gru; the full RRNN search "
                                          r"runs in float32 \(its exclusion test compares candidates within 1e-9, "
                                          r"far below bfloat16's resolution\)$"):
        resolve_config(overrides={"model": "rrnn", "amp": "bf16"})
    assert resolve_config(overrides={"model": "rrnn-gru", "amp": "bf16"}).amp == "bf16"


def test_missing_required_settings_say_how_to_give_them():
    with pytest.raises(FormatError, match=r"^task and model not given: name them with --task \(wiki\|wiki5k\|ptb\|"
                                          r"sst\|planted\), --model \(rrnn\|rrnn-gru\|gru\|lstm\|cell\), or with a --preset or "
                                          r"--config file that sets them \(cellgraph presets lists the presets\)$"):
        resolve_config(require=("task", "model"))
    with pytest.raises(FormatError, match=r"^seed not given: name it with --set seed=\.\.\., or with a --preset or "
                                          r"--config file that sets it "):
        resolve_config(require=("seed",))


def test_toml_files(tmp_path):
    flat, nested, bad = tmp_path / "flat.toml", tmp_path / "nested.toml", tmp_path / "bad.toml"
    flat.write_text("epochs = 3\n")
    nested.write_text("[train]\nepochs = 4\n")
    assert load_toml(flat) == {"epochs": 3} and load_toml(nested) == {"epochs": 4}
    bad.write_text("epochs = \n")
    with pytest.raises(FormatError, match=rf"^{bad}: not valid TOML: "):
        load_toml(bad)
    bad.write_text("train = 3\n")
    with pytest.raises(FormatError, match=rf"^{bad}: train: expected a table of settings$"):
        load_toml(bad)
    bad.write_text("lr = [1, 2]\n")
    with pytest.raises(FormatError, match=rf"^{bad}: lr: expected a single value, got a table or array$"):
        load_toml(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(FormatError, match=rf"^{bad}: not valid TOML: "):
        load_toml(bad)
    with pytest.raises(FileNotFoundError, match=rf"^config file {tmp_path / 'none.toml'} does not exist$"):
        load_toml(tmp_path / "none.toml")


def test_presets_are_named_and_checked_against_the_task_and_model():
    with pytest.raises(FormatError, match=r"^--preset: unknown preset 'paper-x' \(known: paper-wiki5k-gru, "):
        resolve_config("paper-x")
    config = resolve_config("paper-sst-gru", overrides={"task": "ptb"})
    assert preset_conflicts("paper-sst-gru", config) == [
        "warning: preset paper-sst-gru is tuned for task sst, not ptb; its other settings may not suit ptb"]
    assert preset_conflicts(None, config) == [] and preset_conflicts("mine", config) == []


def test_the_recipe_default_takes_settings_that_hold_only_under_it(tmp_path):
    """``cellgraph train`` puts the recipe of the model the last layer names under every layer,
    so ``--set structure_lr=...`` (which needs the recipe's structural term) is read with it;
    the paper's settings refuse it with a one-line error."""
    config = resolve_config(overrides={"task": "planted", "model": "rrnn-gru", "structure_lr": "100"}, recipe=True)
    assert (config.structure_lr, config.structure_term, config.warm_start) == (100.0, True, "teacher")
    toml = tmp_path / "run.toml"
    toml.write_text('model = "rrnn-gru"\n')
    assert resolve_config(config_file=toml, overrides={"model": "gru"}, recipe=True).warm_start == "none"
    with pytest.raises(FormatError, match=r"^--set: structure_lr: 100 sets the structural logits' learning rate, "
                                          r"which only rrnn and rrnn-gru with structure_term=true have$"):
        resolve_config(overrides={"model": "rrnn-gru", "structure_lr": "100"})


def test_the_recipe_lies_under_every_layer_and_needs_a_model(tmp_path):
    """Settings given on the command line or in a file win over the recipe's; without a model
    named no recipe applies."""
    assert resolve_config(overrides={"model": "rrnn-gru", "warm_start": "none"}, recipe=True).warm_start == "none"
    toml = tmp_path / "run.toml"
    toml.write_text('warm_start = "none"\n')
    assert resolve_config(config_file=toml, overrides={"model": "rrnn-gru"}, recipe=True).warm_start == "none"
    assert resolve_config(overrides={"seed": "1"}, recipe=True) == resolve_config(overrides={"seed": "1"})


def test_paper_settings_undo_the_recipe_with_the_papers_values():
    assert paper_settings("gru") == {}
    undo = paper_settings("rrnn-gru")
    assert set(undo) == set(RECIPES["rrnn-gru"]) - {"model"} and undo["warm_start"] == "none"
    assert all(getattr(TrainConfig(), key) == value for key, value in undo.items())
    assert resolve_config(overrides={"model": "rrnn-gru", **undo}, recipe=True) == TrainConfig(model="rrnn-gru")


def test_set_items_split_at_the_first_equals_sign():
    assert parse_set([" name = a=b ", "lr=1e-3"]) == {"name": "a=b", "lr": "1e-3"}
    for bad in ("lr", "=3"):
        with pytest.raises(FormatError, match=rf"^--set: expected key=value, got {bad!r}$"):
            parse_set([bad])


def test_run_config_json_is_read_and_checked(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TrainConfig(epochs=7).to_dict()))
    assert load_run_config(path) == TrainConfig(epochs=7)
    path.write_text("[1]")
    with pytest.raises(FormatError, match=rf"^{path}: expected a JSON object of settings$"):
        load_run_config(path)
    path.write_text(json.dumps({"epochs": 0}))
    with pytest.raises(FormatError, match=rf"^{path}: epochs: invalid value 0: must be >= 1$"):
        load_run_config(path)


def test_auto_td_match_follows_the_model():
    assert resolved_td_match(TrainConfig(model="rrnn-gru")) == "root"
    assert resolved_td_match(TrainConfig(model="rrnn")) == "internal"
    assert resolved_td_match(TrainConfig(model="gru")) == "any"
    assert resolved_td_match(TrainConfig(model="rrnn", td_match="root")) == "root"
    assert TrainConfig().replace(epochs=9) == TrainConfig(epochs=9)


def test_key_table_lists_each_setting_with_its_rule_and_wrapped_help():
    lines = key_table(60).splitlines()
    assert lines[0].startswith("  task: str, default 'planted', must be one of wiki, wiki5k, ptb, sst, planted")
    seed = lines.index("  seed: int, default 0, must be >= 0")
    help_lines = [line for line in lines[seed + 1:] if line.startswith("      ")]
    assert help_lines and all(len(line) <= 60 for line in lines if line.startswith("      "))
    assert any(line.startswith("  ") and not line.startswith("   ") and ", must be" not in line for line in lines)
    assert not any(line.startswith("       ") for line in lines)  # help indented by 6 exactly
    # every line a setting's (indent 2) or its help's (indent 6, the first and the wrapped ones)
    assert all(re.match(r"  [a-z_0-9]+: ", line) or re.match(r" {6}\S", line) for line in lines)
    assert re.match(r" {6}\S", lines[seed + 1]) and len(help_lines) > len(fields(TrainConfig))


def test_a_setting_without_a_rule_ends_at_its_default():
    lines = key_table().splitlines()
    assert "  identity_trainable: bool, default False" in lines


def test_a_cell_is_given_exactly_when_model_is_cell():
    assert TrainConfig(model="cell", cell="mgu").cell == "mgu"
    with pytest.raises(FormatError, match=r"^cell: model=cell trains the cell this setting names: give "
                                          r"--set cell=NAME\|FILE$"):
        TrainConfig(model="cell")
    with pytest.raises(FormatError, match=r"^--set: cell: set for model gru; only model=cell trains a given cell "
                                          r"\(drop it or use --model cell\)$"):
        resolve_config(overrides={"model": "gru", "cell": "mgu"})


def test_fixed_matrices_needs_model_cell():
    assert TrainConfig(model="cell", cell="gru_torch", fixed_matrices=True).fixed_matrices is True
    assert TrainConfig(model="cell", cell="gru_torch").fixed_matrices is False
    with pytest.raises(FormatError, match=r"^--set: fixed_matrices: set for model gru; it fixes matrices of "
                                          r"model=cell's cell \(drop it or use --model cell\)$"):
        resolve_config(overrides={"model": "gru", "fixed_matrices": "true"})


@pytest.mark.parametrize("task, keys", [("sst", {"seed"}), ("ptb", {"seed", "seq_len"}),
                                        ("wiki", {"seed", "seq_len", "wiki_cleaning"}),
                                        ("wiki5k", {"seed", "seq_len", "wiki_cleaning"}),
                                        ("planted", {"seed", "seq_len", "teacher"})])
def test_dataset_options_are_the_tasks_own(task, keys):
    config = TrainConfig(task=task, data_seed=4, seq_len=7, wiki_cleaning="paper", planted_teacher="mut1")
    every = {"seed": 4, "seq_len": 7, "wiki_cleaning": "paper", "teacher": "mut1"}
    assert dataset_options(config) == {key: every[key] for key in keys}


def test_rrnn_grus_structural_term_needs_the_flexible_placement():
    with pytest.raises(FormatError, match=r"^structure_term: rrnn-gru's structural term needs placement=flexible$"):
        TrainConfig(model="rrnn-gru", structure_term=True, placement="gates")
    assert TrainConfig(model="rrnn-gru", structure_term=True).placement == "flexible"
    assert TrainConfig(model="rrnn-gru", placement="gates").structure_term is False
    assert TrainConfig(model="rrnn", structure_term=True, placement="gates").model == "rrnn"  # placement: rrnn-gru's


@pytest.mark.parametrize("model, structure_term", [("gru", True), ("rrnn", False), ("rrnn-gru", False)])
def test_structure_lr_needs_a_structural_term(model, structure_term):
    with pytest.raises(FormatError, match=r"^structure_lr: 0.5 sets the structural logits' learning rate, which "
                                          r"only rrnn and rrnn-gru with structure_term=true have$"):
        TrainConfig(model=model, structure_term=structure_term, structure_lr=0.5)
    assert TrainConfig(model=model, structure_term=structure_term).structure_lr == 1.0


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
def test_structure_lr_with_a_structural_term(model):
    assert TrainConfig(model=model, structure_term=True, structure_lr=0.5).structure_lr == 0.5


@pytest.mark.parametrize("model, cell", [("lstm", ""), ("cell", "mgu")])
def test_a_warm_start_needs_a_model_that_takes_one(model, cell):
    with pytest.raises(FormatError, match=rf"^warm_start: teacher: no warm start for {model} "
                                          r"\(rrnn, rrnn-gru or gru\)$"):
        TrainConfig(model=model, cell=cell, warm_start="teacher")


def test_a_gru_warm_start_takes_the_teachers_weights_whatever_its_settings():
    assert TrainConfig(model="gru", warm_start="teacher", n_tuples=1, n_iterations=8).warm_start == "teacher"


@pytest.mark.parametrize("changes, needs", [
    (dict(model="rrnn", n_iterations=8), "structure_term=True (has False), exclusion='slot' (has 'value'), "
                                         "n_iterations=9 (has 8), n_tuples=4 (has 3)"),
    (dict(model="rrnn", structure_term=True, exclusion="slot", n_tuples=2), "n_tuples=4 (has 2)"),
    (dict(model="rrnn-gru", placement="gates"), "structure_term=True (has False), tree='gru_torch' (has 'gru'), "
                                                "placement='flexible' (has 'gates'), n_tuples=4 (has 3)"),
    (dict(model="rrnn-gru", structure_term=True, tree="gru_torch", n_tuples=1), "n_tuples=4 (has 1)"),
])
def test_a_warm_start_names_every_setting_it_needs(changes, needs):
    with pytest.raises(FormatError, match=rf"^warm_start: teacher makes {changes['model']} compute torch.nn.GRU's "
                                          rf"cell, which needs {re.escape(needs)}$"):
        TrainConfig(warm_start="teacher", **changes)


@pytest.mark.parametrize("model", ["rrnn", "rrnn-gru"])
@pytest.mark.parametrize("n_tuples", [4, 5])
def test_a_warm_start_takes_four_tuples_or_more(model, n_tuples):
    recipe = {**RECIPES[model], "n_tuples": n_tuples}
    assert TrainConfig(**recipe).warm_start == "teacher"
