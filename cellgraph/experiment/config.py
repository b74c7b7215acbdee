"""Training configuration (paper, Sec. 5 and Appendix "Hyperparameters").

A :class:`TrainConfig` is resolved in layers: defaults, then a named preset
(:mod:`cellgraph.experiment.presets`), then a TOML file, then ``--set key=value`` overrides.
Every layer is validated: an unknown key or a value of the wrong type is an error that names
the key and its source.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from cellgraph.algorithm2 import CANDIDATE_NORMS, EXCLUSIONS, MODES, TAU_UNITS
from cellgraph.algorithms.distance import MATCHES
from cellgraph.data.planted import MAX_RANDOM_NODES, RANDOM_SIZES, TEACHERS, is_teacher_spec
from cellgraph.data.text import WIKI_CLEANINGS
from cellgraph.errors import FormatError
from cellgraph.experiment.presets import PRESETS, RECIPES
from cellgraph.files import read_json

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "TrainConfig", "paper_settings", "resolve_config", "load_run_config",
    "parse_set", "key_table", "compact", "preset_conflicts", "valid_device", "AUTO_TD_MATCH", "resolved_td_match",
    "dataset_options", "MACHINE_KEYS",
]

TASKS = ("wiki", "wiki5k", "ptb", "sst", "planted")
MODELS = ("rrnn", "rrnn-gru", "gru", "lstm", "cell")
PLACEMENTS = ("flexible", "gates")
#: RRNN-GRU's trees (the GRU forms whose tuples it chooses).
GRU_TREES = ("gru", "gru_torch")
#: Warm starts of the discovery recipe: none, or the teacher gru run's GRU, computed exactly.
WARM_STARTS = ("none", "teacher")
LOGGERS = ("none", "tensorboard")
#: The forms of the ``device`` setting (resolved against the machine by the torch backend).
DEVICE_FORMS = ("auto", "cpu", "cuda", "cuda:N")
_DEVICE = re.compile(r"auto|cpu|cuda(:(0|[1-9][0-9]*))?")
#: Mixed precision of the training step: none, or bfloat16 autocast (rrnn-gru; the output layer of gru, lstm).
AMPS = ("none", "bf16")
#: ``torch.compile`` modes of ``compile=true``: ``reduce-overhead`` also records CUDA graphs on a GPU.
COMPILE_MODES = ("default", "reduce-overhead")

#: Settings of the machine rather than of the run: where it keeps the data, how many threads it
#: trains with, on which device, and whether it also logs to TensorBoard. A resumed run and a
#: search's workers may differ in them (``cellgraph train --resume RUN --set num_threads=1``).
MACHINE_KEYS = ("data_dir", "num_threads", "device", "logger")

#: Settings that were renamed, with their replacement and why.
RENAMED: dict[str, str] = {
    "lambda1": "lambda_task",
    "lambda2": "lambda_td (note: the paper's Appendix lambda_2 is the margin weight, lambda_margin)",
    "lambda3": "lambda_margin (note: the paper's Appendix lambda_3 is the L2 weight, lambda_l2)",
    "lambda4": "lambda_l2 (note: the paper's Appendix lambda_4 is the TD weight, lambda_td)",
    "batch_norm": "candidate_norm (batch, sample or none)",
}


@dataclass(frozen=True)
class Rule:
    """A condition on a setting's value, worded as errors and ``--help`` show it."""

    text: str
    check: Callable[[Any], bool]


def at_least(low: int | float) -> Rule:
    return Rule(f"must be >= {low}", lambda value: value >= low)


#: ``td_match = "auto"``: the TD form the authors' code computes for each model
#: (docs/paper-notes.md, *TD's zero minimum*)
AUTO_TD_MATCH = {"rrnn-gru": "root", "rrnn": "internal"}


def resolved_td_match(config: "TrainConfig") -> str:
    """The TD form of ``config``: its ``td_match``, with ``auto`` resolved by the model
    (:data:`AUTO_TD_MATCH`; ``any`` for models without a TD term)."""
    return AUTO_TD_MATCH.get(config.model, "any") if config.td_match == "auto" else config.td_match


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(f"must be one of {', '.join(choices)}", lambda value: value in choices)


