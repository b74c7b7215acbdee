"""Text data sets of the paper's experiments: enwik8 (Wiki), Penn Treebank, SST (paper,
Sec. 5.1). Each loader returns a :class:`~cellgraph.data.datasets.Dataset`.

``wiki`` (:func:`load_lm`), character level, metric BPC
    Source: ``enwik8``, ``enwik8.zip`` or ``enwik8-prefix-*`` (raw MediaWiki XML). The paper
    removes "numbers, punctuation, XML tags, and markup characters" so that 26 letters and
    space are left. :func:`clean_enwik8` does exactly this:

    1. keep only the page bodies, the contents of ``<text ...>`` elements (titles, ids,
       timestamps and the rest of the XML envelope are dropped; an unclosed last
       ``<text>`` of a truncated file is dropped);
    2. undo the XML escaping (``&lt; &gt; &quot; &apos; &amp;``);
    3. drop the HTML markup inside the wiki text: comments ``<!-- -->``, tags such as
       ``<ref>`` or ``<br />`` (their contents stay) and entities such as ``&nbsp;``;
    4. lower-case, and map every run of characters other than ``a-z`` (digits,
       punctuation, wiki markup characters ``[[ ]] {{ }} | = ' *``, non-ASCII letters,
       newlines) to one space. Words inside markup (link targets, template names) stay.

    Pages are joined by one space. Bytes that are not UTF-8 decode to U+FFFD, hence a space.
    This is the ``paper`` cleaning (``wiki_cleaning = "paper"``). The default, ``wikifil``
    (:mod:`cellgraph.data.wikifil`), is the one the paper's authors used: Mahoney's
    ``wikifil.pl`` rules, which also spell digits out and drop templates, tables, link
    targets, ``<ref>`` contents, URLs and redirect pages. Either way the vocabulary is
    ``" abcdefghijklmnopqrstuvwxyz"`` (id 0 is the space; no padding).
``ptb`` (:func:`load_lm`), word level, metric perplexity
    Mikolov's ``ptb.{train,valid,test}.txt``: whitespace tokens, ``<eos>`` at each line
    end. Train/val/test windows are drawn from the respective files. Vocabulary: every
    token of the three files (10,000 with ``<eos>``), by train frequency, no padding.
``sst`` (:func:`load_sst`), sentence classification, metric accuracy
    The PTB-style trees ``train.txt``, ``dev.txt``, ``test.txt`` (:func:`parse_sst_tree`).
    Root labels 0-1 -> negative, 2 -> neutral, 3-4 -> positive. Tokens: ``-LRB-``/``-RRB-``
    -> ``(``/``)``, backslash escapes (``\\/``, ``\\*``) undone, lower-cased by default
    (GloVe 6B is uncased). The full train file is used; validation and test sentences are
    drawn at random from ``dev.txt`` and ``test.txt``, after dropping the few sentences
    that also occur in an earlier split (compared as encoded rows: 2 of dev, 2 of test
    with the defaults; counts in ``info``). Vocabulary:
    ``<pad>`` (0), ``<unk>`` (1), then the train words by frequency; other words map to
    ``<unk>``. Inputs are left-padded with 0 to ``seq_len`` (default: the longest train
    sentence); longer sentences keep their last ``seq_len`` tokens.

Reading and cleaning are cached per file (path, size, mtime) for the process.
"""

from __future__ import annotations

import os
import re
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cellgraph.data.datadir import data_subdir, fetch_command
from cellgraph.data.datasets import Dataset, Split, sample_windows
from cellgraph.data.wikifil import clean_wikifil
from cellgraph.errors import CellGraphError, FormatError

__all__ = [
    "WIKI_ALPHABET",
    "WIKI_CLEANINGS",
    "SST_CLASSES",
    "SST_FIVE_TO_THREE",
    "clean_enwik8",
    "find_enwik8",
    "find_ptb",
    "find_sst",
    "read_enwik8",
    "read_ptb",
    "read_sst",
    "parse_sst_tree",
    "load_lm",
    "load_sst",
]

