"""The server's HTTP client for remote rasters and catalogs: the only code in llmc-mcp that opens a
network connection for data.

Everything about a request is bounded or checked here, because the other end is hostile: the URL and
every redirect against the allowlist (redirects are followed here, one hop at a time, never by the
library), the time a request may take in all (a server that trickles bytes is cut off at the deadline,
not at each idle read), the bytes it may deliver (a declared length over what was asked is refused
before the body is read, and a body longer than declared is cut), the requests and bytes a call may
use (:class:`~llmc_mcp.remote.transport.CallBudget`), and the requests in flight for the whole server.
A file's version (ETag, else Last-Modified) is pinned at the first request, and every range after it
asks for that version, so one read never mixes two versions of a file.

Credentials are the operator's: S3 requests are signed from the server's own environment
(:mod:`.s3`); nothing an agent sends can add a header.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import urllib3

from llmc_mcp.remote.allowlist import Allowlist, RemoteUrl, redact
from llmc_mcp.remote.s3 import S3Signer
from llmc_mcp.remote.transport import (
    CallBudget,
    Method,
    RemoteError,
    RemoteFile,
    RemoteLimits,
    call_scope,
    current_budget,
)

MAX_REDIRECTS = 5
MAX_RANGE_BYTES = 16 << 20
"""One range request at most (larger reads are split): what a worker may ask for in one answer."""
MERGE_GAP = 16 << 10
"""Ranges closer than this are fetched as one request: a gap's bytes cost less than a round trip."""
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_USER_AGENT = "llmc-mcp (remote rasters; read-only)"


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    url: RemoteUrl


