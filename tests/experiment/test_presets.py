"""Every ``paper-*`` preset against the paper's Appendix ("Hyperparameters"), transcribed here
independently of :data:`cellgraph.experiment.presets.PRESETS`: a slip in any preset's value, or
a loss weight put in the wrong slot, fails here. Presets are module-level data, which
mutation testing (docs/mutation.md) does not mutate, so this table is their guard."""

from __future__ import annotations

import pytest

from cellgraph.experiment.config import resolve_config
from cellgraph.experiment.presets import PRESETS, RECIPES

#: The Appendix's lambda_2, lambda_3, lambda_4 are its authors' code's slots: margin, L2, TD
#: (docs/paper-notes.md, *Loss weights*); lambda_1 weighs the task loss.
SLOTS = ("lambda_task", "lambda_margin", "lambda_l2", "lambda_td")

#: RRNN presets: the Appendix's (lambda_1, lambda_2, lambda_3, lambda_4) and its other settings.
RRNN = {
    "paper-wiki5k-rrnn": ((1.0, 1e-3, 1e-3, 1e-5), dict(
        task="wiki5k", model="rrnn", batch_size=16, lr=1e-3, scoring_hidden=256, candidate_norm="batch")),
    "paper-wiki10k-rrnn-gru": ((1.0, 0.1, 1e-8, 0.003), dict(
        task="wiki", model="rrnn-gru", batch_size=128, lr=1e-3, scoring_hidden=64, alternate_every=5, clip=1.0)),
    "paper-sst-rrnn-gru": ((1.0, 1.76e-6, 2.67e-12, 5.47e-5), dict(
        task="sst", model="rrnn-gru", lr=1.06e-5, margin=5.47e-5, scoring_hidden=10, clip=46.3, alternate_every=1)),
    "paper-ptb-rrnn-gru": ((1.0, 4.16e-3, 1.22e-13, 1.36e-3), dict(
        task="ptb", model="rrnn-gru", batch_size=116, lr=3.03e-4, margin=1.74, clip=1.64, scoring_hidden=137,
        alternate_every=1)),
}

#: GRU presets: the Appendix's batch size, learning rate and l2 coefficient.
GRU = {
    "paper-wiki5k-gru": ("wiki5k", 18, 1.71e-3, 3.60e-7),
    "paper-wiki10k-gru": ("wiki", 41, 1.4231e-3, 1.2124e-11),
    "paper-sst-gru": ("sst", 3, 4.85e-4, 2.11e-12),
    "paper-ptb-gru": ("ptb", 6, 5.29e-4, 2.71e-15),
}


def test_every_preset_is_transcribed_here():
    """The paper's presets are the ones transcribed above; the others are cellgraph's
    discovery recipes, one per searching model, as RECIPES holds them."""
    assert set(PRESETS) == set(RRNN) | set(GRU) | {f"recipe-{model}" for model in RECIPES}
    assert set(RECIPES) == {"rrnn", "rrnn-gru"}
    assert all(PRESETS[f"recipe-{model}"] == recipe and recipe["model"] == model for model, recipe in RECIPES.items())


@pytest.mark.parametrize("name", sorted(RRNN))
def test_rrnn_preset_weights_sit_in_the_authors_slots(name):
    lambdas, settings = RRNN[name]
    assert PRESETS[name] == {**dict(zip(SLOTS, lambdas)), **settings}
    config = resolve_config(name)
    assert tuple(getattr(config, slot) for slot in SLOTS) == lambdas


@pytest.mark.parametrize("name", sorted(GRU))
def test_gru_preset_is_the_appendix_line(name):
    task, batch_size, lr, l2 = GRU[name]
    assert PRESETS[name] == dict(task=task, model="gru", batch_size=batch_size, lr=lr, lambda_l2=l2)