WIKI_ALPHABET = " abcdefghijklmnopqrstuvwxyz"
#: The cleanings of enwik8 (``wiki_cleaning``): name -> what it does, as run records state it.
WIKI_CLEANINGS = {
    "wikifil": "Mahoney's wikifil.pl rules (the paper's authors' text): <text> bodies of non-redirect "
               "pages, templates, tables, link targets, <ref> contents and URLs dropped, digits "
               "spelled out, lower-cased, runs of non a-z -> one space",
    "paper": "<text> bodies, XML unescaped, HTML tags/entities dropped, lower-cased, runs of non a-z "
             "-> one space (the paper's sentence; digits dropped)",
}
SST_CLASSES = ("negative", "neutral", "positive")
#: SST's 5-class root label -> 3-class id.
SST_FIVE_TO_THREE = (0, 0, 1, 2, 2)

PathLike = str | os.PathLike

# --- enwik8 ----------------------------------------------------------------------------

_TEXT_ELEMENT = re.compile(r"<text\b[^>]*>(.*?)</text>", re.S)
_XML_ENTITIES = {"&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'", "&amp;": "&"}
_XML_ENTITY = re.compile("|".join(_XML_ENTITIES))
_HTML_MARKUP = re.compile(r"<!--.*?-->|<[^<>]*>|&#?\w+;", re.S)
_NOT_LETTERS = re.compile(r"[^a-z]+")


def clean_enwik8(xml: str) -> str:
    """The 27-symbol text of raw MediaWiki XML (steps 1-4 of the module docstring)."""
    pages = []
    for body in _TEXT_ELEMENT.findall(xml):
        body = _XML_ENTITY.sub(lambda m: _XML_ENTITIES[m.group()], body)
        body = _HTML_MARKUP.sub(" ", body)
        body = _NOT_LETTERS.sub(" ", body.lower()).strip()
        if body:
            pages.append(body)
    return " ".join(pages)


def find_enwik8(data_dir: PathLike) -> Path:
    """The enwik8 file in ``data_dir`` (or ``data_dir/enwik8``), or ``data_dir`` if a file:
    ``enwik8``, else ``enwik8.zip``, else the first ``enwik8-prefix-*`` (not a ``.part`` file
    of an unfinished download)."""
    base = data_subdir(data_dir, "enwik8")
    if base.is_file():
        return base
    prefixes = sorted(p for p in base.glob("enwik8-prefix-*") if p.suffix != ".part")
    for candidate in [base / "enwik8", base / "enwik8.zip", *prefixes]:
        if candidate.is_file():
            return candidate
    raise CellGraphError(
        f"wiki: no enwik8 file in {base} (expected enwik8, enwik8.zip or enwik8-prefix-*; "
        f"`{fetch_command('wiki')}` downloads it)"
    )


def read_enwik8(path: PathLike, cleaning: str = "wikifil") -> str:
    """The cleaned text of an enwik8 file (raw XML, or a zip holding one member);
    ``cleaning``: one of :data:`WIKI_CLEANINGS`."""
    if cleaning not in WIKI_CLEANINGS:
        raise CellGraphError(f"unknown wiki cleaning {cleaning!r} (known: {', '.join(WIKI_CLEANINGS)})")
    return _cleaned_enwik8(_stamp(path), cleaning)


@lru_cache(maxsize=2)
def _cleaned_enwik8(stamp: tuple[str, int, int], cleaning: str) -> str:
    path = stamp[0]
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                members = archive.namelist()
                raw = archive.read(members[0]) if len(members) == 1 else None
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError,
                OSError) as err:  # RuntimeError: an encrypted member
            raise FormatError("", f"a damaged zip archive ({type(err).__name__}: {err})", path) from None
        if raw is None:
            raise FormatError("", f"expected a zip with one member (enwik8), got {members}", path)
    else:
        raw = Path(path).read_bytes()
    text = clean_wikifil(raw) if cleaning == "wikifil" else clean_enwik8(raw.decode("utf-8", errors="replace"))
    if not text.strip():
        raise FormatError("", "expected MediaWiki XML with <text> page bodies, found none", path)
    return text


# --- Penn Treebank ---------------------------------------------------------------------

PTB_FILES = {"train": "ptb.train.txt", "val": "ptb.valid.txt", "test": "ptb.test.txt"}


