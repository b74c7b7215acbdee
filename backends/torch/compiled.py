"""A function through ``torch.compile`` for one model, with an eager fallback.

The function is compiled at its first call. Where compilation fails (at ``torch.compile`` or
at a compiled call), :class:`Compiled` warns once and runs the function eagerly from then on:
this model only, not every model of the process. The backward graph is compiled with the
forward one (not lazily at the first backward pass), so that a failure shows at the call,
which is then redone eagerly.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

import torch
from torch._functorch import config as functorch_config

from cellgraph.progress import note

__all__ = ["Compiled"]


class Compiled:
    """``fn`` (described as ``what`` in messages) through ``torch.compile(fn, dynamic=dynamic)``;
    :attr:`fell_back` says whether it runs eagerly after a failure."""

    def __init__(self, fn: Callable[..., Any], what: str, dynamic: bool = True) -> None:
        self.fn, self.what, self.dynamic = fn, what, dynamic
        self._compiled: Callable[..., Any] | None = None
        self.fell_back = False

    def __call__(self, *args: Any) -> Any:
        if self.fell_back:
            return self.fn(*args)
        first = self._compiled is None
        start = time.perf_counter()
        try:
            if first:
                note(f"compiling {self.what} with torch.compile (tens of seconds, once per model)...")
                self._compiled = torch.compile(self.fn, dynamic=self.dynamic)
            with functorch_config.patch(force_non_lazy_backward_lowering=True):
                out = self._compiled(*args)
        except Exception as err:  # noqa: BLE001 - dynamo/inductor errors: fall back
            self.fell_back = True
            warnings.warn(f"torch.compile of {self.what} failed, running eagerly: {type(err).__name__}: {err}",
                          RuntimeWarning, stacklevel=3)
            return self.fn(*args)
        if first:
            note(f"compiled {self.what} in {time.perf_counter() - start:.0f} s")
        return out
