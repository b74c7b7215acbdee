"""Data sets: enwik8 cleaning, PTB, SST trees, GloVe, splits without overlap, the registry.

Tests on the real files use the paper's data sets where the loaders find them and skip
without them (``tests/needs_data.py``); the loaders cache each file, so every file is read
once per session. The same loaders also run on the small data folder ``tests/fixtures/data``.
"""

import dataclasses
import math
import zipfile

import numpy as np
import pytest

from cellgraph.data.text import (
    WIKI_ALPHABET, clean_enwik8, find_enwik8, load_lm, load_sst, parse_sst_tree,
    read_enwik8, read_ptb, read_sst,
)
from cellgraph.data.datasets import (
    DATA_ENV, Dataset, Split, dataset_names, load_dataset, resolve_data_dir, sample_windows,
)
from cellgraph.data.glove import load_glove
from cellgraph.errors import CellGraphError, FormatError

from needs_data import DATA, FIXTURES, SMALL_SIZES, needs_data as real


# --- enwik8 cleaning -------------------------------------------------------------------

XML = """<mediawiki><siteinfo><sitename>Wikipedia</sitename></siteinfo>
<page><title>Title Words</title><id>12</id><revision><text xml:space="preserve">'''Anarchism''' is a [[political philosophy|Philosophy]] (1920s)&lt;ref&gt;Cited&lt;/ref&gt;
&lt;!-- a comment --&gt; caf\u00e9 &amp;nbsp; R&amp;D {{Infobox}}</text></revision></page>
<page><title>Empty</title><text>123 !!</text></page>
<page><title>Second</title><text>Done.</text></page>
<page><title>Cut</title><text>unclosed last page"""


def test_clean_enwik8_keeps_letters_and_space_of_page_bodies():
    assert clean_enwik8(XML) == (
        "anarchism is a political philosophy philosophy s cited caf r d infobox done"
    )


def test_enwik8_zip_and_missing_text(tmp_path):
    archive = tmp_path / "enwik8.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("enwik8", XML)
    assert find_enwik8(tmp_path) == archive
    assert read_enwik8(archive).startswith(" anarchism is") and read_enwik8(archive, "paper").startswith("anarchism is")
    bad = tmp_path / "other" / "enwik8"
    bad.parent.mkdir()
    bad.write_text("<mediawiki><page><title>x</title></page></mediawiki>")
    with pytest.raises(FormatError, match=r"enwik8: expected MediaWiki XML with <text>"):
        read_enwik8(bad)
    with pytest.raises(CellGraphError, match="no enwik8 file in .*expected enwik8, enwik8.zip"):
        find_enwik8(tmp_path / "other" / "nothing")


def test_sample_windows_are_disjoint_and_shifted():
    stream = np.arange(1000)
    parts = sample_windows(stream, (10, 5, 3), 4, np.random.default_rng(0), "toy")
    starts = np.sort(np.concatenate([s for _, _, s in parts]))
    assert len(starts) == 18 and (np.diff(starts) >= 5).all()
    for inputs, targets, s in parts:
        assert (inputs == s[:, None] + np.arange(4)).all() and (targets == inputs + 1).all()
    with pytest.raises(CellGraphError, match="toy: 201 disjoint windows of 5 tokens need 1005"):
        sample_windows(stream, (201,), 4, np.random.default_rng(0), "toy")


def _lm(origins: dict[str, list[int]], T: int = 3) -> Dataset:
    def split(o):
        return Split(np.zeros((len(o), T)), np.zeros((len(o), T)), o, source="s")
    return Dataset("toy", "lm", "bpc", ("a", "b"), *(split(origins[k]) for k in ("train", "val", "test")))


def test_perplexity_of_a_diverged_loss_is_inf_not_an_overflow():
    """A search trial whose argmax diverged (mean loss of thousands of nats) once crashed its
    validation with math's OverflowError; its perplexity is inf, and finite ones are exp."""
    ptb = dataclasses.replace(_lm({"train": [0], "val": [4], "test": [8]}), metric="perplexity")
    assert ptb.metric_from_nats(math.log(239.0)) == pytest.approx(239.0)
    assert ptb.metric_from_nats(5000.0) == math.inf and ptb.metric_from_nats(math.inf) == math.inf


