"""Which session a piece of trusted server work is done for.

The server serves many sessions at once, and some of its work is bounded or bound per session:
a reflection hint may only be persisted by the session it was issued to, CRS identification and
log lines have a per-session budget. The code doing that work sits several calls below the MCP
handler that knows the session, so the session travels in a context variable: set once where a
request enters (:mod:`llmc_mcp.server.sessions`, the worker pool), read where it matters. anyio
copies the context into worker threads, so it survives ``to_thread.run_sync``.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

current_session: ContextVar[str | None] = ContextVar("llmc_current_session", default=None)
"""The key of the session being served, or None for work done for nobody in particular (tests, CLI)."""

STATELESS_PREFIX = "stateless-"
"""Session keys of one-call workers for requests that carry no session (stateless HTTP)."""


HTTP_PREFIX = "http-"
"""Session keys of stateful HTTP sessions: ``http-`` and the client's ``mcp-session-id``."""
CONNECTION_PREFIX = "conn-"
"""Session keys of connections that enter the server's lifespan: stdio (one host per process)."""


JOB_MARK = "/job-"
"""Joins a session key and a job id into the key of the job's worker (:func:`job_session`). No session
key holds a ``/``: they are prefixes and hex, or a digest of a handle."""


def job_session(session: str, job_id: str) -> str:
    """The key of a job's worker: its own worker, its own writes in flight, its session's principal."""
    return f"{session}{JOB_MARK}{job_id.removeprefix('job-')}"


def principal(session: str | None) -> str | None:
    """Whom a reflection hint is bound to, in terms that mean the same in every server process.

    An HTTP session is its own principal: several clients share one HTTP server, and one must not
    answer (or overwrite) another's hints. A stdio server has exactly one client, the host that
    started it, which may start a new server per call (langchain-mcp-adapters does): all its
    connections are the one principal "local". A request of the stateless protocol era carries no
    identity, so its calls can only be tied together as "some stateless caller".
    """
    if session is None:
        return None
    # A job's worker acts for the session that started the job: the same hints, records and quotas.
    session = session.split(JOB_MARK, 1)[0]
    if session.startswith(STATELESS_PREFIX):
        return "stateless"
    if session.startswith(CONNECTION_PREFIX):
        return "local"
    if session.startswith(HTTP_PREFIX):
        # An mcp-session-id is a capability, and principals go into workspace files workers can read.
        return HTTP_PREFIX + hashlib.sha256(session.encode()).hexdigest()[:32]
    return session