class Fetcher:
    """Allowlisted, bounded HTTP(S) and S3 reads for the whole server (one per server process)."""

    def __init__(self, allowlist: Allowlist, limits: RemoteLimits | None = None):
        self.allowlist = allowlist
        self.limits = limits or RemoteLimits()
        self._pool = urllib3.PoolManager(
            num_pools=16,
            maxsize=self.limits.parallel,
            block=False,
            retries=False,
            headers={"User-Agent": _USER_AGENT},
        )
        self._in_flight = threading.BoundedSemaphore(self.limits.parallel)
        self._ranges = ThreadPoolExecutor(self.limits.parallel, thread_name_prefix="llmc-remote")
        self._signer = S3Signer.from_environment()

    def close(self) -> None:
        self._ranges.shutdown(wait=False, cancel_futures=True)
        self._pool.clear()

    # --- the transport -------------------------------------------------------------------------

    def stat(self, url: str) -> RemoteFile:
        """Reach ``url`` with a one-byte range and say its size and version (HEAD is not used: signed
        URLs are signed for one method, GET)."""
        with self._budget():
            start = self.allowlist.check(url, "url")
            answer = self._request(start, "GET", {"Range": "bytes=0-0"}, max_bytes=1)
            shown = answer.url.redacted
            if answer.status != 206:
                what = {404: " (not found)", 403: " (forbidden)", 401: " (unauthorized)"}.get(
                    answer.status, ""
                )
                raise RemoteError(
                    f"'{shown}' answered HTTP {answer.status}{what}.",
                    fix="Check the URL; a private object needs the operator's credentials on the server.",
                )
            found = _CONTENT_RANGE.match(answer.headers.get("content-range", ""))
            if found is None or found.group(3) == "*":
                raise RemoteError(
                    f"'{shown}' gave no usable Content-Range to a range request.", fix=_FIX_SERVER
                )
            etag = answer.headers.get("etag")
            return RemoteFile(
                url=str(answer.url),
                size=int(found.group(3)),
                etag=etag if etag and not etag.startswith("W/") else None,
                last_modified=answer.headers.get("last-modified"),
            )

    def read(self, file: RemoteFile, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)`` range, near ones fetched together, several at once."""
        with self._budget() as budget:
            url = self.allowlist.check(file.url, "url")
            wanted = [_clip(file, offset, length) for offset, length in ranges]
            spans = _merge([w for w in wanted if w[1] > 0])
            context = _copy_budget(budget)
            fetched = dict(
                zip(
                    spans,
                    self._ranges.map(lambda span: context(self._range, url, file, span), spans),
                    strict=True,
                )
            )
            out = []
            for offset, length in wanted:
                if length == 0:
                    out.append(b"")
                    continue
                span = next(s for s in spans if s[0] <= offset and offset + length <= s[0] + s[1])
                data = fetched[span]
                out.append(data[offset - span[0] : offset - span[0] + length])
            return out

    def document(self, url: str, method: Method = "GET", body: Any = None) -> bytes:
        """A JSON document of at most the document limit (a STAC landing page, a search page)."""
        with self._budget():
            start = self.allowlist.check(url, "url")
            headers = {"Accept": "application/json, application/geo+json"}
            answer = self._request(start, method, headers, max_bytes=self.limits.document_bytes, body=body)
            if answer.status != 200:
                said = _excerpt(answer.body)
                raise RemoteError(
                    f"'{answer.url.redacted}' answered HTTP {answer.status}"
                    f"{f' ({said})' if said else ''}.",
                    fix="Check the URL (a STAC API root, a collection or an item) and the search terms.",
                )
            return answer.body

    # --- one request, redirects and retries ----------------------------------------------------

    def _range(self, url: RemoteUrl, file: RemoteFile, span: tuple[int, int]) -> bytes:
        offset, length = span
        headers = {"Range": f"bytes={offset}-{offset + length - 1}"}
        if file.etag:
            headers["If-Match"] = file.etag
        elif file.last_modified:
            headers["If-Unmodified-Since"] = file.last_modified
        answer = self._request(url, "GET", headers, max_bytes=length)
        shown = answer.url.redacted
        if answer.status == 412:
            raise RemoteError(
                f"'{shown}' changed while it was being read (its version is no longer {file.version}).",
                fix="Run the call again: it reads the new version from the start.",
            )
        found = _CONTENT_RANGE.match(answer.headers.get("content-range", ""))
        if answer.status != 206 or found is None:
            raise RemoteError(f"'{shown}' answered HTTP {answer.status} to a range request.", fix=_FIX_SERVER)
        first, last = int(found.group(1)), int(found.group(2))
        if found.group(3) not in ("*", str(file.size)):
            raise RemoteError(
                f"'{shown}' changed while it was being read (its size is no longer {file.size} bytes).",
                fix="Run the call again: it reads the new version from the start.",
            )
        if first != offset or last != offset + length - 1 or len(answer.body) != length:
            raise RemoteError(f"'{shown}' sent other bytes than the range asked for.", fix=_FIX_SERVER)
        etag = answer.headers.get("etag")
        if file.etag and etag and etag != file.etag:
            raise RemoteError(f"'{shown}' changed while it was being read.", fix="Run the call again.")
        return answer.body

    def _request(
        self, url: RemoteUrl, method: Method, headers: dict[str, str], *, max_bytes: int, body: Any = None
    ) -> _Answer:
        """One request, its redirects followed here (each checked), retried where a retry may help."""
        for _hop in range(MAX_REDIRECTS + 1):
            answer = self._attempts(url, method, headers, max_bytes, body)
            location = answer.headers.get("location")
            if answer.status not in (301, 302, 303, 307, 308) or not location:
                return answer
            target = urljoin(str(url), location)
            url = self.allowlist.check(target, "url", via=f"a redirect from '{url.redacted}'")
            if answer.status == 303:
                method, body = "GET", None
        raise RemoteError(
            f"'{url.redacted}' redirected more than {MAX_REDIRECTS} times.", fix="Pass the final URL."
        )

    def _attempts(
        self, url: RemoteUrl, method: Method, headers: dict[str, str], max_bytes: int, body: Any
    ) -> _Answer:
        delay = 0.25
        for attempt in range(self.limits.retries + 1):
            last = attempt == self.limits.retries
            try:
                answer = self._once(url, method, headers, max_bytes, body)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if last:
                    raise RemoteError(
                        f"'{url.redacted}' could not be read ({_reason(exc)}).",
                        fix="Check that the server is up and the URL right; the operator sets the "
                        "timeout and retries (--remote-limits).",
                    ) from None
            else:
                if answer.status not in _RETRY_STATUS or last:
                    return answer
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _once(
        self, url: RemoteUrl, method: Method, headers: dict[str, str], max_bytes: int, body: Any
    ) -> _Answer:
        budget = current_budget.get()
        assert budget is not None
        budget.request(url.redacted)
        target, extra = self._signer.prepare(url, method) if url.scheme == "s3" else (str(url), {})
        deadline = time.monotonic() + self.limits.timeout
        timeout = urllib3.Timeout(connect=min(self.limits.timeout, 10.0), read=self.limits.timeout)
        with self._in_flight:
            response = self._pool.request(
                method,
                target,
                headers={**headers, **extra},
                json=body,
                redirect=False,
                retries=False,
                preload_content=False,
                timeout=timeout,
            )
            complete = False
            try:
                answer_headers = {k.lower(): v for k, v in response.headers.items()}
                if "Range" in headers and response.status == 200:
                    raise RemoteError(
                        f"'{url.redacted}' does not answer range requests (it sends the whole file); it "
                        "cannot be read a window at a time.",
                        fix="Copy the file into the workspace by other means, or use a server that honours "
                        "HTTP range requests (any object store does).",
                    )
                too_long = _FIX_SERVER if "Range" in headers else _FIX_DOCUMENT
                declared = _declared_length(answer_headers)
                if declared is not None and declared > max_bytes and response.status in (200, 206):
                    raise RemoteError(
                        f"'{url.redacted}' declares a body of {declared} bytes where at most {max_bytes} "
                        "were asked for; it is not read.",
                        fix=too_long,
                    )
                data = bytearray()
                wanted = max_bytes if response.status in (200, 206) else 4096
                # read1: whatever one receive brings, so a trickle is measured against the deadline
                # between receives (stream() would wait for a whole chunk, a byte a second).
                while chunk := response.read1(64 << 10):
                    if time.monotonic() > deadline:
                        raise RemoteError(
                            f"'{url.redacted}' took longer than {self.limits.timeout:g} s to answer "
                            f"({len(data)} bytes by then).",
                            fix="Try again later, or ask the operator for a longer timeout "
                            "(--remote-limits timeout=S).",
                        )
                    data += chunk
                    if len(data) > wanted:
                        if response.status not in (200, 206):
                            break
                        raise RemoteError(
                            f"'{url.redacted}' sent more than the {max_bytes} bytes asked for.",
                            fix=too_long,
                        )
                    budget.receive(url.redacted, len(chunk))
                complete = True
            finally:
                # A connection left mid-body (a refusal, a trickle) is closed, never drained.
                if complete:
                    response.release_conn()
                else:
                    response.close()
        return _Answer(response.status, answer_headers, bytes(data), url)

    @contextlib.contextmanager
    def _budget(self) -> Iterator[CallBudget]:
        """The running call's budget (one made for this request alone outside any call)."""
        with call_scope() as budget:
            budget.limits = self.limits
            yield budget


