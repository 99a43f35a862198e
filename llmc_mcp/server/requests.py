"""The MCP request being served, for what the server does on its behalf while a worker runs it.

A worker's host requests are served in the task of the tool call that runs the worker
(:meth:`~llmc_mcp.sandbox.pool.WorkerPool.run`), so this context variable, set by each face's tool
handler, tells them which client request they belong to: the gate can ask that client's model
(sampling) or its user (elicitation) on the same request, and progress is reported against it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import SamplingMessage, TextContent

from llmc_mcp.reflection.sampling import Ask

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


SAMPLING_MAX_TOKENS = 1500
"""Room for a justification (a few hundred tokens) and a model that explains before the JSON."""


def handshake_sampler(ctx: Context) -> Ask:
    """``ask`` over ``sampling/createMessage`` sent mid-call, related to ``ctx``'s request."""

    async def ask(system: str, text: str) -> tuple[str, str]:
        message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
        with warnings.catch_warnings():
            # Deprecated from the 2026-07-28 era on; on the handshake era it is the only way.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await ctx.session.create_message(
                [message],
                max_tokens=SAMPLING_MAX_TOKENS,
                system_prompt=system,
                related_request_id=ctx.request_id,
            )
        return text_of(result.content), result.model

    return ask


def text_of(content: object) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(getattr(block, "text", "") for block in blocks)
