"""clients/ts_client.mjs, a client on the official TypeScript SDK, against llmc-mcp.

One run connects (StdioClientTransport or StreamableHTTPClientTransport), lists the tools, reads
the instructions, and does a whole gated reprojection in one session; it prints a JSON summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import rasterio

from llmc_mcp.reflection.prompts import PromptLibrary
from tests.clients.conftest import CLIENTS, INSTALL_HINT, need, run_node

pytestmark = pytest.mark.clients

PROMPTS = sorted(PromptLibrary.default().names())

SCRIPT = CLIENTS / "ts_client.mjs"
DST = "rgb_4326_ts.tif"


@pytest.fixture(scope="module")
def ts_client(node: Path, node_env: dict[str, str]):
    sdk = CLIENTS / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    need(sdk.exists(), f"@modelcontextprotocol/sdk is not installed in clients/node_modules ({INSTALL_HINT})")

    def run(*args: str) -> dict[str, Any]:
        res = run_node(node, node_env, SCRIPT, ["--dst", DST, *args])
        assert res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-4000:]}"
        return res.json

    return run


@pytest.mark.parametrize("mode", ["code", "classic"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ts_sdk_client_runs_the_gated_reprojection(
    ts_client, http_server, server_command: Path, workspace_dir: Path, transport: str, mode: str
) -> None:
    flags = ["--classic"] if mode == "classic" else []
    if transport == "http":
        server = http_server(mode)
        workspace = server.workspace
        summary = ts_client("--transport", "http", "--url", server.url, *flags)
    else:
        workspace = workspace_dir
        summary = ts_client(
            "--transport", "stdio", "--command", str(server_command), "--workspace", str(workspace), *flags
        )

    assert (summary["transport"], summary["mode"]) == (transport, mode)
    assert summary["serverVersion"]["name"] == "llmc-mcp"
    assert summary["instructions"].startswith(f"llmc-mcp ({mode} mode)")
    assert summary["capabilities"]["tools"] is not None

    miss = summary["miss"]
    assert miss["isError"] is True and miss["promptTextsPresent"]
    assert miss["domains"] == ["crs_datum", "resampling"]
    assert all(h.startswith("sha256:") for h in miss["hashes"])

    if mode == "code":
        assert summary["tools"] == ["00_INIT", "execute_code", "read_stubs"]
        assert summary["init"]["isError"] is False and summary["initMatchesInstructions"] is True
        assert "reproject*" in summary["readStubs"]["index"]
        assert "def reproject(src: str, dst: str, dst_crs: str" in summary["readStubs"]["raster"]
        assert summary["info"]["ok"] and summary["info"]["result"] == 791
        assert miss["errorType"] == "reflection_required" and "reflection.persist" in miss["nextAction"]
        retry = summary["retry"]["structured"]
        assert retry["ok"] and retry["result"]["crs"] == 4326 and retry["result"]["persisted"] == 2
    else:
        assert "persist_justification" in summary["tools"] and "raster_reproject" in summary["tools"]
        assert sorted(summary["prompts"]) == PROMPTS
        assert '"nearest"' in summary["promptText"]
        assert summary["info"]["width"] == 791
        assert miss["errorType"] == "reflection_required" and "persist_justification" in miss["nextAction"]
        assert [p["domain"] for p in summary["persisted"]] == ["crs_datum", "resampling"]
        assert summary["retry"]["structured"]["crs"]["epsg"] == 4326
        # Every classic tool declares an outputSchema; the SDK validated each success against it
        # and took each isError result, which has no structuredContent (DD-MCP-078).
        assert summary["withOutputSchema"] == summary["tools"]
        assert len(summary["conforming"]) == 7
        assert miss["hasStructuredContent"] is False
        bad = summary["badEnum"]
        assert bad["isError"] and not bad["hasStructuredContent"]
        assert bad["error"]["type"] == "invalid_argument"
        assert bad["error"]["message"].startswith("raster_reproject: resampling must be one of 'nearest'")

    assert summary["output"] == {"path": DST, "epsg": 4326}
    output = workspace / DST
    assert output.exists()
    with rasterio.open(output) as out:
        assert out.crs.to_epsg() == 4326 and out.count == 3
