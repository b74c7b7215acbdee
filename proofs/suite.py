"""The checked statements of the paper, by name, in the order ``cellgraph prove`` runs them.

Each statement is a function ``check(seed) -> Result`` (:mod:`cellgraph.proofs.report`) in a
module of :mod:`cellgraph.proofs`; its other arguments (numbers of draws, cells, steps)
default to the sizes of the full run, and :data:`QUICK` gives reduced ones (``cellgraph prove
--quick``, the default test suite). Modules are imported on use (they import torch).
"""

from __future__ import annotations

import importlib
from typing import Callable, Sequence

from cellgraph.errors import CellGraphError
from cellgraph.proofs.report import Result

__all__ = ["STATEMENTS", "QUICK", "statement", "run"]

#: name -> ``module:function`` in :mod:`cellgraph.proofs`.
STATEMENTS: dict[str, str] = {
    "lemma1": "lemma1:check",
    "gru": "gru_theorem:check",
    "gru_torch": "gru_theorem:check_torch",
    "lstm": "lstm_theorem:check",
    "lemma2": "lemma2:check",
    "vanishing": "vanishing:check",
    "exploding": "exploding:check",
}

#: name -> the reduced sizes of ``cellgraph prove --quick``: every statement with every check
#: (negative controls included), on fewer draws, sets, shapes and cells and smaller trees.
QUICK: dict[str, dict[str, int]] = {
    "lemma1": {"n_sets": 100},
    "gru": {"n_draws": 4, "n_controls": 2},
    "gru_torch": {"n_draws": 4, "n_controls": 2},
    "lstm": {"n_draws": 4, "n_controls": 2},
    "lemma2": {"max_internal": 8},
    "vanishing": {"n_search_cells": 1},
    "exploding": {"n_shapes": 8, "n_search_cells": 1, "T": 30},
}


def statement(name: str) -> Callable[..., Result]:
    """The check function of statement ``name``."""
    if name not in STATEMENTS:
        raise CellGraphError(f"unknown statement {name!r} (known: {', '.join(STATEMENTS)})")
    module, function = STATEMENTS[name].split(":")
    return getattr(importlib.import_module(f"cellgraph.proofs.{module}"), function)


def run(names: Sequence[str] | None = None, seed: int = 0, quick: bool = False) -> list[Result]:
    """Run the statements ``names`` (all when ``None``) with ``seed``, in catalogue order, at
    the full sizes or, with ``quick``, at :data:`QUICK`'s."""
    wanted = set(names or STATEMENTS)
    for name in wanted:
        statement(name)  # unknown names fail before anything runs
    return [statement(name)(seed, **(QUICK[name] if quick else {})) for name in STATEMENTS if name in wanted]
