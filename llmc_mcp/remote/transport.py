"""What reading a remote raster needs from whoever holds the network, and the limits it works under.

Only the server process holds the network (DD-MCP-086): workers, where GDAL parses the bytes and agent
code runs, have none. A worker reads through a :class:`RemoteTransport` whose calls become requests
to the server; the server's transport is :class:`~llmc_mcp.remote.fetcher.Fetcher` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from llmc_mcp.errors import LlmcError


class RemoteError(LlmcError):
    """A remote read failed or was stopped at a bound: the message names the URL (redacted) and why."""

    kind = "remote_error"


@dataclass(frozen=True)
class RemoteFile:
    """A remote file as it was when first reached; every later range is read from this version."""

    url: str
    """In normal form, query string included (the server needs it to read; never shown as is)."""
    size: int
    etag: str | None
    last_modified: str | None

    @property
    def version(self) -> str | None:
        return self.etag or self.last_modified

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "size": self.size, "etag": self.etag, "last_modified": self.last_modified}

    @classmethod
    def from_dict(cls, data: Any) -> RemoteFile:
        if not isinstance(data, dict):
            raise RemoteError("malformed remote file description")
        size = data.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RemoteError("malformed remote file size")

        def text(name: str) -> str | None:
            value = data.get(name)
            return value[:512] if isinstance(value, str) else None

        return cls(str(data.get("url"))[:4096], size, text("etag"), text("last_modified"))


Method = Literal["GET", "POST"]


class RemoteTransport(Protocol):
    """Bounded, allowlisted reads; every URL is checked where the network is, whatever the caller said."""

    def stat(self, url: str) -> RemoteFile:
        """Reach ``url`` (following allowed redirects) and say its size and version."""
        ...

    def read(self, file: RemoteFile, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)`` range of ``file``, as of its version."""
        ...

    def document(self, url: str, method: Method = "GET", body: Any = None) -> bytes:
        """A small document (a STAC catalog page, an item): at most :attr:`RemoteLimits.document_bytes`."""
        ...


@dataclass(frozen=True)
class RemoteLimits:
    """The operator's bounds on remote reading (``--remote-limits``); a call is one tool or execute_code
    call, or one job."""

    timeout: float = 20.0
    """Seconds a request may take in all: connecting, waiting and receiving (a trickle stops here)."""
    retries: int = 2
    """Retries of a request that failed for a reason that may pass (connection, 5xx, 429)."""
    call_mb: int = 512
    """MiB one call may receive."""
    call_requests: int = 2000
    """Requests one call may make."""
    parallel: int = 4
    """Requests in flight at once, for the whole server."""
    document_kb: int = 4096
    """KiB one document (a STAC page) may have."""

    @property
    def call_bytes(self) -> int:
        return self.call_mb << 20

    @property
    def document_bytes(self) -> int:
        return self.document_kb << 10

    @classmethod
    def parse(cls, text: str) -> RemoteLimits:
        """``timeout=20,retries=2,call_mb=512,call_requests=2000,parallel=4,document_kb=4096``, any subset."""
        values: dict[str, Any] = {}
        names = {f: t for f, t in cls.__annotations__.items()}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep or key not in names:
                raise ValueError(f"unknown remote limit {key!r}; known: {', '.join(names)}")
            number = float(value) if names[key] == "float" else int(value)
            if (number <= 0 and key != "retries") or number < 0:
                raise ValueError(f"remote limit {key} must be positive")
            values[key] = number
        return cls(**values)


@dataclass
class CallBudget:
    """What one call has used of its :class:`RemoteLimits`; shared by every request the call makes.

    Made where a call starts (a worker request, a job), before anyone knows whether it will read a
    remote file; the fetcher fills in its limits at the first request."""

    limits: RemoteLimits = field(default_factory=RemoteLimits)
    bytes_used: int = 0
    requests_used: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def request(self, url: str) -> None:
        with self._lock:
            if self.requests_used >= self.limits.call_requests:
                raise RemoteError(
                    f"this call reached its limit of {self.limits.call_requests} remote requests "
                    f"(reading {url}).",
                    fix="Read a smaller window or fewer files per call, or run the work as a job; the "
                    "operator sets the limit (--remote-limits call_requests=N).",
                )
            self.requests_used += 1

    def receive(self, url: str, count: int) -> None:
        with self._lock:
            self.bytes_used += count
            if self.bytes_used > self.limits.call_bytes:
                raise RemoteError(
                    f"this call reached its limit of {self.limits.call_mb} MiB from remote files "
                    f"(reading {url}).",
                    fix="Read a smaller window (or an overview), or copy the file into the workspace "
                    "with raster.convert in its own call; the operator sets the limit "
                    "(--remote-limits call_mb=N).",
                )


current_budget: ContextVar[CallBudget | None] = ContextVar("llmc_remote_budget", default=None)
"""The budget of the call being served; set where a call starts (a worker request, a job, an
operation run in the server's own process)."""


@contextmanager
def call_scope(*, fresh: bool = False) -> Iterator[CallBudget]:
    """The running call's budget, or a new one for a call that starts here (always, with ``fresh``:
    a job counts apart from the call that started it)."""
    budget = current_budget.get()
    if budget is not None and not fresh:
        yield budget
        return
    budget = CallBudget()
    token = current_budget.set(budget)
    try:
        yield budget
    finally:
        current_budget.reset(token)
