"""The MCP request being served, for what the server does on its behalf while a worker runs it.

A worker's host requests are served in the task of the tool call that runs the worker
(:meth:`~llmc_mcp.sandbox.pool.WorkerPool.run`), so this context variable, set by each face's tool
handler, tells them which client request they belong to: the gate can ask that client's model
(sampling) or its user (elicitation) on the same request, and progress is reported against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from mcp.server.mcpserver import Context

current_request: ContextVar[Context | None] = ContextVar("llmc_current_request", default=None)


@contextmanager
def serving(ctx: Context) -> Iterator[None]:
    """Mark ``ctx`` as the request the host requests inside this block belong to."""
    token = current_request.set(ctx)
    try:
        yield
    finally:
        current_request.reset(token)


def can_sample(ctx: Context) -> bool:
    """Whether the client declared sampling (it will answer ``sampling/createMessage``)."""
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


def can_elicit(ctx: Context) -> bool:
    """Whether the client declared elicitation (it will show the user a form)."""
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def has_back_channel(ctx: Context) -> bool:
    """Whether the server may send the client a request mid-call (the handshake era, stateful)."""
    return bool(ctx.session.can_send_request)
