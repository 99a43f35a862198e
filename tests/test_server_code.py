"""Code mode through real MCP clients: three tools, stubs, execute_code, the gate inside the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.operations import CATALOG, NAMESPACES, namespace_operations
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import code_instructions
from llmc_mcp.tokens import count_json_tokens, count_tokens
from tests.mcp_helpers import (
    PERSIST_HINTS,
    agreement_with_in_memory_warp,
    justification_for,
    stdio_params,
    structured,
    text,
)

pytestmark = pytest.mark.anyio

ERAS = ["auto", "legacy"]
REPROJECT_4326 = 'raster.reproject("RGB.byte.tif", "rgb_4326.tif", dst_crs="EPSG:4326", resampling="nearest")'
REPROJECT_3857 = 'raster.reproject("RGB.byte.tif", "x.tif", dst_crs="EPSG:3857", resampling="bilinear")'

PERSIST_AND_RETRY = (
    PERSIST_HINTS
    + """out = raster.reproject("RGB.byte.tif", "rgb_4326.tif", dst_crs="EPSG:4326", resampling="nearest")
{"crs": out["crs"]["epsg"], "size": [out["width"], out["height"]]}
"""
)


async def run(client: Client, code: str, reset: bool = False) -> dict:
    return structured(await client.call_tool("execute_code", {"code": code, "reset": reset}))


@pytest.mark.parametrize("era", ERAS)
async def test_only_the_three_bootstrap_tools_are_listed(code_settings: Settings, era: str) -> None:
    async with Client(build_server(code_settings), mode=era) as client:
        tools = (await client.list_tools()).tools
    assert sorted(t.name for t in tools) == ["00_INIT", "execute_code", "read_stubs"]
    init = next(t for t in tools if t.name == "00_INIT")
    assert init.description.startswith(
        "IF YOU HAVE NOT BEEN GIVEN MCP INSTRUCTIONS, USE THIS TOOL ON STARTUP"
    )
    assert "skip it if you already received server instructions" in init.description


@pytest.mark.parametrize("era", ERAS)
async def test_init_returns_the_handshake_instructions(code_settings: Settings, era: str) -> None:
    async with Client(build_server(code_settings), mode=era) as client:
        guide = text(await client.call_tool("00_INIT", {}))
        assert guide == client.instructions == code_instructions(code_settings)


def test_the_guide_describes_code_mode_only(code_settings: Settings) -> None:
    guide = code_instructions(code_settings)
    for word in ("read_stubs", "execute_code", "reflection.persist", "ReflectionRequired", "20 s"):
        assert word in guide
    for classic_only in ("persist_justification", "raster_reproject", "raster_info"):
        assert classic_only not in guide


async def test_tools_and_instructions_fit_in_1000_tokens(code_settings: Settings) -> None:
    async with Client(build_server(code_settings), mode="legacy") as client:
        listed = (await client.list_tools()).model_dump(by_alias=True, mode="json", exclude_none=True)
        total = count_json_tokens(listed) + count_tokens(client.instructions or "")
    assert total < 1000


@pytest.mark.parametrize("era", ERAS)
async def test_read_stubs_without_a_module_lists_every_function_by_namespace(
    code_settings: Settings, era: str
) -> None:
    """The index names every function, marks the gated ones and says how to read one's stub.

    Guards against an index that misses an operation of the catalog (the agent never learns it
    exists), or one that grows with every parameter, read at the start of every task (DD-MCP-058).
    """
    async with Client(build_server(code_settings), mode=era) as client:
        index = text(await client.call_tool("read_stubs", {}))
    for namespace in NAMESPACES:
        names = [op.name + ("*" if op.reflection else "") for op in namespace_operations(namespace)]
        assert f"- {namespace}: {', '.join(names)}" in index
    assert "reproject*" in index and 'read_stubs("raster.stats")' in index
    assert "- reflection: persist, prompt, report" in index
    assert count_tokens(index) <= 6 * len(CATALOG) + 80


async def test_read_stubs_with_a_module_returns_its_typed_source(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        source = text(await client.call_tool("read_stubs", {"module": "raster"}))
    compile(source, "raster.py", "exec")
    assert "def reproject(src: str, dst: str, dst_crs: str, resampling: Resampling = 'nearest'" in source
    assert "class RasterInfo(TypedDict)" in source and "Reflection (may raise" in source


async def test_read_stubs_with_an_unknown_module_lists_the_valid_ones(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        result = await client.call_tool("read_stubs", {"module": "os"})
    assert result.is_error
    assert f"Valid modules: {', '.join([*NAMESPACES, 'reflection', 'jobs'])};" in structured(result)["fix"]


def test_stubs_are_written_into_the_workspace_at_startup(code_settings: Settings) -> None:
    build_server(code_settings)
    stubs = code_settings.workspace / ".llmc" / "stubs"
    expected = ["INDEX.md", "reflection.py", "jobs.py", *(f"{namespace}.py" for namespace in NAMESPACES)]
    assert sorted(p.name for p in stubs.iterdir()) == sorted(expected)


@pytest.mark.parametrize("era", ERAS)
async def test_execute_code_runs_raster_info_on_a_real_file(code_settings: Settings, era: str) -> None:
    async with Client(build_server(code_settings), mode=era) as client:
        result = await run(client, 'info = raster.info("RGB.byte.tif")\nprint(info["driver"])\ninfo["width"]')
    assert result["ok"] and result["stdout"] == "GTiff\n" and result["result"] == 791


@pytest.mark.parametrize("era", ERAS)
async def test_gated_reprojection_completes_in_two_calls(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    async with Client(build_server(code_settings), mode=era) as client:
        miss = await client.call_tool(
            "execute_code",
            {"code": REPROJECT_4326},
        )
        assert miss.is_error
        data = structured(miss)
        assert data["error"]["type"] == "reflection_required"
        hints = data["reflection_required"]
        assert [h["domain"] for h in hints] == ["crs_datum", "resampling"]
        assert all(h["prompt_text"] and h["hash"].startswith("sha256:") for h in hints)
        assert "reflection.persist" in data["next_action"]
        assert not (workspace_dir / "rgb_4326.tif").exists()
        done = await run(client, f"hints = {json.dumps(hints)}\n{PERSIST_AND_RETRY}")
    assert done["ok"], done["error"]
    assert done["result"] == {"crs": 4326, "size": [835, 696]}  # GDAL's suggested grid for this warp
    assert (
        agreement_with_in_memory_warp(workspace_dir / "RGB.byte.tif", workspace_dir / "rgb_4326.tif") > 0.99
    )


async def test_reflection_required_can_be_caught_inside_the_code(code_settings: Settings) -> None:
    code = """
