"""Which session an MCP request belongs to, and the worker it runs in: the same for both faces.

Over stdio and in-process each connection enters the server's lifespan once, so the lifespan's
:class:`SessionScope` identifies the session. Over stateful HTTP the ``mcp-session-id`` header does,
and the session's worker is stopped when the HTTP session ends. A request over HTTP without a
session id (the stateless protocol era) has no session of its own: in code mode it gets a session
handle (:class:`SessionHandles`) it can pass back to keep its variables; a classic call, which
keeps nothing between calls, runs in a worker of its own stopped after the call (DD-MCP-022).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.server.resumable import ResumableCalls
from llmc_mcp.sessions import CONNECTION_PREFIX, HTTP_PREFIX, STATELESS_PREFIX


@dataclass
class SessionScope:
    """One per connection (lifespan entry); its key names the session's worker."""

    key: str = field(default_factory=lambda: CONNECTION_PREFIX + secrets.token_hex(8))


def worker_lifespan(pool: WorkerPool, calls: ResumableCalls) -> Callable[[MCPServer], Any]:
    """A lifespan that gives each connection a session and stops its worker when it ends.

    The first connection starts the pool's warm spare; when the last one ends, the spare stops too,
    so a server nobody is connected to holds no idle process. A call of the session paused for the
    client's answer (:mod:`.resumable`) is stopped first: it holds the session's worker.
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
                await calls.end_session(scope.key)
                await pool.close_session(scope.key)
                if connections == 0:
                    await pool.stop_spare()

    return lifespan


def session_key(ctx: Context) -> str | None:
    """The request's session key, or None for a request that carries no session (stateless HTTP)."""
    return session_key_of(ctx.request_context)


def session_key_of(request_context: Any) -> str | None:
    """:func:`session_key` of a low-level request context (what a method handler or middleware gets)."""
    headers = getattr(request_context.request, "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        return f"{HTTP_PREFIX}{session_id}" if session_id else None
    scope = request_context.lifespan_context
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
    if key.startswith(HTTP_PREFIX):
        # Stop the worker when the HTTP session ends (DELETE, idle timeout, shutdown).
        pool.close_with_connection(key, ctx)
    return await call(key, False)


HANDLE_PATTERN = re.compile(r"\As-[A-Za-z0-9_-]{32}\Z")
UNCLAIMED_TTL = 60.0
"""Seconds a handle session's worker lives if its handle never comes back (a client that ignores
handles would otherwise hold a worker per call until the idle TTL)."""


class SessionHandles:
    """Session handles for clients without a protocol session: unguessable, expiring, this server's.

    A handle is 192 random bits, known only to the client it was returned to; it names a worker
    session like an ``mcp-session-id`` does, so only a client that received it can reach its
    variables. It expires after the pool's idle TTL without use. The pool key is a digest of the
    handle, so logs (which show key prefixes) never show a usable handle.
    """

    def __init__(self, pool: WorkerPool):
        self._pool = pool
        self._last_used: dict[str, float] = {}

    def resolve(self, handle: str | None) -> tuple[str, str, str | None]:
        """``(handle, pool key, why it is new)`` for the handle a call passed (None: a new session)."""
        self._expire()
        if handle is not None and handle in self._last_used:
            self._last_used[handle] = time.monotonic()
            key = self._key(handle)
            self._pool.set_idle_ttl(key, None)
            return handle, key, None
        why = (
            "this call ran in a new session"
            if handle is None
            else "the session handle passed is unknown or expired, so this call ran in a new session"
        )
        fresh = "s-" + secrets.token_urlsafe(24)
        self._last_used[fresh] = time.monotonic()
        return fresh, self._key(fresh), why

    def known(self, handle: str) -> str | None:
        """The pool key of ``handle`` if it names a live session (nothing is created or renewed)."""
        return self._key(handle) if handle in self._last_used else None

    def unclaimed(self, handle: str) -> None:
        """The handle was just issued: its worker lives :data:`UNCLAIMED_TTL` unless it comes back."""
        self._pool.set_idle_ttl(self._key(handle), UNCLAIMED_TTL)

    def _expire(self) -> None:
        horizon = time.monotonic() - self._pool.settings.idle_ttl
        for handle in [h for h, used in self._last_used.items() if used < horizon]:
            del self._last_used[handle]

    @staticmethod
    def _key(handle: str) -> str:
        return "handle-" + hashlib.sha256(handle.encode()).hexdigest()[:32]


async def run_with_handle(
    pool: WorkerPool,
    handles: SessionHandles,
    ctx: Context,
    handle: str | None,
    call: Callable[[str, bool], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Code mode: the request's protocol session, else the session its handle names (or a new one).

    A handle, when passed, always wins: it is the client's explicit choice of session. Its result
    carries ``session.handle`` and, when the session is new, ``session.note`` saying why and how to
    keep state, which the face puts in the text the model reads.
    """
    if handle is None and session_key(ctx) is not None:
        return await run_in_session(pool, ctx, call)
    handle, key, why = handles.resolve(handle)
    result = await call(key, why is not None)
    session = result.get("session") or {}
    session.update({"handle": handle, "stateless": session_key(ctx) is None})
    if why is not None:
        handles.unclaimed(handle)
        session["note"] = (
            f"{why}, without variables from earlier calls. Pass session={handle!r} to your next "
            "execute_code calls to keep this session's variables."
        )
    result["session"] = session
    return result
