"""The metrics of the language-model tasks, data-free: bits per character and perplexity from a
mean loss in nats (:meth:`cellgraph.data.datasets.Dataset.metric_from_nats`), and the count
baselines reported in them (:func:`cellgraph.data.baselines.baselines`). The tests on the real
data sets check the same numbers only where the data is present; these guard the conversions
on a bare clone."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from cellgraph.data.baselines import ALPHAS, baselines, ngram_nats
from cellgraph.data.datasets import Dataset, Split
from cellgraph.errors import CellGraphError

T = 3


def _split(rows: list[list[int]], start: int) -> Split:
    """``lm`` rows whose windows (``T + 1`` tokens) start ``T + 1`` apart from ``start``."""
    inputs = np.array(rows)
    targets = np.roll(inputs, -1, axis=1)
    return Split(inputs, targets, start + (T + 1) * np.arange(len(rows)), source="toy")


def _lm(metric: str) -> Dataset:
    train = _split([[0, 1, 1], [2, 0, 0], [1, 1, 2]], 0)
    val = _split([[1, 0, 2]], 100)
    test = _split([[2, 2, 1]], 200)
    return Dataset("toy", "lm", metric, ("a", "b", "c"), train, val, test)


def _rows(inputs: list[list[int]], labels: list[int]) -> Split:
    return Split(np.array(inputs), np.array(labels), np.arange(len(inputs)), source="toy")


def test_bits_per_character_is_nats_over_ln_2():
    """``ln 2`` nats are one bit; one nat is ``log2(e)`` bits; the conversion is linear."""
    bpc = _lm("bpc")
    assert bpc.metric_from_nats(math.log(2)) == pytest.approx(1.0, rel=1e-15)
    assert bpc.metric_from_nats(1.0) == pytest.approx(math.log2(math.e), rel=1e-15)
    assert bpc.metric_from_nats(3.5) == pytest.approx(3.5 * math.log2(math.e), rel=1e-15)
    assert bpc.metric_from_nats(0.0) == 0.0


def test_perplexity_is_exp_of_nats():
    ppl = _lm("perplexity")
    assert ppl.metric_from_nats(math.log(2)) == pytest.approx(2.0, rel=1e-15)
    assert ppl.metric_from_nats(0.0) == 1.0


def test_accuracy_is_not_a_function_of_nats():
    classify = dataclasses.replace(_lm("bpc"), metric="accuracy", task="classify", classes=("n", "p"),
                                   train=_rows([[0, 1], [1, 0]], [0, 1]), val=_rows([[1, 1]], [1]),
                                   test=_rows([[2, 0]], [0]))
    with pytest.raises(CellGraphError, match=r"^dataset toy: metric 'accuracy' is not a function of nats$"):
        classify.metric_from_nats(1.0)


@pytest.mark.parametrize("metric, convert", [("bpc", lambda n: n / math.log(2)), ("perplexity", math.exp)])
def test_lm_baselines_report_the_best_smoothing_in_the_task_metric(metric, convert):
    """Each n-gram row: the smoothing constant with the least validation nats, and its
    validation and test nats converted to the data set's metric."""
    data = _lm(metric)
    rows = baselines(data)
    assert [r["baseline"] for r in rows] == ["unigram", "bigram"]
    for order, row in enumerate(rows):
        val = {a: ngram_nats(data.train, data.val, order, 3, a) for a in ALPHAS}
        best = min(val, key=val.__getitem__)
        assert row["metric"] == metric and row["alpha"] == best
        assert row["val"] == pytest.approx(convert(val[best]), rel=1e-12)
        assert row["test"] == pytest.approx(convert(ngram_nats(data.train, data.test, order, 3, best)), rel=1e-12)


def test_a_token_never_in_training_gets_the_smoothing_mass():
    """A test token whose id is above every training target's (a word seen only in test)
    has count 0: probability ``a / (N + a V)`` under the unigram, not an index error."""
    train = _split([[0, 1, 0]], 0)  # targets 1, 0, 0 (rolled): ids 0 and 1 only
    held = Split(np.array([[1]]), np.array([[2]]), np.array([0]), source="toy")
    alpha, V = 0.5, 3
    assert ngram_nats(train, held, 0, V, alpha) == pytest.approx(-math.log(alpha / (3 + alpha * V)), rel=1e-12)
