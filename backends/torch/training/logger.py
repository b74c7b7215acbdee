"""Optional loggers of a training run besides ``metrics.jsonl`` (which stays the record):
``config.logger = "tensorboard"`` writes TensorBoard event files into ``RUN_DIR/tensorboard/``
(``pip install 'cellgraph[tensorboard]'``; ``tensorboard --logdir RUN_DIR/tensorboard``).

Per epoch ``e`` (the step of every scalar), from the epoch's ``metrics.jsonl`` record:

* ``<metric>/train``, ``<metric>/val`` (``bpc``, ``perplexity`` or ``accuracy``);
* ``loss/task``, ``loss/td``, ``loss/margin``, ``loss/l2``, ``loss/total`` (the weighted terms
  of Eq. 5, where logged);
* ``structure/N_e`` (RRNN-GRU), ``structure/target_share``;
* ``run/<key>`` for the record's other numbers (``time_s``, ``bad_steps``, ``tau``);

from the epoch's structure log (searched cells; epoch 0 is the untrained model):
``cells/top<k>_share`` (share of the ``k``-th most frequent form among the logged cells, ``k``
up to :data:`TOP_FORMS`), ``cells/distinct_forms``, the shares of cells whose ``h_t`` reads
``x_t``, ``h_{t-1}``, both, and of identity chains (``cells/reads_input_share``,
``cells/reads_state_share``, ``cells/reads_both_share``, ``cells/identity_chain_share``), and a
text ``cells/top_forms`` naming the forms;
at the end, ``final/val_<metric>`` and ``final/test_<metric>`` at the best epoch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from cellgraph.errors import CellGraphError
from cellgraph.experiment.runlog import SHARES

__all__ = ["TOP_FORMS", "EpochLogger", "check_logger", "open_logger", "epoch_scalars",
           "form_scalars"]

#: How many of the most frequent discovered forms get a share scalar.
TOP_FORMS = 5
_NAMED = {"n_e": "structure/N_e", "target_share": "structure/target_share"}


class EpochLogger(Protocol):
    """What the trainer calls: once per epoch (structure log or None), once at the end."""

    def epoch(self, record: dict[str, Any], structures: dict[str, Any] | None) -> None: ...

    def close(self, final: dict[str, Any]) -> None: ...


class _NoLogger:
    """``logger = "none"``: metrics.jsonl only."""

    def epoch(self, record: dict[str, Any], structures: dict[str, Any] | None) -> None:
        """Nothing to write."""

    def close(self, final: dict[str, Any]) -> None:
        """Nothing to close."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def epoch_scalars(record: dict[str, Any]) -> dict[str, float]:
    """Tag -> value of the numbers of one ``metrics.jsonl`` record (module docstring)."""
    out = {}
    for key, value in record.items():
        if key == "epoch" or not _number(value):
            continue
        split, _, rest = key.partition("_")
        if key in _NAMED:
            tag = _NAMED[key]
        elif split in ("train", "val") and rest:
            tag = f"{rest}/{split}"
        elif split == "loss" and rest:
            tag = f"loss/{rest}"
        else:
            tag = f"run/{key}"
        out[tag] = float(value)
    return out


def form_scalars(structures: dict[str, Any], top: int = TOP_FORMS) -> dict[str, float]:
    """Shares of the ``top`` most frequent forms of a structure log, how many forms, and the
    log's shares of what the cells read (where it records them)."""
    total = max(structures["n_cells"], 1)
    out = {f"cells/top{k}_share": form["count"] / total for k, form in enumerate(structures["forms"][:top], 1)}
    out["cells/distinct_forms"] = float(len(structures["forms"]))
    out.update({f"cells/{key}": float(structures[key]) for key in SHARES if key in structures})
    return out


def _forms_text(structures: dict[str, Any], top: int = TOP_FORMS) -> str:
    """A Markdown table of the most frequent forms (TensorBoard's text tab renders it)."""
    total = max(structures["n_cells"], 1)
    rows = [f"| {k} | {form['count'] / total:.3f} | `{form['canonical']}` |"
            for k, form in enumerate(structures["forms"][:top], 1)]
    return "\n".join(["| rank | share | form |", "|---|---|---|", *rows])


class TensorBoardLogger:
    """Event files in ``folder``; ``resume_after`` drops what an earlier, killed process had
    logged for later epochs (they are trained again)."""

    def __init__(self, folder: Path, resume_after: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(folder), purge_step=resume_after + 1 if resume_after else None)

    def epoch(self, record: dict[str, Any], structures: dict[str, Any] | None) -> None:
        step = record["epoch"]
        scalars = epoch_scalars(record)
        if structures is not None:
            scalars.update(form_scalars(structures))
            self.writer.add_text("cells/top_forms", _forms_text(structures), step)
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()  # a killed run keeps every finished epoch

    def close(self, final: dict[str, Any]) -> None:
        metric = final.get("metric")
        for split in ("val", "test"):
            value = final.get(f"{split}_{metric}")
            if _number(value):
                self.writer.add_scalar(f"final/{split}_{metric}", float(value), final["best_epoch"])
        self.writer.close()


def check_logger(name: str) -> None:
    """Fail at once (before a run folder is made) where logger ``name`` cannot run here."""
    if name == "tensorboard":
        try:
            import tensorboard  # noqa: F401 - torch.utils.tensorboard writes through it
        except ImportError:
            raise CellGraphError("logger=tensorboard needs the tensorboard package: "
                                 "pip install 'cellgraph[tensorboard]'") from None


def open_logger(name: str, run_dir: Path, resume_after: int = 0) -> EpochLogger:
    """The logger ``name`` (:data:`cellgraph.experiment.config.LOGGERS`) of a run folder;
    ``resume_after``: the epoch a resumed run continues after."""
    check_logger(name)
    if name == "tensorboard":
        return TensorBoardLogger(Path(run_dir) / "tensorboard", resume_after)
    return _NoLogger()
