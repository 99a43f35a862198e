"""Helpers for driving the server through real MCP clients."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import rasterio
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from rasterio.warp import Resampling, reproject

from llmc_mcp.config import Settings
from llmc_mcp.server.results import result_data
from llmc_mcp.state import STATE_DIR_ENV

JUSTIFICATION_TEMPLATE = {
    "intent": "A map overlay in geographic coordinates for a web viewer.",
    "alternatives": [{"method": "keep the source grid", "why_not": "The viewer needs the target grid."}],
    "choice": {"method": "", "rationale": "It matches the viewer.", "tradeoffs": "Pixels are resampled."},
    "confidence": "medium",
}


PERSIST_HINTS = """
for hint in hints:
    reflection.persist(hint["hash"], hint["domain"], {
        "intent": "An overlay in geographic coordinates for a web viewer.",
        "alternatives": [{"method": "keep the source grid", "why_not": "The viewer needs lat/lon."}],
        "choice": {"method": list(hint["prompt_args"].values())[0],
                   "rationale": "It matches the viewer.", "tradeoffs": "Every pixel is resampled."},
        "confidence": "medium"})
"""
"""Agent code persisting an answer to every hint in ``hints`` (the value each asks about is chosen)."""


def justification_for(hint: dict[str, Any]) -> dict[str, Any]:
    """A valid justification answering one hint (choice.method is the value asked about)."""
    data = json.loads(json.dumps(JUSTIFICATION_TEMPLATE))
    data["choice"]["method"] = next(iter(hint["prompt_args"].values()))
    return data


def structured(result: CallToolResult) -> dict[str, Any]:
    """A result's JSON: a success's structuredContent, or the text of a classic error (which has none).

    An execute_code error keeps its structuredContent (the tool declares no outputSchema); every
    other error carries its JSON in the text only (DD-MCP-078).
    """
    if result.structured_content is not None:
        return result.structured_content
    assert result.is_error, result.content
    return result_data(result)


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def stdio_params(workspace: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """The real ``llmc-mcp`` console script of this environment, as a subprocess.

    It gets the run's own folders (:func:`run_folders`).
    """
    command = str(Path(sys.executable).parent / "llmc-mcp")
    return StdioServerParameters(
        command=command,
        args=["serve", "--workspace", str(workspace), *args],
        env={"PATH": os.environ.get("PATH", ""), **run_folders(), **(env or {})},
    )


def run_folders() -> dict[str, str]:
    """The test run's state folder and kernel cache, for a server a test starts through a client.

    A client passes the server it starts only ``HOME``, ``PATH`` and a few more variables (the SDKs'
    default environment); without these, every such server would write its keys into the user's
    ``~/.local/state/llmc-mcp`` and warm a kernel cache in ``~/.cache``.
    """
    return {name: os.environ[name] for name in (STATE_DIR_ENV, "LLMC_MCP_KERNEL_CACHE") if name in os.environ}


def agreement_with_in_memory_warp(src: Path, out: Path) -> float:
    """Fraction of ``out``'s pixels equal to an independent whole-array nearest warp of ``src``.

    The reference is ``rasterio.warp.reproject`` onto ``out``'s own grid, computed in memory,
    so it checks the server's windowed warp and nodata handling (the grid itself is checked apart).
    """
    with rasterio.open(out) as warped, rasterio.open(src) as source:
        expected = np.zeros((warped.count, warped.height, warped.width), dtype=warped.dtypes[0])
        reproject(
            source.read(),
            expected,
            src_transform=source.transform,
            src_crs=source.crs,
            dst_transform=warped.transform,
            dst_crs=warped.crs,
            resampling=Resampling.nearest,
            src_nodata=source.nodata,
            dst_nodata=source.nodata,
        )
        return float((warped.read() == expected).mean())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Web(uvicorn.Server):
    url = ""


@asynccontextmanager
async def serve_http(server: MCPServer) -> AsyncIterator[Web]:
    """Serve an MCPServer over stateful streamable HTTP on loopback (``web.url``) until the block ends."""
    port = free_port()
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning",
        timeout_graceful_shutdown=5,
    )  # fmt: skip
    web = Web(config)
    web.url = f"http://127.0.0.1:{port}/mcp"
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        with anyio.fail_after(20):
            while not web.started:
                await anyio.sleep(0.05)
        try:
            yield web
        finally:
            web.should_exit = True


def code_settings(workspace: Path, **overrides: object) -> Settings:
    """Code-mode settings for ``workspace`` whose missing justifications come back as hints."""
    values: dict[str, object] = {"mode": "code", "workspace": workspace, "reflection": "hints"}
    values.update(overrides)
    return Settings(**values)


async def execute(client: Client, code: str) -> dict[str, Any]:
    """One ``execute_code`` call's structured answer."""
    return structured(await client.call_tool("execute_code", {"code": code}))
