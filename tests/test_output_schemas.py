"""Classic tools as typed functions: declared result schemas, conforming results, errors any client takes.

Hosts that run their own code (programmatic tool calling, pydantic-ai's CodeMode) type a tool's
result from its ``outputSchema``; without one it is ``Any``. Clients that validate results (the
TypeScript SDK, the Inspector) reject an ``isError`` result whose ``structuredContent`` does not
match that schema, so an error carries its JSON in the text only (DD-MCP-078). The client matrix
in ``tests/clients/`` checks the same shapes through each client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import rasterio
from mcp import Client
from mcp.types import CallToolResult
from pydantic import ValidationError
from rasterio.transform import from_origin

from llmc_mcp.config import Settings
from llmc_mcp.operations import CATALOG
from llmc_mcp.reflection.gate import PersistResult
from llmc_mcp.remote.access import configure
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import REMOTE_NAMESPACES
from tests.mcp_helpers import justification_for, text
from tests.remote_server import RangeServer, stac_api, stac_item

pytestmark = pytest.mark.anyio

CLASSIC = {op.tool_name: op for op in CATALOG if op.classic}
EAST, NORTH, CELL = 500_000.0, 5_000_360.0, 30.0
"""The test DEM's upper-left corner (UTM 32N) and cell size: 12 x 12 cells of 30 m."""


def write(path: Path, data: np.ndarray, nodata: float | None = None) -> None:
    profile = {
        "driver": "GTiff",
        "height": data.shape[0],
        "width": data.shape[1],
        "count": 1,
        "dtype": data.dtype.name,
        "crs": "EPSG:32632",
        "transform": from_origin(EAST, NORTH, CELL, CELL),
        "nodata": nodata,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)


@pytest.fixture
def terrain_dir(workspace_dir: Path) -> Path:
    """A DEM sloping down to the south-east corner with one pit, and two zones on its grid."""
    rows, cols = np.mgrid[0:12, 0:12]
    dem = (200.0 - 3.0 * rows - 2.0 * cols).astype("float32")
    dem[5, 5] -= 10.0
    write(workspace_dir / "dem.tif", dem, nodata=-9999.0)
    write(workspace_dir / "zones.tif", (cols >= 6).astype("int32") + 1, nodata=0)
    return workspace_dir


async def succeed(
    client: Client, tool: str, arguments: dict[str, Any], persisted: list[CallToolResult]
) -> CallToolResult:
    """Call ``tool``; answer every reflection hint it returns with a justification (the results go to
    ``persisted``), then call again."""
    result = await client.call_tool(tool, arguments)
    if result.is_error and '"reflection_required"' in text(result):
        for hint in json.loads(text(result))["reflection_required"]:
            answer = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            persisted.append(await client.call_tool("persist_justification", answer))
            assert not persisted[-1].is_error, text(persisted[-1])
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    return result


