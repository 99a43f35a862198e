"""Build the MCP server for the configured mode."""

from __future__ import annotations

from pathlib import Path

from anyio.abc import Process
from mcp.server.mcpserver import MCPServer

from llmc_mcp.config import Settings
from llmc_mcp.server.runtime import Runtime


def build_server(
    settings: Settings, *, prestarted: Process | None = None, engine_credentials: Path | None = None
) -> MCPServer:
    """The server of ``settings.mode``; ``prestarted`` is a worker already started for its pool;
    ``engine_credentials``, the TLS credentials of the server's own Dask cluster."""
    extra = {"prestarted": prestarted, "engine_credentials": engine_credentials}
    if settings.mode == "classic":
        from llmc_mcp.server.classic import NEXT_ACTION, build_classic_server

        return build_classic_server(Runtime.create(settings, next_action=NEXT_ACTION, **extra))
    from llmc_mcp.server.code import NEXT_ACTION as CODE_NEXT_ACTION
    from llmc_mcp.server.code import build_code_server

    return build_code_server(Runtime.create(settings, next_action=CODE_NEXT_ACTION, **extra))
