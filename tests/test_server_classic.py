"""Classic mode through real MCP clients: a tool per operation, prompts, the gate as isError hints.

An error's JSON is its text (no structuredContent, DD-MCP-078): ``structured`` reads either.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import rasterio
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import agreement_with_in_memory_warp, justification_for, stdio_params, structured, text

pytestmark = pytest.mark.anyio

ERAS = ["auto", "legacy"]
OPERATION_TOOLS = [
    "crs_info",
    "crs_transform",
    "files_list",
    "files_remove",
    "hydrology_condition",
    "hydrology_flow_accumulation",
    "hydrology_flow_direction",
    "hydrology_streams",
    "hydrology_watershed",
    "provenance_lineage",
    "raster_align",
    "raster_area",
    "raster_calc",
    "raster_calc_stats",
    "raster_clip",
    "raster_convert",
    "raster_info",
    "raster_merge",
    "raster_preview",
    "raster_reclassify",
    "raster_reproject",
    "raster_sample",
    "raster_stats",
    "raster_zonal_stats",
    "terrain_aspect",
    "terrain_hillshade",
    "terrain_roughness",
    "terrain_slope",
    "workflow_list",
    "workflow_start",
    "workflow_submit",
]
REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}


@pytest.fixture(params=ERAS)
async def client(request: pytest.FixtureRequest, classic_settings: Settings):
    async with Client(build_server(classic_settings), mode=request.param) as c:
        yield c


async def test_one_tool_per_operation_plus_persist(client: Client) -> None:
    names = sorted(t.name for t in (await client.list_tools()).tools)
    assert names == sorted([*OPERATION_TOOLS, "persist_justification"])


async def test_read_only_tools_are_annotated_as_such(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["raster_info"].annotations.read_only_hint is True
    assert tools["raster_stats"].annotations.read_only_hint is True
    assert tools["raster_reproject"].annotations.read_only_hint is False


async def test_closed_choices_are_enums_in_the_schema(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    resampling = tools["raster_reproject"].input_schema["properties"]["resampling"]
    assert "bilinear" in resampling["enum"] and "lanczos" in resampling["enum"]
    assert tools["raster_reproject"].input_schema["required"] == ["src", "dst", "dst_crs"]


async def test_instructions_describe_classic_mode(client: Client) -> None:
    assert "persist_justification" in client.instructions and "raster_reproject" in client.instructions
    assert "execute_code" not in client.instructions


async def test_the_reflection_prompts_are_mcp_prompts(client: Client) -> None:
    prompts = {p.name for p in (await client.list_prompts()).prompts}
    assert prompts == {
        "justify_crs_selection",
        "justify_resampling_method",
        "justify_lossy_compression",
        "justify_overlap_aggregation",
        "justify_depression_handling",
        "justify_flow_routing",
        "justify_stream_threshold",
    }
    arguments = {"method": "bilinear", "data": "continuous", "purpose": "warping"}
    got = await client.get_prompt("justify_resampling_method", arguments)
    assert '"bilinear"' in got.messages[0].content.text


async def test_raster_info_returns_structured_facts(client: Client) -> None:
    info = structured(await client.call_tool("raster_info", {"path": "RGB.byte.tif"}))
    assert (info["width"], info["height"], info["count"], info["crs"]["epsg"]) == (791, 718, 3, 32618)


async def test_raster_stats_match_numpy(client: Client, workspace_dir: Path) -> None:
    result = structured(await client.call_tool("raster_stats", {"path": "shade.tif", "bands": [1]}))
    with rasterio.open(workspace_dir / "shade.tif") as src:
        data = src.read(1, masked=True)
    assert result["bands"][0]["mean"] == pytest.approx(float(data.mean()), rel=1e-9)
    assert result["bands"][0]["valid_count"] == int(data.count())


async def test_a_miss_is_an_error_with_its_hints_as_json_in_the_text(
    client: Client, workspace_dir: Path
) -> None:
    result = await client.call_tool("raster_reproject", REPROJECT)
    assert result.is_error and result.structured_content is None
    data = structured(result)
    assert [h["domain"] for h in data["reflection_required"]] == ["crs_datum", "resampling"]
    assert "persist_justification" in data["next_action"]
    assert '"reflection_required"' in text(result)
    assert not (workspace_dir / "rgb_4326.tif").exists()


async def test_miss_persist_retry_writes_a_correct_reprojection(client: Client, workspace_dir: Path) -> None:
    hints = structured(await client.call_tool("raster_reproject", REPROJECT))["reflection_required"]
    for hint in hints:
        persisted = await client.call_tool(
            "persist_justification",
            {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)},
        )
        assert not persisted.is_error, text(persisted)
    result = await client.call_tool("raster_reproject", REPROJECT)
    assert not result.is_error, text(result)
    info = structured(result)
    assert info["crs"]["epsg"] == 4326
    assert (
        agreement_with_in_memory_warp(workspace_dir / "RGB.byte.tif", workspace_dir / "rgb_4326.tif") > 0.99
    )


async def test_an_invalid_justification_gets_field_level_errors(client: Client) -> None:
    hint = structured(await client.call_tool("raster_reproject", REPROJECT))["reflection_required"][0]
    result = await client.call_tool(
        "persist_justification",
        {"hash": hint["hash"], "domain": hint["domain"], "justification": {"intent": 1}},
    )
    assert result.is_error
    errors = structured(result)["details"]["errors"]
    assert any(e.startswith("alternatives") for e in errors) and any(e.startswith("choice") for e in errors)


async def test_a_hash_never_issued_is_refused(client: Client) -> None:
    result = await client.call_tool(
        "persist_justification",
        {
            "hash": "sha256:" + "a" * 64,
            "domain": "resampling",
            "justification": justification_for({"prompt_args": {"method": "nearest"}}),
        },
    )
    assert result.is_error and structured(result)["type"] == "not_found"


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../outside.tif",
        "/vsicurl/http://example.com/x.tif",
        "/vsizip/a.zip/x.tif",
        "WMS:http://x",
        "MEM:::DATAPOINTER=0",
        "<VRTDataset/>",
        ".preflight/secret.key",
        "a\x00b.tif",
    ],
)
async def test_paths_outside_the_workspace_are_refused(client: Client, path: str) -> None:
    result = await client.call_tool("raster_info", {"path": path})
    assert result.is_error and structured(result)["type"] == "path_refused"


async def test_a_symlink_out_of_the_workspace_is_refused(client: Client, workspace_dir: Path) -> None:
    (workspace_dir / "escape.tif").symlink_to("/etc/hostname")
    result = await client.call_tool("raster_info", {"path": "escape.tif"})
    assert result.is_error and "outside the workspace" in structured(result)["message"]


@pytest.mark.parametrize("sidecar", ["RGB.byte.tif.aux.xml", "RGB.byte.tif.ovr", "RGB.byte.tfw"])
async def test_a_sidecar_linking_out_of_the_workspace_is_refused(
    client: Client, workspace_dir: Path, sidecar: str
) -> None:
    (workspace_dir / sidecar).symlink_to("/etc/hostname")
    result = await client.call_tool("raster_info", {"path": "RGB.byte.tif"})
    assert result.is_error and "sidecar" in structured(result)["message"]


async def test_a_corrupt_raster_gets_a_clear_error(client: Client) -> None:
    result = await client.call_tool("raster_stats", {"path": "corrupt.tif"})
    data = structured(result)
    assert result.is_error and data["type"] == "raster_error" and "corrupt.tif" in data["message"]


async def test_an_unknown_crs_is_refused_before_any_hint(client: Client, workspace_dir: Path) -> None:
    result = await client.call_tool("raster_reproject", {**REPROJECT, "dst_crs": "EPSG:999999"})
    assert result.is_error and structured(result)["type"] == "crs_error"


async def test_an_unknown_resampling_method_is_refused(client: Client) -> None:
    result = await client.call_tool("raster_reproject", {**REPROJECT, "resampling": "magic"})
    assert result.is_error and "nearest" in text(result)


async def test_conflicting_options_are_refused_and_nothing_is_written(
    client: Client, workspace_dir: Path
) -> None:
    result = await client.call_tool("raster_reproject", {**REPROJECT, "resolution": 0.01, "width": 100})
    assert result.is_error and structured(result)["type"] == "invalid_argument"
    assert not (workspace_dir / "rgb_4326.tif").exists()


async def test_stdio_subprocess_serves_classic_mode(workspace_dir: Path) -> None:
    async with Client(stdio_params(workspace_dir, "--mode", "classic")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        info = structured(await client.call_tool("raster_info", {"path": "RGB.byte.tif"}))
    assert "raster_reproject" in names and info["width"] == 791


async def test_the_mode_can_come_from_the_environment(workspace_dir: Path) -> None:
    params = stdio_params(workspace_dir, env={"LLMC_MCP_MODE": "classic"})
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "persist_justification" in names