def test_dataset_rejects_overlapping_windows_and_shared_sequences():
    _lm({"train": [0, 4], "val": [8], "test": [12]})
    with pytest.raises(CellGraphError, match="overlap in s: train window at 4 and val window at 6"):
        _lm({"train": [0, 4], "val": [6], "test": [12]})
    rows = np.array([[1, 2], [2, 1]])
    with pytest.raises(CellGraphError, match=r"splits train and test share the sequence \[2, 1\]"):
        Dataset("toy", "classify", "accuracy", ("<pad>", "a", "b"),
                Split(rows, [0, 1], [0, 1], "f"), Split(rows[:0], [], [], "g"),
                Split(rows[1:], [0], [0], "h"), classes=("n", "p"), padding_idx=0)


def test_dataset_checks_task_metric_shapes_and_ids():
    empty = Split(np.zeros((0, 3)), np.zeros((0, 3)), [], "s")
    with pytest.raises(CellGraphError, match="metric 'accuracy' is not one of"):
        Dataset("toy", "lm", "accuracy", ("a",), empty, empty, empty)
    with pytest.raises(CellGraphError, match="split train: token ids outside 0..1"):
        Dataset("toy", "lm", "bpc", ("a", "b"), Split([[0, 2, 0]], [[0, 0, 0]], [0], "s"), empty, empty)
    with pytest.raises(CellGraphError, match=r"split val: targets must have shape \(0,\)"):
        Dataset("toy", "classify", "accuracy", ("a",), Split(np.zeros((0, 3)), [], [], "s"), empty,
                empty, classes=("n", "p"))


# --- SST tree parser -------------------------------------------------------------------


def test_parse_sst_tree():
    assert parse_sst_tree(r"(3 (2 (2 The) (2 Rock)) (4 (2 8 1\/2) (2 .)))") == (
        3, ("The", "Rock", r"8 1\/2", ".")
    )
    assert parse_sst_tree("(0 word)") == (0, ("word",))


@pytest.mark.parametrize("line, message", [
    ("", "column 1: expected a tree"),
    ("(2 (2 a) (2 b)", "column 15: expected '\\)' \\(1 open\\), found end of line"),
    ("(7 a)", "column 1: expected a label 0-4 after '\\(', found '7'"),
    ("(2 a (2 b))", "column 6: a node holds one word or subtrees, not both"),
    ("(2 (2 a) b)", "column 10: a node holds one word or subtrees, not both \\(found 'b'\\)"),
    ("(2 a) (2 b)", "column 7: expected end of line after the tree"),
    ("(2 )", "column 4: expected a word or a subtree before"),
    ("a (2 b)", "column 1: expected '\\(', found 'a'"),
    ("(2 a))", "column 6: expected end of line after the tree, found '\\)'"),
])
def test_parse_sst_tree_errors(line, message):
    with pytest.raises(FormatError, match=message):
        parse_sst_tree(line)


def test_sst_file_errors_name_file_and_line(tmp_path):
    (tmp_path / "train.txt").write_text("(3 (2 a) (4 good))\n(1 bad)\n(2 (2 x) (2 y)\n")
    with pytest.raises(FormatError, match=r"train.txt: line 3, column 15: expected '\)'"):
        read_sst(tmp_path / "train.txt")
    with pytest.raises(CellGraphError, match=r"sst: missing file .*dev.txt"):
        load_sst(tmp_path)
    (tmp_path / "dev.txt").write_bytes(b"(2 \xff)\n")
    with pytest.raises(FormatError, match="dev.txt: byte 3: expected UTF-8"):
        read_sst(tmp_path / "dev.txt")


