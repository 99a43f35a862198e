"""What a job is, as stored and as shown: the one shape behind ``jobs.*`` and MCP tasks."""

from __future__ import annotations

import re
import secrets
from typing import Any, Literal

from pydantic import BaseModel, Field

JobStatus = Literal["working", "completed", "failed", "cancelled"]
"""``completed``: the work returned its result. ``failed``: it returned an error, hit a limit, or was
lost (the server stopped while it ran). ``cancelled``: stopped on request; nothing it wrote is kept."""
JobKind = Literal["operation", "code"]
"""An operation of the catalog (``jobs.start``, a classic tool's task) or agent code (an
``execute_code`` task, run in its session's worker so its variables persist)."""

TERMINAL: tuple[JobStatus, ...] = ("completed", "failed", "cancelled")
JOB_ID = re.compile(r"\Ajob-[A-Za-z0-9_-]{32}\Z")
"""A job id: 192 random bits. It is also what a client polls with, so it must not be guessable."""


def new_job_id() -> str:
    return "job-" + secrets.token_urlsafe(24)


class JobRecord(BaseModel):
    """One job, as the server keeps it (signed, in its state folder) and reads it back after a restart."""

    id: str
    principal: str
    """Who may see it: the principal of the session that started it (:func:`llmc_mcp.sessions.principal`)."""
    session: str
    """The key of the session that started it: its concurrency counts against that session."""
    kind: JobKind
    name: str
    """The operation's qualified name, or ``execute_code``."""
    status: JobStatus = "working"
    message: str = ""
    progress: float | None = Field(None, ge=0, le=1)
    created: float
    updated: float
    finished: float | None = None
    expires: float | None = None
    """When it and its result are deleted: ``--task-ttl`` after it ended (None while it runs)."""
    server: str
    """The server process that runs it (pid and start time): a record still working whose server is
    gone was lost, and is reported as failed."""
    answer: dict[str, Any] | None = None
    """What the worker answered (``ok``, ``result``, ``error``...), once it ended."""

    def public(self) -> dict[str, Any]:
        """What an agent sees of it: no principal, no session key, no raw answer."""
        shown: dict[str, Any] = {
            "id": self.id,
            "operation": self.name,
            "status": self.status,
            "message": self.message,
            "progress": self.progress,
            "created": self.created,
            "finished": self.finished,
            "expires": self.expires,
        }
        if self.status == "failed" and self.answer is not None and not self.answer.get("ok"):
            shown["error"] = _error_of(self.answer)
        return shown


def _error_of(answer: dict[str, Any]) -> dict[str, Any]:
    error = answer.get("error") or {}
    return {k: v for k, v in error.items() if k in ("type", "message", "fix", "details")}
