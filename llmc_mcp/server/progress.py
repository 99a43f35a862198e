"""Progress of a worker's call, relayed to the client whose request it serves (DD-MCP-062).

The worker pool calls :func:`relay_progress` with values it has already checked
(:class:`~llmc_mcp.sandbox.relay.ProgressRelay`); this sends them as MCP progress notifications
against the request being served (:data:`~llmc_mcp.server.requests.current_request`). A client that
asked for no progress (no progress token) gets nothing: the SDK drops the notification.
"""

from __future__ import annotations

import logging
import weakref

from llmc_mcp.server.requests import current_request
from llmc_mcp.server.resumable import waiting_request

log = logging.getLogger(__name__)

_last_sent: dict[int, float] = {}
"""The last value sent to each request, by the identity of its context (forgotten with it). One
request can hear from two workers, agent code in its session's worker and each operation's work in an
engine worker (``--engine dask``), each counting from zero: a value not above the last one sent is
dropped, as the protocol requires."""


async def relay_progress(progress: float, total: float | None, message: str) -> None:
    # A resumable call outlives the request that started it: report to the retry now waiting on it.
    ctx = waiting_request() or current_request.get()
    if ctx is None or progress <= _last_sent.get(id(ctx), float("-inf")):
        return
    if id(ctx) not in _last_sent:
        weakref.finalize(ctx, _last_sent.pop, id(ctx), None)
    _last_sent[id(ctx)] = progress
    try:
        await ctx.report_progress(progress, total, message)
    except Exception as exc:
        # A client gone mid-call: the work goes on (or is cancelled) whatever happened to one notification.
        log.debug("progress notification not sent: %s", type(exc).__name__)