_FIX_SERVER = "The remote server misbehaves for range reads; copy the file into the workspace by other means."
_FIX_DOCUMENT = (
    "Ask for less (a smaller limit, fewer items per page), or ask the operator for a larger "
    "document bound (--remote-limits document_kb=N)."
)


def _declared_length(headers: dict[str, str]) -> int | None:
    value = headers.get("content-length", "")
    return int(value) if value.isdigit() else None


def _excerpt(body: bytes, limit: int = 300) -> str:
    """What an error answer says, as one short line of printable text (the server is not trusted)."""
    text = body[: limit * 4].decode("utf-8", errors="replace")
    text = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(text.split())[:limit]


def _reason(exc: BaseException) -> str:
    text = type(exc).__name__
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        text = type(exc.reason).__name__
    return {"ReadTimeoutError": "timed out", "ConnectTimeoutError": "connection timed out"}.get(text, text)


def _clip(file: RemoteFile, offset: int, length: int) -> tuple[int, int]:
    if offset < 0 or length < 0:
        raise RemoteError("a negative range was asked for.")
    if offset >= file.size:
        return offset, 0
    return offset, min(length, file.size - offset)


def _merge(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans covering ``ranges``, near ones joined, none longer than :data:`MAX_RANGE_BYTES`
    unless one range alone is."""
    spans: list[list[int]] = []
    for offset, length in sorted(ranges):
        if spans:
            start, size = spans[-1]
            end = max(start + size, offset + length)
            if offset <= start + size + MERGE_GAP and end - start <= MAX_RANGE_BYTES:
                spans[-1][1] = end - start
                continue
        spans.append([offset, length])
    return [(s, n) for s, n in spans]


def _copy_budget(budget: CallBudget) -> Any:
    """Run a function in a pool thread with this call's budget (threads do not inherit context)."""

    def run(func: Any, *args: Any) -> Any:
        token = current_budget.set(budget)
        try:
            return func(*args)
        finally:
            current_budget.reset(token)

    return run


__all__ = ["Fetcher", "redact"]
