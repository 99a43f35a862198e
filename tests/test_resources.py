"""MCP resources through real clients: stubs, workspace rasters, provenance records, justifications.

RGB.byte.tif (tests/data) is 791 x 718 pixels, three uint8 bands in UTM zone 18N (EPSG:32618): its
one-line summary is worked out from that.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from mcp.shared.exceptions import MCPError

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from llmc_mcp.stubs.render import StubSet
from tests.mcp_helpers import justification_for, structured, text

pytestmark = pytest.mark.anyio

ERAS = ["auto", "legacy"]
MODES = ["classic", "code"]
RGB_SUMMARY = "GTiff 791x718, 3 bands uint8, EPSG:32618"


def server(mode: str, workspace: Path) -> Any:
    return build_server(Settings(mode=mode, workspace=workspace))  # type: ignore[arg-type]


async def listed(client: Client) -> dict[str, str | None]:
    """Every listed resource's URI with its description."""
    return {str(r.uri): r.description for r in (await client.list_resources()).resources}


async def read(client: Client, uri: str) -> str:
    (content,) = (await client.read_resource(uri)).contents
    return content.text  # type: ignore[union-attr]


def constant_raster(path: Path) -> None:
    profile = {
        "driver": "GTiff", "width": 4, "height": 3, "count": 1, "dtype": "float32", "crs": "EPSG:32618",
        "transform": Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0),
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.full((1, 3, 4), 3.0, dtype="float32"))


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("mode", MODES)
async def test_workspace_rasters_are_listed_with_their_one_line_summary(
    workspace_dir: Path, mode: str, era: str
) -> None:
    """Guards against a listing without the summary a host shows beside each raster, or one that
    lists a file GDAL cannot open (junk.tif: text, not a TIFF) as if it could be used."""
    (workspace_dir / "junk.tif").write_text("not a raster")
    async with Client(server(mode, workspace_dir), mode=era) as client:
        resources = await listed(client)
    assert resources["workspace://RGB.byte.tif"] == RGB_SUMMARY
    assert "workspace://junk.tif" not in resources


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("mode", MODES)
async def test_a_workspace_raster_reads_as_its_raster_info(workspace_dir: Path, mode: str, era: str) -> None:
    """Guards against a resource that says something other than raster.info does about the file."""
    async with Client(server(mode, workspace_dir), mode=era) as client:
        info = json.loads(await read(client, "workspace://RGB.byte.tif"))
    assert (info["width"], info["height"], info["count"], info["crs"]["epsg"]) == (791, 718, 3, 32618)


@pytest.mark.parametrize("era", ERAS)
async def test_code_mode_serves_every_stub_module_as_read_stubs_does(workspace_dir: Path, era: str) -> None:
    """Guards against stub resources that drift from what read_stubs returns."""
    stubs = StubSet.render()
    async with Client(server("code", workspace_dir), mode=era) as client:
        resources = await listed(client)
        assert {f"stubs://{m}" for m in stubs.modules} | {"stubs://index"} <= set(resources)
        assert await read(client, "stubs://raster") == text(
            await client.call_tool("read_stubs", {"module": "raster"})
        )
        assert await read(client, "stubs://index") == text(await client.call_tool("read_stubs", {}))


async def test_classic_mode_does_not_serve_stubs(workspace_dir: Path) -> None:
    """Guards against classic mode advertising code-mode stubs its agents cannot use."""
    async with Client(server("classic", workspace_dir), mode="legacy") as client:
        assert not [uri for uri in await listed(client) if uri.startswith("stubs://")]
        with pytest.raises(MCPError):
            await client.read_resource("stubs://raster")


async def test_code_mode_advertises_resources_and_no_prompts(workspace_dir: Path) -> None:
    """Guards against code mode advertising prompts it does not serve, or serving resources it does
    not advertise."""
    async with Client(server("code", workspace_dir), mode="legacy") as client:
        capabilities = client.session.initialize_result.capabilities
        assert capabilities.resources is not None and capabilities.prompts is None
        with pytest.raises(MCPError):
            await client.list_prompts()


@pytest.mark.parametrize("era", ERAS)
async def test_an_outputs_provenance_record_is_listed_and_read_byte_for_byte(
    workspace_dir: Path, era: str
) -> None:
    """Guards against a record listed apart from its output, or served other than as written."""
    constant_raster(workspace_dir / "three.tif")
    args = {"expression": "a * 2", "inputs": [{"name": "a", "path": "three.tif"}], "dst": "out/six.tif"}
    async with Client(server("classic", workspace_dir), mode=era) as client:
        assert not (await client.call_tool("raster_calc", args)).is_error
        resources = await listed(client)
        record = await read(client, "provenance://out/six.tif")
    assert "provenance://out/six.tif" in resources
    assert resources["workspace://out/six.tif"] == "GTiff 4x3, 1 band float32, EPSG:32618"
    assert record == (workspace_dir / "out" / "six.tif.provenance.json").read_text()
    assert "raster.calc" in record


@pytest.mark.parametrize("era", ERAS)
async def test_a_stored_justification_is_listed_and_read(workspace_dir: Path, era: str) -> None:
    """Guards against justifications that a host cannot find, or that read as something else than
    what the agent persisted."""
    reproject = {
        "src": "RGB.byte.tif",
        "dst": "rgb_4326.tif",
        "dst_crs": "EPSG:4326",
        "resampling": "nearest",
    }
    async with Client(server("classic", workspace_dir), mode=era) as client:
        hints = structured(await client.call_tool("raster_reproject", reproject))["reflection_required"]
        for hint in hints:
            answer = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            assert not (await client.call_tool("persist_justification", answer)).is_error
        resources = await listed(client)
        first = hints[0]
        record = json.loads(await read(client, f"justification://{first['domain']}/{first['hash']}"))
    for hint in hints:
        assert f"justification://{hint['domain']}/{hint['hash']}" in resources
    assert record["key"] == first["hash"] and record["domain"] == first["domain"]
    assert record["justification"]["intent"] == justification_for(first)["intent"]
    assert record["justification"]["choice"]["method"] == justification_for(first)["choice"]["method"]
    assert "digest" not in record


@pytest.mark.parametrize(
    "uri",
    [
        "workspace://../outside.tif",
        "workspace:///etc/hostname",
        "workspace://link.tif",
        "provenance://../outside.tif",
        "provenance://linked.tif",
        "justification://crs_datum/not-a-hash",
        "workspace://.llmc/outputs/ledger.lock",
    ],
)
@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_outside_the_workspace_is_refused(workspace_dir: Path, mode: str, uri: str) -> None:
    """Guards against resources as a way around the path policy: a parent folder, an absolute path,
    a link out of the workspace (to a raster or as a record), or a key that is not one."""
    outside = workspace_dir.parent / "outside.tif"
    constant_raster(outside)
    os.symlink(outside, workspace_dir / "link.tif")
    constant_raster(workspace_dir / "linked.tif")
    outside_record = workspace_dir.parent / "outside.tif.provenance.json"
    outside_record.write_text('{"secret": true}')
    os.symlink(outside_record, workspace_dir / "linked.tif.provenance.json")
    try:
        async with Client(server(mode, workspace_dir), mode="legacy") as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
    finally:  # not a record of ours: kept from the suite's check of every record it leaves
        (workspace_dir / "linked.tif.provenance.json").unlink()
        outside_record.unlink()
    assert "secret" not in refused.value.error.message
