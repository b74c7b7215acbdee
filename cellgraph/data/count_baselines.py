"""Count baselines of a data set: what a predictor with no recurrent state scores, as reference
points for the models of Table 1.

* ``unigram`` and ``bigram`` (``lm`` tasks): the next token from counts of the training split,
  ``P(y) = (c(y) + a) / (N + a V)`` and ``P(y | x) = (c(x, y) + a) / (c(x) + a V)``, with ``x`` the
  input token of the same step (the current character or word) and add-``a`` (Lidstone)
  smoothing, ``a`` chosen on the validation split from :data:`ALPHAS`. Scored like the models:
  the mean cross-entropy over every target of a split, as bits per character or perplexity.
* ``majority class`` (``classify`` and ``tag`` tasks): the training split's most frequent
  label, scored by accuracy.

Reference: C. D. Manning and H. Schütze, *Foundations of Statistical Natural Language
Processing*, MIT Press 1999, Sec. 6.2.2 (Lidstone's law).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellgraph.data.datasets import Dataset, Split
from cellgraph.errors import CellGraphError

__all__ = ["ALPHAS", "ngram_counts", "smoothed_nats", "ngram_nats", "majority_accuracy", "baselines"]

#: The smoothing constants tried on the validation split.
ALPHAS = (1e-3, 1e-2, 0.1, 1.0)


def ngram_counts(train: Split, split: Split, order: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """For every target of ``split``: how often ``train`` has it after the same context
    (``order`` 0: at all; 1: after the step's input token) and how often it has that context.
    Counts are kept sparse, so a word vocabulary costs no ``V x V`` table."""
    if order not in (0, 1):
        raise CellGraphError(f"n-gram order must be 0 or 1, got {order}")
    y_train, y = train.targets.ravel(), split.targets.ravel()
    if order == 0:
        return np.bincount(y_train, minlength=vocab_size)[y], np.full(len(y), len(y_train))
    x_train, x = train.inputs.ravel(), split.inputs.ravel()
    pairs, counts = np.unique(x_train * vocab_size + y_train, return_counts=True)
    keys = x * vocab_size + y
    at = np.searchsorted(pairs, keys).clip(max=len(pairs) - 1)
    return np.where(pairs[at] == keys, counts[at], 0), np.bincount(x_train, minlength=vocab_size)[x]


def smoothed_nats(joint: np.ndarray, context: np.ndarray, vocab_size: int, alpha: float) -> float:
    """Mean nats of the add-``alpha`` estimates ``(joint + alpha) / (context + alpha V)``
    (:func:`ngram_counts`)."""
    if alpha <= 0:
        raise CellGraphError(f"the smoothing constant must be > 0, got {alpha}")
    return float(-np.log((joint + alpha) / (context + alpha * vocab_size)).mean())


def ngram_nats(train: Split, split: Split, order: int, vocab_size: int, alpha: float) -> float:
    """Mean nats per target of ``split`` under the add-``alpha`` n-gram of ``train`` (``order``
    0: unigram, 1: bigram on the step's input token)."""
    return smoothed_nats(*ngram_counts(train, split, order, vocab_size), vocab_size, alpha)


def majority_accuracy(train: Split, split: Split) -> float:
    """Accuracy on ``split`` of always answering ``train``'s most frequent label."""
    label = np.bincount(train.targets.ravel()).argmax()
    return float((split.targets.ravel() == label).mean())


def baselines(dataset: Dataset) -> list[dict[str, Any]]:
    """The baselines of ``dataset`` (module docstring), one row each: ``baseline``,
    ``metric``, ``val``, ``test`` and, for the n-grams, ``alpha``."""
    if dataset.task != "lm":
        return [{"baseline": "majority class", "metric": "accuracy", "alpha": None,
                 **{s: majority_accuracy(dataset.train, getattr(dataset, s)) for s in ("val", "test")}}]
    rows, size = [], len(dataset.vocab)
    for order, name in ((0, "unigram"), (1, "bigram")):
        val, test = (ngram_counts(dataset.train, split, order, size) for split in (dataset.val, dataset.test))
        nats = {a: smoothed_nats(*val, size, a) for a in ALPHAS}
        alpha = min(nats, key=nats.__getitem__)
        rows.append({"baseline": name, "metric": dataset.metric, "alpha": alpha,
                     "val": dataset.metric_from_nats(nats[alpha]),
                     "test": dataset.metric_from_nats(smoothed_nats(*test, size, alpha))})
    return rows