def test_sst_loader_on_tiny_files(tmp_path):
    (tmp_path / "sst").mkdir()
    base = tmp_path / "sst"
    (base / "train.txt").write_text("(4 (2 A) (4 good))\n(0 (1 bad) (2 -RRB-))\n(2 ok)\n")
    (base / "dev.txt").write_text("(3 (2 a) (4 good))\n(1 new)\n(2 (2 ok) (2 ok))\n")
    (base / "test.txt").write_text("(1 (2 a) (4 GOOD))\n(4 (2 good) (2 ok))\n")
    d = load_sst(tmp_path, n_val=2, n_test=1, seed=3)
    assert d.vocab[:2] == ("<pad>", "<unk>") and ")" in d.vocab and "a" in d.vocab
    by_line = dict(zip(d.train.origin.tolist(), zip(d.train.inputs.tolist(), d.train.targets.tolist())))
    assert by_line == {0: ([d.vocab.index("a"), d.vocab.index("good")], 2),
                       1: ([d.vocab.index("bad"), d.vocab.index(")")], 0),
                       2: ([0, d.vocab.index("ok")], 1)}
    # "a good" is in train: dropped from dev (and from test, where "a GOOD" lower-cases to it)
    assert d.info["val_dropped_as_seen"] == 1 and d.info["test_dropped_as_seen"] == 1
    assert sorted(d.val.origin.tolist()) == [1, 2] and d.test.origin.tolist() == [1]
    assert d.val.inputs[d.val.origin.tolist().index(1)].tolist() == [0, 1]  # "new" is unknown
    assert d.test.targets.tolist() == [2]
    with pytest.raises(CellGraphError, match=r"sst test \(.*test.txt, sentences unseen so far\): "
                                             r"cannot draw 2 sequences from 1"):
        load_sst(tmp_path, n_val=2, n_test=2)
    # seq_len=1 keeps the last token: "good" of test line 1 then equals train line 1
    with pytest.raises(CellGraphError, match="cannot draw 1 sequences from 0"):
        load_sst(tmp_path, n_val=1, n_test=1, seq_len=1)


def test_sst_truncates_from_the_left(tmp_path):
    (tmp_path / "train.txt").write_text("(2 (2 one) (2 two))\n")
    (tmp_path / "dev.txt").write_text("(2 (2 three) (2 one))\n")
    (tmp_path / "test.txt").write_text("(2 (2 two) (2 three))\n")
    d = load_sst(tmp_path, n_val=1, n_test=1, seq_len=1)
    assert [[d.vocab[k] for k in s.inputs[0]] for s in d.splits.values()] == [["two"], ["one"], ["<unk>"]]
    assert (d.info["train_truncated"], d.info["val_truncated"], d.info["test_truncated"]) == (1, 1, 1)


# --- PTB --------------------------------------------------------------------------------


def test_ptb_missing_and_bad_files(tmp_path):
    with pytest.raises(CellGraphError, match=r"ptb: missing file .*ptb.train.txt \(expected Mikolov's"):
        load_lm(tmp_path, corpus="ptb")
    (tmp_path / "ptb.train.txt").write_text("")
    with pytest.raises(FormatError, match="ptb.train.txt: expected one sentence per line"):
        read_ptb(tmp_path / "ptb.train.txt")


# --- registry and data folder ----------------------------------------------------------


def test_registry_and_data_dir(tmp_path, monkeypatch):
    assert set(dataset_names()) == {"wiki", "wiki5k", "ptb", "sst", "planted"}
    with pytest.raises(CellGraphError, match="unknown dataset 'imdb' \\(known: wiki, wiki5k"):
        load_dataset("imdb")
    with pytest.raises(CellGraphError, match="does not exist"):
        resolve_data_dir(tmp_path / "nope")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert resolve_data_dir() == tmp_path
    with pytest.raises(CellGraphError, match="wiki5k fixes \\['n_train'\\]"):
        load_dataset("wiki5k", n_train=10)


# --- real files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wiki():
    return load_dataset("wiki", DATA)


@pytest.fixture(scope="module")
def sst():
    return load_dataset("sst", DATA)


@pytest.fixture(scope="module")
def ptb():
    return load_dataset("ptb", DATA)