def one_call_per_tool(workflow_state: dict[str, Any], stac: str) -> list[tuple[str, dict[str, Any]]]:
    """Valid, cheap arguments for every classic tool, in an order where each input already exists
    (``stac``: the root of a loopback STAC API the server may read)."""
    centre = [EAST + 6.5 * CELL, NORTH - 6.5 * CELL]
    return [
        ("raster_info", {"path": "dem.tif"}),
        ("raster_stats", {"path": "dem.tif"}),
        ("raster_preview", {"path": "RGB.byte.tif", "max_size": 32}),
        ("raster_reproject", {"src": "dem.tif", "dst": "dem_4326.tif", "dst_crs": "EPSG:4326"}),
        ("raster_convert", {"src": "dem.tif", "dst": "dem_cog.tif", "driver": "COG"}),
        ("raster_area", {"path": "zones.tif"}),
        (
            "raster_calc",
            {"expression": "z * 2", "inputs": [{"name": "z", "path": "dem.tif"}], "dst": "c.tif"},
        ),
        ("raster_calc_stats", {"expression": "z * 2", "inputs": [{"name": "z", "path": "dem.tif"}]}),
        ("raster_sample", {"path": "dem.tif", "points": [centre]}),
        ("raster_align", {"src": "dem_4326.tif", "like": "dem.tif", "dst": "aligned.tif"}),
        ("raster_merge", {"sources": ["dem.tif", "c.tif"], "dst": "merged.tif"}),
        ("raster_reclassify", {"src": "dem.tif", "dst": "classes.tif", "rules": [{"max": 180, "to": 1}]}),
        (
            "raster_clip",
            {"src": "dem.tif", "dst": "clip.tif", "bounds": [EAST, NORTH - 180, EAST + 180, NORTH]},
        ),
        ("raster_zonal_stats", {"path": "dem.tif", "zones": "zones.tif"}),
        ("crs_info", {"crs": "EPSG:32632"}),
        ("crs_transform", {"points": [centre], "src_crs": "EPSG:32632", "dst_crs": "EPSG:4326"}),
        ("files_list", {}),
        ("provenance_lineage", {"path": "c.tif"}),
        ("files_remove", {"path": "c.tif"}),
        ("terrain_slope", {"dem": "dem.tif", "dst": "slope.tif"}),
        ("terrain_aspect", {"dem": "dem.tif", "dst": "aspect.tif"}),
        ("terrain_hillshade", {"dem": "dem.tif", "dst": "shade_out.tif"}),
        ("terrain_roughness", {"dem": "dem.tif", "dst": "tri.tif"}),
        ("hydrology_condition", {"dem": "dem.tif", "dst": "filled.tif"}),
        ("hydrology_flow_direction", {"dem": "filled.tif", "dst": "d8.tif"}),
        ("hydrology_flow_accumulation", {"flow_dir": "d8.tif", "dst": "acc.tif"}),
        ("hydrology_streams", {"accumulation": "acc.tif", "dst": "streams.tif", "threshold": 5}),
        ("hydrology_watershed", {"flow_dir": "d8.tif", "pour_points": [centre], "dst": "basin.tif"}),
        ("workflow_list", {}),
        ("workflow_start", {"name": "chain_of_thought", "inputs": [{"name": "problem", "value": "Why?"}]}),
        ("workflow_submit", workflow_state),
        ("stac_search", {"url": stac, "collections": ["demo"]}),
        ("stac_item", {"url": f"{stac}collections/demo/items/scene"}),
    ]


