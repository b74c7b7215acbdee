"""Training configuration, the paper's presets and its hyper-parameter search ranges
(paper, Sec. 5 and Appendix "Hyperparameters"; SPEC §8).

A :class:`TrainConfig` is resolved in layers: defaults, then a named preset, then a TOML
file, then ``--set key=value`` overrides. Every layer is validated: an unknown key or a
value of the wrong type is an error that names the key and its source.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from cellgraph.errors import FormatError
from cellgraph.runs import read_json

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["TrainConfig", "PRESETS", "SEARCH_RANGES", "resolve_config", "load_run_config", "parse_set",
           "valid_device"]

TASKS = ("wiki", "wiki5k", "ptb", "sst", "planted")
MODELS = ("rrnn", "rrnn-gru", "gru", "lstm")
MODES = ("hard", "soft", "straight-through")
CANDIDATE_NORMS = ("none", "batch", "sample")
PLACEMENTS = ("flexible", "gates")
LOSS_WEIGHTS = ("lambda_task", "lambda_td", "lambda_margin", "lambda_l2")
#: The forms of the ``device`` setting (resolved against the machine by the torch backend).
DEVICE_FORMS = ("auto", "cpu", "cuda", "cuda:N")
_DEVICE = re.compile(r"auto|cpu|cuda(:(0|[1-9][0-9]*))?")
#: Mixed precision of the training step: none, or bfloat16 autocast (rrnn-gru; the output layer of gru, lstm).
AMPS = ("none", "bf16")

#: Settings that were renamed, with their replacement and why.
RENAMED: dict[str, str] = {
    "lambda1": "lambda_task",
    "lambda2": "lambda_td (note: the paper's Appendix lambda_2 is the margin weight, lambda_margin)",
    "lambda3": "lambda_margin (note: the paper's Appendix lambda_3 is the L2 weight, lambda_l2)",
    "lambda4": "lambda_l2 (note: the paper's Appendix lambda_4 is the TD weight, lambda_td)",
    "batch_norm": "candidate_norm (batch, sample or none)",
}


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run needs; recorded as ``config.json`` in the run folder.

    Loss weights are named by the term of Eq. 5 they weigh: ``lambda_task`` (the task loss,
    summed over the steps of a sequence), ``lambda_td`` (the tree distance to the target
    tree), ``lambda_margin`` (the scoring margin, with ``margin`` = M) and ``lambda_l2`` (the
    L2 penalty; for the GRU and LSTM baselines the paper's "l2 regularization coefficient").
    The paper's Appendix lists its values in its authors' code's slot order, not Eq. 5's:
    ``docs/paper-notes.md`` ("Loss weights") gives the mapping the presets use.
    """

    task: str = "planted"
    model: str = "rrnn"
    seed: int = 0
    epochs: int = 10
    batch_size: int = 16
    lr: float = 1e-3
    clip: float = 1.0
    hidden_size: int = 100
    max_train: int = 0  # 0 = all training sequences
    max_eval: int = 0  # 0 = all validation/test sequences
    eval_batch_size: int = 256
    # RRNN / RRNN-GRU
    n_tuples: int = 3
    n_iterations: int = 9
    scoring_hidden: int = 256
    mode: str = "soft"
    tau: float = 1.0  # softmax temperature of the soft modes (the start value when annealed)
    tau_end: float = 0.0  # > 0: tau annealed geometrically from tau to tau_end over training
    candidate_norm: str = "none"  # RRNN: normalise every candidate (none, batch, sample)
    placement: str = "flexible"  # RRNN-GRU: which nodes choose their tuple (flexible, gates)
    identity_trainable: bool = False  # RRNN-GRU flexible: the identity tuple trains (from I, I, 0)
    compile: bool = False  # RRNN: torch.compile the search's candidate block (eager where that fails)
    alternate_every: int = 0  # RRNN-GRU: switch tuples <-> scoring every k epochs (0 = never)
    lambda_task: float = 1.0
    lambda_td: float = 1e-3
    lambda_margin: float = 1e-3
    lambda_l2: float = 1e-5
    margin: float = 1.0
    iso: bool = True
    target: str = "gru"
    teacher: str = ""  # run folder of a finished GRU run: the `teacher` target provider
    eval_mode: str = "hard"  # choice mode of validation/test/structure logs (SPEC §3: inference is hard)
    # data
    data_seed: int = 0  # seed of the data set's random draws (fixed while ``seed`` varies)
    data_dir: str = ""
    glove: str = ""
    seq_len: int = 20
    # run control
    patience: int = 5  # early stopping on the validation metric
    num_threads: int = 0  # 0 = torch default
    log_structures: int = 64  # samples whose discovered trees are logged per epoch
    max_bad_steps: int = 5  # stop after this many non-finite losses in a row (each is skipped)
    device: str = "auto"  # auto (a CUDA GPU when there is one, else the CPU), cpu, cuda, cuda:N
    amp: str = "none"  # bf16: forward pass in bfloat16 autocast (rrnn-gru; gru/lstm output layer), loss in float32

    def __post_init__(self) -> None:
        checks = {
            "task": self.task in TASKS,
            "model": self.model in MODELS,
            "mode": self.mode in MODES,
            "eval_mode": self.eval_mode in MODES,
            "candidate_norm": self.candidate_norm in CANDIDATE_NORMS,
            "placement": self.placement in PLACEMENTS,
            "device": valid_device(self.device),
            "amp": self.amp in AMPS,
            "epochs": self.epochs >= 1,
            "batch_size": self.batch_size >= 1,
            "lr": self.lr > 0 and math.isfinite(self.lr),
            "hidden_size": self.hidden_size >= 1,
            "n_tuples": self.n_tuples >= 1,
            "n_iterations": self.n_iterations >= 1,
            "scoring_hidden": self.scoring_hidden >= 1,
            "tau": self.tau > 0,
            "tau_end": self.tau_end >= 0,
            "margin": self.margin > 0,
            "seq_len": self.seq_len >= 2,
            "max_train": self.max_train >= 0,
            "max_eval": self.max_eval >= 0,
            "clip": self.clip >= 0,
            "max_bad_steps": self.max_bad_steps >= 1,
            "seed": self.seed >= 0,  # numpy and torch generators take non-negative seeds
            "data_seed": self.data_seed >= 0,
            "eval_batch_size": self.eval_batch_size >= 1,
            "alternate_every": self.alternate_every >= 0,
            "patience": self.patience >= 0,
            "num_threads": self.num_threads >= 0,
            "log_structures": self.log_structures >= 0,
            **{key: getattr(self, key) >= 0 for key in LOSS_WEIGHTS},
        }
        allowed = {"task": TASKS, "model": MODELS, "mode": MODES, "eval_mode": MODES,
                   "candidate_norm": CANDIDATE_NORMS, "placement": PLACEMENTS, "device": DEVICE_FORMS,
                   "amp": AMPS}
        for key, ok in checks.items():
            if not ok:
                hint = f" (one of {', '.join(allowed[key])})" if key in allowed else ""
                raise FormatError(key, f"invalid value {getattr(self, key)!r}{hint}")
        if self.amp != "none" and self.model == "rrnn":
            raise FormatError("amp", f"{self.amp} applies to gru, lstm and rrnn-gru; the full RRNN search "
                              "runs in float32 (its exclusion test compares candidates within 1e-9, far "
                              "below bfloat16's resolution)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def _preset(**kw: Any) -> dict[str, Any]:
    return kw


#: The paper's optimal hyper-parameters (Appendix "Hyperparameters"), by name. The Appendix's
#: lambda_2, lambda_3, lambda_4 are its authors' code's slots (2 = margin, 3 = L2, 4 = TD), not
#: Eq. 5's order: each RRNN preset below maps them by those slots (docs/paper-notes.md,
#: "Loss weights"). The GRU presets' "l2 regularization coefficient" is lambda_l2.
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

#: The paper's random-search ranges (Appendix tables "search range"): key -> (low, high, scale).
#: The RRNN-GRU table's lambda_2, lambda_3, lambda_4 rows are mapped by the same slots as
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
    ("gru", "wiki"): {"batch_size": (8, 256, "int"), "lr": (1e-5, 1e-1, "log"), "lambda_l2": (1e-16, 1, "log")},
    ("gru", "sst"): {"batch_size": (4, 128, "int"), "lr": (1e-6, 1e1, "log"), "lambda_l2": (1e-16, 1e-2, "log")},
    ("gru", "ptb"): {"batch_size": (8, 256, "int"), "lr": (1e-4, 1e-1, "log"), "lambda_l2": (1e-16, 1, "log")},
}