#: A finite number above zero.
POSITIVE = Rule("must be > 0", lambda value: value > 0 and math.isfinite(value))
#: One of the :data:`DEVICE_FORMS`.
DEVICE_RULE = Rule(f"must be one of {', '.join(DEVICE_FORMS)}", lambda value: valid_device(value))
#: A plugin name (whether it is installed is checked where it is used).
NAME_RULE = Rule("must be a name of letters, digits, '_', '-' or '.'",
                 lambda value: bool(re.fullmatch(r"[A-Za-z0-9_.-]+", value)))


def _key(default: Any, help: str, rule: Rule | None = None) -> Any:
    """A :class:`TrainConfig` field with its one-line help and its rule (``--help`` and the
    validation both read them from here)."""
    return field(default=default, metadata={"help": help, "rule": rule})


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run needs; recorded as ``config.json`` in the run folder.

    Every field carries its one-line help and its rule (:func:`_key`): ``cellgraph train
    --help`` lists them (:func:`key_table`) and :meth:`__post_init__` enforces them.

    Loss weights are named by the term of Eq. 5 they weigh: ``lambda_task`` (the task loss,
    summed over the steps of a sequence), ``lambda_td`` (the tree distance to the target
    tree), ``lambda_margin`` (the scoring margin, with ``margin`` = M) and ``lambda_l2`` (the
    L2 penalty; for the GRU and LSTM baselines the paper's "l2 regularization coefficient").
    The paper's Appendix lists its values in its authors' code's slot order, not Eq. 5's:
    docs/paper-notes.md, *Loss weights* gives the mapping the presets use.
    """

    task: str = _key("planted", "the data set (wiki, wiki5k: enwik8 cut to 10k or 5k sequences; "
                     "planted: labelled by a hidden teacher cell, planted_teacher); cellgraph train needs it given",
                     one_of(TASKS))
    model: str = _key("rrnn", "rrnn (full cell search), rrnn-gru (search over the GRU's tuples), "
                      "gru or lstm (baselines), cell (the fixed cell of the cell setting, trained from "
                      "scratch); cellgraph train needs it given", one_of(MODELS))
    cell: str = _key("", "model=cell: the cell trained from scratch: a target name (gru, mgu, mut1...), "
                     "random:SEED[:LOW-HIGH] or minimal:SEED[:LOW-HIGH] (a planted teacher's cell) or a "
                     "cell JSON file (export, trees --save)")
    fixed_matrices: bool = _key(False, "model=cell: the matrices the cell's layout names I or 0 stay the identity "
                                "or zero (cell=gru_torch is then torch.nn.GRU's cell) instead of training "
                                "as every other matrix of a non-identity tuple")
    seed: int = _key(0, "seed of the initialisation and of the training order", at_least(0))
    epochs: int = _key(10, "training epochs (patience may stop sooner; a larger value extends a "
                       "resumed run)", at_least(1))
    batch_size: int = _key(16, "sequences per optimizer step (the global batch under torchrun)", at_least(1))
    lr: float = _key(1e-3, "Adam learning rate", POSITIVE)
    clip: float = _key(1.0, "clip the gradient norm to this value (0 = no clipping)", at_least(0))
    hidden_size: int = _key(100, "p: width of the embeddings, the hidden state and every cell vector",
                            at_least(1))
    max_train: int = _key(0, "train on the first N training sequences only (0 = all)", at_least(0))
    max_eval: int = _key(0, "evaluate on the first N validation and test sequences only (0 = all)",
                         at_least(0))
    eval_batch_size: int = _key(256, "sequences per batch of validation, test and structure logs",
                                at_least(1))
    # RRNN / RRNN-GRU
    n_tuples: int = _key(3, "rrnn, rrnn-gru: trainable weight tuples (L_r, R_r, b_r), besides the "
                         "identity tuple (I, I, 0)", at_least(1))
    n_iterations: int = _key(9, "rrnn: N_bar, the merges of Algorithm 2 (generated nodes per cell)",
                             at_least(1))
    scoring_hidden: int = _key(256, "rrnn, rrnn-gru: hidden width of the scoring network alpha",
                               at_least(1))
    mode: str = _key("soft", "training's choice among candidates: soft (softmax(alpha / tau) mixture, "
                     "the paper's), hard (argmax) or straight-through (hard forward, soft backward)",
                     one_of(MODES))
    tau: float = _key(1.0, "softmax temperature of the soft modes (the start value when tau_end > 0)",
                      POSITIVE)
    tau_end: float = _key(0.0, "> 0: tau is annealed geometrically from tau to tau_end over training "
                          "(0 = tau stays)", at_least(0))
    tau_units: str = _key("score", "rrnn, rrnn-gru soft modes: score (softmax(alpha / tau), the paper's) "
                          "or std (softmax(alpha / (tau * sigma)), sigma the std of the scores a "
                          "sample chooses among, so the scores' scale cannot undo tau)",
                          one_of(TAU_UNITS))
    candidate_norm: str = _key("none", "rrnn: normalise every candidate before it is scored: none, "
                               "batch (over the batch, as the authors' BatchNorm) or sample (over "
                               "each sample's features)", one_of(CANDIDATE_NORMS))
    placement: str = _key("flexible", "rrnn-gru: flexible (r, z use tuples 0 and 1, the six other nodes "
                          "choose among all tuples and the identity) or gates (only r, z, h~ choose; "
                          "an ablation)", one_of(PLACEMENTS))
    identity_trainable: bool = _key(False, "rrnn-gru flexible: the identity tuple trains (starting "
                                    "from I, I, 0) instead of staying fixed")
    compile: bool = _key(False, "torch.compile in training (minutes; evaluation stays eager): rrnn each "
                         "step's search, rrnn-gru the cell's step, cell the pass over a sequence")
    compile_mode: str = _key("default", "with compile: torch.compile's mode; reduce-overhead also records "
                             "CUDA graphs on a GPU (where the full RRNN's compiled search has fixed "
                             "shapes and no host sync), the same as default on the CPU",
                             one_of(COMPILE_MODES))
    recompute: bool = _key(False, "rrnn, rrnn-gru: checkpoint every step; the search runs again in the "
                           "backward pass: 13x less memory at batch 16, 1.5-1.9x the time, same results")
    alternate_every: int = _key(0, "rrnn-gru: train the tuples and the scoring network in turn, "
                                "switching every k epochs (0 = both always)", at_least(0))
    structure_term: bool = _key(False, "rrnn, rrnn-gru: add a learned logit per iteration and candidate "
                                "slot (tuple, op, activation, operands) to alpha; rrnn-gru: per choosing "
                                "node and tuple (flexible placement)")
    exclusion: str = _key("value", "rrnn: what Algorithm 2's 'v not in P' excludes: value (the paper's: "
                          "vectors equal to a generated node's) or slot (only the candidates already "
                          "chosen)", one_of(EXCLUSIONS))
    tree: str = _key("gru", "rrnn-gru: the GRU tree whose tuples it chooses: gru (the paper's, reset "
                     "before the matrix) or gru_torch (torch.nn.GRU's, reset after)", one_of(GRU_TREES))
    warm_start: str = _key("none", "rrnn, rrnn-gru, gru: none, or teacher: start as the teacher gru run's "
                           "model, exactly (a gru continues it); without --teacher a gru run of "
                           "teacher_epochs is trained first into RUN_DIR/teacher",
                           one_of(WARM_STARTS))
    warm_weight: float = _key(0.9, "warm_start=teacher: the share of each soft mixture the teacher's candidate "
                              "holds at the start (the argmax is the teacher's whatever it is)",
                              Rule("must lie strictly between 0 and 1", lambda value: 0 < value < 1))
    teacher_epochs: int = _key(5, "warm_start=teacher without --teacher: epochs of the gru run trained first",
                               at_least(1))
    score_lr: float = _key(1.0, "rrnn, rrnn-gru: alpha's (the scoring network's) learning rate as a multiple "
                           "of lr; 0 (the discovery recipe's) freezes alpha, so only the structural term and "
                           "the tuples learn what is chosen",
                           at_least(0))
    structure_lr: float = _key(1.0, "rrnn, rrnn-gru with structure_term: the structural logits' learning rate, a "
                               "multiple of lr; the warm start's lead A closes in about A / (lr * structure_lr) "
                               "steps (docs/training.md)", at_least(0))
    lambda_task: float = _key(1.0, "weight of the task loss (cross-entropy summed over a sequence's "
                              "steps)", at_least(0))
    lambda_td: float = _key(1e-3, "rrnn, rrnn-gru: weight of the tree distance TD between the "
                            "discovered cells and the target tree", at_least(0))
    lambda_margin: float = _key(1e-3, "rrnn, rrnn-gru: weight of the margin term, which rewards a "
                                "best candidate scoring `margin` above the second", at_least(0))
    lambda_l2: float = _key(1e-5, "weight of the L2 penalty on the core's and output layer's "
                            "parameters", at_least(0))
    l2_embedding: bool = _key(False, "the L2 penalty also reaches the input embedding (the paper's "
                              "embeddings are fixed vectors outside it)")
    margin: float = _key(1.0, "M of the margin term: score gaps beyond M earn nothing more", POSITIVE)
    iso: bool = _key(True, "TD is the minimum over the target tree's isomorphs (false: the tree as "
                     "drawn)")
    td_match: str = _key("auto", "TD's matches: any (the paper's; zero vectors are at TD 0), internal "
                         "(authors' RRNN), root (whole-tree VD: authors' RRNN-GRU); auto: the authors' "
                         "for the model", one_of(("auto",) + MATCHES))
    target: str = _key("gru", "the target cell of TD and of the structure logs (gru, gru_torch, "
                       "lstm, lstm_torch); rrnn searches one cell per state of it")
    teacher: str = _key("", "run folder of a finished gru run on the same task: its GRU gives the TD "
                        "target vectors (--teacher)")
    eval_mode: str = _key("hard", "choice mode of validation, test and structure logs (inference is "
                          "hard)", one_of(MODES))
    # data
    data_seed: int = _key(0, "seed of the data set's random draws (fixed while seed varies)", at_least(0))
    wiki_cleaning: str = _key("wikifil", "wiki, wiki5k: enwik8's cleaning: wikifil (wikifil.pl's rules, "
                              "the authors' text) or paper (the paper's sentence); a config.json "
                              "without the key reads as paper", one_of(tuple(WIKI_CLEANINGS)))
    planted_teacher: str = _key("gru", "planted: the hidden cell: a named cell (mgu, mut1-3...), "
                                f"random:SEED ({RANDOM_SIZES[0]}-{RANDOM_SIZES[1]} nodes), random:SEED:LOW-HIGH, "
                                "or minimal:SEED[:LOW-HIGH], a random cell redrawn until minimal (docs/discover.md)",
                                Rule(f"must be one of {', '.join(TEACHERS)}, minimal:SEED[:LOW-HIGH], random:SEED or "
                                     "random:SEED:LOW-HIGH "
                                     f"(integers, SEED >= 0, 1 <= LOW <= HIGH <= {MAX_RANDOM_NODES})", is_teacher_spec))
    data_dir: str = _key("", "data folder (--data; empty: $CELLGRAPH_DATA, else ~/.cache/cellgraph, where "
                         "`cellgraph data fetch` stores the data sets)")
    glove: str = _key("", "GloVe text file or folder to initialise the embeddings (--glove; empty: "
                      "random)")
    seq_len: int = _key(20, "tokens per sequence (every task but sst, which pads to its longest "
                        "training sentence)", at_least(2))
    # run control
    patience: int = _key(5, "stop after this many epochs without a better validation metric "
                         "(0 = never)", at_least(0))
    num_threads: int = _key(0, "torch CPU threads (0 = torch's default; 1 on a busy machine)",
                            at_least(0))
    log_structures: int = _key(64, "validation sequences whose discovered cells are logged per epoch "
                               "(structures/)", at_least(0))
    checkpoint_minutes: float = _key(10.0, "also save checkpoints/last.pt within an epoch every this many "
                                     "minutes, so that a killed run resumes from that step (0 = at the "
                                     "end of each epoch only; single process only)", at_least(0))
    max_bad_steps: int = _key(5, "stop after this many non-finite losses in a row (each is skipped)",
                              at_least(1))
    logger: str = _key("none", "tensorboard: also write the per-epoch metrics, loss terms, N_e and "
                       "discovered-cell shares to RUN_DIR/tensorboard/ (pip install 'cellgraph[tensorboard]')",
                       one_of(LOGGERS))
    backend: str = _key("torch", "the backend plugin that trains and evaluates (an unknown name is an error "
                        "that lists the installed ones; a third-party plugin adds its own)", NAME_RULE)
    device: str = _key("auto", "where the model trains and evaluates: auto (a CUDA GPU when there is one, "
                       "else the CPU), cpu, cuda or cuda:N", DEVICE_RULE)
    amp: str = _key("none", "bf16: the forward pass in bfloat16 autocast (rrnn-gru throughout, the output "
                    "layer of gru and lstm), the loss in float32; not for rrnn, whose search runs in "
                    "float32", one_of(AMPS))

    def __post_init__(self) -> None:
        for item in fields(self):
            rule = item.metadata["rule"]
            value = getattr(self, item.name)
            if rule is not None and not rule.check(value):
                raise FormatError(item.name, f"invalid value {value!r}: {rule.text}")
        _check_recipe(self)
        if (self.model == "cell") != bool(self.cell):
            raise FormatError("cell", "model=cell trains the cell this setting names: give --set cell=NAME|FILE"
                              if self.cell == "" else f"set for model {self.model}; only model=cell trains a "
                              "given cell (drop it or use --model cell)")
        if self.fixed_matrices and self.model != "cell":
            raise FormatError("fixed_matrices", f"set for model {self.model}; it fixes matrices of model=cell's "
                              "cell (drop it or use --model cell)")
        if self.amp != "none" and self.model == "rrnn":
            raise FormatError("amp", f"{self.amp} applies to gru, lstm and rrnn-gru; the full RRNN search "
                              "runs in float32 (its exclusion test compares candidates within 1e-9, far "
                              "below bfloat16's resolution)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def dataset_options(config: TrainConfig) -> dict[str, Any]:
    """The options of :func:`cellgraph.data.datasets.load_dataset` that ``config`` sets for its
    task: ``seed`` (``data_seed``), ``seq_len`` (every task but ``sst``), ``wiki_cleaning``
    (``wiki``, ``wiki5k``) and ``teacher`` (``planted``: ``planted_teacher``)."""
    options: dict[str, Any] = {"seed": config.data_seed}
    if config.task != "sst":
        options["seq_len"] = config.seq_len
    if config.task in ("wiki", "wiki5k"):
        options["wiki_cleaning"] = config.wiki_cleaning
    if config.task == "planted":
        options["teacher"] = config.planted_teacher
    return options


def _check_recipe(config: "TrainConfig") -> None:
    """The discovery recipe's settings fit together (docs/paper-notes.md, *Extension: the
    discovery recipe*): a warm start needs the structural term and a model that can compute
    ``torch.nn.GRU``'s form, and ``structure_lr`` the structural term."""
    if config.structure_term and config.model == "rrnn-gru" and config.placement != "flexible":
        raise FormatError("structure_term", "rrnn-gru's structural term needs placement=flexible")
    if config.structure_lr != 1.0 and not (config.structure_term and config.model in ("rrnn", "rrnn-gru")):
        raise FormatError("structure_lr", f"{config.structure_lr:g} sets the structural logits' learning rate, "
                          "which only rrnn and rrnn-gru with structure_term=true have")
    if config.warm_start == "none" or config.model == "gru":  # a gru takes the teacher's weights
        return
    if config.model not in ("rrnn", "rrnn-gru"):
        raise FormatError("warm_start", f"teacher: no warm start for {config.model} (rrnn, rrnn-gru or gru)")
    need = {"structure_term": (config.structure_term, True)}
    if config.model == "rrnn":
        need.update(exclusion=(config.exclusion, "slot"), n_iterations=(config.n_iterations, 9))
    else:
        need.update(tree=(config.tree, "gru_torch"), placement=(config.placement, "flexible"))
    if config.n_tuples < 4:
        need["n_tuples"] = (config.n_tuples, 4)
    wrong = [f"{key}={want!r} (has {have!r})" for key, (have, want) in need.items() if have != want]
    if wrong:
        raise FormatError("warm_start", f"teacher makes {config.model} compute torch.nn.GRU's cell, which "
                          f"needs {', '.join(wrong)}")


