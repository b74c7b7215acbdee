"""Reading what a training run logged: metrics per epoch and discovered structures.

The trainer writes, per epoch ``e``, a line of ``metrics.jsonl`` with at least ``epoch``,
``train_<metric>``, ``val_<metric>``, the loss terms ``loss_task``, ``loss_td``,
``loss_margin``, ``loss_l2``, ``time_s`` and, for RRNN-GRU, ``n_e`` (the paper's ``N_e``:
tuple choices that changed since epoch ``e-1`` over all (sample, t, node)); and a file
``structures/epoch_EEE.json``::

    {"epoch": e, "n_cells": int, "target": "gru", "target_share": float,
     "identity_chain_share": float, "reads_input_share": float, "reads_state_share": float,
     "reads_both_share": float,
     "forms": [{"canonical": str, "count": int, "depth": int, "n_internal": int,
                "balance": float, "is_target": bool, "identity_chain": bool,
                "reads": {"x": bool, "h": bool, ...}, "reads_input": bool, "reads_state": bool,
                "example": {"sample": i, "t": t},
                "cell": <cellgraph.export.jsonio.dump_cell(cell, layout) of one cell with this form>},
               ...]}

with ``forms`` sorted by decreasing count (``canonical``: the exact form, tuple indices
included; ``is_target``: same structure as the target, whatever trainable tuples it uses).
``identity_chain``, ``reads``, ``reads_input`` and ``reads_state`` are :func:`form_reads` of the
form's cell (:mod:`cellgraph.algorithms.reads`: which leaves ``h_t`` reads); the ``*_share``
fields are their shares among the ``n_cells`` cells, weighted by count (:func:`read_shares`;
``reads_both_share``: ``h_t`` reads both ``x_t`` and ``h_{t-1}``). Logs written before these
fields existed get them from their cell dumps through :func:`with_reads`.
The trainer also records ``loss_total``, ``phase``, ``bad_steps`` (skipped non-finite
steps) and, for searched cells, ``target_share`` per epoch. ``balance`` is the shallowest
leaf depth over the deepest (1 for a perfect tree, small for a caterpillar).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellgraph.algorithms.reads import cell_reads, is_identity_chain
from cellgraph.cell.graph import MultiCell
from cellgraph.cell.layout import Layout
from cellgraph.errors import CellGraphError, FormatError
from cellgraph.experiment.config import load_run_config
from cellgraph.experiment.runs import RunDir
from cellgraph.export.jsonio import load_document
from cellgraph.files import read_json

__all__ = ["METRICS", "SHARES", "RunLog", "metric_name", "structure_summary", "require_field",
           "form_reads", "read_shares", "with_reads", "reads_summary", "is_identity_chain"]

#: task -> (metric, lower is better)
METRICS: dict[str, tuple[str, bool]] = {
    "wiki": ("bpc", True),
    "wiki5k": ("bpc", True),
    "ptb": ("perplexity", True),
    "sst": ("accuracy", False),
    "planted": ("accuracy", False),
}


def metric_name(task: str) -> str:
    return METRICS[task][0]


#: Share of a structure log -> the form flags a cell needs, all true, to count in it.
SHARES: dict[str, tuple[str, ...]] = {
    "identity_chain_share": ("identity_chain",),
    "reads_input_share": ("reads_input",),
    "reads_state_share": ("reads_state",),
    "reads_both_share": ("reads_input", "reads_state"),
}


def form_reads(cell: MultiCell, layout: Layout | None) -> dict[str, Any]:
    """The fields of a structure log's form entry on what ``cell`` (a
    :class:`~cellgraph.cell.graph.MultiCell` over ``layout``) reads: ``identity_chain`` (not
    known without a layout), ``reads`` (leaf name -> whether ``h_t`` reads it),
    ``reads_input``, ``reads_state``."""
    reads = cell_reads(cell)
    chain = {} if layout is None else {"identity_chain": is_identity_chain(cell, layout)}
    return {**chain, "reads": reads.flags(), "reads_input": reads.reads_input,
            "reads_state": reads.reads_state}


def read_shares(forms: list[dict[str, Any]], n_cells: int) -> dict[str, float]:
    """The :data:`SHARES` of a structure log's ``forms`` among its ``n_cells`` cells, weighted
    by count; a share some form lacks the flags of is left out (not known)."""
    return {key: sum(f["count"] for f in forms if all(f[k] for k in flags)) / max(n_cells, 1)
            for key, flags in SHARES.items() if all(k in f for f in forms for k in flags)}


def with_reads(log: dict[str, Any]) -> dict[str, Any]:
    """A structure log with :func:`form_reads`' fields in every form and :data:`SHARES` at the
    top, as the trainer writes them today; for an older log they are computed from each form's
    cell dump (a form without a readable dump leaves them unknown, and the shares that need it
    too; ``identity_chain`` needs the dump's layout)."""
    forms = [form if _FORM_READS <= form.keys() else {**_dumped_reads(form), **form} for form in log["forms"]]
    return {**read_shares(forms, log["n_cells"]), **log, "forms": forms}


_FORM_READS = {"identity_chain", "reads", "reads_input", "reads_state"}


def reads_summary(log: dict[str, Any]) -> str:
    """One line on the :data:`SHARES` of a structure log (after :func:`with_reads`), saying
    which are not known."""
    share = {key: log.get(key) for key in SHARES}
    if None in (share["reads_input_share"], share["reads_state_share"], share["reads_both_share"]):
        reads = "what h_t reads is not known (no readable cell dumps in this log)"
    else:
        reads = (f"h_t reads x_t in {share['reads_input_share']:.1%} of the cells, h_{{t-1}} in "
                 f"{share['reads_state_share']:.1%}, both in {share['reads_both_share']:.1%}")
    chains = share["identity_chain_share"]
    return reads + ("; identity chains: not known" if chains is None else f"; identity chains in {chains:.1%}")


def _dumped_reads(form: dict[str, Any]) -> dict[str, Any]:
    """:func:`form_reads` of the cell dumped in ``form``; empty where it has no readable dump."""
    try:
        doc = load_document(form["cell"])
    except (KeyError, CellGraphError):
        return {}
    return form_reads(doc.cell, doc.layout)


def structure_summary(tree) -> dict[str, Any]:
    """Depth, size and balance of an unfolded :class:`~cellgraph.cell.tree.Tree`."""
    depths = tree.leaf_depths()
    return {
        "depth": max(depths),
        "n_internal": tree.n_internal(),
        "balance": min(depths) / max(depths) if max(depths) else 1.0,
    }


@dataclass
class RunLog:
    """The logged history of one run folder."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]

    @classmethod
    def load(cls, path: str | Path) -> "RunLog":
        """Read and validate a run folder: ``config.json`` must be a valid
        :class:`~cellgraph.experiment.config.TrainConfig` (and :meth:`RunDir.metrics` checks the
        records); errors name the file, the line and the field."""
        run = RunDir(path)
        if not run.file("config.json").exists():
            raise CellGraphError(f"{path} is not a run folder (no config.json)")
        return cls(Path(path), load_run_config(run.file("config.json")).to_dict(), run.metrics())

    @property
    def label(self) -> str:
        return f"{self.config.get('model')} ({self.path.name})"

    @property
    def metric(self) -> str:
        return metric_name(self.config["task"])

    @property
    def variant(self) -> str:
        """The folder's name without its seed suffix ``-s<N>``: runs of one variant over seeds."""
        return re.sub(r"-s\d+$", "", self.path.name)

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """Epochs and values of metric ``key`` where logged; a logged value must be a number."""
        source = self.path / "metrics.jsonl"
        rows = [(line, r) for line, r in enumerate(self.metrics, 1) if r.get(key) is not None]
        return ([r["epoch"] for _, r in rows],
                [float(require_field(r, key, float, f"line {line}", source)) for line, r in rows])

    def _structure_files(self) -> list[Path]:
        folder = self.path / "structures"
        return sorted(folder.glob("epoch_*.json")) if folder.is_dir() else []

    @property
    def has_structures(self) -> bool:
        """Whether the run logged a structure log (searched cells do)."""
        return bool(self._structure_files())

    def structures(self) -> list[dict[str, Any]]:
        """Per-epoch structure logs, by epoch, validated (module docstring)."""
        return [_structure_log(read_json(f), f) for f in self._structure_files()]

    def structure_log(self, epoch: int | None = None) -> dict[str, Any]:
        """The structure log of ``epoch`` (default: the last logged) with what its cells read
        (:func:`with_reads`); an error naming the run where there is none."""
        files = self._structure_files()
        if not files:
            raise CellGraphError(f"{self.path} has no structure log (structures/epoch_*.json)")
        if epoch is None:
            chosen = _structure_log(read_json(files[-1]), files[-1])
        else:
            chosen = next((s for s in self.structures() if s["epoch"] == epoch), None)
        if chosen is None:
            raise CellGraphError(f"{self.path}: no structure log for epoch {epoch}")
        return with_reads(chosen)

    def final(self) -> dict[str, Any] | None:
        path = self.path / "final.json"
        return _object(read_json(path), "", path) if path.exists() else None


def _object(value: Any, where: str, source: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FormatError(where, f"expected a JSON object, got {type(value).__name__}", str(source))
    return value


def require_field(obj: dict[str, Any], key: str, kind: type, where: str, source: Path) -> Any:
    """``obj[key]``, which must be a ``kind`` (``float`` accepts integers; never a boolean);
    else a :class:`FormatError` naming ``source``, ``where`` and ``key``."""
    value = obj.get(key)
    kinds = (int, float) if kind is float else kind
    if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kinds):
        at = f"{where}.{key}" if where else key
        raise FormatError(at, f"expected {_KIND_NAMES[kind]}, got {value!r:.40}", str(source))
    return value


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
               list: "a list", dict: "an object"}