def find_ptb(data_dir: PathLike) -> dict[str, Path]:
    """Split -> path of Mikolov's ``ptb.{train,valid,test}.txt`` in ``data_dir`` (or ``data_dir/ptb``)."""
    base = data_subdir(data_dir, "ptb")
    return {k: _require(base / f, "ptb", "Mikolov's ptb.{train,valid,test}.txt") for k, f in PTB_FILES.items()}


def read_ptb(path: PathLike) -> tuple[str, ...]:
    """The tokens of a Mikolov PTB file, ``<eos>`` after every line."""
    return _ptb_tokens(_stamp(path))


@lru_cache(maxsize=6)
def _ptb_tokens(stamp: tuple[str, int, int]) -> tuple[str, ...]:
    tokens: list[str] = []
    for line in _read_lines(stamp[0]):
        tokens.extend(line.split())
        tokens.append("<eos>")
    if not tokens:
        raise FormatError("", "expected one sentence per line, the file is empty", stamp[0])
    return tuple(tokens)


@dataclass(frozen=True)
class _Corpus:
    """A language-modelling corpus as token ids: ``streams`` holds one stream for all splits
    (key ``all``: the windows of the three are drawn together, disjoint) or one per split,
    read from ``sources`` (same keys)."""

    metric: str
    vocab: tuple[str, ...]
    streams: dict[str, np.ndarray]
    sources: dict[str, Path]
    info: dict[str, Any]


def _wiki_corpus(data_dir: PathLike, cleaning: str) -> _Corpus:
    path = find_enwik8(data_dir)
    text = read_enwik8(path, cleaning)
    lookup = np.zeros(256, np.int64)
    lookup[np.frombuffer(WIKI_ALPHABET.encode(), np.uint8)] = np.arange(len(WIKI_ALPHABET))
    return _Corpus(
        "bpc", tuple(WIKI_ALPHABET), {"all": lookup[np.frombuffer(text.encode("ascii"), np.uint8)]}, {"all": path},
        {"source": str(path), "clean_chars": len(text), "wiki_cleaning": cleaning,
         "cleaning": WIKI_CLEANINGS[cleaning]},
    )


def _ptb_corpus(data_dir: PathLike, cleaning: str) -> _Corpus:
    """PTB's corpus (``cleaning``, a wiki setting, does not apply)."""
    paths = find_ptb(data_dir)
    tokens = {k: read_ptb(p) for k, p in paths.items()}
    counts = Counter(tokens["train"])
    extra = sorted(set(tokens["val"] + tokens["test"]) - counts.keys())
    vocab = tuple(sorted(counts, key=lambda w: (-counts[w], w))) + tuple(extra)
    ids = {w: i for i, w in enumerate(vocab)}
    streams = {k: np.fromiter((ids[w] for w in t), np.int64, len(t)) for k, t in tokens.items()}
    return _Corpus("perplexity", vocab, streams, paths,
                   {"source": str(data_subdir(data_dir, "ptb")), "tokens": {k: len(t) for k, t in tokens.items()}})


_CORPORA = {"wiki": _wiki_corpus, "ptb": _ptb_corpus}


def load_lm(
    data_dir: PathLike,
    n_train: int = 10_000,
    n_val: int = 1_000,
    n_test: int = 2_000,
    seq_len: int = 20,
    seed: int = 0,
    *,
    corpus: str,
    name: str | None = None,
    wiki_cleaning: str = "wikifil",
) -> Dataset:
    """Random disjoint ``seq_len``-token sequences of a language-modelling corpus (targets: the
    next tokens, so windows of ``seq_len + 1``; the paper's 10,000 / 1,000 / 2,000 sequences of
    20 by default): ``wiki``, the characters of cleaned enwik8, all splits from one stream;
    ``ptb``, the words of PTB, each split from its own file. ``name``: the data set's name
    (default the corpus'; ``wiki5k`` is ``wiki`` with ``n_train=5000``). ``wiki_cleaning``: the
    cleaning of enwik8 (:data:`WIKI_CLEANINGS`)."""
    if corpus not in _CORPORA:
        raise CellGraphError(f"unknown corpus {corpus!r} (known: {', '.join(_CORPORA)})")
    found, name = _CORPORA[corpus](data_dir, wiki_cleaning), name or corpus
    rng = np.random.default_rng(seed)
    sizes = {"train": n_train, "val": n_val, "test": n_test}
    if "all" in found.streams:
        source = found.sources["all"]
        parts = sample_windows(found.streams["all"], tuple(sizes.values()), seq_len, rng, f"{name} ({source})")
        splits = {k: Split(*part, source=source.name) for k, part in zip(sizes, parts)}
    else:
        splits = {}
        for k, n in sizes.items():
            (part,) = sample_windows(found.streams[k], (n,), seq_len, rng, f"{name} {k} ({found.sources[k]})")
            splits[k] = Split(*part, source=found.sources[k].name)
    return Dataset(name, "lm", found.metric, found.vocab, **splits, seed=seed, info=found.info)