def paper_settings(model: str) -> dict[str, Any]:
    """The paper's values (:class:`TrainConfig`'s defaults) of every key the discovery recipe of
    ``model`` sets, to give ``cellgraph train`` explicitly where it would otherwise start from
    the recipe (empty for a model without one)."""
    default = TrainConfig()
    return {key: getattr(default, key) for key in RECIPES.get(model, {}) if key != "model"}


_FIELDS = {f.name: f for f in fields(TrainConfig)}


def _coerce(key: str, value: Any, source: str) -> Any:
    """Check ``value`` against the type of field ``key`` (ints widen to floats)."""
    if key in RENAMED:
        raise FormatError(key, f"this setting was renamed: use {RENAMED[key]}", source)
    if key not in _FIELDS:
        raise FormatError(key, f"unknown setting{_suggestion(key)}", source)
    kind = type(TrainConfig.__dataclass_fields__[key].default)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(float(value)):
                return float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                return number
    elif kind is str and isinstance(value, str):
        return value
    raise FormatError(key, f"expected a {kind.__name__}, got {value!r}", source)


def _missing(keys: list[str]) -> str:
    """What to say when the settings ``keys`` (e.g. task and model) were not given."""
    choices = {"task": TASKS, "model": MODELS}
    flags = ", ".join(f"--{key} ({'|'.join(choices[key])})" if key in choices else f"--set {key}=..."
                      for key in keys)
    them = "them" if len(keys) > 1 else "it"
    return (f"{' and '.join(keys)} not given: name {them} with {flags}, or with a --preset or --config "
            f"file that sets {them} (cellgraph presets lists the presets)")


