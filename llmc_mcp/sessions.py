"""Which session a piece of trusted server work is done for.

The server serves many sessions at once, and some of its work is bounded or bound per session:
a reflection hint may only be persisted by the session it was issued to, CRS identification and
log lines have a per-session budget. The code doing that work sits several calls below the MCP
handler that knows the session, so the session travels in a context variable: set once where a
request enters (:mod:`llmc_mcp.server.sessions`, the worker pool), read where it matters. anyio
copies the context into worker threads, so it survives ``to_thread.run_sync``.
"""

from __future__ import annotations

from contextvars import ContextVar

current_session: ContextVar[str | None] = ContextVar("llmc_current_session", default=None)
"""The key of the session being served, or None for work done for nobody in particular (tests, CLI)."""

STATELESS_PREFIX = "stateless-"
"""Session keys of one-call workers for requests that carry no session (stateless HTTP)."""


def principal(session: str | None) -> str | None:
    """Whom a reflection hint is bound to: its session, or every stateless caller alike.

    A request of the stateless protocol era carries no identity, so two of its calls (the miss, then
    the persist) can only be tied together as "some stateless caller"; sessions never share hints.
    """
    if session is None:
        return None
    return "stateless" if session.startswith(STATELESS_PREFIX) else session
