"""Build the MCP server for the configured mode."""

from __future__ import annotations

from anyio.abc import Process
from mcp.server.mcpserver import MCPServer

from llmc_mcp.config import Settings
from llmc_mcp.server.runtime import Runtime


def build_server(settings: Settings, *, prestarted: Process | None = None) -> MCPServer:
    """The server of ``settings.mode``; ``prestarted`` is a worker already started for its pool."""
    if settings.mode == "classic":
        from llmc_mcp.server.classic import NEXT_ACTION, build_classic_server

        return build_classic_server(Runtime.create(settings, next_action=NEXT_ACTION, prestarted=prestarted))
    from llmc_mcp.server.code import NEXT_ACTION as CODE_NEXT_ACTION
    from llmc_mcp.server.code import build_code_server

    return build_code_server(Runtime.create(settings, next_action=CODE_NEXT_ACTION, prestarted=prestarted))