async def test_every_classic_tool_declares_its_result_model_as_output_schema(
    classic_settings: Settings,
) -> None:
    """Guards against tools whose results a host can only type as Any (0 of 31 declared one)."""
    async with Client(build_server(classic_settings)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    declared = {name: set((tool.output_schema or {}).get("properties", {})) for name, tool in tools.items()}
    expected = {
        name: set(op.result.model_json_schema(by_alias=True)["properties"])
        for name, op in CLASSIC.items()
        if op.namespace not in REMOTE_NAMESPACES  # served only when URLs may be read
    }
    expected["persist_justification"] = set(PersistResult.model_json_schema()["properties"])
    assert declared == expected


async def test_every_classic_tools_success_conforms_to_its_output_schema(terrain_dir: Path) -> None:
    """Guards against a declared schema that the results break (a host's typed code would then fail)."""
    checked: set[str] = set()
    with RangeServer() as catalog:
        catalog.files["cogs/scene.tif"] = (terrain_dir / "dem.tif").read_bytes()
        asset = {"href": catalog.url("cogs/scene.tif"), "type": "image/tiff", "roles": ["data"]}
        item = stac_item("scene", datetime="2024-06-01", bbox=(8, 45, 9, 46), epsg=32632, assets={"a": asset})
        root = stac_api(catalog, items=[item], root="apis/stac/", collection="demo")
        # No call may fail for time: a worker's first routing compiles its kernels (seconds, more
        # on a loaded host), and this test is about shapes.
        settings = Settings(
            mode="classic", workspace=terrain_dir, allow_remote=(catalog.base,), exec_timeout=600
        )
        try:
            await _every_tool_once(settings, root, checked)
        finally:
            configure(None)  # the in-process server allowed the catalog; the next test's must not


async def _every_tool_once(settings: Settings, stac: str, checked: set[str]) -> None:
    async with Client(build_server(settings)) as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        state: dict[str, Any] = {}
        for tool, arguments in one_call_per_tool(state, stac):
            persisted: list[CallToolResult] = []
            result = await succeed(client, tool, arguments, persisted)
            for name, done in [(tool, result), *(("persist_justification", p) for p in persisted)]:
                jsonschema.Draft202012Validator(schemas[name]).validate(done.structured_content)
                checked.add(name)
            if tool == "workflow_start":
                state.update(state_id=result.structured_content["state_id"], answer=["a part"])
    assert checked == set(schemas)


async def test_a_preview_declares_the_note_that_replaces_its_image(classic_settings: Settings) -> None:
    """Guards against typing the note the result holds as base64 PNG data (the image is a content block)."""
    async with Client(build_server(classic_settings)) as client:
        schema = {t.name: t.output_schema for t in (await client.list_tools()).tools}["raster_preview"]
        result = await client.call_tool("raster_preview", {"path": "RGB.byte.tif", "max_size": 32})
    field = schema["properties"]["png_base64"]
    assert "contentEncoding" not in field and field["type"] == "string"
    assert result.structured_content["png_base64"].startswith("[image/png")
    assert [block.type for block in result.content] == ["text", "image"]


async def failure(settings: Settings, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The error JSON and text of calling ``tool``: an ``isError`` result with no structuredContent,
    which the TypeScript SDK would reject, so its JSON is in the text."""
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error and result.structured_content is None
    return json.loads(text(result)), text(result)


REPROJECT = {"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}


async def test_an_error_has_its_json_in_the_text_and_no_structured_content(
    classic_settings: Settings,
) -> None:
    """Guards against an isError result with structuredContent, which the TypeScript SDK rejects."""
    error, _ = await failure(classic_settings, "raster_info", {"path": "../outside.tif"})
    assert error["type"] == "path_refused"


async def test_a_gate_miss_has_its_hints_in_the_text_and_no_structured_content(
    classic_settings: Settings,
) -> None:
    """Guards against the hints living only in structuredContent, which an error no longer carries."""
    data, _ = await failure(classic_settings, "raster_reproject", REPROJECT)
    assert [h["domain"] for h in data["reflection_required"]] == ["crs_datum", "resampling"]
    assert all(h["hash"].startswith("sha256:") for h in data["reflection_required"])


async def test_a_wrong_enum_value_is_an_invalid_argument_naming_tool_argument_and_values(
    classic_settings: Settings,
) -> None:
    """Guards against pydantic's raw text and its pydantic.dev link instead of the project's error."""
    error, raw = await failure(classic_settings, "raster_reproject", REPROJECT | {"resampling": "magic"})
    assert error["type"] == "invalid_argument" and error["fix"]
    assert error["message"].startswith("raster_reproject: resampling must be one of 'nearest', 'bilinear'")
    assert "pydantic.dev" not in raw


async def test_a_wrong_argument_name_is_an_invalid_argument_listing_the_tools_arguments(
    classic_settings: Settings,
) -> None:
    """Guards against a misspelt argument getting pydantic's 'Extra inputs are not permitted' and a link."""
    error, raw = await failure(classic_settings, "raster_info", {"path": "RGB.byte.tif", "include_wtk": True})
    assert error["type"] == "invalid_argument"
    assert error["message"] == (
        "raster_info: include_wtk is not an argument of this tool (its arguments: path, include_wkt, "
        "georeferencing)."
    )
    assert "pydantic.dev" not in raw


async def test_tools_serves_the_classic_tools_of_the_namespaces_named(workspace_dir: Path) -> None:
    """Guards against a host that asks for fewer tools still paying for the whole catalog on every turn."""
    settings = Settings(mode="classic", workspace=workspace_dir, tools="raster,crs")
    async with Client(build_server(settings)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        guide = client.instructions or ""
    expected = {name for name, op in CLASSIC.items() if op.namespace in ("raster", "crs")}
    assert names == expected | {"persist_justification"}
    # The guide names the tools served and no other (it, too, is sent on every turn).
    assert "in the namespaces raster, crs:" in guide
    assert all(f"- {name}:" in guide for name in expected)
    assert not [name for name in set(CLASSIC) - expected if name in guide]


def test_tools_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards against a flag that hosts configured by environment variables cannot set."""
    monkeypatch.setenv("LLMC_MCP_MODE", "classic")
    monkeypatch.setenv("LLMC_MCP_TOOLS", "raster, hydrology")
    assert Settings.from_env().tools == ("raster", "hydrology")


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"mode": "classic", "tools": "rasters"}, "unknown namespace(s) ['rasters']"),
        ({"mode": "code", "tools": "raster"}, "add --mode classic"),
    ],
)
def test_tools_refuses_what_it_cannot_serve(settings: dict[str, str], says: str) -> None:
    """Guards against a misspelt namespace (or code mode) silently serving every tool, or none."""
    with pytest.raises(ValidationError) as raised:
        Settings(**settings)
    assert says in str(raised.value)
