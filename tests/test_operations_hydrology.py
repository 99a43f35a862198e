"""The hydrology namespace, specified on DEMs whose answers are worked out on paper.

Fixtures (rows x cols, 10 m cells unless said): a V-shaped valley walled by a 1000 m rim with one
outlet in the bottom edge, so every valley cell drains to it; a closed depression whose lowest
spill point is a 12 m saddle; two such valleys side by side, whose divide runs between two columns.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.hydrology._grid import routing_capacity
from llmc_mcp.operations.invoke import invoke
from llmc_mcp.reflection.gate import Gate, ReflectionRequired
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, stdio_params, structured

CONDITION = get_operation("hydrology.condition")
FLOW_DIRECTION = get_operation("hydrology.flow_direction")
FLOW_ACCUMULATION = get_operation("hydrology.flow_accumulation")
STREAMS = get_operation("hydrology.streams")
WATERSHED = get_operation("hydrology.watershed")
UTM = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
RIM = 1000.0


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def write(
    path: Path, data: np.ndarray, *, crs: str = "EPSG:32633", transform: Affine = UTM, **extra: Any
) -> str:
    profile = {"driver": "GTiff", "width": data.shape[1], "height": data.shape[0], "count": 1,
               "dtype": data.dtype.name, "crs": crs, "transform": transform, **extra}  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data, 1)
    return path.name


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def valley(rows: int = 7, cols: int = 9, centres: tuple[int, ...] = (4,)) -> np.ndarray:
    """Valleys whose floors (columns ``centres``) fall 1 m a row to an outlet (0 m) in the bottom edge.

    Walls rise 10 m a column from the nearest floor; the rest of the edge is a 1000 m rim.
    """
    r, c = np.mgrid[0:rows, 0:cols]
    across = np.min([np.abs(c - centre) for centre in centres], axis=0)
    z = (10.0 * across + (rows - 1 - r)).astype("float32")
    z[0, :] = z[-1, :] = z[:, 0] = z[:, -1] = RIM
    for centre in centres:
        z[-1, centre] = 0.0
    return z


def depression() -> np.ndarray:
    """20 m terrain holding a 3 x 3 pit (5 m, centre 2 m) whose lowest spill point is a 12 m saddle.

    The saddle (row 1, column 3) leads to an 11 m outlet in the top edge; filling raises the pit to
    12 m exactly: 9 cells, the centre by 10 m, the volume 10 + 8 x 7 = 66 cell-metres.
    """
    z = np.full((7, 7), 20.0, dtype="float32")
    z[2:5, 2:5] = 5.0
    z[3, 3] = 2.0
    z[1, 3] = 12.0
    z[0, 3] = 11.0
    return z


@pytest.fixture
def dem(workspace_dir: Path) -> str:
    return write(workspace_dir / "valley.tif", valley())


# Accumulation


def test_a_valley_drains_every_cell_to_its_outlet(
    ctx: OperationContext, workspace_dir: Path, dem: str
) -> None:
    """Guards against losing cells on the way down: every one of the 63 cells drains to the outlet (rim
    cells too: an edge cell drains inwards when a neighbour is lower), and the highest corner holds
    only itself."""
    call(FLOW_DIRECTION, ctx, dem=dem, dst="d8.tif")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
    acc = read(workspace_dir / "acc.tif")
    assert acc[6, 4] == 63 == valley().size
    assert result.max_value == 63
    assert acc[0, 0] == 1


def test_flow_directions_are_esri_codes(ctx: OperationContext, workspace_dir: Path, dem: str) -> None:
    """Guards against an undocumented encoding: above the outlet the floor drains south (4), a wall cell
    beside the floor's bottom (11 m) drains east or west (1, 16) to the floor, 10 m down over 10 m,
    which is steeper than 11 m over 14.1 m to the outlet diagonally, the outlet drains off the grid (0)
    and the top-left corner into the valley (2, south-east)."""
    result = call(FLOW_DIRECTION, ctx, dem=dem, dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    assert (d8[5, 4], d8[5, 3], d8[5, 5], d8[6, 4], d8[0, 0]) == (4, 1, 16, 0, 2)
    assert result.outlet_cells == 1 and result.sink_cells == 0
    assert "1 E, 2 SE, 4 S" in result.encoding


def test_upstream_area_is_ground_area_on_an_equal_area_grid(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against multiplying counts by a nominal cell size or leaving units unstated: on a 1 km
    EASE-Grid 2.0 (equal-area) grid each cell is 1 km² of ground, so the outlet drains 63 km²."""
    ease = Affine(1000.0, 0.0, 0.0, 0.0, -1000.0, 1_000_000.0)
    write(workspace_dir / "valley.tif", valley(), crs="EPSG:6933", transform=ease)
    call(FLOW_DIRECTION, ctx, dem="valley.tif", dst="d8.tif")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="area.tif", units="m2")
    area = read(workspace_dir / "area.tif")
    assert area[6, 4] == pytest.approx(63e6, rel=1e-9)
    assert result.units == "m2"
    with rasterio.open(workspace_dir / "area.tif") as ds:
        assert ds.tags(1)["LLMC_ACCUMULATION_UNITS"] == "m2"


