"""The named presets of ``cellgraph train --preset`` and the hyper-parameter search ranges of
``cellgraph tune`` (paper, Appendix "Hyperparameters").

A preset is a named layer of settings that :func:`cellgraph.experiment.config.resolve_config`
puts over :class:`~cellgraph.experiment.config.TrainConfig`'s defaults, under a TOML file and
``--set`` overrides; ``cellgraph presets`` lists them. The ``paper-*`` presets hold the
Appendix's optimal values per task and model, their loss weights mapped by the authors' code's
slots (docs/paper-notes.md, *Loss weights*). A recipe is cellgraph's discovery recipe for one
searching model (docs/training.md, *The discovery recipe: the default of rrnn and rrnn-gru*;
docs/paper-notes.md, *Extension: the discovery recipe*): ``cellgraph train`` puts it in the
preset's place for rrnn and rrnn-gru when no preset is given, and it is a preset too,
``recipe-MODEL``. The search ranges are the Appendix's tables that ``cellgraph tune`` draws
from (docs/training.md, *Hyper-parameter search*).

Values only, importing no configuration code: a preset's keys and values are checked when
:func:`~cellgraph.experiment.config.resolve_config` resolves it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS", "RECIPES", "SEARCH_RANGES"]


def _preset(**kw: Any) -> dict[str, Any]:
    return kw


#: The paper's optimal hyper-parameters (Appendix "Hyperparameters"), by name. The Appendix's
#: lambda_2, lambda_3, lambda_4 are its authors' code's slots (2 = margin, 3 = L2, 4 = TD), not
#: Eq. 5's order: each RRNN preset below maps them by those slots (docs/paper-notes.md,
#: *Loss weights*). The GRU presets' "l2 regularization coefficient" is lambda_l2.
PRESETS: dict[str, dict[str, Any]] = {
    "paper-wiki5k-gru": _preset(task="wiki5k", model="gru", batch_size=18, lr=1.71e-3, lambda_l2=3.60e-7),
    # Appendix: lambda_1 = 1, lambda_2 = 1e-3, lambda_3 = 1e-3, lambda_4 = 1e-5; "batch normalization"
    "paper-wiki5k-rrnn": _preset(
        task="wiki5k", model="rrnn", batch_size=16, lr=1e-3, scoring_hidden=256,
        lambda_task=1.0, lambda_margin=1e-3, lambda_l2=1e-3, lambda_td=1e-5, candidate_norm="batch",
    ),
    "paper-wiki10k-gru": _preset(task="wiki", model="gru", batch_size=41, lr=1.4231e-3, lambda_l2=1.2124e-11),
    # Appendix: lambda_1 = 1, lambda_2 = 0.1, lambda_3 = 1e-8, lambda_4 = 0.003
    "paper-wiki10k-rrnn-gru": _preset(
        task="wiki", model="rrnn-gru", batch_size=128, lr=1e-3, scoring_hidden=64, alternate_every=5,
        lambda_task=1.0, lambda_margin=0.1, lambda_l2=1e-8, lambda_td=0.003, clip=1.0,
    ),
    "paper-sst-gru": _preset(task="sst", model="gru", batch_size=3, lr=4.85e-4, lambda_l2=2.11e-12),
    # Appendix: lambda_1 = 1, lambda_2 = 1.76e-6, lambda_3 = 2.67e-12, lambda_4 = 5.47e-5, max-margin
    # 5.47e-5 (the Appendix repeats lambda_4 there; kept as written although it lies outside the
    # margin's own search range [0.1, 10])
    "paper-sst-rrnn-gru": _preset(
        task="sst", model="rrnn-gru", lr=1.06e-5, lambda_task=1.0, lambda_margin=1.76e-6,
        lambda_l2=2.67e-12, lambda_td=5.47e-5, margin=5.47e-5, scoring_hidden=10, clip=46.3,
        alternate_every=1,
    ),
    "paper-ptb-gru": _preset(task="ptb", model="gru", batch_size=6, lr=5.29e-4, lambda_l2=2.71e-15),
    # Appendix: lambda_1 = 1, lambda_2 = 4.16e-3, lambda_3 = 1.22e-13, lambda_4 = 1.36e-3
    "paper-ptb-rrnn-gru": _preset(
        task="ptb", model="rrnn-gru", batch_size=116, lr=3.03e-4, lambda_task=1.0, lambda_margin=4.16e-3,
        lambda_l2=1.22e-13, lambda_td=1.36e-3, margin=1.74, clip=1.64, scoring_hidden=137,
        alternate_every=1,
    ),
}

#: cellgraph's discovery recipe (docs/paper-notes.md, *Extension: the discovery recipe*), per
#: model: trained straight-through (the argmax cell forward), the structural term, exclusion by
#: slot, and a warm start from a gru run that the model computes exactly at step 0; structure
#: logs compare with torch's GRU form, the teacher's. Without Eq. 5's TD and margin terms: TD
#: to a frozen teacher holds the model back, and the margin is saturated from the start; and
#: with alpha, the per-sample scoring network, frozen (``score_lr=0``): trained, it made the
#: departures that stopped the full RRNN on Wiki-5k and cost RRNN-GRU on Wiki-10k
#: (RESULTS.md, "The discovery recipe"); the teacher's candidate holds 99% of each soft
#: mixture (``warm_weight``), so that the mixture, which straight-through training never runs,
#: is the argmax to within 1e-4 BPC instead of a perturbed model. ``cellgraph train`` uses it for rrnn and
#: rrnn-gru when no preset is given; the paper's settings are TrainConfig's defaults and the
#: ``paper-*`` presets'.
_RECIPE = {"mode": "straight-through", "structure_term": True, "warm_start": "teacher", "n_tuples": 4,
           "tau_units": "score", "tau_end": 0.0, "candidate_norm": "none", "target": "gru_torch",
           "lambda_td": 0.0, "lambda_margin": 0.0, "score_lr": 0.0, "warm_weight": 0.99}
RECIPES: dict[str, dict[str, Any]] = {
    "rrnn": _preset(model="rrnn", exclusion="slot", n_iterations=9, **_RECIPE),
    "rrnn-gru": _preset(model="rrnn-gru", tree="gru_torch", placement="flexible", **_RECIPE),
}
PRESETS.update({f"recipe-{model}": recipe for model, recipe in RECIPES.items()})


#: The paper's random-search ranges (Appendix tables "search range"), plus our table for full
#: RRNN (marked below): key -> (low, high, scale). The RRNN-GRU table's lambda_2, lambda_3, lambda_4 rows are mapped by the same slots as
#: :data:`PRESETS` (margin, L2, TD).
SEARCH_RANGES: dict[tuple[str, str], dict[str, tuple[float, float, str]]] = {
    ("rrnn-gru", "wiki"): {
        "batch_size": (1, 316, "int"), "lr": (1e-5, 1e-2, "log"), "lambda_margin": (1e-2, 1, "log"),
        "lambda_l2": (1e-16, 1, "log"), "lambda_td": (1e-6, 1e-2, "log"), "margin": (0.1, 10, "log"),
        "clip": (0.1, 100, "log"), "alternate_every": (1, 10, "int"),
    },
    ("rrnn-gru", "sst"): {
        "batch_size": (1, 316, "int"), "lr": (1e-5, 1e-2, "log"), "lambda_margin": (1e-5, 1e-2, "log"),
        "lambda_l2": (1e-5, 1e-2, "log"), "lambda_td": (1e-8, 1e-4, "log"), "margin": (0.1, 10, "log"),
        "clip": (0.1, 100, "log"), "alternate_every": (1, 10, "int"),
    },
    ("rrnn-gru", "ptb"): {
        "batch_size": (1, 316, "int"), "lr": (1e-5, 1e-2, "log"), "lambda_margin": (3e-2, 3, "log"),
        "lambda_l2": (3e-16, 3e-2, "log"), "lambda_td": (3e-6, 3e-2, "log"), "margin": (0.1, 10, "log"),
        "clip": (0.1, 100, "log"), "alternate_every": (1, 10, "int"),
    },
    # Ours, not the paper's (it gives no table for full RRNN): the RRNN-GRU Wiki table without
    # alternate_every, which full RRNN does not have.
    ("rrnn", "wiki5k"): {
        "batch_size": (1, 316, "int"), "lr": (1e-5, 1e-2, "log"), "lambda_margin": (1e-2, 1, "log"),
        "lambda_l2": (1e-16, 1, "log"), "lambda_td": (1e-6, 1e-2, "log"), "margin": (0.1, 10, "log"),
        "clip": (0.1, 100, "log"),
    },
    ("gru", "wiki"): {"batch_size": (8, 256, "int"), "lr": (1e-5, 1e-1, "log"), "lambda_l2": (1e-16, 1, "log")},
    ("gru", "sst"): {"batch_size": (4, 128, "int"), "lr": (1e-6, 1e1, "log"), "lambda_l2": (1e-16, 1e-2, "log")},
    ("gru", "ptb"): {"batch_size": (8, 256, "int"), "lr": (1e-4, 1e-1, "log"), "lambda_l2": (1e-16, 1, "log")},
}