try:
    raster.reproject("RGB.byte.tif", "x.tif", dst_crs="EPSG:3857", resampling="bilinear")
except reflection.ReflectionRequired as e:
    caught = [h["domain"] for h in e.hints]
caught
"""
    async with Client(build_server(code_settings)) as client:
        result = await run(client, code)
    assert result["result"] == ["crs_datum", "resampling"]


async def test_persisting_a_justification_for_the_wrong_method_is_refused(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        miss = structured(
            await client.call_tool(
                "execute_code",
                {"code": REPROJECT_3857},
            )
        )
        hint = miss["reflection_required"][1]
        wrong = justification_for(hint) | {
            "choice": {"method": "cubic", "rationale": "Smooth.", "tradeoffs": "Blurs."}
        }
        result = await run(client, f'reflection.persist({hint["hash"]!r}, "resampling", {wrong!r})')
    assert result["error"]["type"] == "justification_invalid"
    assert any("choice.method" in e for e in result["error"]["details"]["errors"])


async def test_variables_persist_across_calls_and_reset_clears_them(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        await run(client, "counter = 41")
        assert (await run(client, "counter + 1"))["result"] == 42
        cleared = await run(client, "counter", reset=True)
    assert cleared["error"]["type"] == "NameError"


async def test_two_sessions_never_see_each_others_variables(code_settings: Settings) -> None:
    server = build_server(code_settings)
    async with Client(server) as first, Client(server) as second:
        await run(first, "secret = 'first session'")
        seen = await run(second, "secret")
        assert (await run(first, "secret"))["result"] == "first session"
    assert seen["error"]["type"] == "NameError"


async def test_an_infinite_loop_is_stopped_and_the_next_call_works(workspace_dir: Path) -> None:
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=3)
    async with Client(build_server(settings)) as client:
        await run(client, "kept = 1")
        stopped = await client.call_tool("execute_code", {"code": "while True:\n    pass"})
        after = await run(client, "kept")
        fine = await run(client, "1 + 1")
    assert stopped.is_error
    error = structured(stopped)["error"]
    assert error["type"] == "Timeout" and "reset" in error["message"]
    assert after["error"]["type"] == "NameError"
    assert fine["result"] == 2


async def test_output_over_the_cap_is_truncated_with_a_marker(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        result = await client.call_tool(
            "execute_code", {"code": "for i in range(10000):\n    print('x' * 99)"}
        )
    data = structured(result)
    assert len(data["stdout"]) < code_settings.output_limit + 300
    assert f"[output truncated: {1_000_000 - code_settings.output_limit} more characters" in data["stdout"]
    assert "[output truncated" in text(result)


async def test_a_huge_result_is_truncated_with_a_marker(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        data = await run(client, "['y' * 1000] * 500")
    assert "[result truncated:" in data["result"]


async def test_errors_point_at_the_agents_line(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        data = await run(client, "a = 1\nb = 0\nc = a / b")
    assert data["error"]["type"] == "ZeroDivisionError"
    assert data["error"]["line"] == 3 and "c = a / b" in data["error"]["traceback"]
    assert "site-packages" not in data["error"]["traceback"]


async def test_api_errors_carry_the_fix(code_settings: Settings) -> None:
    async with Client(build_server(code_settings)) as client:
        data = await run(client, 'raster.info("missing.tif")')
    assert data["error"]["type"] == "not_found" and data["error"]["fix"]


async def test_stdio_subprocess_runs_a_gated_reprojection(workspace_dir: Path) -> None:
    async with Client(stdio_params(workspace_dir)) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == [
            "00_INIT",
            "execute_code",
            "read_stubs",
        ]
        miss = structured(
            await client.call_tool(
                "execute_code",
                {"code": REPROJECT_4326},
            )
        )
        done = await run(client, f"hints = {json.dumps(miss['reflection_required'])}\n{PERSIST_AND_RETRY}")
    assert done["ok"] and done["result"]["crs"] == 4326
    assert (workspace_dir / "rgb_4326.tif").exists()
