"""MCP resources, for hosts that fetch context themselves (DD-MCP-063).

Both faces serve:

- ``workspace://<name>``: the workspace's rasters. Listed with their one-line summaries, read as
  ``raster.info``'s JSON. Both come from the session's confined worker (``files.list`` and
  ``raster.info`` there), so the server never opens a raster and the path policy and hostile-file
  checks are the ones every operation gets.
- ``provenance://<name>``: the provenance record of an output, ``<name>.provenance.json`` as written
  beside it. Listed from the same ``files.list``; read by the server through the workspace's path
  policy (no link followed, nothing outside the workspace or in a server folder), at most
  :data:`MAX_RECORD_BYTES`, as bytes it does not parse.
- ``justification://<domain>/<hash>``: a stored justification, verified by the store (a forged or
  stale record is not served). The newest :data:`MAX_LISTED` are listed.

Code mode also serves ``stubs://<module>`` and ``stubs://index``: the stubs ``read_stubs`` returns.
Classic mode does not, because its agents do not write code against them.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError
from mcp.types import Resource
from mcp_types.jsonrpc import INVALID_PARAMS

from llmc_mcp.errors import LlmcError, NotFound, PathRefused
from llmc_mcp.reflection.store import Record
from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.server.runtime import Runtime
from llmc_mcp.server.sessions import run_in_session
from llmc_mcp.stubs.render import StubSet

MAX_LISTED = 200
"""Justifications listed at most (the newest); older ones are still read by their URI."""
MAX_RECORD_BYTES = 1024 * 1024
"""A provenance record larger than this is not served (ours are a few kilobytes)."""
RECORD_SUFFIX = ".provenance.json"
JSON = "application/json"

Lister = Callable[[Context], Awaitable[list[Resource]]]


def serve_resources(server: MCPServer, runtime: Runtime, pool: WorkerPool, stubs: StubSet | None) -> Lister:
    """Register the resources of this face; returns the lister of the ones that change as work is done."""
    if stubs is not None:
        _add_stubs(server, stubs)

    @server.resource(
        "workspace://{+name}",
        name="workspace raster",
        description="A raster of the workspace: raster.info as JSON (bands, CRS, grid, layout).",
        mime_type=JSON,
    )
    async def workspace_raster(name: str, ctx: Context) -> str:
        answer = await _in_worker(pool, ctx, "raster.info", {"path": name})
        return json.dumps(answer, ensure_ascii=False)

    @server.resource(
        "provenance://{+name}",
        name="provenance record",
        description="How an output was made, from what and why: its <name>.provenance.json record.",
        mime_type=JSON,
    )
    async def provenance_record(name: str) -> str:
        return await anyio.to_thread.run_sync(_read_record, runtime, name)

    @server.resource(
        "justification://{domain}/{key}",
        name="justification",
        description="A stored justification of a reflection decision (key: the hint's hash).",
        mime_type=JSON,
    )
    async def justification(domain: str, key: str) -> str:
        record = await anyio.to_thread.run_sync(_get_justification, runtime, domain, key)
        return json.dumps(_public(record), ensure_ascii=False)

    async def changing(ctx: Context) -> list[Resource]:
        listing = await _in_worker(pool, ctx, "files.list", {"pattern": "*"})
        records = await anyio.to_thread.run_sync(_newest, runtime.gate.store.records(), MAX_LISTED)
        return [*_file_resources(listing.get("files", [])), *map(_justification_resource, records)]

    return changing


def _add_stubs(server: MCPServer, stubs: StubSet) -> None:
    server.add_resource(
        TextResource(
            uri="stubs://index",
            name="stubs index",
            description="The functions by module (read_stubs() without a module).",
            mime_type="text/plain",
            text=stubs.index,
        )
    )
    for module, source in stubs.modules.items():
        server.add_resource(
            TextResource(
                uri=f"stubs://{module}",
                name=f"{module} stubs",
                description=f"The typed stub of the {module} module: signatures, result shapes, docs.",
                mime_type="text/x-python",
                text=source,
            )
        )


async def _in_worker(pool: WorkerPool, ctx: Context, operation: str, args: dict[str, Any]) -> Any:
    """Run one catalog operation in the session's worker; its refusal becomes an invalid-params error."""
    answer = await run_in_session(pool, ctx, lambda key, _fresh: pool.operate(key, operation, args))
    if not answer["ok"]:
        error = answer["error"]
        fix = f" Fix: {error['fix']}" if error.get("fix") else ""
        raise MCPError(INVALID_PARAMS, f"{error.get('message', 'refused')}{fix}")
    return answer["result"]


def _file_resources(files: Iterable[dict[str, Any]]) -> list[Resource]:
    resources = []
    for entry in files:
        raster = entry.get("raster")
        if raster is not None:
            resources.append(
                Resource(
                    uri=f"workspace://{entry['name']}",
                    name=entry["name"],
                    description=_summary(raster),
                    mime_type=JSON,
                    size=None,
                )
            )
        if entry.get("provenance"):
            resources.append(
                Resource(
                    uri=f"provenance://{entry['name']}",
                    name=entry["provenance"],
                    description=f"Provenance record of {entry['name']}: how it was made, from what, why.",
                    mime_type=JSON,
                )
            )
    return resources


def _summary(raster: dict[str, Any]) -> str:
    """``GTiff 791x718, 3 bands uint8, EPSG:32618``: the raster in one line."""
    bands = f"{raster['count']} band{'s' if raster['count'] != 1 else ''}"
    crs = raster.get("crs") or "no CRS"
    return f"{raster['driver']} {raster['width']}x{raster['height']}, {bands} {raster['dtype']}, {crs}"


def _read_record(runtime: Runtime, name: str) -> str:
    """The record beside ``name``, through the path policy, without following a link, bounded."""
    try:
        path = runtime.context.workspace.input_path(name + RECORD_SUFFIX, argument="uri")
    except (NotFound, PathRefused) as exc:
        raise _invalid(exc) from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise MCPError(INVALID_PARAMS, f"The record of '{name}' cannot be read ({exc.strerror}).") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MCPError(INVALID_PARAMS, f"The record of '{name}' is not a regular file.")
        data = handle.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise MCPError(
            INVALID_PARAMS,
            f"The record of '{name}' is over {MAX_RECORD_BYTES} bytes; not served.",
        )
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise MCPError(INVALID_PARAMS, f"The record of '{name}' is not UTF-8 text.") from None


def _get_justification(runtime: Runtime, domain: str, key: str) -> Record:
    try:
        record = runtime.gate.store.get(domain, key)
    except LlmcError as exc:
        raise _invalid(exc) from None
    if record is None:
        raise MCPError(INVALID_PARAMS, f"No justification {key} in domain {domain} is stored.")
    return record


def _newest(records: Iterable[Record], limit: int) -> list[Record]:
    return sorted(records, key=lambda r: r.created_at, reverse=True)[:limit]


def _justification_resource(record: Record) -> Resource:
    choice = record.justification.choice.method
    return Resource(
        uri=f"justification://{record.domain}/{record.key}",
        name=f"{record.domain}: {choice}"[:120],
        description=f"{record.operation}, {record.justification.confidence} confidence: "
        f"{record.justification.intent}"[:300],
        mime_type=JSON,
    )


def _public(record: Record) -> dict[str, Any]:
    """The record as stored, without its digest (the store's authentication, of no use to a reader)."""
    return record.model_dump(mode="json", exclude={"digest"})


def _invalid(exc: LlmcError) -> MCPError:
    return MCPError(INVALID_PARAMS, str(exc))  # the message with its fix