_LOG_FIELDS = {"epoch": int, "n_cells": int, "forms": list}
_FORM_FIELDS = {"canonical": str, "count": int, "depth": int, "n_internal": int, "balance": float}
#: Fields a structure log or a form may hold, by type (older logs lack them).
_OPTIONAL_LOG_FIELDS = {"target_share": float, **dict.fromkeys(SHARES, float)}
_OPTIONAL_FORM_FIELDS = {"is_target": bool, "cell": dict, "identity_chain": bool, "reads": dict,
                         "reads_input": bool, "reads_state": bool}


def _structure_log(value: Any, source: Path) -> dict[str, Any]:
    """``value`` if it is a structure log as the module docstring describes."""
    log = _object(value, "", source)
    for key, kind in _LOG_FIELDS.items():
        require_field(log, key, kind, "", source)
    for key in (k for k in _OPTIONAL_LOG_FIELDS if k in log):
        require_field(log, key, _OPTIONAL_LOG_FIELDS[key], "", source)
    for i, form in enumerate(log["forms"]):
        where = f"forms[{i}]"
        _object(form, where, source)
        for key, kind in _FORM_FIELDS.items():
            require_field(form, key, kind, where, source)
        if form["count"] < 0:
            raise FormatError(f"{where}.count", f"expected a count >= 0, got {form['count']}", str(source))
        for key in (k for k in _OPTIONAL_FORM_FIELDS if k in form):
            require_field(form, key, _OPTIONAL_FORM_FIELDS[key], where, source)
    return log