# --- SST -------------------------------------------------------------------------------

SST_FILES = {"train": "train.txt", "val": "dev.txt", "test": "test.txt"}


def find_sst(data_dir: PathLike) -> dict[str, Path]:
    """Split -> path of the SST trees ``train.txt``, ``dev.txt``, ``test.txt`` in ``data_dir``
    (or ``data_dir/sst``)."""
    base = data_subdir(data_dir, "sst")
    expected = "the SST trees train.txt, dev.txt, test.txt"
    return {k: _require(base / f, "sst", expected) for k, f in SST_FILES.items()}


_SST_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_SST_BRACKETS = {"-LRB-": "(", "-RRB-": ")"}
_BACKSLASH_ESCAPE = re.compile(r"\\(.)")


def parse_sst_tree(line: str, where: str = "", source: str | None = None) -> tuple[int, tuple[str, ...]]:
    """``(root label, leaf tokens)`` of one PTB-style tree ``(3 (2 The) (4 (2 Rock) ...))``.

    A node is ``(LABEL WORD)`` or ``(LABEL SUBTREE SUBTREE...)`` with ``LABEL`` in 0-4. A
    word may hold spaces (SST has the one token ``8 1\\/2``): the parts between the label
    and ``)`` form one token, joined by one space. Tokens are otherwise returned as written. Malformed input raises :class:`FormatError` naming
    ``source``, ``where`` (e.g. ``line 12``) and the column.
    """
    def fail(column: int, message: str) -> FormatError:
        return FormatError(f"{where}, column {column + 1}" if where else f"column {column + 1}",
                           message, source)

    stack: list[str] = []  # per open node: "" (empty), "word" or "tree"
    leaves: list[str] = []
    root: int | None = None
    closed = False
    matches = list(_SST_TOKEN.finditer(line))
    if not matches:
        raise fail(0, "expected a tree '(LABEL ...)', found an empty line")
    i = 0
    while i < len(matches):
        tok, col = matches[i].group(), matches[i].start()
        if closed:
            raise fail(col, f"expected end of line after the tree, found {tok!r}")
        if tok == "(":
            label = matches[i + 1] if i + 1 < len(matches) else None
            if label is None or label.group() not in ("0", "1", "2", "3", "4"):
                found = "end of line" if label is None else repr(label.group())
                raise fail(col, f"expected a label 0-4 after '(', found {found}")
            if stack:
                if stack[-1] == "word":
                    raise fail(col, "a node holds one word or subtrees, not both")
                stack[-1] = "tree"
            else:
                root = int(label.group())
            stack.append("")
            i += 2
        elif tok == ")":
            if not stack:
                raise fail(col, "unbalanced ')'")
            if stack.pop() == "":
                raise fail(col, "expected a word or a subtree before ')'")
            closed = not stack
            i += 1
        else:
            if not stack:
                raise fail(col, f"expected '(', found {tok!r}")
            if stack[-1] == "tree":
                raise fail(col, f"a node holds one word or subtrees, not both (found {tok!r})")
            if stack[-1] == "word":
                leaves[-1] += " " + tok
            else:
                stack[-1] = "word"
                leaves.append(tok)
            i += 1
    if stack:
        raise fail(len(line.rstrip()), f"expected ')' ({len(stack)} open), found end of line")
    assert root is not None
    return root, tuple(leaves)


def read_sst(path: PathLike) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """``(root label 0-4, tokens)`` per line of an SST tree file."""
    return _sst_trees(_stamp(path))