@real
def test_wiki_real(wiki):
    text = read_enwik8(find_enwik8(DATA))
    assert set(text) == set(WIKI_ALPHABET) and "  " not in text and len(text) > 3_000_000
    assert (wiki.task, wiki.metric, wiki.vocab) == ("lm", "bpc", tuple(WIKI_ALPHABET))
    assert [len(s) for s in wiki.splits.values()] == [10_000, 1_000, 2_000]
    for split in wiki.splits.values():
        assert split.inputs.shape == (len(split), 20) == split.targets.shape
        assert (split.inputs[:, 1:] == split.targets[:, :-1]).all()
    starts = np.sort(np.concatenate([s.origin for s in wiki.splits.values()]))
    assert (np.diff(starts) >= 21).all()
    i = 7
    window = "".join(WIKI_ALPHABET[k] for k in [*wiki.val.inputs[i], wiki.val.targets[i, -1]])
    assert text[wiki.val.origin[i]:wiki.val.origin[i] + 21] == window
    assert wiki.metric_from_nats(math.log(2) * 2.5) == pytest.approx(2.5)


@real
def test_wiki_seeded_and_wiki5k(wiki):
    again = load_dataset("wiki", DATA)
    other = load_dataset("wiki5k", DATA, seed=1)
    assert (again.train.inputs == wiki.train.inputs).all() and (again.test.origin == wiki.test.origin).all()
    assert len(other.train) == 5_000 and not (other.val.origin == wiki.val.origin).all()
    assert load_lm(DATA, 3, 2, 1, seq_len=5, corpus="wiki").train.inputs.shape == (3, 5)


@real
def test_ptb_real(ptb):
    assert len(ptb.vocab) == 10_000 and "<eos>" in ptb.vocab and "<unk>" in ptb.vocab
    assert (ptb.task, ptb.metric, ptb.padding_idx) == ("lm", "perplexity", None)
    assert [len(s) for s in ptb.splits.values()] == [10_000, 1_000, 2_000]
    assert [s.source for s in ptb.splits.values()] == ["ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"]
    tokens = read_ptb(DATA / "ptb" / "ptb.valid.txt")
    assert len(tokens) == 73_760
    o = ptb.val.origin[3]
    assert [ptb.vocab[k] for k in ptb.val.inputs[3]] == list(tokens[o:o + 20])
    assert ptb.vocab[ptb.val.targets[3, -1]] == tokens[o + 20]
    assert ptb.metric_from_nats(math.log(239.0)) == pytest.approx(239.0)


@real
def test_sst_real(sst):
    assert (sst.task, sst.metric, sst.classes) == ("classify", "accuracy", ("negative", "neutral", "positive"))
    assert np.bincount(sst.train.targets).tolist() == [3310, 1624, 3610]
    assert [len(s) for s in sst.splits.values()] == [8_544, 1_000, 2_000]
    assert sst.seq_len == 52 and sst.padding_idx == 0 and sst.vocab[0] == "<pad>"
    for split in sst.splits.values():
        nonzero = split.inputs != 0
        # left padding: once a token starts, no padding follows
        assert (np.maximum.accumulate(nonzero, axis=1) == nonzero).all() and nonzero[:, -1].all()
    assert len(set(sst.val.origin)) == 1_000 and sst.val.origin.max() < 1_101
    rows = {k: {r.tobytes() for r in s.inputs} for k, s in sst.splits.items()}
    assert not rows["train"] & rows["val"] and not rows["train"] & rows["test"] and not rows["val"] & rows["test"]
    first = [sst.vocab[k] for k in sst.train.inputs[sst.train.origin.tolist().index(0)] if k]
    assert first[:4] == ["the", "rock", "is", "destined"]
    # train.txt is sorted by label; the split is shuffled, so a head (max_train) is balanced
    assert sorted(sst.train.origin.tolist()) == list(range(8_544)) and sst.train.origin[0] != 0
    assert np.bincount(sst.train.targets[:2000], minlength=3).min() > 250
    again = load_dataset("sst", DATA)
    assert (again.test.inputs == sst.test.inputs).all()
    assert not (load_dataset("sst", DATA, seed=1).test.origin == sst.test.origin).all()
    assert "test_truncated" in sst.info and "negative" in sst.describe()


