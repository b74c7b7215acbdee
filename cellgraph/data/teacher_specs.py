"""The names of the planted task's teachers (docs/discover.md, *The planted regression task*):
the named ones (:data:`TEACHERS`) and the random ones, ``random:SEED``, ``random:SEED:LOW-HIGH``
and ``minimal:SEED[:LOW-HIGH]`` (:class:`RandomSpec`, parsed by :func:`random_spec`), whose
cells :mod:`cellgraph.data.planted` draws."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cellgraph.errors import CellGraphError

__all__ = ["RANDOM", "MINIMAL", "TEACHERS", "RANDOM_SIZES", "MAX_RANDOM_NODES", "MAX_DRAWS", "MAX_MINIMAL_DRAWS",
           "RandomSpec", "random_spec", "random_sizes", "is_teacher_spec", "teacher_folder"]

RANDOM = "random"
MINIMAL = "minimal"
#: The named teachers of the ``planted_teacher`` setting (besides ``random:SEED[:LOW-HIGH]`` and
#: ``minimal:SEED[:LOW-HIGH]``).
TEACHERS = ("gru", "gru_torch", "lstm", "mgu", "mut1", "mut2", "mut3")
_INT = r"(0|[1-9][0-9]*)"
_RANDOM_SPEC = re.compile(rf"({RANDOM}|{MINIMAL}):{_INT}(?::(.*))?")
_SIZES = re.compile(rf"{_INT}-{_INT}")
#: Generated nodes of a ``random:SEED`` teacher: drawn uniformly from this range (inclusive).
RANDOM_SIZES = (6, 12)
#: The largest ``HIGH`` of a ``random:SEED:LOW-HIGH`` teacher: the search space's ``max_nodes``
#: (:class:`cellgraph.discover.space.CellSpace`), so that every random teacher is a candidate size.
MAX_RANDOM_NODES = 15
#: Cells ``random:SEED`` draws (sub-seeds ``0, 1, ...``) before a non-finite teacher is an error.
MAX_DRAWS = 20
#: Sub-seeds ``minimal:SEED`` draws before no cell that passes the filters is an error.
MAX_MINIMAL_DRAWS = 1000


@dataclass(frozen=True)
class RandomSpec:
    """A random teacher: ``random:SEED``, or ``random:SEED:LOW-HIGH`` when ``sizes`` are not
    :data:`RANDOM_SIZES`; its cell has ``LOW <= N <= HIGH`` generated nodes (``N`` drawn from
    ``SEED``), ``1 <= LOW <= HIGH <=`` :data:`MAX_RANDOM_NODES`. With ``minimal``,
    ``minimal:SEED[:LOW-HIGH]``: the cells drawn that fail :func:`probe_problem` are skipped."""

    seed: int
    sizes: tuple[int, int] = RANDOM_SIZES
    minimal: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise CellGraphError(f"random teacher: SEED must be an integer >= 0, got {self.seed!r}")
        problem = _sizes_problem(self.sizes)
        if problem:
            raise CellGraphError(f"random teacher: {problem}")
        if not isinstance(self.minimal, bool):
            raise CellGraphError(f"random teacher: minimal must be True or False, got {self.minimal!r}")

    @property
    def kind(self) -> str:
        """``random`` or ``minimal``: the spec's prefix."""
        return MINIMAL if self.minimal else RANDOM

    def __str__(self) -> str:
        low, high = self.sizes
        return f"{self.kind}:{self.seed}" + ("" if self.sizes == RANDOM_SIZES else f":{low}-{high}")

    @property
    def folder(self) -> str:
        """A folder name: ``randomSEED``, ``randomSEED-LOWtoHIGH`` (``minimal...``)."""
        low, high = self.sizes
        return f"{self.kind}{self.seed}" + ("" if self.sizes == RANDOM_SIZES else f"-{low}to{high}")


def _sizes_problem(sizes: Any) -> str | None:
    """What keeps ``sizes`` from being the sizes of a :class:`RandomSpec`, or ``None``."""
    if not isinstance(sizes, tuple) or len(sizes) != 2 or not all(type(n) is int for n in sizes):
        return f"sizes must be a pair of integers (LOW, HIGH), got {sizes!r}"
    low, high = sizes
    if not 1 <= low <= high <= MAX_RANDOM_NODES:
        return f"sizes {low}-{high}: need 1 <= LOW <= HIGH <= {MAX_RANDOM_NODES}"
    return None


def random_spec(spec: str, what: str = "teacher") -> RandomSpec | None:
    """The :class:`RandomSpec` that ``spec`` names: ``random:SEED``, ``random:SEED:LOW-HIGH``
    or the same with ``minimal`` (integers without leading zeros); ``None`` when ``spec`` does
    not start with ``random:`` or ``minimal:``, a one-line :class:`CellGraphError` naming
    ``what`` and ``spec`` when it does but is not one."""
    prefix = spec.partition(":")[0] if isinstance(spec, str) and ":" in spec else None
    if prefix not in (RANDOM, MINIMAL):
        return None
    match = _RANDOM_SPEC.fullmatch(spec)
    if match is None:
        raise CellGraphError(f"{what} {spec}: expected {prefix}:SEED or {prefix}:SEED:LOW-HIGH "
                             "(integers without leading zeros)")
    _, seed, sizes = match.groups()
    return RandomSpec(int(seed), RANDOM_SIZES if sizes is None else random_sizes(sizes, f"{what} {spec}"),
                      prefix == MINIMAL)


def random_sizes(text: str, what: str = "sizes") -> tuple[int, int]:
    """The range ``(LOW, HIGH)`` that ``text`` ``LOW-HIGH`` names (integers without leading
    zeros, ``1 <= LOW <= HIGH <=`` :data:`MAX_RANDOM_NODES`); a one-line
    :class:`CellGraphError` that starts with ``what`` otherwise."""
    match = _SIZES.fullmatch(text)
    if match is None:
        raise CellGraphError(f"{what}: expected LOW-HIGH (integers without leading zeros), got {text!r}")
    low, high = int(match.group(1)), int(match.group(2))
    problem = _sizes_problem((low, high))
    if problem:
        raise CellGraphError(f"{what}: {problem}")
    return low, high


def is_teacher_spec(spec: str) -> bool:
    """Whether ``spec`` is a value of the ``planted_teacher`` setting: one of :data:`TEACHERS`
    or a :func:`random_spec`."""
    if isinstance(spec, str) and spec in TEACHERS:
        return True
    try:
        return random_spec(spec) is not None
    except CellGraphError:
        return False


def teacher_folder(spec: str) -> str:
    """Teacher ``spec`` as a folder name: a named teacher as it is, a random one
    :attr:`RandomSpec.folder` (``random:4`` ``random4``, ``random:4:4-7`` ``random4-4to7``,
    ``minimal:4:4-7`` ``minimal4-4to7``)."""
    chosen = random_spec(spec)
    return spec if chosen is None else chosen.folder
