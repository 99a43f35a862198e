"""What one operation call did, gathered while it runs, for the record written beside its output.

:func:`capture` wraps an operation's checks and run (:func:`llmc_mcp.operations.invoke.invoke`, the
one path of both faces); :func:`note_input` is called where files are opened for reading
(:func:`~llmc_mcp.gdal.datasets.open_for_read` for rasters, the vector reader for zones and
masks), so the inputs a record lists are the files the operation actually read, not the parameters
that look like paths. A context variable keeps calls apart: each call in a worker runs in its own
context.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from llmc_mcp.remote.allowlist import looks_remote, redact

_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class InputSeen:
    """One file an operation read: its workspace-relative path, CRS (as WKT) and layer (vectors).

    The CRS is labelled (``EPSG:32618``) only when a record is written: identification costs PROJ
    time, and most calls that read a file write nothing."""

    path: str
    absolute: Path | None
    """None for a remote input (``path`` is then its redacted URL)."""
    crs_wkt: str | None
    layer: str | None = None
    remote: Any = None
    """A remote input's :class:`~llmc_mcp.remote.reader.RemoteSource`: its version and the ranges read."""


@dataclass
class Invocation:
    """One operation call as its provenance record will describe it."""

    operation: str
    parameters: dict[str, Any]
    justifications: list[dict[str, Any]]
    started_at: str = field(default_factory=lambda: utc_now())
    inputs: dict[str, InputSeen] = field(default_factory=dict)
    transformation: dict[str, Any] | None = None
    """The coordinate operation a warp applied to the data (pipeline, accuracy...), as it ran."""
    compute_engine: str = "local"
    """Where its pixel work ran: ``local`` (the worker, window by window) or ``dask`` (a cluster)."""


_current: ContextVar[Invocation | None] = ContextVar("llmc_invocation", default=None)


def utc_now() -> str:
    """RFC 3339 in UTC with microseconds and a ``Z``: the only form the manifest format accepts."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextmanager
def capture(
    operation: str,
    parameters: Mapping[str, Any],
    justifications: Sequence[Mapping[str, Any]] = (),
    *,
    compute_engine: str = "local",
) -> Iterator[Invocation]:
    """Collect what the call inside this block reads, for the records of what it writes."""
    invocation = Invocation(
        operation=operation,
        parameters=_redacted(to_jsonable_python(dict(parameters), fallback=str)),
        justifications=[dict(j) for j in justifications],
        compute_engine=compute_engine,
    )
    token = _current.set(invocation)
    try:
        yield invocation
    finally:
        _current.reset(token)


def _redacted(value: Any) -> Any:
    """``value`` with every URL's query values redacted: a signed URL's credentials are in them."""
    if isinstance(value, str):
        return redact(value) if looks_remote(value) else value
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def current() -> Invocation | None:
    """The call being run in this context, or None outside any operation (tests, the CLI)."""
    return _current.get()


def note_input(relative: str, absolute: Path, crs_wkt: str | None, layer: str | None = None) -> None:
    """Record that the running operation read ``relative``; a no-op outside an operation."""
    invocation = _current.get()
    if invocation is not None and relative not in invocation.inputs:
        invocation.inputs[relative] = InputSeen(relative, absolute, crs_wkt, layer)


def note_remote_input(shown: str, source: Any, crs_wkt: str | None) -> None:
    """Record that the running operation read the remote file ``shown`` (a redacted URL) through
    ``source``, whose version and ranges the record lists; a no-op outside an operation."""
    invocation = _current.get()
    if invocation is not None and shown not in invocation.inputs:
        invocation.inputs[shown] = InputSeen(shown, None, crs_wkt, remote=source)


def note_transformation(applied: Mapping[str, Any]) -> None:
    """Record the coordinate operation the running operation applied; a no-op outside an operation."""
    invocation = _current.get()
    if invocation is not None:
        invocation.transformation = dict(applied)


_digests: dict[tuple[str, int, int, int], str] = {}
_MAX_DIGESTS = 4096


def sha256_of(path: Path) -> str:
    """SHA-256 of a file's bytes, remembered per (path, size, mtime, inode) for this process.

    An input read by several calls of one session is hashed once; a file changed since has another
    mtime or size, so it is hashed again.
    """
    info = os.stat(path)
    key = (str(path), info.st_size, info.st_mtime_ns, info.st_ino)
    known = _digests.get(key)
    if known is not None:
        return known
    if len(_digests) >= _MAX_DIGESTS:
        _digests.clear()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    _digests[key] = digest.hexdigest()
    return _digests[key]