@real
def test_glove_real(sst):
    emb = load_glove(DATA, sst.vocab, padding_idx=0)
    assert emb.vectors.shape == (len(sst.vocab), 100) and 0.05 < emb.coverage < 1
    assert (emb.vectors[0] == 0).all() and not emb.found[0]
    the = sst.vocab.index("the")
    assert emb.found[the] and emb.vectors[the][:3] == pytest.approx([-0.038194, -0.24487, 0.72812])
    again = load_glove(DATA / "glove", sst.vocab, padding_idx=0)
    assert (again.vectors == emb.vectors).all() and "words found" in emb.describe()


def test_glove_lookup_and_errors(tmp_path):
    good = tmp_path / "glove.toy.3d.txt"
    good.write_text("the 1 2 3\nrock 4 5 6\nthe 9 9 9\n")
    emb = load_glove(good, ["<pad>", "The", "rock", "zzz"], dim=3, seed=1, padding_idx=0)
    assert emb.vectors[1].tolist() == [1, 2, 3] and emb.vectors[2].tolist() == [4, 5, 6]
    assert emb.found.tolist() == [False, True, True, False] and emb.coverage == pytest.approx(2 / 3)
    same = load_glove(tmp_path, ["<pad>", "The", "rock", "zzz"], dim=3, seed=1, padding_idx=0)
    assert (same.vectors == emb.vectors).all()
    bad = tmp_path / "bad" / "glove.txt"
    bad.parent.mkdir()
    bad.write_text("the 1 2 3\nrock 4 5\n")
    with pytest.raises(FormatError, match=r"glove.txt: line 2: expected a word and 3 numbers .* found 3 fields"):
        load_glove(bad, ["the"], dim=3)
    bad.write_text("the 1 2 3\nrock 4 x 6\n")
    with pytest.raises(FormatError, match=r"line 2: expected a number, found 'x'"):
        load_glove(bad, ["rock"], dim=3)
    with pytest.raises(CellGraphError, match="glove: no glove\\*.txt file"):
        load_glove(tmp_path / "empty", ["x"])


def test_an_unknown_corpus_is_named_with_the_known_ones(tmp_path):
    with pytest.raises(CellGraphError, match="unknown corpus 'enwik9' \\(known: wiki, ptb\\)"):
        load_lm(tmp_path, corpus="enwik9")


# --- the small data folder ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["wiki", "wiki5k", "ptb", "sst"])
def test_the_small_data_folder_is_read_as_the_real_files_are(small_data, name):
    """``tests/fixtures/data`` holds the real formats: the loaders find and read it as they read
    the full data, drawing the sizes the tests ask for."""
    data = load_dataset(name)
    sizes = SMALL_SIZES[name]
    want = [sizes.get("n_train", 40), sizes["n_val"], sizes["n_test"]]
    assert [len(split) for split in data.splits.values()] == want
    assert data.info["source"].startswith(str(small_data))
    if name == "sst":
        assert np.bincount(data.train.targets).tolist() == [16, 8, 16]  # 8 trees per root label 0-4
        emb = load_glove(small_data, data.vocab, padding_idx=0)
        assert emb.found[data.vocab.index("the")] and emb.found[data.vocab.index(".")]
    else:
        data.check_disjoint()


@real
def test_the_small_data_folder_is_cut_from_the_full_one(tmp_path, monkeypatch):
    """``tests/fixtures/cut_data.py`` run on the full data sets gives the small folder byte for
    byte, as its SOURCE.md says."""
    import importlib.util

    path = FIXTURES / ".." / "cut_data.py"
    spec = importlib.util.spec_from_file_location("cut_data", path)
    cut = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cut)
    monkeypatch.setattr(cut, "OUT", tmp_path)
    cut.main(DATA)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(FIXTURES) for p in FIXTURES.rglob("*") if p.is_file() and p.name != "SOURCE.md")
    assert made == kept and all((tmp_path / p).read_bytes() == (FIXTURES / p).read_bytes() for p in made)
