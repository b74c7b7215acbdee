"""Progress of long steps (training epochs, validation, test, ``cellgraph eval``,
compilation) on stderr, in one form for all of them.

On a terminal :func:`progress` draws a ``tqdm`` bar that vanishes when the step ends.
Elsewhere (stderr piped through ``tee``, a log file, CI) a bar would be a stream of carriage
returns, so it writes plain lines instead::

    val: 1200/5000 sequences (24%), 41.3/s, ETA 1:32

one when another tenth of the step is done or :data:`EVERY_S` seconds have passed, whichever
comes first, and a closing ``done`` line; a step that ends within :data:`QUIET_S` seconds
prints nothing. The lines of :func:`progress` come from a heartbeat too, so that a step whose
units come slowly (a first batch that takes a minute) is never silent for more than
:data:`EVERY_S` seconds::

    structures, epoch 0: 0/1280 cells (0%), 0:30 so far

:func:`note` prints a one-off line (``compiling the search ...``).

Switching it off: ``with cellgraph.progress.disabled(): ...`` for code in this process and
thread (what ``cellgraph tune`` does around its trials), or ``CELLGRAPH_NO_PROGRESS=1`` in
the environment of a command.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Protocol, TextIO

__all__ = ["ENV", "EVERY_S", "QUIET_S", "BEAT_S", "Progress", "LineProgress", "progress", "note", "disabled", "enabled"]

#: Environment variable that switches progress off for a whole command when set to ``1``.
ENV = "CELLGRAPH_NO_PROGRESS"
#: Seconds between two plain progress lines at the most.
EVERY_S = 30.0
#: A step that ends within this many seconds prints no plain progress lines.
QUIET_S = 5.0
#: Seconds between two looks of the heartbeat at a :class:`LineProgress`.
BEAT_S = 1.0

_ON: ContextVar[bool] = ContextVar("cellgraph_progress", default=True)


class Progress(Protocol):
    """What :func:`progress` returns (tqdm's interface, the part cellgraph uses): ``disable``
    says whether nothing is shown (callers skip computing what only the bar would show)."""

    disable: bool

    def update(self, n: int = 1) -> Any: ...

    def set_postfix(self, **values: Any) -> Any: ...

    def close(self) -> Any: ...


class _Silent:
    """Progress that shows nothing."""

    disable = True

    def update(self, n: int = 1) -> None:
        """Nothing to show."""

    def set_postfix(self, **values: Any) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""


def _clock_text(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss``."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LineProgress:
    """Plain-line progress of ``total`` units (module docstring); ``clock`` is for tests."""

    disable = False

    def __init__(self, total: int, desc: str, stream: TextIO, unit: str = "steps",
                 clock: Callable[[], float] = time.monotonic, initial: int = 0) -> None:
        self.total, self.desc, self.stream, self.unit, self.clock = max(int(total), 0), desc, stream, unit, clock
        self.n = self.initial = int(initial)  # units done before this bar (a resumed epoch): not in the rate
        self.postfix, self.printed, self.closed = "", False, False
        self.start = self.last = clock()
        self.next_tenth = 1
        self._lock = threading.Lock()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done; write a line when one is due."""
        with self._lock:
            self.n += n
            now = self.clock()
            tenth = 10 * self.n // self.total if self.total else 0
            if tenth >= self.next_tenth or now - self.last >= EVERY_S:
                self._maybe_write(now)
            self.next_tenth = max(self.next_tenth, tenth + 1)

    def beat(self) -> None:
        """Write a line if none was written for :data:`EVERY_S` seconds (the heartbeat's call)."""
        with self._lock:
            now = self.clock()
            if not self.closed and now - self.last >= EVERY_S:
                self._maybe_write(now)

    def _maybe_write(self, now: float) -> None:
        if now - self.start >= QUIET_S and self.n < self.total:
            self._write(self._line(now))
            self.last = now

    def set_postfix(self, **values: Any) -> None:
        """Values shown at the end of every later line (``loss=3.2541``)."""
        self.postfix = ", ".join(f"{key} {value}" for key, value in values.items())

    def close(self) -> None:
        """The ``done`` line, where progress lines were written."""
        with self._lock:
            self.closed = True
        if self.printed:
            elapsed = self.clock() - self.start
            self._write(f"{self.desc}: done, {self.n - self.initial} {self.unit} in {_clock_text(elapsed)}"
                        + (f", {self.postfix}" if self.postfix else ""))

    def _line(self, now: float) -> str:
        elapsed = now - self.start
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        one = self.unit[:-1] if self.unit.endswith("s") else self.unit
        parts = [f"{self.desc}: {self.n}/{self.total} {self.unit} ({100 * self.n // max(self.total, 1)}%)"]
        if rate > 0:
            parts += [f"{rate:.3g}/s" if rate >= 1 else f"{1 / rate:.3g} s/{one}",
                      f"ETA {_clock_text((self.total - self.n) / rate)}"]
        else:
            parts.append(f"{_clock_text(elapsed)} so far")
        if self.postfix:
            parts.append(self.postfix)
        return ", ".join(parts)

    def _write(self, line: str) -> None:
        self.printed = True
        print(line, file=self.stream, flush=True)


def _heartbeat(bar: LineProgress) -> None:
    """Call ``bar.beat()`` every :data:`BEAT_S` seconds from a daemon thread until the bar is
    closed or gone, or its stream can no longer be written."""
    ref = weakref.ref(bar)
    del bar

    def run() -> None:
        while True:
            time.sleep(BEAT_S)
            bar = ref()
            if bar is None or bar.closed:
                return
            try:
                bar.beat()
            except (OSError, ValueError):  # the stream was closed under it
                return
            del bar

    threading.Thread(target=run, name="cellgraph-progress", daemon=True).start()


def enabled() -> bool:
    """Whether progress is shown here: not inside :func:`disabled`, nor with ``ENV=1``."""
    return _ON.get() and os.environ.get(ENV) != "1"


@contextmanager
def disabled() -> Iterator[None]:
    """No progress inside the block (this thread and context only; nothing leaks out)."""
    token = _ON.set(False)
    try:
        yield
    finally:
        _ON.reset(token)


def progress(total: int, desc: str, show: bool = True, unit: str = "steps",
             stream: TextIO | None = None, initial: int = 0) -> Progress:
    """Progress of a step of ``total`` units named ``desc``, ``initial`` of them done before
    (a resumed epoch; they count in the fraction, not in the speed): a bar on a terminal,
    plain lines elsewhere, nothing when ``show`` is false or progress is off (:func:`enabled`)."""
    if not (show and enabled()):
        return _Silent()
    stream = sys.stderr if stream is None else stream
    if stream.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=f" {unit}", leave=False, dynamic_ncols=True, file=stream,
                    initial=initial)
    bar = LineProgress(total, desc, stream, unit, initial=initial)
    _heartbeat(bar)
    return bar


def note(message: str, show: bool = True) -> None:
    """One line on stderr about a long step that has no count (where progress is on)."""
    if show and enabled():
        print(message, file=sys.stderr, flush=True)
