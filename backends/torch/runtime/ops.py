"""Torch numeric forms of the registered activations ``U`` and operations ``O`` (paper,
Sec. 3.1), and the leaf values of a cell (``S_data``, ``S_prev``, ``S_aux``).

The built-ins (``sigmoid``, ``tanh``, ``one_minus``, ``identity``, ``relu``; ``add``, ``mul``)
have their torch forms here. An entry a user registers gives its own torch form as
``numeric["torch"]`` of its :mod:`cellgraph.cell.registry` entry; that form takes precedence.

Two structural facts let the search skip work (see :mod:`cellgraph.backends.torch.algorithm2.search`):

* an *affine* activation ``u(z) = a z + c`` (``identity``: ``a=1, c=0``; ``one_minus``:
  ``a=-1, c=1``) commutes with the first linear layer of the scoring network;
* the *additive* operation ``add`` makes ``W_1 (L_r c_i + R_r c_j + b_r)`` a sum of
  per-node projections ``(W_1 L_r) c_i + (W_1 R_r) c_j + W_1 b_r``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from cellgraph.cell import registry
from cellgraph.cell.constants import constant_vector
from cellgraph.cell.expr import Leaf, Role
from cellgraph.errors import CellGraphError

__all__ = ["activation", "op", "affine", "is_additive", "constant", "leaf_vector", "run_sequence"]

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "one_minus": lambda z: 1.0 - z,
    "identity": lambda z: z,
    "relu": torch.relu,
}
_AFFINE: dict[str, tuple[float, float]] = {"identity": (1.0, 0.0), "one_minus": (-1.0, 1.0)}
_OPS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"add": torch.add, "mul": torch.mul}
_ADDITIVE = frozenset({"add"})


def _torch_form(entry, kind: str):
    form = entry.numeric.get("torch")
    if form is not None:
        return form
    table = _ACTIVATIONS if kind == "activation" else _OPS
    if entry.name in table:
        return table[entry.name]
    raise CellGraphError(
        f"{kind} {entry.name!r} has no torch form: register it with numeric={{'torch': fn, ...}}"
    )


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """The entry-wise torch function of activation ``name``."""
    return _torch_form(registry.activation(name), "activation")


def op(name: str) -> Callable[[Tensor, Tensor], Tensor]:
    """The entry-wise torch function of binary operation ``name``."""
    return _torch_form(registry.op(name), "operation")


def affine(name: str) -> tuple[float, float] | None:
    """``(a, c)`` with ``u(z) = a z + c`` for a built-in affine activation, else ``None``."""
    if "torch" in registry.activation(name).numeric:
        return None
    return _AFFINE.get(name)


def is_additive(name: str) -> bool:
    """Whether operation ``name`` is the built-in ``o(a, b) = a + b``."""
    return "torch" not in registry.op(name).numeric and name in _ADDITIVE


def constant(leaf: Leaf, p: int, dtype: torch.dtype, device: torch.device | str | None = None) -> Tensor:
    """The ``(p,)`` value of a constant leaf (:func:`cellgraph.cell.constants.constant_vector`),
    made once per ``(leaf, p, dtype, device)``: a cell reads it at every step, and making it
    there would copy it from the host each time. Shared: never modify it in place."""
    return _constant(leaf, p, dtype, torch.device("cpu") if device is None else torch.device(device))


@functools.lru_cache(maxsize=256)
def _constant(leaf: Leaf, p: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.as_tensor(constant_vector(leaf, p), dtype=dtype, device=device)


def leaf_vector(leaf: Leaf, x: Tensor, prev: Mapping[str, Tensor], current: Mapping[str, Tensor]) -> Tensor:
    """The value of ``leaf`` in a cell at step ``t``: ``x`` (``(B, p)``) for the data leaf
    ``x``, ``prev[name]`` for a previous state, ``current[name]`` for a state made earlier in
    this step, the constant (``(p,)``, broadcast over the batch) for ``S_aux``."""
    if leaf.role is Role.CONST:
        return constant(leaf, x.shape[-1], x.dtype, x.device)
    if leaf.role is Role.DATA:
        if leaf.name != "x":
            raise CellGraphError(f"data leaf {leaf.name!r}: a recurrent cell has one data leaf, 'x'")
        return x
    table, what = (prev, "previous") if leaf.role is Role.PREV else (current, "this step's")
    if leaf.name not in table:
        raise CellGraphError(
            f"leaf {leaf.name!r} ({leaf.role.value}): no {what} state of that name "
            f"(have {sorted(table)})"
        )
    return table[leaf.name]


def run_sequence(step: Callable[[int, Tensor, Any], tuple[Any, Any]], input: Tensor, state: Any,
                 batch_first: bool = False) -> tuple[Tensor, Any, list[Any]]:
    """The recurrence of every sequence model: ``state, extra = step(t, x_t, state)`` for
    ``t = 0..T-1``, the output at ``t`` the last state of a tuple (``h`` of ``(c, h)``), a
    constant cell's ``(p,)`` state broadcast to ``x_t``.

    Shape:
        - input: ``(T, B, p)`` (``(B, T, p)`` with ``batch_first``).
        - output: ``(output (T, B, p) or (B, T, p), final state, [extra of each step])``.
    """
    if batch_first:
        input = input.transpose(0, 1)
    outputs, extras = [], []
    for t, x_t in enumerate(input):
        state, extra = step(t, x_t, state)
        out = state[-1] if isinstance(state, tuple) else state
        outputs.append(out if out.dim() == x_t.dim() else out.expand_as(x_t))
        extras.append(extra)
    return torch.stack(outputs, 1 if batch_first else 0), state, extras
