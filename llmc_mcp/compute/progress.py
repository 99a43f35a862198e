"""Progress of long operations, from their window loops to the MCP client (DD-MCP-062).

An operation's window loop runs through the engine (:meth:`~llmc_mcp.compute.engine.Engine.map`),
which calls :func:`report` once per piece it has finished, ``report(i + 1, n)``;
:func:`fraction_callback` serves a library's own callback. In a
worker, :mod:`llmc_mcp.sandbox.worker` installs a :class:`Tracker` per call that turns those counts
into the values of one MCP request's progress notifications and sends them to the server as one-way
channel messages (nothing waits for an answer, so progress never slows the work). Outside a worker
(in-process tests, the CLI) nothing is installed and :func:`report` does nothing.

The values a request sees always increase:

- a classic tool call runs one operation: the value is its fraction of the work, ``total`` is 1,
  and the last value is 1.0 (a second loop of the operation, raster.stats' second pass, sends no value
  below those already sent);
- an ``execute_code`` call may run several operations, and how many is not known up front: the value
  is the number of loops finished (one per operation, two for a two-pass one) plus the fraction of the
  current one (1.0 after the first, 2.0 after the second...), ``total`` is absent, and the message
  names the operation and its count (``raster.calc: 7 of 12``).

At most :data:`PER_SECOND` messages a second leave the worker; the value not yet sent when the call
ends is sent before its answer, so a client always sees the last one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PER_SECOND = 5
"""Progress messages a worker sends per second at most."""

Send = Callable[[float, float | None, str], None]
"""Sends one value: ``(progress, total, message)``."""


class Tracker:
    """One call's progress: the phases it ran, and what it last sent."""

    def __init__(self, send: Send, *, one_operation: bool, clock: Callable[[], float] = time.monotonic):
        self._send = send
        self._one_operation = one_operation
        self._clock = clock
        self._lock = threading.Lock()
        self._finished = 0
        """Phases (operations' loops) completed in this call."""
        self._what: str | None = None
        self._fraction = 0.0
        self._sent_value = 0.0
        self._sent_at = -float("inf")
        self._pending: tuple[float, str] | None = None

    def report(self, done: int, total: int, what: str) -> None:
        fraction = min(1.0, max(0.0, done / total)) if total > 0 else 1.0
        with self._lock:
            if self._what is not None and (what != self._what or fraction < self._fraction):
                # A new loop started before the last one reached its end (it failed, or it was the
                # first of an operation's two loops): the old one counts as finished.
                self._finished += 1
            self._what, self._fraction = what, fraction
            value = fraction if self._one_operation else self._finished + fraction
            message = f"{what}: {done} of {total}"
            if fraction >= 1.0:
                self._finished += 1
                self._what, self._fraction = None, 0.0
            if self._one_operation:
                value = max(value, self._sent_value)
            if value <= self._sent_value:
                return
            self._pending = (value, message)
            if self._clock() - self._sent_at >= 1.0 / PER_SECOND:
                self._flush()

    def close(self) -> None:
        """Send what the rate limit held back: the client sees where the call ended."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._pending is None:
            return
        value, message = self._pending
        self._pending = None
        self._sent_value, self._sent_at = value, self._clock()
        self._send(value, 1.0 if self._one_operation else None, message)


_tracker: Tracker | None = None


def report(done: int, total: int, what: str | None = None) -> None:
    """``done`` of ``total`` units (windows, rows) of ``what`` are finished (default: the operation's)."""
    tracker = _tracker
    if tracker is not None:
        tracker.report(done, total, what or _operation())


def _operation() -> str:
    from llmc_mcp.capture import current

    invocation = current()
    return invocation.operation if invocation is not None else "operation"


def fraction_callback(what: str | None = None) -> Callable[[float, str], None]:
    """A library's progress callback, called with a completed fraction (exactextract's ``progress=``)."""

    def callback(fraction: float, _status: str) -> None:
        report(round(fraction * 100), 100, what)

    return callback


@contextmanager
def tracking(send: Send, *, one_operation: bool) -> Iterator[Tracker]:
    """Track one call's progress with ``send`` while the block runs (the worker, per call)."""
    global _tracker
    tracker = _tracker = Tracker(send, one_operation=one_operation)
    try:
        yield tracker
    finally:
        _tracker = None
        tracker.close()
