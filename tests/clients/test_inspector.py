"""The MCP Inspector CLI (@modelcontextprotocol/inspector) against llmc-mcp over stdio and streamable HTTP.

Each Inspector call is one client session. Over stdio it is also one server process; issued hints
are signed files of the workspace (DD-MCP-028), so a hint from one process is answered in the next
and the classic miss / persist / retry works across calls. Over HTTP one server serves every call,
but each call is a new ``mcp-session-id``, and a hint belongs to the session it was issued to
(DD-MCP-016): the code-mode retry asks again inside the retrying call, and classic mode shows the
refusal a neighbour session gets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rasterio

from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.server.instructions import classic_operations
from tests.mcp_helpers import justification_for

pytestmark = pytest.mark.clients

SOURCE = "RGB.byte.tif"  # copied into every workspace by the fixtures
CODE_TOOLS = ["00_INIT", "execute_code", "read_stubs"]
CLASSIC_TOOLS = sorted([*(op.tool_name for op in classic_operations()), "persist_justification"])
"""What a server that reads no URLs lists (the ``stac`` tools come with ``--allow-remote``)."""
PROMPTS = sorted(PromptLibrary.default().names())
REPROJECT_CALL = f'raster.reproject("{SOURCE}", "rgb_4326.tif", dst_crs="EPSG:4326", resampling="nearest")'
REPROJECT_ARGS = {"src": SOURCE, "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}


@dataclass
class Target:
    transport: str
    argv: list[str]
    workspace: Path


def _target(request: pytest.FixtureRequest, mode: str) -> Target:
    if request.param == "http":
        server = request.getfixturevalue("http_server")(mode)
        return Target("http", [server.url], server.workspace)
    workspace = request.getfixturevalue("workspace_dir")
    return Target("stdio", request.getfixturevalue("stdio_target")(workspace, mode), workspace)


@pytest.fixture(params=["stdio", "http"])
def code_target(request: pytest.FixtureRequest) -> Target:
    return _target(request, "code")


@pytest.fixture(params=["stdio", "http"])
def classic_target(request: pytest.FixtureRequest) -> Target:
    return _target(request, "classic")


@pytest.fixture
def call(inspector):
    """``call(target, method, *args, error=False)``: the Inspector's JSON result, checking its exit code."""

    def run(target: Target, method: str, *args: str, error: bool = False) -> dict[str, Any]:
        res = inspector(target.argv, "--method", method, *args)
        # The Inspector exits 5 when a tool returns isError:true, and still prints the result as JSON.
        assert res.returncode == (5 if error else 0), f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
        result = res.json["result"]
        if method == "tools/call":
            assert result.get("isError", False) is error, result
        return result

    return run


def tool(call, target: Target, name: str, args: dict[str, Any] | None = None, *, error: bool = False) -> dict:
    extra = ["--tool-args-json", json.dumps(args)] if args is not None else []
    return call(target, "tools/call", "--tool-name", name, *extra, error=error)


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def error_data(result: dict[str, Any]) -> dict[str, Any]:
    """A classic error's JSON: in its text, with no structuredContent (DD-MCP-078)."""
    assert result["isError"] is True and "structuredContent" not in result, result
    return json.loads(text(result))


def assert_reprojected(path: Path) -> None:
    with rasterio.open(path) as out:
        assert out.crs.to_epsg() == 4326 and out.count == 3


# --- code mode ---------------------------------------------------------------------------------


def test_tools_list_shows_the_three_bootstrap_tools(call, code_target: Target) -> None:
    tools = call(code_target, "tools/list")["tools"]
    assert sorted(t["name"] for t in tools) == CODE_TOOLS
    init = next(t for t in tools if t["name"] == "00_INIT")
    assert init["description"].startswith("IF YOU HAVE NOT BEEN GIVEN MCP INSTRUCTIONS")
    execute = next(t for t in tools if t["name"] == "execute_code")
    assert execute["inputSchema"]["required"] == ["code"]


def test_initialize_carries_the_instructions_and_00_init_returns_them(call, code_target: Target) -> None:
    init = call(code_target, "initialize")
    assert init["serverInfo"]["name"] == "llmc-mcp"
    assert init["protocolVersion"] == "2025-11-25"
    instructions = init["instructions"]
    assert instructions.startswith("llmc-mcp (code mode)")
    for word in ("read_stubs", "execute_code", "reflection.persist"):
        assert word in instructions
    assert text(tool(call, code_target, "00_INIT", {})) == instructions


def test_read_stubs_with_and_without_a_module(call, code_target: Target) -> None:
    index = text(tool(call, code_target, "read_stubs", {}))
    assert "reproject*" in index and "- reflection: persist, prompt, report" in index
    source = text(tool(call, code_target, "read_stubs", {"module": "raster"}))
    compile(source, "raster.py", "exec")
    assert "def reproject(src: str, dst: str, dst_crs: str" in source


