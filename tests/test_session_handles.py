"""State for clients of the stateless protocol era: a session handle, returned and passed back.

The SDK's own ``Client`` over HTTP (2026-07-28 era) sends no ``mcp-session-id``, like openai-agents,
pydantic-ai 2.x and fastmcp 4 in their default mode. Without a handle each of their calls would run
in a fresh worker: variables gone and a worker start per call.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from llmc_mcp.server.sessions import UNCLAIMED_TTL
from tests.mcp_helpers import justification_for, structured, text
from tests.reliability.test_load import serve_http

pytestmark = pytest.mark.anyio


async def run(client: Client, code: str, session: str | None = None) -> tuple[dict[str, Any], str]:
    arguments: dict[str, Any] = {"code": code}
    if session is not None:
        arguments["session"] = session
    result = await client.call_tool("execute_code", arguments)
    return structured(result), text(result)


async def test_a_stateless_client_keeps_its_variables_by_passing_the_handle_back(workspace_dir: Path) -> None:
    """Guards against stateless-era clients losing every variable between calls."""
    server = build_server(Settings(mode="code", workspace=workspace_dir))
    async with serve_http(server) as web, Client(web.url) as client:
        first, shown = await run(client, "x = 41")
        handle = first["session"]["handle"]
        assert first["session"]["stateless"] and handle in shown, "the model cannot see the handle"
        second, shown = await run(client, "x + 1", handle)
    assert second["result"] == 42 and not second["session"]["fresh"]
    assert "[session" not in shown, "a call that kept its state should not carry a note"


async def test_a_call_without_the_handle_says_in_its_text_that_it_ran_without_state(
    workspace_dir: Path,
) -> None:
    """Guards against a silent fresh session: the model must read that its variables are not there."""
    server = build_server(Settings(mode="code", workspace=workspace_dir))
    async with serve_http(server) as web, Client(web.url) as client:
        await run(client, "x = 41")
        answer, shown = await run(client, "x")
    assert answer["error"]["type"] == "NameError"
    assert "new session" in shown and "without variables" in shown


async def test_a_made_up_or_foreign_looking_handle_never_reaches_another_session(workspace_dir: Path) -> None:
    """Guards against handles that can be guessed or mistyped into someone else's variables."""
    server = build_server(Settings(mode="code", workspace=workspace_dir))
    async with serve_http(server) as web, Client(web.url) as alice, Client(web.url) as mallory:
        first, _ = await run(alice, "secret = 'alice'")
        handle = first["session"]["handle"]
        guessed = handle[:-1] + ("A" if handle[-1] != "A" else "B")
        stolen, shown = await run(mallory, "secret", guessed)
        assert stolen["error"]["type"] == "NameError" and "unknown or expired" in shown
        assert stolen["session"]["handle"] not in (handle, guessed)
        mine, _ = await run(alice, "secret", handle)
    assert mine["result"] == "alice"


async def test_a_handle_that_never_comes_back_frees_its_worker_soon(workspace_dir: Path) -> None:
    """Guards against a client that ignores handles holding a worker per call until the idle TTL."""
    server = build_server(Settings(mode="code", workspace=workspace_dir, idle_ttl=900))
    pool: Any = server.pool  # type: ignore[attr-defined]
    async with serve_http(server) as web, Client(web.url) as client:
        kept, _ = await run(client, "x = 1")
        await run(client, "x", kept["session"]["handle"])
        for _ in range(3):
            await run(client, "1 + 1")
        assert pool.sessions == 4
        reaped = await pool.reap_idle(now=time.monotonic() + UNCLAIMED_TTL + 1)
        assert reaped == 3 and pool.sessions == 1, "the claimed session should stay, the others go"


async def test_a_stateless_client_completes_a_gated_reprojection(workspace_dir: Path) -> None:
    """The whole flow (miss; persist + retry in one call) through handles."""
    server = build_server(Settings(mode="code", workspace=workspace_dir))
    reproject = 'out = raster.reproject("RGB.byte.tif", "o.tif", dst_crs="EPSG:4326")'
    async with serve_http(server) as web, Client(web.url) as client:
        miss, _ = await run(client, reproject)
        handle = miss["session"]["handle"]
        persists = "\n".join(
            f"reflection.persist({h['hash']!r}, {h['domain']!r}, {justification_for(h)!r})"
            for h in miss["reflection_required"]
        )
        done, _ = await run(client, f"{persists}\n{reproject}\nout['width']", handle)
        again, _ = await run(client, "out['crs']['epsg']", handle)
    assert done["ok"] and done["result"] > 0, done
    assert again["result"] == 4326
