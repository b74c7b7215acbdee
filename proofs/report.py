"""Results of the checks in :mod:`cellgraph.proofs`: one :class:`Result` per statement of the
paper, printed as one table (``cellgraph prove``) or written as JSON.

A check *constructs* the object a statement talks about and measures it. Each result holds

* ``literal``: the statement as the paper writes it, checked as written;
* ``corrected``: the corrected statement (docs/paper-notes.md, *Errata*), or ``None`` where the
  paper is right;
* ``erratum``: the item of *Errata* the literal check must reproduce (``"erratum 1"``; ``""``
  where none);
* ``evidence``: counts, worst errors and bounds measured by the check;
* ``counterexample``: a printed counterexample to the literal statement, where it fails.

A result is *ok* when the corrected statement holds and the literal check agrees with *Errata*:
it fails exactly where *Errata* lists an item.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

__all__ = ["Outcome", "joined", "Result", "timed", "format_table", "to_json", "exit_code"]

Evidence = dict[str, float | int | str]


@dataclass(frozen=True)
class Outcome:
    """Whether one checked statement held, with a one-line summary of what was measured."""

    holds: bool
    summary: str

    @property
    def label(self) -> str:
        return "holds" if self.holds else "FAILS"


def joined(*outcomes: Outcome) -> Outcome:
    """One outcome for several checks of one statement: holds when every one holds."""
    return Outcome(all(o.holds for o in outcomes), "; ".join(o.summary for o in outcomes))


@dataclass
class Result:
    """The checks of one statement of the paper."""

    name: str
    title: str
    literal: Outcome
    corrected: Outcome | None = None
    erratum: str = ""
    evidence: Evidence = field(default_factory=dict)
    counterexample: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Corrected statement holds, and the literal one fails iff *Errata* lists it."""
        corrected = self.corrected is None or self.corrected.holds
        return corrected and self.literal.holds == (not self.erratum)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "erratum": self.erratum,
            "literal": {"holds": self.literal.holds, "summary": self.literal.summary},
            "corrected": None if self.corrected is None
            else {"holds": self.corrected.holds, "summary": self.corrected.summary},
            "evidence": {k: _plain(v) for k, v in self.evidence.items()},
            "counterexample": self.counterexample,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
        }


def _plain(value: object) -> float | int | str:
    """A JSON-ready scalar (numpy scalars become Python numbers)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        return value.item()  # type: ignore[union-attr]
    return str(value)


def timed(check: Callable[..., Result]) -> Callable[..., Result]:
    """Decorate a check so that its result records its wall time."""

    def run(*args, **kwargs) -> Result:
        start = time.perf_counter()
        result = check(*args, **kwargs)
        result.seconds = time.perf_counter() - start
        return result

    run.__name__ = check.__name__
    run.__doc__ = check.__doc__
    run.__wrapped__ = check  # type: ignore[attr-defined]
    return run


def _evidence_text(evidence: Evidence) -> str:
    parts = []
    for key, value in evidence.items():
        if isinstance(value, float):
            parts.append(f"{key}={value:.3g}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def format_table(results: Iterable[Result]) -> str:
    """The results as one text table, followed by the counterexamples to literal statements."""
    results = list(results)
    lines = []
    for r in results:
        literal = f"{r.literal.label}" + (f" [{r.erratum} reproduced]" if r.erratum and not r.literal.holds else "")
        corrected = "(as stated)" if r.corrected is None else r.corrected.label
        status = "ok" if r.ok else "NOT OK"
        lines.append(f"== {r.title} [{r.name}]: {status}, {r.seconds:.1f} s")
        lines.append(f"   literal:   {literal}: {r.literal.summary}")
        if r.corrected is not None:
            lines.append(f"   corrected: {corrected}: {r.corrected.summary}")
        lines.append(f"   evidence:  {_evidence_text(r.evidence)}")
    header = f"{'statement':<11} {'literal':<8} {'corrected':<11} {'seconds':>7}"
    summary = [header, "-" * len(header)]
    for r in results:
        corrected = "(as stated)" if r.corrected is None else r.corrected.label
        summary.append(f"{r.name:<11} {r.literal.label:<8} {corrected:<11} {r.seconds:>7.1f}")
    total = sum(r.seconds for r in results)
    n_ok = sum(r.ok for r in results)
    summary.append(f"{n_ok}/{len(results)} statements as expected, {total:.1f} s in all")
    examples = [
        f"-- counterexample to the literal statement [{r.name}]:\n{r.counterexample}"
        for r in results if r.counterexample
    ]
    return "\n".join(lines + [""] + summary + ([""] + examples if examples else []))


def to_json(results: Iterable[Result], seed: int) -> str:
    """The results as a JSON document ``{"seed", "ok", "results": [...]}``."""
    results = list(results)
    doc = {"seed": seed, "ok": all(r.ok for r in results), "results": [r.as_dict() for r in results]}
    return json.dumps(doc, indent=2)


def exit_code(results: Iterable[Result]) -> int:
    """0 when every result is ok, else 1."""
    return 0 if all(r.ok for r in results) else 1