@lru_cache(maxsize=6)
def _sst_trees(stamp: tuple[str, int, int]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    path = stamp[0]
    trees = tuple(
        parse_sst_tree(line, f"line {n}", path) for n, line in enumerate(_read_lines(path), 1)
    )
    if not trees:
        raise FormatError("", "expected one tree per line, the file is empty", path)
    return trees


def _sst_token(token: str, lowercase: bool) -> str:
    token = _BACKSLASH_ESCAPE.sub(r"\1", _SST_BRACKETS.get(token, token))
    return token.lower() if lowercase else token


def load_sst(
    data_dir: PathLike,
    n_train: int | None = None,
    n_val: int = 1_000,
    n_test: int = 2_000,
    seq_len: int | None = None,
    seed: int = 0,
    lowercase: bool = True,
) -> Dataset:
    """SST, 3 classes: all train sentences in random order (or a random ``n_train``), ``n_val`` from
    ``dev.txt`` and ``n_test`` from ``test.txt`` at random, left-padded to ``seq_len``."""
    base = data_subdir(data_dir, "sst")
    paths = find_sst(data_dir)
    pools = {
        k: [(line, SST_FIVE_TO_THREE[label], [_sst_token(t, lowercase) for t in tokens])
            for line, (label, tokens) in enumerate(read_sst(p))]
        for k, p in paths.items()
    }
    rng = np.random.default_rng(seed)
    # Always drawn, so the train split is in random order: train.txt is sorted by label, and
    # the trainer's max_train keeps the first sequences.
    n_train = len(pools["train"]) if n_train is None else n_train
    pools["train"] = _draw(pools["train"], n_train, rng, f"sst train ({paths['train']})")
    counts = Counter(t for _, _, tokens in pools["train"] for t in tokens)
    vocab = ("<pad>", "<unk>", *sorted(counts, key=lambda w: (-counts[w], w)))
    ids = {w: i for i, w in enumerate(vocab)}
    if seq_len is None:
        seq_len = max(len(tokens) for _, _, tokens in pools["train"])
    sizes = {"val": n_val, "test": n_test}
    splits, seen, info = {}, set(), {"source": str(base), "lowercase": lowercase, "seq_len": seq_len}
    for k, pool in pools.items():
        rows = [(entry, _pad_left([ids.get(t, 1) for t in entry[2]], seq_len)) for entry in pool]
        if k in sizes:
            unseen = [r for r in rows if r[1].tobytes() not in seen]
            info[f"{k}_dropped_as_seen"] = len(rows) - len(unseen)
            rows = _draw(unseen, sizes[k], rng, f"sst {k} ({paths[k]}, sentences unseen so far)")
        inputs = np.stack([row for _, row in rows])
        seen.update(row.tobytes() for row in inputs)
        info[f"{k}_truncated"] = sum(len(entry[2]) > seq_len for entry, _ in rows)
        lines, labels = [entry[0] for entry, _ in rows], [entry[1] for entry, _ in rows]
        splits[k] = Split(inputs, labels, lines, source=paths[k].name)
    return Dataset(
        "sst", "classify", "accuracy", vocab, **splits, classes=SST_CLASSES, padding_idx=0,
        seed=seed, info=info,
    )


def _pad_left(ids: list[int], length: int) -> np.ndarray:
    row = np.zeros(length, np.int64)
    tail = ids[-length:]
    row[length - len(tail):] = tail
    return row


def _draw(pool: list, n: int, rng: np.random.Generator, what: str) -> list:
    """``n`` distinct entries of ``pool`` in random order."""
    if not 0 <= n <= len(pool):
        raise CellGraphError(f"{what}: cannot draw {n} sequences from {len(pool)}")
    return [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]


# --- files -----------------------------------------------------------------------------


def _require(path: Path, dataset: str, expected: str) -> Path:
    if not path.is_file():
        raise CellGraphError(f"{dataset}: missing file {path} (expected {expected}; "
                             f"`{fetch_command(dataset)}` downloads them)")
    return path


def _stamp(path: PathLike) -> tuple[str, int, int]:
    """Cache key of a file: resolved path, size, modification time."""
    p = Path(path)
    if not p.is_file():
        raise CellGraphError(f"missing file {p}")
    st = p.stat()
    return str(p.resolve()), st.st_size, st.st_mtime_ns


def _read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise FormatError(f"byte {err.start}", "expected UTF-8 text", path) from None
