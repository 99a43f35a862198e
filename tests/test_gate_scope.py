"""A gate that means it: justifications are the agent's own, and unlock exactly what they argued for.

A scripted session through the real ``llmc-mcp`` command (stdio, code mode) and the classic face:
an agent that copies the prompt's example is refused with every problem listed at once, and a
justification of bilinear for a continuous raster does not unlock bilinear for a categorical one,
nor bilinear for building overviews.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from mcp import Client
from rasterio.transform import from_origin

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.reflection.specs import check_facts
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for, stdio_params, structured

EXAMPLE = re.compile(r"```json\n(?P<json>.*?)\n```", re.S)


def write_raster(path: Path, dtype: str, *, colormap: bool = False, thematic: bool = False) -> None:
    data = (np.arange(64 * 64).reshape(64, 64) % 5).astype(dtype)
    profile = {"driver": "GTiff", "width": 64, "height": 64, "count": 1, "dtype": dtype,
               "crs": "EPSG:32633", "transform": from_origin(500000, 4000000, 30, 30)}  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
        if colormap:
            dst.write_colormap(1, {i: (40 * i, 255 - 40 * i, 0, 255) for i in range(5)})
        if thematic:
            dst.update_tags(1, LAYER_TYPE="thematic")


@pytest.fixture
def rasters(workspace_dir: Path) -> Path:
    write_raster(workspace_dir / "dem.tif", "float32")
    write_raster(workspace_dir / "landcover.tif", "uint8", colormap=True)
    write_raster(workspace_dir / "classes.tif", "int16", thematic=True)
    write_raster(workspace_dir / "counts.tif", "uint16")
    return workspace_dir


@pytest.mark.parametrize(
    ("name", "kind"),
    [("dem.tif", "continuous"), ("landcover.tif", "categorical"), ("classes.tif", "categorical"),
     ("counts.tif", "integer")],
)  # fmt: skip
def test_the_kind_of_data_is_read_from_the_header(rasters: Path, name: str, kind: str) -> None:
    """Guards against scoping by a guess: colour tables and LAYER_TYPE=thematic mark categories, and
    integer codes without either are their own scope, never 'continuous' (land cover without a
    colour table would otherwise be unlocked by a DEM's bilinear justification)."""
    ctx = OperationContext(Workspace(rasters))
    convert = get_operation("raster.convert")
    assert convert.check(ctx, convert.validate({"src": name, "dst": "out.tif"})) == {"data": kind}


def test_facts_the_gate_does_not_know_are_refused() -> None:
    """Guards against a worker inventing a scope (e.g. 'data': 'anything') to dodge a decision."""
    for facts in ({"data": "anything"}, {"data": "continuous", "extra": "x"}, ["continuous"]):
        with pytest.raises(InvalidArgument):
            check_facts(facts)


async def execute(client: Client, code: str) -> dict[str, Any]:
    return structured(await client.call_tool("execute_code", {"code": code}))


def reproject(src: str, dst: str, method: str = "bilinear") -> str:
    return f'raster.reproject("{src}", "{dst}", dst_crs="EPSG:32633", resolution=60, resampling="{method}")'


def persist_code(hints: list[dict[str, Any]], make: Any = justification_for) -> str:
    return "\n".join(f"reflection.persist({h['hash']!r}, {h['domain']!r}, {make(h)!r})" for h in hints)


@pytest.mark.anyio
async def test_a_scripted_session_copying_the_example_is_refused_and_scopes_hold(rasters: Path) -> None:
    """The issue's scripted session, through the real llmc-mcp command over stdio in code mode."""
    async with Client(stdio_params(rasters)) as client:
        miss = await execute(client, reproject("dem.tif", "dem_60.tif"))
        (hint,) = [h for h in miss["reflection_required"] if h["domain"] == "resampling"]
        assert hint["prompt_args"] == {"method": "bilinear", "data": "continuous", "purpose": "warping"}
        copied = json.loads(EXAMPLE.search(hint["prompt_text"])["json"])
        refused = await execute(client, persist_code([hint], lambda h: copied))
        error = refused["error"]
        assert error["type"] == "justification_invalid", error
        problems = " ".join(error["details"]["errors"])
        for field in (
            "intent",
            "choice.rationale",
            "choice.tradeoffs",
            "alternatives.0.why_not",
            "confidence",
        ):
            assert field in problems, problems

        assert (
            await execute(
                client, f"{persist_code(miss['reflection_required'])}\n{reproject('dem.tif', 'dem_60.tif')}"
            )
        )["ok"]

        categorical = await execute(client, reproject("landcover.tif", "lc_60.tif"))
        asked = [(h["domain"], h["prompt_args"]) for h in categorical["reflection_required"]]
        assert asked == [("resampling", {"method": "bilinear", "data": "categorical", "purpose": "warping"})]

        overviews = await execute(
            client,
            'raster.convert("dem.tif", "dem_ovr.tif", overviews=[2], overview_resampling="bilinear")',
        )
        asked = [(h["domain"], h["prompt_args"]) for h in overviews["reflection_required"]]
        assert asked == [("resampling", {"method": "bilinear", "data": "continuous", "purpose": "overviews"})]


@pytest.mark.anyio
async def test_classic_mode_scopes_resampling_by_the_data_too(rasters: Path) -> None:
    """Guards against a face that forgot the facts: classic tools run the same binding."""
    server = build_server(Settings(mode="classic", workspace=rasters))
    arguments = {"dst_crs": "EPSG:32633", "resolution": [60, 60], "resampling": "bilinear"}
    async with Client(server) as client:
        miss = structured(
            await client.call_tool("raster_reproject", {"src": "dem.tif", "dst": "a.tif", **arguments})
        )
        for hint in miss["reflection_required"]:
            answer = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            assert not (await client.call_tool("persist_justification", answer)).is_error
        assert not (
            await client.call_tool("raster_reproject", {"src": "dem.tif", "dst": "a.tif", **arguments})
        ).is_error
        again = await client.call_tool(
            "raster_reproject", {"src": "landcover.tif", "dst": "b.tif", **arguments}
        )
    assert again.is_error
    (hint,) = structured(again)["reflection_required"]
    assert hint["prompt_args"]["data"] == "categorical"
