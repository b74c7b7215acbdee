"""What training tells its user besides the metrics: the one-line epoch summary
(:func:`epoch_summary`) and the warnings about an auxiliary term that outweighs the task
(:func:`outweighed`) and about an argmax far from the mixture (:func:`hard_search_warning`).
"""

from __future__ import annotations

import math
from typing import Any

from cellgraph.backends.torch.runs.evaluation import MODES_EVALUATED
from cellgraph.backends.torch.training.loss import TERMS, WEIGHT_KEYS
from cellgraph.experiment.config import TrainConfig

__all__ = ["outweighed", "ACCURACY_GAP", "hard_search_warning", "epoch_summary"]


def outweighed(record: dict[str, Any], factor: float = 10.0) -> str | None:
    """A warning when an auxiliary term of an epoch's ``record`` (weighted, absolute value)
    is more than ``factor`` times the weighted task term, naming the weight to lower."""
    task = record.get("loss_task")
    aux = [(abs(record[f"loss_{k}"]), k) for k in TERMS[1:] if record.get(f"loss_{k}") is not None]
    if not task or not aux:
        return None
    value, key = max(aux)
    if value <= factor * abs(task):
        return None
    return (f"warning: the weighted {key} term ({value:.4g}) is {value / abs(task):.0f}x the task term "
            f"({abs(task):.4g}) after epoch {record['epoch']}; it drives training: lower "
            f"{WEIGHT_KEYS[key]}")


#: A classifier's hard-search validation accuracy this far below the soft mixture's is warned about.
ACCURACY_GAP = 0.1


def hard_search_warning(final: dict[str, Any], vocab_size: int) -> str | None:
    """A warning when the hard search is far from the soft mixture on validation: a language
    model's metric, in bits per token, more than 1 bit above the soft one, not finite, or above
    the uniform baseline ``log2(V)``; a classifier's accuracy more than :data:`ACCURACY_GAP`
    below the soft one."""
    metric = final["metric"]
    if f"val_{metric}_soft" not in final:  # trained straight-through: no mixture to compare with
        return None
    if metric not in ("bpc", "perplexity"):
        hard, soft = final[f"val_{metric}_hard"], final[f"val_{metric}_soft"]
        return None if hard >= soft - ACCURACY_GAP else _hard_search_warning(final, "")
    bits = (lambda v: v) if metric == "bpc" else (lambda v: math.log2(v) if v > 0 else math.inf)  # noqa: E731
    hard, soft = bits(final[f"val_{metric}_hard"]), bits(final[f"val_{metric}_soft"])
    uniform = math.log2(vocab_size)
    if math.isfinite(hard) and hard <= uniform and hard - soft <= 1.0:
        return None
    return _hard_search_warning(final, f" (uniform guessing: {uniform:.2f} bits per token)")


def _hard_search_warning(final: dict[str, Any], baseline: str) -> str:
    metric = final["metric"]
    return (f"warning: the hard search (Algorithm 2's argmax) gives val {metric} "
            f"{final[f'val_{metric}_hard']:.4g} against {final[f'val_{metric}_soft']:.4g} with the soft "
            f"mixture{baseline}: the argmax cells do not compute what training optimised; see "
            f"candidate_norm, tau_end and mode=straight-through")


def epoch_summary(record: dict[str, Any], metric: str, config: TrainConfig, improved: bool) -> str:
    parts = [f"epoch {record['epoch']}/{config.epochs}"]
    if record[f"train_{metric}"] is not None:
        parts.append(f"train {metric} {record[f'train_{metric}']:.4f}")
    parts.append(f"val {metric} {record[f'val_{metric}']:.4f}")
    parts += [f"{mode} search {record[key]:.4f}" for mode in MODES_EVALUATED
              if mode != config.eval_mode and (key := f"val_{metric}_{mode}") in record]
    if record["loss_total"] is not None:
        parts.append(f"loss {record['loss_total']:.4f}")
    if record.get("n_e") is not None:
        parts.append(f"N_e {record['n_e']}")
    if record["phase"] != "all":
        parts.append(f"phase {record['phase']}")
    if record["bad_steps"]:
        parts.append(f"{record['bad_steps']} skipped steps")
    parts.append(f"{record['time_s']:.1f}s" + (" *" if improved else ""))
    return ", ".join(parts)