def _suggestion(key: str) -> str:
    """``; did you mean X?`` for the settings closest to ``key``, else where to find them all."""
    close = difflib.get_close_matches(key, [*_FIELDS, *RENAMED], n=3, cutoff=0.6)
    if close:
        return f"; did you mean {' or '.join(filter(None, [', '.join(close[:-1]), close[-1]]))}?"
    return " (cellgraph train --help lists every setting)"


def key_table(width: int = 100) -> str:
    """Every :class:`TrainConfig` setting: a line with its name, type, default and rule, then
    its help, indented and wrapped to ``width``."""
    lines = []
    for item in fields(TrainConfig):
        rule = item.metadata["rule"]
        lines.append(f"  {item.name}: {type(item.default).__name__}, default {item.default!r}"
                     + (f", {rule.text}" if rule else ""))
        indent = " " * 6
        lines += textwrap.wrap(item.metadata["help"], width, initial_indent=indent, subsequent_indent=indent)
    return "\n".join(lines)


def compact(config: TrainConfig) -> str:
    """One line: task, model, seed, epochs, then every other setting that differs from its
    default (``key=value``), e.g. ``task=sst model=gru seed=0 epochs=10 lr=0.000485``."""
    values = config.to_dict()
    shown = ["task", "model", "seed", "epochs"]
    shown += [item.name for item in fields(TrainConfig)
              if item.name not in shown and values[item.name] != item.default]
    return " ".join(f"{key}={values[key]}" for key in shown)


