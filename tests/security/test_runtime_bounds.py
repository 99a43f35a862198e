"""Runtime bounds (the third review, issue 20 section 7): clients that decline, calls that wait,
memory, and grid files named in a workspace file's CRS.

- A host of the 2026-07-28 era that declines or fails the server's sampling request makes its SDK
  end the agent's call; the server is never told. The session's next call must find the worker free
  (not held for hints x ``--sampling-timeout``), and the next gated call must come back as hints that
  say why the host's model was not asked, instead of the question the host refuses every time.
- A worker's caches are sized from its memory budget (``--memory-mb``), and running out of memory is
  its own error kind, naming the limit and the flag.
- The rule that refuses grid files named by path in CRS text an agent passes holds for the CRS text
  of a zone file's ``.prj`` and of a raster's ``.aux.xml`` too: PROJ opens such a grid when it
  transforms, even one in ``.llmc/``.
"""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import rasterio
import shapely
from mcp import Client
from mcp.types import CreateMessageResult, ErrorData
from rasterio.transform import from_origin

from llmc_mcp import crs_text
from llmc_mcp.config import Settings
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import CrsError
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations import OperationContext
from llmc_mcp.sandbox.bindings import sandbox_error
from llmc_mcp.sandbox.pool import DEMOTE_AFTER, WorkerPool
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured
from tests.reliability.test_load import _group_nice, _nice, _no_requests, busy_for, code_settings, serve_http
from tests.security.test_hostile_vectors import UTM, read, write_vector

REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}


class Refusing:
    """A host whose sampler will not sample: it answers an error, or raises."""

    def __init__(self, how: str):
        self.how = how
        self.asked = 0

    async def __call__(self, ctx: Any, params: Any) -> CreateMessageResult | ErrorData:
        self.asked += 1
        if self.how == "raises":
            raise RuntimeError("the host's model is unavailable")
        return ErrorData(code=-1, message="User rejected sampling")


async def refused_call(client: Client) -> None:
    """The gated call whose question the host refuses: in this era the SDK ends it with the error."""
    with pytest.raises(Exception):  # noqa: B017  # MCPError when declined; the sampler's own when raised
        await client.call_tool("raster_reproject", REPROJECT)


# ------------------------------------------------------------------------------- declined sampling


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["declines", "raises"])
async def test_a_call_after_a_refused_question_finds_the_sessions_worker_free(
    classic_settings: Settings, how: str
) -> None:
    """Guards against the paused call holding the session's worker until its questions time out:
    with two hints and 120 s each, an ungated crs_info after the refusal waited 240 s."""
    settings = classic_settings.model_copy(update={"sampling_timeout": 600.0})
    async with Client(build_server(settings), mode="auto", sampling_callback=Refusing(how)) as client:
        await refused_call(client)
        with anyio.fail_after(60):  # a guard against the 1200 s wait, not a measurement
            info = structured(await client.call_tool("crs_info", {"crs": "EPSG:4326"}))
    assert info["epsg"] == 4326


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["declines", "raises"])
async def test_the_gated_call_made_again_gets_hints_saying_why_the_model_was_not_asked(
    classic_settings: Settings, workspace_dir: Path, how: str
) -> None:
    """Guards against asking a host that refused again on every retry, so the agent never gets past
    the gate: the call made again is the hint flow, with the reason, and the host is not asked."""
    host = Refusing(how)
    async with Client(build_server(classic_settings), mode="auto", sampling_callback=host) as client:
        await refused_call(client)
        asked = host.asked
        again = await client.call_tool("raster_reproject", REPROJECT)
    answer = structured(again)
    assert again.is_error and answer["type"] == "reflection_required"
    assert {h["domain"] for h in answer["reflection_required"]} == {"crs_datum", "resampling"}
    for hint in answer["reflection_required"]:
        assert "did not answer the server's last sampling question" in hint["fallback"]
    assert host.asked == asked
    assert not (workspace_dir / "rgb_4326.tif").exists()


# ------------------------------------------------------------------------------------------ memory