def test_execute_code_runs_raster_info(call, code_target: Target) -> None:
    code = f'info = raster.info("{SOURCE}")\nprint(info["driver"])\n[info["width"], info["crs"]["epsg"]]'
    data = tool(call, code_target, "execute_code", {"code": code})["structuredContent"]
    assert data["ok"] and data["stdout"] == "GTiff\n" and data["result"] == [791, 32618]


def persist_and_retry(hints: list[dict[str, Any]], reissue: bool) -> str:
    """Python for ONE execute_code call: persist every hint, then the same reprojection again.

    With ``reissue`` (a new session: every Inspector call over HTTP) the reprojection is tried first,
    so the gate issues the hints to this session; the hashes are deterministic, so they are the ones
    received.
    """
    lines = []
    if reissue:
        lines += [
            "try:",
            f"    {REPROJECT_CALL}",
            "except reflection.ReflectionRequired as e:",
            '    reissued = [h["hash"] for h in e.hints]',
        ]
    lines += [f"reflection.persist({h['hash']!r}, {h['domain']!r}, {justification_for(h)!r})" for h in hints]
    lines += [
        f"out = {REPROJECT_CALL}",
        '{"crs": out["crs"]["epsg"], "reissued": ' + ("reissued" if reissue else "None") + "}",
    ]
    return "\n".join(lines)


def test_gated_reprojection_miss_then_persist_and_retry(call, code_target: Target) -> None:
    miss = tool(call, code_target, "execute_code", {"code": REPROJECT_CALL}, error=True)
    data = miss["structuredContent"]
    assert data["ok"] is False and data["error"]["type"] == "reflection_required"
    hints = data["reflection_required"]
    assert [h["domain"] for h in hints] == ["crs_datum", "resampling"]
    assert all(h["hash"].startswith("sha256:") and h["prompt_text"] for h in hints)
    assert "reflection.persist" in data["next_action"]
    assert '"reflection_required"' in text(miss)
    assert not (code_target.workspace / "rgb_4326.tif").exists()

    reissue = code_target.transport == "http"
    code = persist_and_retry(hints, reissue)
    done = tool(call, code_target, "execute_code", {"code": code})["structuredContent"]
    assert done["ok"], done["error"]
    assert done["result"]["crs"] == 4326
    if reissue:
        assert done["result"]["reissued"] == [h["hash"] for h in hints]
    assert_reprojected(code_target.workspace / "rgb_4326.tif")


# --- classic mode ------------------------------------------------------------------------------


def test_classic_tools_prompts_and_raster_info(call, classic_target: Target) -> None:
    tools = call(classic_target, "tools/list")["tools"]
    assert sorted(t["name"] for t in tools) == CLASSIC_TOOLS
    assert all(t["outputSchema"]["type"] == "object" for t in tools)
    assert sorted(p["name"] for p in call(classic_target, "prompts/list")["prompts"]) == PROMPTS
    info = tool(call, classic_target, "raster_info", {"path": SOURCE})["structuredContent"]
    assert (info["width"], info["height"], info["count"], info["crs"]["epsg"]) == (791, 718, 3, 32618)


def test_classic_gated_reprojection_across_inspector_calls_over_stdio(
    call, stdio_target, workspace_dir: Path
) -> None:
    """One server process per call, as langchain-mcp-adapters runs too: the hint outlives its process."""
    target = Target("stdio", stdio_target(workspace_dir, "classic"), workspace_dir)
    miss = error_data(tool(call, target, "raster_reproject", REPROJECT_ARGS, error=True))
    hints = miss["reflection_required"]
    assert [h["domain"] for h in hints] == ["crs_datum", "resampling"]
    assert "persist_justification" in miss["next_action"]
    for hint in hints:
        args = {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)}
        saved = tool(call, target, "persist_justification", args)
        assert saved["structuredContent"]["persisted"] is True
    done = tool(call, target, "raster_reproject", REPROJECT_ARGS)["structuredContent"]
    assert done["crs"]["epsg"] == 4326
    assert_reprojected(workspace_dir / "rgb_4326.tif")


def test_classic_over_http_a_hint_belongs_to_the_session_it_was_issued_to(call, http_server) -> None:
    """Each Inspector call is a new HTTP session: persisting another session's hint is refused."""
    server = http_server("classic")
    target = Target("http", [server.url], server.workspace)
    hint = error_data(tool(call, target, "raster_reproject", REPROJECT_ARGS, error=True))[
        "reflection_required"
    ][0]
    refused = error_data(
        tool(
            call,
            target,
            "persist_justification",
            {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)},
            error=True,
        )
    )
    assert refused["type"] == "not_found" and "Run the operation again" in refused["fix"]


def test_classic_wrong_enum_value_is_the_projects_invalid_argument(call, classic_target: Target) -> None:
    """Guards against the SDK's pydantic text (with its pydantic.dev link) reaching the Inspector."""
    bad = error_data(
        tool(call, classic_target, "raster_reproject", {**REPROJECT_ARGS, "resampling": "x"}, error=True)
    )
    assert bad["type"] == "invalid_argument" and "resampling must be one of 'nearest'" in bad["message"]