def test_upstream_area_on_a_lat_lon_grid_is_ground_area(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against counting square degrees, or one nominal cell size, on a geographic DEM: on a
    sphere of radius R the 9 x 7 cells of 0.01° between 60.00° and 60.07° N cover
    R² x 0.09° (in radians) x (sin 60.07° - sin 60°), all of which drains to the outlet."""
    sphere = "+proj=longlat +R=6371000 +no_defs"
    degrees = Affine(0.01, 0.0, 10.0, 0.0, -0.01, 60.07)
    write(workspace_dir / "valley.tif", valley(), crs=sphere, transform=degrees)
    call(FLOW_DIRECTION, ctx, dem="valley.tif", dst="d8.tif")
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="area.tif", units="m2")
    expected = (
        6371000.0**2 * math.radians(0.09) * (math.sin(math.radians(60.07)) - math.sin(math.radians(60.0)))
    )
    assert read(workspace_dir / "area.tif")[6, 4] == pytest.approx(expected, rel=1e-9)


def test_nodata_cells_stay_out_of_the_flow(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against nodata routed as terrain (NaN or -9999 elevations draining or collecting): a
    nodata wall cell (row 1, column 1) is 247 in the directions and nodata in the accumulation; the
    corner that drained into it has no lower valid neighbour left, so it is an outlet of its own; the
    valley outlet gathers the other 61 cells."""
    z = valley()
    z[1, 1] = -9999.0
    write(workspace_dir / "holed.tif", z, nodata=-9999.0)
    result = call(FLOW_DIRECTION, ctx, dem="holed.tif", dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    assert (d8[1, 1], d8[0, 0]) == (247, 0) and result.outlet_cells == 2
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
    acc = read(workspace_dir / "acc.tif")
    assert (acc[1, 1], acc[0, 0], acc[6, 4]) == (-1, 1, 61)


def test_weights_are_summed_along_the_flow(ctx: OperationContext, workspace_dir: Path, dem: str) -> None:
    """Guards against weights ignored or counted as cells: a weight of 2.5 everywhere gives 63 x 2.5."""
    write(workspace_dir / "runoff.tif", np.full((7, 9), 2.5, dtype="float32"))
    call(FLOW_DIRECTION, ctx, dem=dem, dst="d8.tif")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="w.tif", weights="runoff.tif")
    assert read(workspace_dir / "w.tif")[6, 4] == 157.5
    assert result.units == "weights"


def test_a_grid_that_is_not_d8_codes_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against accumulating a DEM passed as directions: 3 is no D8 code."""
    write(workspace_dir / "not_d8.tif", np.full((5, 5), 3, dtype="uint8"))
    with pytest.raises(InvalidArgument, match="not D8 codes"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="not_d8.tif", dst="acc.tif")


def test_directions_that_loop_are_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an accumulation that never ends or silently drops cells: two cells pointing at
    each other (1 E, 16 W) reach no outlet."""
    d8 = np.zeros((4, 4), dtype="uint8")
    d8[1, 1], d8[1, 2] = 1, 16
    write(workspace_dir / "loop.tif", d8)
    with pytest.raises(InvalidArgument, match="loop"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="loop.tif", dst="acc.tif")


# Conditioning


def test_fill_raises_a_closed_depression_to_its_spill_height(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against filling to the wrong level (the rim, the lowest edge) or not at all: the pit
    rises to the 12 m saddle exactly, and nothing else changes."""
    write(workspace_dir / "pit.tif", depression())
    result = call(CONDITION, ctx, dem="pit.tif", dst="filled.tif")
    expected = depression()
    expected[2:5, 2:5] = 12.0
    np.testing.assert_array_equal(read(workspace_dir / "filled.tif"), expected)
    assert (result.raised_cells, result.max_raise, result.volume_cells) == (9, 10.0, 66.0)


def test_max_depth_keeps_a_deeper_depression_as_a_sink(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against erasing a real lake: the pit's floor, 7 m below the 12 m saddle, is kept with
    max_depth=5; only the 3 m hollow inside it (2 m under a 5 m floor, less than 5 m) is filled, to 5 m."""
    write(workspace_dir / "pit.tif", depression())
    result = call(CONDITION, ctx, dem="pit.tif", dst="kept.tif", max_depth=5.0)
    expected = depression()
    expected[3, 3] = 5.0
    np.testing.assert_array_equal(read(workspace_dir / "kept.tif"), expected)
    assert (result.raised_cells, result.max_raise) == (1, 3.0)


def test_flow_direction_does_not_fill_what_conditioning_kept(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a routing step that silently fills every depression (overriding the gated choice):
    the unfilled pit ends in one sink, its 2 m centre; once filled, nothing does."""
    write(workspace_dir / "pit.tif", depression())
    raw = call(FLOW_DIRECTION, ctx, dem="pit.tif", dst="raw_d8.tif")
    assert raw.sink_cells == 1 and read(workspace_dir / "raw_d8.tif")[3, 3] == 0
    call(CONDITION, ctx, dem="pit.tif", dst="filled.tif")
    assert call(FLOW_DIRECTION, ctx, dem="filled.tif", dst="d8.tif").sink_cells == 0


# Streams


def test_streams_are_exactly_the_cells_at_or_above_the_threshold(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against > for >= and nodata marked as land: of accumulations 1..20 the 11 cells >= 10."""
    acc = np.arange(1, 21, dtype="int32").reshape(4, 5)
    acc[0, 0] = -1
    write(workspace_dir / "acc.tif", acc, nodata=-1)
    with rasterio.open(workspace_dir / "acc.tif", "r+") as ds:
        ds.update_tags(1, LLMC_ACCUMULATION_UNITS="cells")
    result = call(STREAMS, ctx, accumulation="acc.tif", dst="streams.tif", threshold=10)
    expected = np.where(acc >= 10, 1, 0).astype("uint8")
    expected[0, 0] = 255
    np.testing.assert_array_equal(read(workspace_dir / "streams.tif"), expected)
    assert result.stream_cells == 11


def test_a_threshold_in_other_units_than_the_accumulation_is_refused(
    ctx: OperationContext, workspace_dir: Path, dem: str
) -> None:
    """Guards against comparing square metres with a cell count (1e6 'm2' would mean a million cells)."""
    call(FLOW_DIRECTION, ctx, dem=dem, dst="d8.tif")
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
    with pytest.raises(InvalidArgument, match="accumulates cells") as refused:
        call(STREAMS, ctx, accumulation="acc.tif", dst="s.tif", threshold=1e6, threshold_units="m2")
    assert "units='m2'" in refused.value.fix


# Watersheds


def two_valleys(workspace_dir: Path) -> str:
    """6 x 8: valleys on columns 2 and 5, outlets (5, 2) and (5, 5); the divide runs between columns 3
    and 4 (a cell in column 3 is 10 m above column 2 and level with column 4; rim cells drain to their
    lowest neighbour, on their own side)."""
    return write(workspace_dir / "two.tif", valley(rows=6, cols=8, centres=(2, 5)))


def centre(row: int, col: int) -> list[float]:
    x, y = UTM @ (col + 0.5, row + 0.5)
    return [x, y]


def test_two_catchments_split_exactly_along_the_divide(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against catchments that bleed across a divide or miss cells: 24 cells each (6 rows x 4
    columns), columns 0-3 and 4-7."""
    call(FLOW_DIRECTION, ctx, dem=two_valleys(workspace_dir), dst="d8.tif")
    result = call(WATERSHED, ctx, flow_dir="d8.tif", pour_points=[centre(5, 2), centre(5, 5)], dst="ws.tif")
    expected = np.zeros((6, 8), dtype="int32")
    expected[:, :4] = 1
    expected[:, 4:] = 2
    np.testing.assert_array_equal(read(workspace_dir / "ws.tif"), expected)
    assert [(p.cells, p.accumulation_cells, p.snap_distance_m) for p in result.points] == [(24, 24, 0.0)] * 2
    assert result.points[0].area_m2 == pytest.approx(2400, rel=2e-3)  # UTM scale factor ~0.9996 squared


def test_a_point_beside_the_channel_snaps_to_it_and_reports_how_far(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a gauge one cell off the channel getting a hillslope's catchment, and against a
    snap that moves silently: within 15 m the highest accumulation is the outlet, a diagonal 14.1 m
    away (10 sqrt 2, times the UTM scale factor)."""
    call(FLOW_DIRECTION, ctx, dem=two_valleys(workspace_dir), dst="d8.tif")
    unsnapped = call(WATERSHED, ctx, flow_dir="d8.tif", pour_points=[centre(4, 3)], dst="a.tif")
    assert unsnapped.points[0].cells == 1
    snapped = call(
        WATERSHED, ctx, flow_dir="d8.tif", pour_points=[centre(4, 3)], dst="b.tif", snap_distance=15
    )
    point = snapped.points[0]
    assert (point.row, point.col, point.cells) == (5, 2, 24)
    assert 14.1 < point.snap_distance_m < 14.15


def test_pour_points_in_another_crs_land_on_the_same_cell(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against treating longitude/latitude as grid coordinates."""
    from pyproj import Transformer

    call(FLOW_DIRECTION, ctx, dem=two_valleys(workspace_dir), dst="d8.tif")
    lon, lat = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True).transform(*centre(5, 5))
    result = call(
        WATERSHED, ctx, flow_dir="d8.tif", pour_points=[[lon, lat]], points_crs="EPSG:4326", dst="w.tif"
    )
    assert (result.points[0].row, result.points[0].col, result.points[0].cells) == (5, 5, 24)


# Size


def header_only(path: Path, width: int, height: int) -> Path:
    """A DEM of that size whose pixels were never written: a few bytes on disk, a full header."""
    profile = {"driver": "GTiff", "width": width, "height": height, "count": 1, "dtype": "uint8",
               "crs": "EPSG:32633", "transform": UTM, "tiled": True, "compress": "DEFLATE"}  # fmt: skip
    with rasterio.open(path, "w", **profile):
        pass
    return path


def test_the_routing_capacity_follows_the_memory_of_the_worker() -> None:
    """Guards against a constant cap: 8192² was refused with --memory-mb 8192 while pyflwdir routes it
    in 2.4 GB; the default 2 GiB still holds exactly the 4096² it held before."""
    assert routing_capacity(2048 << 20) == 4096 * 4096
    assert routing_capacity(8192 << 20) >= 8192 * 8192
    assert routing_capacity(512 << 20) == 0


@pytest.mark.anyio
async def test_a_grid_above_what_the_worker_holds_is_refused_naming_what_fits(workspace_dir: Path) -> None:
    """Guards against a worker killed by its memory limit halfway through routing: in a worker of
    2048 MiB, 4097 x 4096 cells is one row over, refused from the header before any pixel is read,
    with the size that fits, the memory that would hold it and the flag."""
    header_only(workspace_dir / "big.tif", 4096, 4097)
    settings = Settings(mode="code", workspace=workspace_dir, memory_mb=2048, reflection="hints")
    async with Client(build_server(settings)) as client:
        refused = structured(
            await client.call_tool("execute_code", {"code": 'hydrology.flow_direction("big.tif", "d8.tif")'})
        )
    error = refused["error"]
    assert error["type"] == "invalid_argument"
    assert "2,048 MiB hold at most 16,777,216 cells (about 4096 x 4096)" in error["message"]
    assert "Coarsen" in error["fix"] and "--memory-mb" in error["fix"] and "2,049 MiB" in error["fix"]


@pytest.mark.anyio
async def test_a_job_is_sized_by_the_job_workers_memory(workspace_dir: Path) -> None:
    """Guards against a job refused by the memory of the call that starts it (so --job-memory-mb could
    never route more), and against one accepted beyond the job's own."""
    header_only(workspace_dir / "big.tif", 4096, 4097)
    header_only(workspace_dir / "huge.tif", 7000, 7000)
    settings = Settings(
        mode="code", workspace=workspace_dir, memory_mb=2048, job_memory_mb=4096, reflection="hints"
    )
    start = 'jobs.start(hydrology.flow_direction, "{dem}", "d8.tif")'
    async with Client(build_server(settings)) as client:
        fits = structured(await client.call_tool("execute_code", {"code": start.format(dem="big.tif")}))
        too_big = structured(await client.call_tool("execute_code", {"code": start.format(dem="huge.tif")}))
    assert fits["error"]["type"] == "reflection_required"  # past the size check: the gate asks
    assert "4,096 MiB hold at most" in too_big["error"]["message"]
    assert "--job-memory-mb" in too_big["error"]["fix"]


# The gate


@pytest.fixture
def gate(workspace_dir: Path) -> Gate:
    return Gate(
        JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="persist"
    )


def answer(gate: Gate, hint: Any) -> None:
    gate.persist(hint.hash, hint.domain, justification_for(hint.model_dump()))


GATED = [
    (CONDITION, {"dem": "pit.tif", "dst": "filled.tif"}, {"method": "fill", "max_depth": "none"}),
    (FLOW_DIRECTION, {"dem": "pit.tif", "dst": "d8.tif"}, {"routing": "d8"}),
    (STREAMS, {"accumulation": "acc.tif", "dst": "s.tif", "threshold": 5000},
     {"threshold": "5000.0", "units": "cells"}),
]  # fmt: skip


@pytest.mark.parametrize(("op", "args", "asked"), GATED, ids=["condition", "flow_direction", "streams"])
def test_each_hydrology_choice_asks_for_a_justification(
    ctx: OperationContext,
    workspace_dir: Path,
    gate: Gate,
    op: Any,
    args: dict[str, Any],
    asked: dict[str, str],
) -> None:
    """Guards against a consequential hydrology choice made without saying why."""
    write(workspace_dir / "pit.tif", depression())
    write(workspace_dir / "acc.tif", np.ones((7, 7), dtype="int32"))
    with pytest.raises(ReflectionRequired) as missing:
        invoke(op, ctx, gate, args)
    assert [(h.domain, h.prompt_args) for h in missing.value.hints] == [("hydrology", asked)]
    answer(gate, missing.value.hints[0])
    invoke(op, ctx, gate, args)


def test_a_threshold_justification_unlocks_only_its_own_threshold(
    ctx: OperationContext, workspace_dir: Path, gate: Gate
) -> None:
    """Guards against one argued threshold unlocking any other: 5000 cells (also written 5e3) is
    justified, 500 cells and 5000 m2 are not, and neither is the routing model."""
    write(workspace_dir / "acc.tif", np.ones((7, 7), dtype="int32"))
    write(workspace_dir / "pit.tif", depression())
    args = {"accumulation": "acc.tif", "dst": "s.tif", "threshold": 5000}
    with pytest.raises(ReflectionRequired) as missing:
        invoke(STREAMS, ctx, gate, args)
    answer(gate, missing.value.hints[0])
    invoke(STREAMS, ctx, gate, {**args, "threshold": 5e3})
    for other in ({**args, "threshold": 500}, {**args, "threshold_units": "m2"}):
        with pytest.raises(ReflectionRequired):
            invoke(STREAMS, ctx, gate, other)
    with pytest.raises(ReflectionRequired):
        invoke(FLOW_DIRECTION, ctx, gate, {"dem": "pit.tif", "dst": "d8.tif"})


def test_a_fill_justification_does_not_unlock_keeping_sinks(
    ctx: OperationContext, workspace_dir: Path, gate: Gate
) -> None:
    """Guards against 'fill everything' unlocking 'keep sinks deeper than 2 m': different hydrology."""
    write(workspace_dir / "pit.tif", depression())
    args = {"dem": "pit.tif", "dst": "filled.tif"}
    with pytest.raises(ReflectionRequired) as missing:
        invoke(CONDITION, ctx, gate, args)
    answer(gate, missing.value.hints[0])
    invoke(CONDITION, ctx, gate, args)
    with pytest.raises(ReflectionRequired) as again:
        invoke(CONDITION, ctx, gate, {**args, "max_depth": 2})
    assert again.value.hints[0].prompt_args == {"method": "fill", "max_depth": "2.0"}


# Both faces, through a real server


def persist_code(hints: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"reflection.persist({h['hash']!r}, {h['domain']!r}, {justification_for(h)!r})" for h in hints
    )


async def run_gated(client: Client, code: str) -> dict[str, Any]:
    """Run ``code``; on a miss, persist a justification for each hint (all hydrology) and run it again."""
    miss = structured(await client.call_tool("execute_code", {"code": code}))
    if miss["ok"]:
        return miss
    assert "reflection_required" in miss, miss
    hints = miss["reflection_required"]
    assert {h["domain"] for h in hints} == {"hydrology"}
    persisted = structured(await client.call_tool("execute_code", {"code": persist_code(hints)}))
    assert persisted["ok"], persisted
    again = structured(await client.call_tool("execute_code", {"code": code}))
    assert again["ok"], again
    return again


@pytest.mark.anyio
async def test_code_mode_routes_a_valley_end_to_end(workspace_dir: Path, dem: str) -> None:
    """The whole chain in a real sandboxed (Landlock-confined) worker over stdio: each gated step asks,
    then runs, and the outlet gathers the valley's 63 cells. pyflwdir imports and compiles inside the
    worker, where numba can write no cache; the generous timeout is for that compilation on a busy
    machine (a call running over a second is reniced to 19), one call per step."""
    steps = (
        'hydrology.condition("valley.tif", "filled.tif")',
        'hydrology.flow_direction("filled.tif", "d8.tif")',
        'hydrology.flow_accumulation("d8.tif", "acc.tif")["max_value"]',
        'hydrology.streams("acc.tif", "streams.tif", threshold=6)["stream_cells"]',
    )
    async with Client(stdio_params(workspace_dir, "--exec-timeout", "300")) as client:
        results = [await run_gated(client, code) for code in steps]
    assert all(r["ok"] for r in results), results
    assert results[2]["result"] == 63
    assert read(workspace_dir / "acc.tif")[6, 4] == 63


@pytest.mark.anyio
async def test_classic_mode_asks_for_the_stream_threshold_then_draws_streams(workspace_dir: Path) -> None:
    """The classic face runs the same binding: a miss names the threshold, the justification unlocks it."""
    acc = np.arange(1, 21, dtype="int32").reshape(4, 5)
    write(workspace_dir / "acc.tif", acc)
    server = build_server(Settings(mode="classic", workspace=workspace_dir))
    arguments = {"accumulation": "acc.tif", "dst": "streams.tif", "threshold": 10}
    async with Client(server) as client:
        miss = structured(await client.call_tool("hydrology_streams", arguments))
        (hint,) = miss["reflection_required"]
        assert hint["prompt_args"] == {"threshold": "10.0", "units": "cells"}
        answer_args = {
            "hash": hint["hash"],
            "domain": hint["domain"],
            "justification": justification_for(hint),
        }
        assert not (await client.call_tool("persist_justification", answer_args)).is_error
        done = await client.call_tool("hydrology_streams", arguments)
    assert not done.is_error
    assert structured(done)["stream_cells"] == 11
    assert math.isclose(structured(done)["threshold"], 10.0)
