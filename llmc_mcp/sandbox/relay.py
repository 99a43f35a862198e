"""A call's progress notifications, from an untrusted worker to its client, checked on the way."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping

ProgressHandler = Callable[[float, float | None, str], Awaitable[None]]
"""Relays one progress value of the call being served to its client: ``(progress, total, message)``."""


PROGRESS_PER_SECOND = 20
"""Progress notifications relayed per call and second at most, whatever the worker sends."""


PROGRESS_MESSAGE_CHARS = 200


class ProgressRelay:
    """One call's progress notifications, checked before they reach its client.

    The worker is untrusted: a value that is not a finite number above the last one relayed, or that
    passes its total, is dropped, messages are cut to :data:`PROGRESS_MESSAGE_CHARS`, and at most
    :data:`PROGRESS_PER_SECOND` a second are relayed (a real worker sends five, see
    :mod:`llmc_mcp.compute.progress`), so a subverted worker cannot flood the client.
    """

    def __init__(self, handler: ProgressHandler | None, clock: Callable[[], float] = time.monotonic):
        self._handler = handler
        self._clock = clock
        self._last = 0.0
        self._window = (-math.inf, 0)

    async def relay(self, params: object) -> None:
        if self._handler is None or not isinstance(params, Mapping):
            return
        progress, total = params.get("progress"), params.get("total")
        if not _finite(progress) or progress <= self._last:
            return
        if total is not None and (not _finite(total) or progress > total):
            return
        start, count = self._window
        now = self._clock()
        if now - start >= 1.0:
            start, count = now, 0
        if count >= PROGRESS_PER_SECOND:
            return
        self._window = (start, count + 1)
        self._last = float(progress)
        message = str(params.get("message") or "")[:PROGRESS_MESSAGE_CHARS]
        await self._handler(float(progress), None if total is None else float(total), message)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
