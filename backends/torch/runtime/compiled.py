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
from torch._dynamo import config as dynamo_config
from torch._functorch import config as functorch_config

from cellgraph.errors import CellGraphError
from cellgraph.experiment.config import COMPILE_MODES
from cellgraph.progress import note

__all__ = ["Compiled"]


class Compiled:
    """``fn`` (described as ``what`` in messages, its compilation expected to take
    ``duration``) through ``torch.compile(fn, dynamic=dynamic, mode=mode)``, traced and called
    with the settings ``dynamo_config`` of ``torch._dynamo.config`` (for this function only);
    :attr:`fell_back` says whether it runs eagerly after a failure. ``mode``: one of
    :data:`~cellgraph.experiment.config.COMPILE_MODES` (``reduce-overhead`` records CUDA
    graphs on a GPU)."""

    def __init__(self, fn: Callable[..., Any], what: str, dynamic: bool | None = True,
                 dynamo_config: dict[str, Any] | None = None, duration: str = "tens of seconds",
                 mode: str = "default") -> None:
        if mode not in COMPILE_MODES:
            raise CellGraphError(f"unknown compile mode {mode!r} (known: {', '.join(COMPILE_MODES)})")
        self.fn, self.what, self.dynamic, self.duration, self.mode = fn, what, dynamic, duration, mode
        self.dynamo_config = dict(dynamo_config or {})
        self._compiled: Callable[..., Any] | None = None
        self.fell_back = False

    def __call__(self, *args: Any) -> Any:
        if self.fell_back:
            return self.fn(*args)
        first = self._compiled is None
        start = time.perf_counter()
        try:
            if first:
                note(f"compiling {self.what} with torch.compile ({self.duration}, once per model)...")
                self._compiled = torch.compile(self.fn, dynamic=self.dynamic, mode=self.mode)
            with functorch_config.patch(force_non_lazy_backward_lowering=True), \
                    dynamo_config.patch(**self.dynamo_config), warnings.catch_warnings():
                # dynamo traces through functools.lru_cache and warns that the cache could hide
                # state; the project's cached functions are pure functions of their arguments
                warnings.filterwarnings("ignore", "Dynamo detected a call to a `functools.lru_cache`")
                out = self._compiled(*args)
        except CellGraphError:  # the function's own error (bad input), not the compiler's
            raise
        except Exception as err:  # noqa: BLE001 - dynamo/inductor errors: fall back
            self.fell_back = True
            warnings.warn(f"torch.compile of {self.what} failed, running eagerly: {type(err).__name__}: {err}",
                          RuntimeWarning, stacklevel=3)
            return self.fn(*args)
        if first:
            note(f"compiled {self.what} in {time.perf_counter() - start:.0f} s")
        return out
