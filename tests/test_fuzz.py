"""Fuzzing of every loader and of the CLI with bad input.

Every file the project reads is fuzzed through its loader: cell documents
(:mod:`cellgraph.export.jsonio`), config TOML, ``--set`` items and presets (:mod:`cellgraph.experiment.config`),
SST trees, PTB and enwik8 text (:mod:`cellgraph.data.text`), GloVe vectors
(:mod:`cellgraph.data.glove`), checkpoints (:mod:`cellgraph.backends.torch.training.checkpoint`), JSON
(:func:`cellgraph.files.read_json`) and run folders (:class:`cellgraph.experiment.runlog.RunLog`). Each
starts from valid inputs built here and mutates them (bytes flipped, set, deleted, inserted,
duplicated, truncated; JSON fields replaced by values of other types, deleted or added), or
feeds random bytes. A loader may accept the input or raise :class:`CellGraphError` whose
message names the file; any other exception fails, and so does an example that runs longer
than :data:`HANG_S` (a SIGALRM interrupts it, so a hang cannot block the suite).

The CLI gets argv lists built from the real subcommands, their flags and choices, files
(valid, mutated, missing, folders) and junk, run in-process through :func:`cellgraph.cli.main`:
the exit code must be 0, 1 or 2 (argparse exits 2) and stderr must hold no traceback.

This module runs :data:`FAST_EXAMPLES` examples per fuzzer and holds the regression tests of
the bugs the fuzzers found; ``tests/test_fuzz_full.py`` (``pytest -m slow``) runs 10,000 each.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import json
import signal
import subprocess
import sys
import zipfile
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellgraph.cli.main import build_parser, main
from cellgraph.data.glove import load_glove
from cellgraph.data.text import load_lm, load_sst, parse_sst_tree
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import parse_set, resolve_config
from cellgraph.experiment.presets import PRESETS
from cellgraph.experiment.runlog import RunLog
from cellgraph.export import jsonio
from cellgraph.files import read_json
from cellgraph.targets import target

FAST_EXAMPLES = 150
#: Seconds after which one example counts as hung.
HANG_S = 30.0
#: Hypothesis' per-example deadline (a slow example fails; HANG_S stops a hung one).
DEADLINE = timedelta(seconds=10)


class Hang(BaseException):
    """Raised in an example that ran past :data:`HANG_S`; a ``BaseException`` so that no
    loader's ``except Exception`` can swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum, frame):
        raise Hang(f"example ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def clean(call: Callable[[], Any], names: tuple[str, ...] = ()) -> Any:
    """``call()``, or ``None`` if it raised a :class:`CellGraphError` whose message is
    non-empty and holds one of ``names`` (the file it read)."""
    try:
        return call()
    except CellGraphError as err:
        message = str(err)
        assert message.strip(), f"{type(err).__name__} without a message"
        assert not names or any(n in message for n in names), f"message does not name {names}: {message}"
        return None


class Files:
    """Fresh file names in one folder (loaders cache by path, size and mtime)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def path(self, name: str) -> Path:
        self.count += 1
        folder = self.root / f"f{self.count}"
        folder.mkdir(parents=True)
        return folder / name

    def write(self, name: str, data: bytes) -> Path:
        path = self.path(name)
        path.write_bytes(data)
        return path


# --- mutation strategies ---------------------------------------------------------------

#: Byte strings that are special to one of the formats.
TOKENS = (b"(", b")", b"{", b"}", b"[", b"]", b'"', b"'", b"\\", b"\x00", b"\xff", b"\xc3", b"-1",
          b"0", b"1e999", b"-1e999", b"NaN", b"Infinity", b"null", b"true", b"\n", b"\r", b" ", b"=",
          b",", b":", b"<text>", b"</text>", b"&amp;", b"<!--", b"PK\x05\x06", b"9" * 30, b"[[",
          b'"op"', b'"leaf"', b'"children"', b'"tuple"', b'"id"', b'"format"', b'"states"')


@st.composite
def mutated_bytes(draw: st.DrawFn, seeds: tuple[bytes, ...]) -> bytes:
    """One of ``seeds`` with 1-4 byte mutations."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(("flip", "set", "delete", "insert", "token", "duplicate", "truncate")))
        i = draw(st.integers(0, len(data)))
        j = min(i, len(data) - 1)
        if action == "flip" and data:
            data[j] ^= 1 << draw(st.integers(0, 7))
        elif action == "set" and data:
            data[j] = draw(st.integers(0, 255))
        elif action == "delete":
            del data[i:i + draw(st.integers(1, 16))]
        elif action == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif action == "token":
            data[i:i] = draw(st.sampled_from(TOKENS))
        elif action == "duplicate":
            k = draw(st.integers(0, len(data)))
            data[i:i] = data[k:k + draw(st.integers(1, 32))]
        else:
            del data[i:]
    return bytes(data)


def byte_inputs(seeds: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    """Mutated seeds (most often), random text and random bytes."""
    return st.one_of(
        mutated_bytes(seeds), mutated_bytes(seeds),
        st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
        st.binary(max_size=200),
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**20) | st.floats() | st.text(max_size=12)
    | st.sampled_from(["x", "h", "c", "add", "mul", "tanh", "sigmoid", "L", "R", "const", "prev", "h_t"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)


def _slots(value: Any, out: list) -> list:
    """Every (container, key) pair of a JSON value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.append((value, k))
        _slots(v, out)
    return out


@st.composite
def mutated_json(draw: st.DrawFn, seeds: tuple[Any, ...], keys: tuple[str, ...]) -> Any:
    """One of ``seeds`` with 1-3 field mutations: a value replaced by one of another type,
    a field deleted, a field (one of ``keys`` or random) or list item inserted."""
    value = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(value, [])
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(("replace", "delete", "insert")))
        if action == "replace":
            container[key] = draw(json_values)
        elif action == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[draw(st.sampled_from(keys) | st.text(max_size=6))] = draw(json_values)
        else:
            container.insert(key, draw(json_values))
    return value


def json_file_inputs(seeds: tuple[Any, ...], keys: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    """JSON text of field-mutated seeds, byte-mutated JSON text, random bytes."""
    texts = tuple(json.dumps(s, indent=1).encode() for s in seeds)
    return st.one_of(mutated_json(seeds, keys).map(lambda v: json.dumps(v).encode()), byte_inputs(texts))


# --- valid inputs ----------------------------------------------------------------------


@lru_cache(maxsize=None)
def cell_documents() -> tuple[dict[str, Any], ...]:
    """Valid cell documents: GRU tree with vectors and a swap, LSTM DAG with layout and
    vectors, gru_torch tree, a bare nested tree."""
    rng = np.random.default_rng(0)
    gru, lstm = target("gru"), target("lstm")
    gru_tree = gru.graph.unfold().with_vectors({e: rng.normal(size=3) for e in gru.graph.root.walk()})
    values = {e: rng.normal(size=3) for g in lstm.cell for e in g.root.walk()}
    torch_gru = target("gru_torch")
    return (
        jsonio.dump_tree(gru_tree.swap(), gru.layout),
        jsonio.dump_cell(lstm.cell, lstm.layout, values),
        jsonio.dump_tree({g.state: g.unfold() for g in torch_gru.cell}, torch_gru.layout),
        jsonio.dump_cell(gru.cell),
        {"op": "mul", "act": "tanh", "tuple": 0, "edges": ["R", "L"],
         "children": [{"leaf": "x", "vector": [1, 2]}, {"leaf": "e1", "role": "const"}]},
    )


DOC_KEYS = ("format", "version", "layout", "states", "state", "tree", "nodes", "root", "leaf", "role",
            "vector", "op", "act", "tuple", "children", "edges", "id", "name", "L", "R", "b", "identity")

TOML_SEEDS = (
    b'task = "sst"\nmodel = "gru"\nepochs = 3\nlr = 0.01\nidentity_trainable = true\nglove = "g.txt"\n',
    b'[train]\nmodel = "rrnn-gru"\nalternate_every = 2\nlambda_td = 1e-3\ntau = 0.5\nmode = "hard"\n',
    b"seed = 7\n",
)
SST_LINES = (
    r"(3 (2 (2 The) (2 Rock)) (4 (2 8 1\/2) (2 .)))",
    "(0 (1 bad) (2 -RRB-))",
    "(2 (2 ok) (3 (2 fine) (2 film)))",
    "(4 good)",
)
PTB_TEXT = b" the cat sat on the mat \n a <unk> ate N fish \n the end of the line \n"
ENWIK8 = (b'<mediawiki><page><title>T</title><text xml:space="preserve">Hello [[World]] '
          b"&lt;ref&gt;x&lt;/ref&gt; 123 {{cite|a=b}} more words here to sample windows from "
          b"and again and again</text></page>\n<page><text>Second &amp; page &nbsp; text</text>"
          b"</page></mediawiki>\n")
GLOVE = b"the 0.1 -0.2 3\ncat -1 2 3e-2\nrock 1.5 0 -0\n"
GLOVE_VOCAB = ("<pad>", "the", "Cat", "rock", "zzz")


def _zip(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


@lru_cache(maxsize=None)
def checkpoint_bytes() -> tuple[bytes, ...]:
    import torch

    out = []
    for state in ({"epoch": 3, "model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(2)}},
                  {"epoch": 1, "config": {"lr": 0.1, "name": "gru"}, "steps": [1, 2, 3]}):
        buffer = io.BytesIO()
        torch.save(state, buffer)
        out.append(buffer.getvalue())
    return tuple(out)


RUN_CONFIG = {"task": "planted", "model": "rrnn-gru", "seed": 0, "epochs": 2}
RUN_METRICS = ({"epoch": 1, "train_accuracy": 0.5, "val_accuracy": 0.4, "n_e": 10, "loss_task": 1.2},
               {"epoch": 2, "train_accuracy": 0.6, "val_accuracy": 0.5, "n_e": 3, "loss_task": 0.9})


@lru_cache(maxsize=None)
def structure_log() -> dict[str, Any]:
    cell = cell_documents()[3]
    return {"epoch": 2, "n_cells": 4, "target": "gru", "target_share": 0.5, "forms": [
        {"canonical": "gru-form", "count": 2, "depth": 4, "n_internal": 9, "balance": 0.5,
         "is_target": True, "example": {"sample": 0, "t": 1}, "cell": cell},
        {"canonical": "other", "count": 2, "depth": 2, "n_internal": 3, "balance": 1.0,
         "is_target": False, "example": {"sample": 1, "t": 0}, "cell": cell},
    ]}


RUN_KEYS = ("task", "model", "epoch", "n_cells", "forms", "canonical", "count", "depth", "n_internal",
            "balance", "is_target", "cell", "target_share", "val_accuracy", "train_accuracy", "n_e")


def write_run(folder: Path, config: bytes, metrics: bytes, structures: bytes) -> Path:
    (folder / "structures").mkdir(parents=True)
    (folder / "config.json").write_bytes(config)
    (folder / "metrics.jsonl").write_bytes(metrics)
    (folder / "structures" / "epoch_002.json").write_bytes(structures)
    return folder


def valid_run_bytes() -> tuple[bytes, bytes, bytes]:
    return (json.dumps(RUN_CONFIG).encode(), b"".join(json.dumps(r).encode() + b"\n" for r in RUN_METRICS),
            json.dumps(structure_log()).encode())


# --- the loader fuzzers: fuzz(data, files) ------------------------------------------------


def fuzz_cell_document(data: st.DataObject, files: Files) -> None:
    if data.draw(st.booleans()):
        doc = data.draw(mutated_json(cell_documents(), DOC_KEYS) | json_values.filter(lambda v: not isinstance(v, str)))
        loaded = clean(lambda: jsonio.load_document(doc))
    else:
        path = files.write("cell.json", data.draw(json_file_inputs(cell_documents(), DOC_KEYS)))
        loaded = clean(lambda: jsonio.load_document(path), (str(path),))
    if loaded is not None:
        assert loaded.kind in ("tree", "dag") and loaded.tree().expr == loaded.cell.output.root


def fuzz_config_file(data: st.DataObject, files: Files) -> None:
    path = files.write("train.toml", data.draw(byte_inputs(TOML_SEEDS)))
    preset = data.draw(st.none() | st.sampled_from(tuple(PRESETS)))
    config = clean(lambda: resolve_config(preset, path), (str(path),))
    assert config is None or config.epochs >= 1


setting_items = st.one_of(
    st.builds(lambda k, v: f"{k}={v}",
              st.sampled_from(("epochs", "lr", "task", "model", "mode", "identity_trainable", "tau", "seed",
                               "margin", "clip", "nope", "")),
              st.sampled_from(("3", "-1", "0", "1e-3", "nan", "inf", "true", "maybe", "sst", "gru",
                               "soft", "", "=", "1_000", " 2 ", "0x10", "1e999"))
              | st.text(max_size=8)),
    st.text(max_size=16),
)


def fuzz_config_settings(data: st.DataObject, files: Files) -> None:
    items = data.draw(st.lists(setting_items, max_size=4))
    preset = data.draw(st.none() | st.sampled_from(tuple(PRESETS)) | st.text(max_size=10))
    base = data.draw(st.none() | st.dictionaries(st.sampled_from(("epochs", "lr", "task", "x")), json_values,
                                                  max_size=2))
    config = clean(lambda: resolve_config(preset, None, parse_set(items), base))
    assert config is None or config.batch_size >= 1


def fuzz_sst_line(data: st.DataObject, files: Files) -> None:
    line = data.draw(byte_inputs(tuple(s.encode() for s in SST_LINES))).decode("utf-8", "replace")
    parsed = clean(lambda: parse_sst_tree(line, "line 1", "train.txt"), ("train.txt",))
    assert parsed is None or (parsed[0] in range(5) and all(parsed[1]))


def fuzz_sst_files(data: st.DataObject, files: Files) -> None:
    folder = files.path("sst")
    folder.mkdir()
    texts = {"train.txt": "\n".join(SST_LINES[:3]), "dev.txt": "(1 new)\n(3 (2 other) (2 film))",
             "test.txt": "(0 (2 one) (2 more))\n(2 last)"}
    bad = data.draw(st.sampled_from(tuple(texts)))
    for name, text in texts.items():
        raw = data.draw(byte_inputs((text.encode(),))) if name == bad else text.encode()
        (folder / name).write_bytes(raw)
    dataset = clean(lambda: load_sst(folder, n_val=1, n_test=1), (str(folder),))
    assert dataset is None or len(dataset.val) == 1


def fuzz_ptb_files(data: st.DataObject, files: Files) -> None:
    folder = files.path("ptb")
    folder.mkdir()
    bad = data.draw(st.sampled_from(("train", "valid", "test")))
    for part in ("train", "valid", "test"):
        raw = data.draw(byte_inputs((PTB_TEXT,))) if part == bad else PTB_TEXT
        (folder / f"ptb.{part}.txt").write_bytes(raw)
    dataset = clean(lambda: load_lm(folder, n_train=1, n_val=1, n_test=1, seq_len=2, corpus="ptb"),
                    (str(folder),))
    assert dataset is None or dataset.seq_len == 2


def fuzz_enwik8(data: st.DataObject, files: Files) -> None:
    name = data.draw(st.sampled_from(("enwik8", "enwik8.zip")))
    seed = ENWIK8 if name == "enwik8" else _zip("enwik8", ENWIK8)
    path = files.write(name, data.draw(byte_inputs((seed,))))
    dataset = clean(lambda: load_lm(path.parent, n_train=2, n_val=1, n_test=1, seq_len=3, corpus="wiki"),
                    (str(path.parent),))
    assert dataset is None or dataset.train.inputs.shape == (2, 3)


def fuzz_glove(data: st.DataObject, files: Files) -> None:
    path = files.write("glove.toy.3d.txt", data.draw(byte_inputs((GLOVE,))))
    vocab = data.draw(st.sampled_from((GLOVE_VOCAB,)) | st.lists(st.text(max_size=5), max_size=4).map(tuple))
    emb = clean(lambda: load_glove(path, vocab, dim=3, padding_idx=0 if vocab else None), (str(path),))
    assert emb is None or (emb.vectors.shape == (len(vocab), 3) and np.isfinite(emb.vectors).all())


def fuzz_checkpoint(data: st.DataObject, files: Files) -> None:
    from cellgraph.backends.torch.training.checkpoint import _digest, load_checkpoint

    raw = data.draw(byte_inputs(checkpoint_bytes()))
    path = files.write("last.pt", raw)
    sidecar = data.draw(st.sampled_from(("none", "right", "mutated")))
    if sidecar != "none":
        digest = _digest(raw).encode()
        Path(f"{path}.sha256").write_bytes(digest if sidecar == "right" else data.draw(byte_inputs((digest,))))
    state = clean(lambda: load_checkpoint(path), (str(path),))
    assert state is None or isinstance(state, dict)


def fuzz_read_json(data: st.DataObject, files: Files) -> None:
    path = files.write("x.json", data.draw(json_file_inputs((RUN_CONFIG, structure_log()), RUN_KEYS)))
    clean(lambda: read_json(path), (str(path),))


def fuzz_run_log(data: st.DataObject, files: Files) -> None:
    parts = list(valid_run_bytes())
    seeds = ((RUN_CONFIG,), RUN_METRICS, (structure_log(),))
    for k in data.draw(st.sets(st.integers(0, 2), min_size=1)):
        if k == 1:  # metrics.jsonl: mutate the records or the bytes
            records = data.draw(st.lists(mutated_json(seeds[1], RUN_KEYS) | json_values, min_size=1, max_size=3))
            parts[1] = data.draw(st.sampled_from((b"".join(json.dumps(r).encode() + b"\n" for r in records),
                                                  data.draw(byte_inputs((parts[1],))))))
        else:
            parts[k] = data.draw(json_file_inputs(seeds[k], RUN_KEYS))
    folder = write_run(files.path("run"), *parts)

    def read() -> RunLog:
        log = RunLog.load(folder)
        for key in (f"train_{log.metric}", "n_e", "loss_task"):
            epochs, values = log.series(key)
            assert len(epochs) == len(values) and all(isinstance(v, float) for v in values)
        for s in log.structures():
            assert all(f["count"] >= 0 for f in s["forms"])
        return log

    clean(read, (str(folder),))


LOADERS: dict[str, Callable[[st.DataObject, Files], None]] = {
    "cell_document": fuzz_cell_document,
    "config_file": fuzz_config_file,
    "config_settings": fuzz_config_settings,
    "sst_line": fuzz_sst_line,
    "sst_files": fuzz_sst_files,
    "ptb_files": fuzz_ptb_files,
    "enwik8": fuzz_enwik8,
    "glove": fuzz_glove,
    "checkpoint": fuzz_checkpoint,
    "read_json": fuzz_read_json,
    "run_log": fuzz_run_log,
}


# --- the CLI fuzzer ----------------------------------------------------------------------


@lru_cache(maxsize=None)
def cli_grammar() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Subcommand -> (its option strings, every choice any of its arguments allows), read
    from the real parser, so new subcommands are fuzzed as they land."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    grammar = {}
    for name, p in sub.choices.items():
        flags = tuple(s for a in p._actions for s in a.option_strings)
        choices = tuple(str(c) for a in p._actions if a.choices for c in a.choices)
        grammar[name] = (flags, choices)
    return grammar


def cli_files(files: Files) -> tuple[str, ...]:
    """Paths the CLI fuzzer passes: valid and broken documents and run folders, a TOML
    file, a folder, missing paths and output names of every suffix."""
    docs = cell_documents()
    paths = [jsonio.save(files.path("gru.json"), docs[0]), jsonio.save(files.path("lstm.json"), docs[1]),
             jsonio.save(files.path("torch.json"), docs[2])]
    broken = json.loads(json.dumps(docs[0]))
    broken["tree"]["children"][0]["act"] = "__import__('os').system('false')"
    paths += [jsonio.save(files.path("bad.json"), broken), files.write("junk.json", b"\xff{\"format\""),
              files.write("train.toml", TOML_SEEDS[0]), files.write("empty", b"")]
    paths += tiny_runs(files)
    paths.append(write_run(files.path("run"), *valid_run_bytes()))
    paths.append(write_run(files.path("badrun"), b'{"task": 3}', b"[1]\n", b'{"forms": 1}'))
    out = files.path("out")
    out.mkdir()
    outputs = [out / f"o.{ext}" for ext in ("svg", "dot", "png", "json", "txt", "pdf", "gv")] + [out / "o"]
    blocked = files.write("a_file", b"") / "below"  # a path under a file: never writable
    return tuple(str(p) for p in paths + outputs + [out, files.root / "missing.json", blocked])


JUNK = ("", "-", "--", "-1", "0", "3", "99999999999999999999", "1e-3", "nan", "--nope", "-x", "é",
        "\x00", "a=b", "=", "--help", "-h", "\\", "..")


@st.composite
def cli_argv(draw: st.DrawFn, paths: tuple[str, ...]) -> list[str]:
    grammar = cli_grammar()
    names = tuple(grammar)
    command = draw(st.sampled_from(names) | st.sampled_from(JUNK) | st.text(max_size=6))
    flags, choices = grammar.get(command, ((), ()))
    word = st.one_of(st.sampled_from(flags or names), st.sampled_from(choices or names), st.sampled_from(paths),
                     st.sampled_from(JUNK), st.text(max_size=6), st.sampled_from(names))
    argv = [command] + draw(st.lists(word, max_size=6))
    if draw(st.integers(0, 9)) == 0:
        argv = draw(st.permutations(argv))
    return [a for a in argv if a != "-h" and a != "--help"] if draw(st.integers(0, 4)) else argv


def fake_statements(only, seed, quick=False):
    """Stands in for the proof suite: a real run takes minutes (test_proofs covers it)."""
    from cellgraph.proofs.report import Outcome, Result

    return [Result("fake", "fuzz stand-in", Outcome(True, f"seed {seed}, only {only}, quick {quick}"))]


def fake_train(config, out_dir, resume=False, argv=None, **kwargs):
    """Stands in for training (minutes with the default sizes; test_train covers it): the
    command has resolved a valid config; the run folder is checked as the trainer does."""
    from cellgraph.experiment.config import TrainConfig
    from cellgraph.experiment.runs import RunDir

    assert isinstance(config, TrainConfig)
    RunDir.create(out_dir, resume=resume)
    return {}


def fake_plan_run(runner, jobs):
    """Stands in for :meth:`Runner.run` (it starts ``cellgraph`` subprocesses, which no
    in-process stand-in reaches): the plan was built from the command's argv; nothing runs."""
    assert all(job.commands() for job in jobs)
    return []


#: Work that takes minutes, replaced under the CLI fuzzer; these commands' own input is their
#: argv and the files they name, which are still read. A module not there yet is skipped.
STAND_INS = {
    "cellgraph.proofs.suite.run": fake_statements,
    "cellgraph.backends.torch.runs.train.train": fake_train,
    "cellgraph.experiment.jobs.Runner.run": fake_plan_run,
    "cellgraph.cli.commands.demo.run": lambda args: 0,
    "cellgraph.cli.commands.bench.run": lambda args: 0,
}


def fewer_trials(real):
    """Wraps ``hpo.draw``: at most 3 configurations, so that a fuzzed ``--trials 999999`` does
    not queue a million trials (the search itself is covered by test_search)."""
    return lambda space, n, seed: real(space, min(n, 3), seed)


#: Functions wrapped (not replaced) under the CLI fuzzer: target -> wrapper of the original.
WRAPPERS = {"cellgraph.experiment.hpo.draw": fewer_trials}

#: A small but real run (train, eval and export read it).
TINY_RUN = dict(task="planted", model="rrnn-gru", hidden_size=6, n_iterations=3, scoring_hidden=4, max_train=8,
                max_eval=8, batch_size=4, seq_len=5, epochs=1, log_structures=2, num_threads=1)


def tiny_runs(files: Files) -> list[Path]:
    """A trained tiny run and copies with a damaged config, checkpoint or structure log."""
    import shutil

    from cellgraph.backends.torch.runs.train import train
    from cellgraph.experiment.config import TrainConfig

    good = files.path("tiny")
    train(TrainConfig(**TINY_RUN), good, log=lambda line: None)
    damaged = []
    for name, data in (("config.json", b'{"task": "planted", "model": "rrnn-gru", "epochs": -1}'),
                       ("checkpoints/best.pt", b"PK\x03\x04 not a checkpoint"),
                       ("structures/epoch_001.json", b'{"epoch": 1, "n_cells": "many", "forms": []}')):
        copy_ = files.path("damaged")
        shutil.copytree(good, copy_)
        (copy_ / name).write_bytes(data)
        damaged.append(copy_)
    return [good, *damaged]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def fuzz_cli(data: st.DataObject, files: Files, paths: tuple[str, ...]) -> None:
    argv = data.draw(cli_argv(paths))
    code, _, err = run_cli(argv)
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)


# --- the runner --------------------------------------------------------------------------


def run_fuzzer(name: str, root: Path, examples: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run fuzzer ``name`` (a key of :data:`LOADERS` or ``"cli"``) for ``examples`` examples
    in folder ``root``; returns how many examples ran."""
    files = Files(root)
    if name == "cli":
        paths = cli_files(files)
        for target_, stand_in in STAND_INS.items():
            with contextlib.suppress(ImportError):
                monkeypatch.setattr(target_, stand_in)
        for target_, wrap in WRAPPERS.items():
            with contextlib.suppress(ImportError):
                module, attr = target_.rsplit(".", 1)
                monkeypatch.setattr(target_, wrap(getattr(importlib.import_module(module), attr)))
        monkeypatch.chdir(files.path("cwd").parent)
        fuzzer = lambda data, files: fuzz_cli(data, files, paths)  # noqa: E731
    else:
        fuzzer = LOADERS[name]
    count = 0

    @settings(derandomize=True, database=None, max_examples=examples, deadline=DEADLINE,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        nonlocal count
        count += 1
        with time_limit(HANG_S):
            fuzzer(data, files)

    fuzz()
    return count


@pytest.mark.parametrize("name", [*LOADERS, "cli"])
def test_fuzz(name, tmp_path, monkeypatch):
    assert run_fuzzer(name, tmp_path, FAST_EXAMPLES, monkeypatch) >= FAST_EXAMPLES


def test_time_limit_interrupts_a_hang():
    with pytest.raises(Hang):
        with time_limit(0.05):
            while True:
                pass


# --- regressions: each bug the fuzzers found, as a plain test -----------------------------


def test_config_value_errors_name_the_file_that_set_them(tmp_path):
    toml = tmp_path / "train.toml"
    toml.write_text('model = "fru"\n')
    with pytest.raises(FormatError, match=r"train.toml: model: invalid value 'fru'"):
        resolve_config(config_file=toml)
    with pytest.raises(FormatError, match=r"--set: epochs: invalid value 0"):
        resolve_config(overrides={"epochs": "0"})
    with pytest.raises(FormatError, match=r"preset paper-sst-gru: epochs|--set: seed: invalid value -1"):
        resolve_config("paper-sst-gru", overrides={"seed": "-1"})


@pytest.mark.parametrize("item", ["seed=-1", "data_seed=-2", "eval_batch_size=0", "alternate_every=-1",
                                  "patience=-1", "num_threads=-1", "log_structures=-1", "lambda_td=-0.5"])
def test_settings_no_run_could_use_are_rejected(item):
    with pytest.raises(FormatError, match=f"--set: {item.split('=')[0]}: invalid value"):
        resolve_config(overrides=parse_set([item]))


def test_run_config_json_is_validated(tmp_path):
    from cellgraph.experiment.config import load_run_config

    path = tmp_path / "config.json"
    for text, message in (("[1]", "expected a JSON object"), ('{"epochs": "x"}', "epochs: expected a int"),
                          ('{"nope": 1}', "nope: unknown setting"), ('{"task": "mnist"}', "task: invalid value")):
        path.write_text(text)
        with pytest.raises(FormatError, match=f"config.json: {message}"):
            load_run_config(path)


def test_damaged_enwik8_zip_is_a_format_error(tmp_path):
    data = bytearray(_zip("enwik8", ENWIK8))
    data[0] ^= 1  # the local header's magic: the central directory still says "zip"
    (tmp_path / "enwik8.zip").write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"enwik8.zip: a damaged zip archive \(BadZipFile"):
        load_lm(tmp_path, n_train=1, n_val=1, n_test=1, seq_len=3, corpus="wiki")


def test_encrypted_enwik8_zip_is_a_format_error(tmp_path):
    data = bytearray(_zip("enwik8", ENWIK8))
    data[data.index(b"PK\x01\x02") + 8] |= 1  # central directory: "encrypted" flag
    (tmp_path / "enwik8.zip").write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"enwik8.zip: a damaged zip archive \(RuntimeError: .*encrypted"):
        load_lm(tmp_path, n_train=1, n_val=1, n_test=1, seq_len=3, corpus="wiki")


def test_checkpoint_with_binary_sidecar_or_folder_is_a_checkpoint_error(tmp_path):
    from cellgraph.backends.torch.training.checkpoint import CheckpointError, load_checkpoint

    path = tmp_path / "last.pt"
    path.write_bytes(checkpoint_bytes()[0])
    Path(f"{path}.sha256").write_bytes(b"\x80\xff")
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        load_checkpoint(path)
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(CheckpointError, match="dir.pt cannot be read"):
        load_checkpoint(tmp_path / "dir.pt")


@pytest.mark.parametrize("part, data, message", [
    (0, b"[]", r"config.json: expected a JSON object"),
    (0, b'{"task": 3}', r"config.json: task: expected a str"),
    (1, b"[1]\n", r"metrics.jsonl: line 1: expected an object with an integer epoch"),
    (1, b'{"epoch": 1}\n{"loss": 2}\n', r"metrics.jsonl: line 2: expected an object with an integer epoch"),
    (1, b'{"epoch": 1, "train_accuracy": [0.5]}\n', r"metrics.jsonl: line 1.train_accuracy: expected a number"),
    (1, b'{"epoch": 1}\n\xfb\n', r"metrics.jsonl: not UTF-8 text"),
    (2, b'{"epoch": 1, "n_cells": 2}', r"epoch_002.json: forms: expected a list"),
    (2, b'{"epoch": 1, "n_cells": 2, "forms": [{"canonical": "a", "count": true}]}',
     r"epoch_002.json: forms\[0\].count: expected an integer"),
    (2, b'{"epoch": 1, "n_cells": 2, "forms": [], "target_share": "half"}', r"target_share: expected a number"),
])
def test_damaged_run_folders_are_format_errors_naming_the_file(tmp_path, part, data, message):
    parts = list(valid_run_bytes())
    parts[part] = data
    folder = write_run(tmp_path / "run", *parts)
    with pytest.raises(CellGraphError, match=message):
        log = RunLog.load(folder)
        log.series("train_accuracy")
        log.structures()


def test_summary_of_a_damaged_final_json(tmp_path):
    from cellgraph.experiment.summary import summarize

    folder = write_run(tmp_path / "run", *valid_run_bytes())
    for text, message in (("[]", "final.json: expected a JSON object"),
                          ('{"val_accuracy": 0.5}', "final.json: test_accuracy: expected a number"),
                          ('{"val_accuracy": 0.5, "test_accuracy": 0.5, "train_seconds": "x"}',
                           "train_seconds: expected a number")):
        (folder / "final.json").write_text(text)
        with pytest.raises(FormatError, match=message):
            summarize([folder])


def test_cli_output_to_a_folder_and_a_negative_seed_are_clean_errors(tmp_path):
    code, out, err = run_cli(["target", "gru", "--format", "sympy", "-o", str(tmp_path)])
    assert code == 2 and err.startswith("cellgraph target: error: [Errno 21] Is a directory")
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["prove", "--seed", "-1"])
    assert code == 2 and "argument --seed: expected an integer >= 0, got '-1'" in err


def test_resume_of_a_run_with_a_damaged_config_names_the_file(tmp_path):
    folder = write_run(tmp_path / "run", b'{"task": "planted", "lr": -1}', b"", b"{}")
    code, _, err = run_cli(["train", "--resume", str(folder)])
    assert code == 2 and f"{folder / 'config.json'}: lr: invalid value -1" in err


def test_a_closed_pipe_ends_the_command_quietly():
    """``cellgraph target lstm --format sympy | head -1``: the reader is gone before the
    command writes (here: closed at once), so every write fails with EPIPE."""
    process = subprocess.Popen([sys.executable, "-m", "cellgraph", "target", "lstm", "--format", "sympy"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141 and err == ""


@pytest.mark.parametrize("number", ["1.1e9995", "nan", "-inf", "Infinity"])
def test_glove_rejects_non_finite_numbers(tmp_path, number):
    path = tmp_path / "glove.toy.3d.txt"
    path.write_text(f"the 0.1 -0.2 3\nrock {number} 0 -0\n")
    with pytest.raises(FormatError, match=rf"glove.toy.3d.txt: line 2: expected a number, found '{number}' \(finite"):
        load_glove(path, GLOVE_VOCAB, dim=3, padding_idx=0)
