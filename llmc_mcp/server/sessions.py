"""Which session an MCP request belongs to, and the worker it runs in: the same for both faces.

Over stdio and in-process each connection enters the server's lifespan once, so the lifespan's
:class:`SessionScope` identifies the session. Over stateful HTTP the ``mcp-session-id`` header does,
and the session's worker is stopped when the HTTP session ends. A request over HTTP without a
session id (the stateless protocol era) runs in a worker of its own that is stopped after the call,
so no two clients ever share a worker (DD-MCP-013).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.sessions import CONNECTION_PREFIX, STATELESS_PREFIX


@dataclass
class SessionScope:
    """One per connection (lifespan entry); its key names the session's worker."""

    key: str = field(default_factory=lambda: CONNECTION_PREFIX + secrets.token_hex(8))


def worker_lifespan(pool: WorkerPool) -> Callable[[MCPServer], Any]:
    """A lifespan that gives each connection a session and stops its worker when it ends.

    The first connection starts the pool's warm spare; when the last one ends, the spare stops too,
    so a server nobody is connected to holds no idle process.
    """
    connections = 0

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[SessionScope]:
        nonlocal connections
        scope = SessionScope()
        connections += 1
        pool.start_spare()
        try:
            yield scope
        finally:
            connections -= 1
            with anyio.CancelScope(shield=True):
                await pool.close_session(scope.key)
                if connections == 0:
                    await pool.stop_spare()

    return lifespan


def session_key(ctx: Context) -> str | None:
    """The request's session key, or None for a request that carries no session (stateless HTTP)."""
    headers = ctx.headers
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        return f"http-{session_id}" if session_id else None
    scope = ctx.request_context.lifespan_context
    return scope.key if isinstance(scope, SessionScope) else None


async def run_in_session(
    pool: WorkerPool, ctx: Context, call: Callable[[str, bool], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Run ``call(key, fresh)`` in the worker of the request's session.

    ``fresh`` is True for a stateless request, whose worker lives for this call only; its result
    says so (``session.stateless``).
    """
    key = session_key(ctx)
    if key is None:
        ephemeral = STATELESS_PREFIX + secrets.token_hex(8)
        try:
            result = await call(ephemeral, True)
        finally:
            await pool.close_session(ephemeral)
        result["session"] = {"fresh": True, "stateless": True}
        return result
    if key.startswith("http-"):
        # Stop the worker when the HTTP session ends (DELETE, idle timeout, shutdown).
        pool.close_with_connection(key, ctx)
    return await call(key, False)