_FIELDS = {f.name: f for f in fields(TrainConfig)}


def _coerce(key: str, value: Any, source: str) -> Any:
    """Check ``value`` against the type of field ``key`` (ints widen to floats)."""
    if key in RENAMED:
        raise FormatError(key, f"this setting was renamed: use {RENAMED[key]}", source)
    if key not in _FIELDS:
        raise FormatError(key, f"unknown setting (known: {', '.join(_FIELDS)})", source)
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
) -> TrainConfig:
    """Defaults <- ``base`` <- preset <- TOML file <- overrides, each validated."""
    layers: list[tuple[str, Mapping[str, Any]]] = [("arguments", base or {})]
    if preset:
        if preset not in PRESETS:
            raise FormatError("--preset", f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        layers.append((f"preset {preset}", PRESETS[preset]))
    if config_file:
        layers.append((str(config_file), load_toml(config_file)))
    layers.append(("--set", overrides or {}))
    return _build(layers)


def load_run_config(path: str | Path) -> TrainConfig:
    """The :class:`TrainConfig` recorded in a JSON file (a run folder's ``config.json``),
    validated like a TOML file: errors name the file and the key."""
    values = read_json(path)
    if not isinstance(values, dict):
        raise FormatError("", "expected a JSON object of settings", str(path))
    return _build([(str(path), values)])


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
