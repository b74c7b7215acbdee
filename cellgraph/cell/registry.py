"""Registries of the unary activations ``U`` and binary operations ``O`` (paper, Sec. 3.1).

A node of a cell computes ``u(o(L_r c_i, R_r c_j) + b_r)``. The names of ``u`` and ``o``
are looked up here. Each entry carries

* its symbolic form, a function of sympy matrix expressions (vectors are ``p x 1``
  ``MatrixSymbol``s), so exports keep entry-wise products and activations as such;
* its numeric forms, one per backend name (``"numpy"`` is built in; a backend such as
  ``"torch"`` keeps its own table for the built-ins and reads ``numeric[name]`` for
  entries a user registers);
* for activations, ``derivative_bound`` = sup |u'| (condition (vanishCond2) of the
  vanishing-gradient theorem), and for operations whether they are commutative, which
  defines the isomorphism class ``Iso(T)`` (paper, Sec. 3.1).

Users extend the sets with :func:`register_activation` and :func:`register_op`; inside a
``with scoped():`` block (or a function decorated ``@scoped()``) the registrations last until
the block ends.

The built-ins' symbolic forms import sympy when first called, so that importing the registry
(and with it ``cellgraph``, its drawings and its JSON files) does not import sympy.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import numpy as np

from cellgraph.errors import CellGraphError

if TYPE_CHECKING:
    from sympy.matrices.expressions import MatrixExpr

__all__ = [
    "Activation",
    "Op",
    "register_activation",
    "register_op",
    "scoped",
    "activation",
    "op",
    "activation_names",
    "op_names",
]

SympyUnary = Callable[["MatrixExpr"], "MatrixExpr"]
SympyBinary = Callable[["MatrixExpr", "MatrixExpr"], "MatrixExpr"]


@dataclass(frozen=True)
class Activation:
    """An entry-wise activation ``u`` in ``U``.

    Attributes:
        name: registry key, used in graphs and files.
        sympy: symbolic form on a ``p x 1`` matrix expression.
        numeric: backend name -> entry-wise array function.
        derivative_bound: ``sup_z |u'(z)|`` or ``None`` when unbounded.
        latex: short label for drawings.
    """

    name: str
    sympy: SympyUnary
    numeric: Mapping[str, Callable] = field(default_factory=dict)
    derivative_bound: float | None = None
    latex: str = ""


@dataclass(frozen=True)
class Op:
    """A binary operation ``o`` in ``O`` applied to ``(L_r c_i, R_r c_j)``."""

    name: str
    commutative: bool
    sympy: SympyBinary
    numeric: Mapping[str, Callable] = field(default_factory=dict)
    symbol: str = ""


_ACTIVATIONS: dict[str, Activation] = {}
_OPS: dict[str, Op] = {}


def _check_name(name: str, kind: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise CellGraphError(f"{kind} name must be an identifier string, got {name!r}")


def _register(table: dict, entry, kind: str, replace: bool):
    _check_name(entry.name, kind)
    if entry.name in table and not replace:
        raise CellGraphError(f"{kind} {entry.name!r} is already registered")
    table[entry.name] = entry
    return entry


def register_activation(entry: Activation, *, replace: bool = False) -> Activation:
    """Add an activation to ``U``. Raises if the name exists and ``replace`` is false."""
    return _register(_ACTIVATIONS, entry, "activation", replace)


def register_op(entry: Op, *, replace: bool = False) -> Op:
    """Add a binary operation to ``O``. Raises if the name exists and ``replace`` is false."""
    return _register(_OPS, entry, "operation", replace)


@contextmanager
def scoped() -> Iterator[None]:
    """A block (or, as ``@scoped()``, a function) whose registrations are undone at its end:
    ``U`` and ``O`` are restored to what they were when it began."""
    saved = dict(_ACTIVATIONS), dict(_OPS)
    try:
        yield
    finally:
        for table, before in zip((_ACTIVATIONS, _OPS), saved):
            table.clear()
            table.update(before)


def activation(name: str) -> Activation:
    """The registered activation ``name``; a clear error lists the known ones."""
    try:
        return _ACTIVATIONS[name]
    except (KeyError, TypeError):
        raise CellGraphError(
            f"unknown activation {name!r} (known: {', '.join(sorted(_ACTIVATIONS))})"
        ) from None


def op(name: str) -> Op:
    """The registered binary operation ``name``; a clear error lists the known ones."""
    try:
        return _OPS[name]
    except (KeyError, TypeError):
        raise CellGraphError(
            f"unknown operation {name!r} (known: {', '.join(sorted(_OPS))})"
        ) from None


def activation_names() -> tuple[str, ...]:
    return tuple(_ACTIVATIONS)


def op_names() -> tuple[str, ...]:
    return tuple(_OPS)


# --- built-ins -------------------------------------------------------------------------


def _sympy_sigmoid(v: MatrixExpr) -> MatrixExpr:
    import sympy

    return v.applyfunc(sympy.Function("sigma"))


def _sympy_tanh(v: MatrixExpr) -> MatrixExpr:
    import sympy

    return v.applyfunc(sympy.tanh)


def _sympy_one_minus(v: MatrixExpr) -> MatrixExpr:
    import sympy

    return sympy.OneMatrix(*v.shape) - v


def _sympy_relu(v: MatrixExpr) -> MatrixExpr:
    import sympy

    return v.applyfunc(sympy.Function("relu"))


def _sympy_hadamard(a: MatrixExpr, b: MatrixExpr) -> MatrixExpr:
    """``HadamardProduct(a, b)``, not ``hadamard_product(a, b)``: the latter sorts the
    operands, and an export must keep a discovered cell as built; compare via
    ``symbolic.canonical`` (docs/paper-notes.md, *Symbolic export and canonical forms*)."""
    import sympy

    return sympy.HadamardProduct(a, b)


def _np_sigmoid(z: np.ndarray) -> np.ndarray:
    # numerically stable in float64 for large |z|
    out = np.empty_like(z, dtype=np.result_type(z, np.float64))
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


register_activation(
    Activation("sigmoid", _sympy_sigmoid, {"numpy": _np_sigmoid}, 0.25, r"\sigma")
)
register_activation(
    Activation("tanh", _sympy_tanh, {"numpy": np.tanh}, 1.0, r"\tanh")
)
register_activation(
    Activation(
        "one_minus", _sympy_one_minus, {"numpy": lambda z: 1.0 - z}, 1.0, r"1-\cdot"
    )
)
register_activation(
    Activation("identity", lambda v: v, {"numpy": lambda z: z}, 1.0, r"\mathrm{id}")
)
register_activation(
    Activation(
        "relu", _sympy_relu, {"numpy": lambda z: np.maximum(z, 0.0)}, 1.0,
        r"\mathrm{relu}",
    )
)

register_op(Op("add", True, lambda a, b: a + b, {"numpy": np.add}, "+"))
register_op(Op("mul", True, _sympy_hadamard, {"numpy": np.multiply}, "⊙"))
