"""Count baselines (:mod:`cellgraph.data.count_baselines`) against brute-force probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cellgraph.cli import main
from cellgraph.data.count_baselines import ALPHAS, baselines, majority_accuracy, ngram_nats
from cellgraph.data.datasets import Split, load_dataset
from cellgraph.errors import CellGraphError


def _split(inputs: list[list[int]], targets: list[list[int]]) -> Split:
    return Split(np.array(inputs), np.array(targets), np.arange(len(inputs)), "test")


TRAIN = _split([[0, 1, 1], [2, 0, 0]], [[1, 1, 2], [0, 1, 0]])  # inputs and targets counted differently
HELD = _split([[1, 0, 2]], [[2, 1, 2]])


def _brute(order: int, alpha: float, V: int = 3) -> float:
    """Mean nats of HELD, each probability counted by hand from TRAIN's pairs."""
    pairs = list(zip(TRAIN.inputs.ravel(), TRAIN.targets.ravel()))
    nats = []
    for x, y in zip(HELD.inputs.ravel(), HELD.targets.ravel()):
        if order == 0:
            p = (sum(t == y for _, t in pairs) + alpha) / (len(pairs) + alpha * V)
        else:
            p = (sum(s == x and t == y for s, t in pairs) + alpha) / (sum(s == x for s, _ in pairs) + alpha * V)
        nats.append(-math.log(p))
    return sum(nats) / len(nats)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("alpha", [0.01, 1.0])
def test_ngram_nats_is_the_mean_cross_entropy_of_the_smoothed_counts(order, alpha):
    assert ngram_nats(TRAIN, HELD, order, 3, alpha) == pytest.approx(_brute(order, alpha), rel=1e-12)


def test_every_context_is_a_distribution():
    """Summed over the vocabulary, each bigram context's probabilities give 1, also for a
    context never seen in training."""
    V = 4
    for x in range(V):
        probe = _split([[x] * V], [list(range(V))])
        nats_each = [ngram_nats(TRAIN, _split([[x]], [[y]]), 1, V, 0.1) for y in range(V)]
        assert sum(math.exp(-n) for n in nats_each) == pytest.approx(1.0)
        assert ngram_nats(TRAIN, probe, 1, V, 0.1) == pytest.approx(sum(nats_each) / V)


def test_majority_class_and_bad_input():
    assert majority_accuracy(TRAIN, HELD) == pytest.approx(1 / 3)  # train's label 1 is HELD's middle one
    with pytest.raises(CellGraphError, match="order must be 0 or 1"):
        ngram_nats(TRAIN, HELD, 2, 3, 0.1)
    with pytest.raises(CellGraphError, match="smoothing constant must be > 0"):
        ngram_nats(TRAIN, HELD, 1, 3, 0.0)


def test_the_command_prints_a_row_per_baseline(capsys):
    (row,) = baselines(load_dataset("planted"))
    assert row["baseline"] == "majority class" and row["alpha"] is None
    assert main(["baseline", "planted"]) == 0
    assert f"| planted | majority class | accuracy | {row['val']:.3f} | {row['test']:.3f} | — |" in capsys.readouterr().out


def test_the_smoothing_is_the_best_on_validation_and_test_is_scored_with_it(small_data):
    data = load_dataset("wiki5k")
    rows = {row["baseline"]: row for row in baselines(data)}
    for order, name in ((0, "unigram"), (1, "bigram")):
        val = {a: ngram_nats(data.train, data.val, order, len(data.vocab), a) for a in ALPHAS}
        alpha = rows[name]["alpha"]
        assert val[alpha] == min(val.values())
        assert rows[name]["val"] == pytest.approx(val[alpha] / math.log(2))
        test = ngram_nats(data.train, data.test, order, len(data.vocab), alpha)
        assert rows[name]["test"] == pytest.approx(test / math.log(2))
    assert rows["bigram"]["test"] < rows["unigram"]["test"]