def _large_float32(path: Path, side: int) -> None:
    """A ``side``² float32 raster (DEFLATE, 512-cell tiles): small on disk, ``4 side²`` bytes decoded."""
    profile = {"driver": "GTiff", "width": side, "height": side, "count": 1, "dtype": "float32",
               "crs": "EPSG:32633", "transform": from_origin(500_000, 6_000_000, 10, 10), "tiled": True,
               "blockxsize": 512, "blockysize": 512, "compress": "deflate"}  # fmt: skip
    row = np.arange(side, dtype="float32")
    with rasterio.open(path, "w", **profile) as dst:
        for top in range(0, side, 512):
            dst.write((row + top)[None, :].repeat(512, axis=0), 1, window=((top, top + 512), (0, side)))


@pytest.mark.anyio
async def test_stats_of_a_large_float32_raster_passes_under_512_mib(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a fixed 256 MiB GDAL block cache whatever --memory-mb says: one streaming pass
    over 8192² float32 cells (256 MiB decoded) filled it and the worker ran out of memory (7680² did
    not). Cell (r, c) holds 512 * (r // 512) + c: the mean is 4095.5 + 3840 = 7935.5."""
    _large_float32(workspace_dir / "big.tif", 8192)
    settings = classic_settings.model_copy(update={"memory_mb": 512, "exec_timeout": 120.0})
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("raster_stats", {"path": "big.tif", "percentiles": []})
    assert not result.is_error, result.content
    band = structured(result)["bands"][0]
    assert (band["min"], band["max"]) == (0.0, 7680.0 + 8191.0)
    assert band["mean"] == pytest.approx(7935.5, rel=1e-12)  # a sum of 2^26 cells in float64


def test_running_out_of_memory_is_its_own_kind_naming_the_limit_and_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards against MemoryError in an operation reported as internal_error with the fix "Check the
    arguments": the agent must learn that the limit was hit, which one, and what changes it."""
    limit = (512 << 20, resource.RLIM_INFINITY)
    monkeypatch.setattr(resource, "getrlimit", lambda which: limit if which == resource.RLIMIT_AS else (0, 0))
    error = sandbox_error(MemoryError()).as_dict()
    assert error["type"] == "out_of_memory"
    assert "512 MiB" in error["message"] and "--memory-mb" in error["message"]
    assert "--memory-mb" in error["fix"] and "smaller" in error["fix"]


# --------------------------------------------------------------------------- grids named in files


def _grid_in_llmc(workspace_dir: Path) -> Path:
    grid = workspace_dir / ".llmc" / "shift.gsb"
    grid.parent.mkdir(exist_ok=True)
    grid.write_bytes(b"not a grid, but PROJ opens it to find out")
    return grid


def _wkt_with_grid(grid: Path) -> str:
    """GDAL's WKT1 for a CRS shifted by a grid: the grid rides in EXTENSION["PROJ4_GRIDS", path]."""
    return (
        'GEOGCS["zones",DATUM["D_zones",SPHEROID["WGS 84",6378137,298.257223563],'
        f'EXTENSION["PROJ4_GRIDS","{grid}"]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]'
    )


def test_a_zone_files_prj_naming_a_grid_in_llmc_is_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against PROJ opening a file the .prj names when the zones are transformed to the raster's
    CRS (checked with strace: the grid in .llmc/ was opened three times)."""
    grid = _grid_in_llmc(workspace_dir)
    write_vector(workspace_dir / "zones.shp", [shapely.box(2, 48, 3, 49)])
    (workspace_dir / "zones.prj").write_text(_wkt_with_grid(grid))
    with pytest.raises(CrsError) as caught:
        read(ctx, "zones.shp")
    assert "zones.shp" in caught.value.message and "PROJ4_GRIDS" in caught.value.message
    assert "EPSG" in (caught.value.fix or "")
    assert UTM.to_epsg() == 32631  # the target the zones would have been transformed to


def test_a_rasters_aux_xml_naming_a_grid_by_path_is_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a raster whose CRS (here from its .aux.xml, which GDAL prefers to the file's own)
    names a grid by path that PROJ opens when the raster is warped."""
    grid = _grid_in_llmc(workspace_dir)
    profile = {"driver": "GTiff", "width": 4, "height": 4, "count": 1, "dtype": "uint8",
               "transform": from_origin(2, 49, 0.25, 0.25)}  # fmt: skip
    with rasterio.open(workspace_dir / "g.tif", "w", **profile) as dst:
        dst.write(np.ones((1, 4, 4), dtype="uint8"))
    srs = _wkt_with_grid(grid).replace('"', "&quot;")
    (workspace_dir / "g.tif.aux.xml").write_text(f"<PAMDataset><SRS>{srs}</SRS></PAMDataset>")
    with pytest.raises(CrsError) as caught, gdal_env(ctx):
        open_for_read(ctx, "g.tif", georeferencing="unchecked").close()
    assert "g.tif" in caught.value.message and "PROJ4_GRIDS" in caught.value.message


def test_an_agents_crs_naming_a_grid_in_proj4_grids_is_refused() -> None:
    """Guards against the WKT1 form of a grid path slipping past the rule for agents' CRS text, which
    knew ``+nadgrids=`` and ``PARAMETERFILE`` but not GDAL's ``EXTENSION["PROJ4_GRIDS", ...]``."""
    with pytest.raises(CrsError, match="grid files given by path"):
        parse_crs(_wkt_with_grid(Path("/work/ws/.llmc/shift.gsb")), "dst_crs")


# ------------------------------------------------------------------------------ priority under load


@pytest.mark.anyio
async def test_a_lone_sessions_long_call_is_not_put_below_the_machines_other_work(tmp_path: Path) -> None:
    """Guards against a call lowered to nice 19 after a second while no other session needs the CPU:
    --exec-timeout counts wall-clock time, and beside two CPU-bound processes terrain.slope of an
    8192² DEM (6.2 s on a quiet machine, 17-18 s at normal priority) timed out in 3 runs of 3."""
    pool = WorkerPool(code_settings(tmp_path), str(tmp_path), _no_requests)
    try:
        await pool.execute("lone", "1", False)
        (pid,) = pool.worker_pids().values()
        seen: list[tuple[int, int | None]] = []

        async def watch() -> None:
            # Well past DEMOTE_AFTER into the call (6 s of wall time), where the parent demoted it.
            await anyio.sleep(DEMOTE_AFTER + 1.5)
            seen.append((_nice(pid), _group_nice(pid)))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            await pool.execute("lone", busy_for(6, "1"), False)
        assert seen and seen[0][0] == 0 and seen[0][1] in (0, None), seen
    finally:
        await pool.close()


# ------------------------------------------------------------------------------ the server's caches


def test_the_crs_cache_is_bounded_by_characters_not_only_by_entries() -> None:
    """Guards against a cache bounded by count alone: 4096 definitions of 100,000 characters each (and
    their WKT results) would keep about 800 million characters in the server. 50 of them fill more
    than the bound here; the cache keeps the newest that fit."""
    crs_text.clear_cache()
    name = "z" * 90_000
    try:
        for i in range(50):
            crs_text.normalize_crs(
                f'GEOGCS["{name}{i}",DATUM["D",SPHEROID["WGS 84",6378137,298.257223563]],'
                'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]'
            )
        held = sum(len(key) + len(value) for key, value in crs_text._cache.items())
        assert 0 < held <= 8_000_000
    finally:
        crs_text.clear_cache()


@pytest.mark.anyio
async def test_a_stateless_client_that_makes_the_refused_call_again_gets_hints_with_the_reason(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against the stateless 2026-07-28 client (no session id over HTTP) asked again on every
    retry: its paused call cannot be tied to a session, but the same call made again is that call."""
    host = Refusing("declines")
    settings = classic_settings.model_copy(update={"sampling_timeout": 600.0})
    async with serve_http(build_server(settings)) as web, Client(web.url, sampling_callback=host) as client:
        await refused_call(client)
        asked = host.asked
        with anyio.fail_after(60):  # a guard against the first call's worker held for 1200 s
            again = await client.call_tool("raster_reproject", REPROJECT)
    answer = structured(again)
    assert answer["type"] == "reflection_required", answer
    assert all("did not answer" in h["fallback"] for h in answer["reflection_required"])
    assert host.asked == asked
