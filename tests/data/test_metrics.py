"""Data sets and their metrics without the real data: bits per character and perplexity from a
mean loss in nats (:meth:`cellgraph.data.datasets.Dataset.metric_from_nats`), the count
baselines reported in them (:func:`cellgraph.data.count_baselines.baselines`), and a data set's
checks, summary and loading on toy inputs (:mod:`cellgraph.data.datasets`). The tests on the
real data sets check the same things only where the data is present; these guard them on a
bare clone."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from cellgraph.data.count_baselines import ALPHAS, baselines, ngram_nats
from cellgraph.data.datasets import Dataset, Split, load_dataset, sample_windows
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


# --- data set objects -----------------------------------------------------------------------


def _classify() -> Dataset:
    return Dataset("toy", "classify", "accuracy", ("<pad>", "a", "b"), _rows([[1, 2], [2, 2]], [0, 1]),
                   _rows([[1, 1]], [1]), _rows([[2, 1]], [1]), classes=("neg", "pos"), padding_idx=0, seed=3,
                   info={"source": "hand-made"})


def test_summary_and_describe_of_a_classification_set():
    data = _classify()
    assert data.summary() == {
        "name": "toy", "task": "classify", "metric": "accuracy", "vocab_size": 3, "seq_len": 2, "seed": 3,
        "padding_idx": 0, "splits": {k: {"n": n, "source": "toy"} for k, n in (("train", 2), ("val", 1), ("test", 1))},
        "classes": ["neg", "pos"], "class_counts": {"train": [1, 1], "val": [0, 1], "test": [0, 1]},
        "info": {"source": "hand-made"}}
    assert data.describe().splitlines() == [
        "toy: task classify, metric accuracy, vocabulary 3, T = 2, seed 3",
        "  train:      2 sequences from toy, classes {'neg': 1, 'pos': 1}",
        "  val  :      1 sequences from toy, classes {'neg': 0, 'pos': 1}",
        "  test :      1 sequences from toy, classes {'neg': 0, 'pos': 1}",
        "  source: hand-made"]


def test_class_counts_cover_every_class_and_an_lm_set_has_none():
    counts = dataclasses.replace(_classify(), val=_rows([[1, 1]], [0])).summary()["class_counts"]
    assert counts["val"] == [1, 0]  # the last class is absent from the split, still counted
    lm = _lm("bpc")
    assert "class_counts" not in lm.summary()
    assert lm.describe().splitlines()[:4] == ["toy: task lm, metric bpc, vocabulary 3, T = 3, seed 0",
                                              "  train:      3 sequences from toy",
                                              "  val  :      1 sequences from toy",
                                              "  test :      1 sequences from toy"]


@pytest.mark.parametrize("change, message", [
    (dict(metric="bpc"), r"^dataset toy: task 'classify' with metric 'bpc' is not one of "),
    (dict(task="summarise"), r"^dataset toy: task 'summarise' with metric 'accuracy' is not one of "),
    (dict(classes=()), r"^dataset toy: classes are given iff the task is not lm$"),
    (dict(padding_idx=1), r"^dataset toy: padding_idx must be 0 or None$"),
    (dict(test=_rows([[2, 1]], [2])), r"^dataset toy, split test: target ids outside 0\.\.1$"),
    (dict(test=_rows([[1, 2]], [1])), r"^dataset toy: splits train and test share the sequence \[1, 2\]$"),
])
def test_a_malformed_data_set_is_a_one_line_error(change, message):
    with pytest.raises(CellGraphError, match=message):
        dataclasses.replace(_classify(), **change)


def test_overlapping_lm_windows_name_the_data_set():
    with pytest.raises(CellGraphError, match="^dataset toy: sequences overlap in toy: train window at 0 and val "
                                             "window at 2 are closer than 4 tokens$"):
        dataclasses.replace(_lm("bpc"), val=_split([[1, 0, 2]], 2))


def test_a_split_is_int64_and_checks_its_shapes():
    split = Split([[1.0, 2.0]], [[2.0, 3.0]], [0.0], source="s")
    assert {a.dtype for a in (split.inputs, split.targets, split.origin)} == {np.dtype(np.int64)}
    for inputs, targets, origin in (([1, 2], [2], [0]), ([[1, 2]], [], [0]), ([[1, 2]], [[2, 3]], [0, 1])):
        with pytest.raises(CellGraphError, match=r"^split of s: expected inputs \(n, T\), targets \(n, \.\.\.\) "
                                                 r"and origin \(n,\), got "):
            Split(inputs, targets, origin, source="s")


def test_sample_windows_uses_every_block_and_refuses_one_more():
    stream = np.arange(12)
    (inputs, targets, starts), = sample_windows(stream, (4,), 2, np.random.default_rng(0), "toy")
    assert sorted(starts.tolist()) == [0, 3, 6, 9]  # 4 blocks of 3 tokens, all drawn once
    np.testing.assert_array_equal(targets, inputs + 1)
    (one,), = [sample_windows(np.arange(2), (1,), 1, np.random.default_rng(0), "toy")]
    assert one[0].tolist() == [[0]]  # seq_len 1: one input and its next token
    with pytest.raises(CellGraphError, match=r"^toy: 5 disjoint windows of 3 tokens need 15 tokens, the source "
                                             r"has 12 \(seq_len=2\)$"):
        sample_windows(stream, (2, 3), 2, np.random.default_rng(0), "toy")


def test_load_dataset_reads_the_named_folder_with_the_fixed_options(tmp_path, monkeypatch):
    """A tiny PTB in a folder given as ``data_dir``: the loader gets the folder, the corpus
    fixed for the name and the caller's options."""
    monkeypatch.delenv("CELLGRAPH_DATA", raising=False)
    words = "the cat sat on a mat and the dog ran far".split()
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text(" " + " ".join(words) + " \n")
    data = load_dataset("ptb", tmp_path, n_train=2, n_val=1, n_test=1, seq_len=4, seed=5)
    assert (data.name, data.metric, data.seq_len, data.seed, len(data.train)) == ("ptb", "perplexity", 4, 5, 2)
    assert data.info["source"] == str(tmp_path)
