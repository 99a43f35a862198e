"""Progress of a worker's call, relayed to the client whose request it serves (DD-MCP-062).

The worker pool calls :func:`relay_progress` with values it has already checked
(:class:`~llmc_mcp.sandbox.relay.ProgressRelay`); this sends them as MCP progress notifications
against the request being served (:data:`~llmc_mcp.server.requests.current_request`). A client that
asked for no progress (no progress token) gets nothing: the SDK drops the notification.
"""

from __future__ import annotations

import logging

from llmc_mcp.server.requests import current_request
from llmc_mcp.server.resumable import waiting_request

log = logging.getLogger(__name__)


async def relay_progress(progress: float, total: float | None, message: str) -> None:
    # A resumable call outlives the request that started it: report to the retry now waiting on it.
    ctx = waiting_request() or current_request.get()
    if ctx is None:
        return
    try:
        await ctx.report_progress(progress, total, message)
    except Exception as exc:
        # A client gone mid-call: the work goes on (or is cancelled) whatever happened to one notification.
        log.debug("progress notification not sent: %s", type(exc).__name__)