def preset_conflicts(preset: str | None, config: TrainConfig) -> list[str]:
    """Warnings, one line each, where the resolved ``config`` trains another task or model
    than ``preset`` was made for (its other settings are then someone else's choice)."""
    if not preset or preset not in PRESETS:
        return []
    out = []
    for key in ("task", "model"):
        meant, given = PRESETS[preset].get(key), getattr(config, key)
        if meant is not None and meant != given:
            out.append(f"warning: preset {preset} is tuned for {key} {meant}, not {given}; its other "
                       f"settings may not suit {given}")
    return out


def valid_device(name: str) -> bool:
    """Whether ``name`` has one of the :data:`DEVICE_FORMS` (not whether this machine has it)."""
    return isinstance(name, str) and _DEVICE.fullmatch(name) is not None


def parse_set(items: list[str]) -> dict[str, str]:
    """``["epochs=3", "lr=1e-3"]`` -> ``{"epochs": "3", "lr": "1e-3"}`` (values typed later)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise FormatError("--set", f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a config TOML file: a flat table of settings (or one under ``[train]``)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"config file {path} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise FormatError("", f"not valid TOML: {err}", str(path)) from None
    table = data.get("train", data)
    if not isinstance(table, dict):
        raise FormatError("train", "expected a table of settings", str(path))
    for key, value in table.items():
        if isinstance(value, (dict, list)):
            raise FormatError(key, "expected a single value, got a table or array", str(path))
    return table


def resolve_config(
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
    require: tuple[str, ...] = (),
    recipe: bool = False,
) -> TrainConfig:
    """Defaults <- ``base`` <- preset <- TOML file <- overrides, each validated; every key in
    ``require`` must be set by one of these layers (its default does not count). ``recipe``:
    without a preset, the discovery recipe of the model (:data:`RECIPES`) takes the preset's
    place (``cellgraph train``'s default)."""
    layers: list[tuple[str, Mapping[str, Any]]] = [("arguments", base or {})]
    if preset:
        if preset not in PRESETS:
            raise FormatError("--preset", f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        layers.append((f"preset {preset}", PRESETS[preset]))
    if config_file:
        layers.append((str(config_file), load_toml(config_file)))
    layers.append(("--set", overrides or {}))
    if recipe and not preset and any("model" in layer for _, layer in layers):
        # the recipe of the model the last layer naming one names, under them all; read, not
        # built, since the settings may hold only with the recipe (structure_lr needs its structural term)
        model = next(layer["model"] for _, layer in reversed(layers) if "model" in layer)
        if model in RECIPES:
            layers.insert(1, (f"preset recipe-{model}", RECIPES[model]))
    config = _build(layers)
    missing = [key for key in require if not any(key in layer for _, layer in layers)]
    if missing:
        raise FormatError("", _missing(missing))
    return config


#: The enwik8 cleaning of a recorded run whose config.json has no ``wiki_cleaning`` (it predates the key).
RECORDS_BEFORE_WIKI_CLEANING = "paper"


def load_run_config(path: str | Path) -> TrainConfig:
    """The :class:`TrainConfig` recorded in a JSON file (a run folder's ``config.json``),
    validated like a TOML file: errors name the file and the key."""
    values = read_json(path)
    if not isinstance(values, dict):
        raise FormatError("", "expected a JSON object of settings", str(path))
    return _build([(str(path), {"wiki_cleaning": RECORDS_BEFORE_WIKI_CLEANING, **values})])


def _build(layers: list[tuple[str, Mapping[str, Any]]]) -> TrainConfig:
    """Apply ``(source, settings)`` layers in order; an invalid value names the layer that set it."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in layers:
        for key, value in layer.items():
            values[key] = _coerce(key, value, source)
            sources[key] = source
    try:
        return TrainConfig(**values)
    except FormatError as err:
        raise FormatError(err.path, err.message, sources.get(err.path, "defaults")) from None
