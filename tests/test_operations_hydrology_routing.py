"""D-infinity, MFD, drained flats and breaching (written here, DD-MCP-068), on DEMs worked out on paper.

Fixtures (10 m cells, UTM): inclined planes; a funnel (elevation = distance from the centre cell);
a 3 x 1 ridge; a closed flat-bottomed basin with one notch in its rim; a channel dammed by one cell
with a pit behind it; the main module's V valley and walled hollow with a saddle.
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

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.invoke import invoke
from llmc_mcp.reflection.gate import Gate, ReflectionRequired
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from tests.mcp_helpers import stdio_params
from tests.test_operations_hydrology import answer, call, depression, read, run_gated, valley, write

CONDITION = get_operation("hydrology.condition")
FLOW_DIRECTION = get_operation("hydrology.flow_direction")
FLOW_ACCUMULATION = get_operation("hydrology.flow_accumulation")
WATERSHED = get_operation("hydrology.watershed")
SPILL = 50.0


def plane(dz_row: float, dz_col: float, size: int = 7) -> np.ndarray:
    """Elevation rising ``dz_row`` a row (southwards) and ``dz_col`` a column (eastwards)."""
    r, c = np.mgrid[0:size, 0:size]
    return 100.0 + dz_row * r + dz_col * c


def funnel(size: int = 7) -> np.ndarray:
    """Elevation = distance (cells) from the centre: every cell but the centre has a lower neighbour."""
    r, c = np.mgrid[0:size, 0:size]
    centre = size // 2
    return np.hypot(r - centre, c - centre)


def basin() -> np.ndarray:
    """6 x 6, float32: a 4 x 4 floor at 30 m inside a 100 m rim, with a 50 m notch (the spill point) in
    the south edge (row 5, column 2). Filled, the floor is a flat at 50 m: no cell of it has a lower
    neighbour but the three beside the notch."""
    z = np.full((6, 6), 100.0, dtype="float32")
    z[1:5, 1:5] = 30.0
    z[5, 2] = SPILL
    return z


def dammed() -> np.ndarray:
    """5 x 7, 100 m rim; row 2 runs 10, 9, then a 5 m pit, a 12 m dam, 4, and a 3 m outlet on the edge."""
    z = np.full((5, 7), 100.0, dtype="float32")
    z[2, 1:] = [10.0, 9.0, 5.0, 12.0, 4.0, 3.0]
    return z


def strictly_lower_neighbour(z: np.ndarray) -> np.ndarray:
    """Whether each interior cell has a strictly lower 8-neighbour."""
    rows, cols = z.shape
    padded = np.pad(z, 1, constant_values=np.inf)
    lowest = np.full(z.shape, np.inf)
    for dr in (0, 1, 2):
        for dc in (0, 1, 2):
            if (dr, dc) != (1, 1):
                lowest = np.minimum(lowest, padded[dr : dr + rows, dc : dc + cols])
    return (lowest < z)[1:-1, 1:-1]


# D-infinity


@pytest.mark.parametrize(
    ("dz_row", "dz_col", "angle"),
    [
        (-1.0, 0.0, 180.0),
        (0.0, 1.0, 270.0),
        (1.0, 0.0, 0.0),
        (2.0, -1.0, math.degrees(math.atan(0.5))),
        (1.0, 0.5, 360.0 - math.degrees(math.atan(0.5))),
    ],
)
def test_dinf_on_an_inclined_plane_gives_its_downhill_azimuth(
    ctx: OperationContext, workspace_dir: Path, dz_row: float, dz_col: float, angle: float
) -> None:
    """Guards against another angle convention (radians, counter-clockwise, from east): a plane falling
    south flows 180 degrees; rising east, 270; rising south, 0 (not 360); falling 2 a row north and 1 a
    column east, atan(1/2) = 26.565 degrees; rising 1 a row south and 0.5 east, 360 - 26.565."""
    write(workspace_dir / "plane.tif", plane(dz_row, dz_col))
    result = call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    with rasterio.open(workspace_dir / "dinf.tif") as ds:
        assert ds.tags(1)["LLMC_ROUTING"] == "dinf" and ds.dtypes[0] == "float32"
        interior = ds.read(1)[1:-1, 1:-1]
    np.testing.assert_allclose(interior, angle, atol=1e-4)
    assert "degrees clockwise from north" in result.encoding


def test_dinf_on_a_south_facing_plane_is_exactly_south_and_the_lower_edge_drains_off(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against edge cells routed into missing neighbours: every cell above the bottom row flows
    exactly 180 (edge columns too); the bottom row has no lower neighbour on the grid: -1, outlets."""
    write(workspace_dir / "plane.tif", plane(-1.0, 0.0))
    result = call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    angles = read(workspace_dir / "dinf.tif")
    assert (angles[:-1] == 180.0).all() and (angles[-1] == -1.0).all()
    assert (result.outlet_cells, result.sink_cells) == (7, 0)


def test_dinf_accumulation_on_a_plane_conserves_the_cells(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against split flow lost or counted twice: on the plane falling at 26.565 degrees
    (north-north-east) the top row flows east and the east column north, so the north-east corner, the
    one cell without a lower neighbour, gathers all 49 cells; the south-west corner holds only itself."""
    write(workspace_dir / "plane.tif", plane(2.0, -1.0))
    direction = call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif")
    acc = read(workspace_dir / "acc.tif")
    assert direction.outlet_cells == 1
    assert math.isclose(acc[0, 6], 49.0, rel_tol=1e-12) and math.isclose(
        result.max_value, 49.0, rel_tol=1e-12
    )
    assert acc[6, 0] == 1.0 and result.units == "cells"


def test_dinf_splits_by_the_angle_between_the_two_neighbours(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against D-infinity sent whole to the nearer neighbour: at 26.565 degrees a cell sends
    1 - 26.565/45 = 0.4097 of its flow north and 0.5903 north-east. The south-west corner (1 cell)
    is the only donor of the cell north of it, which thus holds 1 + 0.4097."""
    write(workspace_dir / "plane.tif", plane(2.0, -1.0))
    call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif")
    north_share = 1.0 - math.degrees(math.atan(0.5)) / 45.0
    assert read(workspace_dir / "acc.tif")[5, 0] == pytest.approx(1.0 + north_share, abs=1e-6)


def test_dinf_routes_around_nodata_and_keeps_it(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against flow sent into a nodata hole or nodata given an angle: on the south-facing plane
    with a hole at (3, 3), the cell above it has no facet through the hole; of the two steepest left
    (E-SE and W-SW, both falling 1 m over a diagonal) the first, towards south-east, wins: 135. The
    hole stays NaN in both outputs, and the bottom row still gathers all 48 valid cells."""
    z = plane(-1.0, 0.0)
    z[3, 3] = -9999.0
    write(workspace_dir / "holed.tif", z, nodata=-9999.0)
    call(FLOW_DIRECTION, ctx, dem="holed.tif", dst="dinf.tif", routing="dinf")
    call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif")
    angles, acc = read(workspace_dir / "dinf.tif"), read(workspace_dir / "acc.tif")
    assert angles[2, 3] == 135.0 and np.isnan(angles[3, 3]) and np.isnan(acc[3, 3])
    assert math.isclose(float(acc[-1].sum()), 48.0, rel_tol=1e-12)


def test_dinf_accumulates_weights_along_the_split_flow(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against weights ignored for dinf: with 2 in every cell, the bottom row of the south-facing
    plane holds 2 x 7 rows = 14, and the result says weights."""
    write(workspace_dir / "plane.tif", plane(-1.0, 0.0))
    write(workspace_dir / "w.tif", np.full((7, 7), 2.0))
    call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif", weights="w.tif")
    assert (read(workspace_dir / "acc.tif")[-1] == 14.0).all() and result.units == "weights"


def test_dinf_refuses_a_geographic_grid(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against angles from slopes whose horizontal distances are degrees (not square on the
    ground): refused with the fix, reproject."""
    geo = Affine(0.001, 0, 10, 0, -0.001, 50)
    write(workspace_dir / "geo.tif", plane(0.0, 1.0), crs="EPSG:4326", transform=geo)
    with pytest.raises(InvalidArgument, match="geographic grid") as caught:
        call(FLOW_DIRECTION, ctx, dem="geo.tif", dst="dinf.tif", routing="dinf")
    assert "raster.reproject" in (caught.value.fix or "")


def test_dinf_refuses_cells_that_are_not_square(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against facet angles computed as if 10 x 20 m cells were square."""
    write(workspace_dir / "rect.tif", plane(0.0, 1.0), transform=Affine(10, 0, 500_000, 0, -20, 4_500_000))
    with pytest.raises(InvalidArgument, match="square"):
        call(FLOW_DIRECTION, ctx, dem="rect.tif", dst="dinf.tif", routing="dinf")


# MFD


def test_mfd_splits_a_ridge_cell_exactly_in_half(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against unequal shares for equal slopes: a 3 x 1 ridge (0, 1, 0) sends half of its cell
    north and half south, so each end holds 1.5; its mask is N + S = 64 + 4 = 68."""
    write(workspace_dir / "ridge.tif", np.array([[0.0], [1.0], [0.0]]))
    call(FLOW_DIRECTION, ctx, dem="ridge.tif", dst="mfd.tif", routing="mfd")
    with rasterio.open(workspace_dir / "mfd.tif") as ds:
        assert ds.tags(1)["LLMC_ROUTING"] == "mfd" and ds.dtypes[0] == "uint16"
        assert ds.read(1)[:, 0].tolist() == [0, 68, 0]
    call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif", dem="ridge.tif")
    assert read(workspace_dir / "acc.tif")[:, 0].tolist() == [1.5, 1.0, 1.5]


def test_mfd_sends_flow_to_every_lower_neighbour(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an MFD that is D8 in disguise: on the funnel the cell east of the centre sends all
    to the centre (W: 16); the cell north-east of it (1.41 from the centre) to W, S and SW
    (16 + 4 + 8 = 28); the centre drains nowhere (0, a sink)."""
    write(workspace_dir / "funnel.tif", funnel())
    result = call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="mfd.tif", routing="mfd")
    mfd = read(workspace_dir / "mfd.tif")
    assert (mfd[3, 4], mfd[2, 4], mfd[3, 3]) == (16, 28, 0)
    assert result.sink_cells == 1


def test_mfd_accumulation_in_a_valley_conserves_the_cells(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against split flow lost or counted twice: in the V valley every cell drains, through
    however many splits, to the one outlet, which gathers all 63 cells; the top-left corner (whose only
    lower neighbour is inward) holds only itself."""
    write(workspace_dir / "valley.tif", valley())
    call(FLOW_DIRECTION, ctx, dem="valley.tif", dst="mfd.tif", routing="mfd")
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif", dem="valley.tif")
    acc = read(workspace_dir / "acc.tif")
    assert math.isclose(acc[6, 4], 63.0, rel_tol=1e-12) and math.isclose(
        result.max_value, 63.0, rel_tol=1e-12
    )
    assert acc[0, 0] == 1.0


@pytest.mark.parametrize("routing", ["dinf", "mfd"])
def test_multiple_flow_on_a_funnel_gathers_every_cell_in_its_centre(
    ctx: OperationContext, workspace_dir: Path, routing: str
) -> None:
    """Guards against flow lost at splits towards a sink: everything on the funnel ends in its centre,
    which gathers all 49 cells; a corner holds only its own 1 (nothing flows up)."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="dir.tif", routing=routing)
    extra = {"dem": "funnel.tif"} if routing == "mfd" else {}
    call(FLOW_ACCUMULATION, ctx, flow_dir="dir.tif", dst="acc.tif", **extra)
    acc = read(workspace_dir / "acc.tif")
    assert math.isclose(acc[3, 3], 49.0, rel_tol=1e-12) and acc[0, 0] == 1.0


def test_mfd_accumulation_needs_the_dem_the_directions_came_from(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against MFD shares guessed from the mask (equal splits): without dem it is refused, and a
    DEM giving other receivers (a plane instead of the funnel) is refused too."""
    write(workspace_dir / "funnel.tif", funnel())
    write(workspace_dir / "plane.tif", plane(0.0, 1.0))
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="mfd.tif", routing="mfd")
    with pytest.raises(InvalidArgument, match="mfd directions") as caught:
        call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif")
    assert "Pass dem" in (caught.value.fix or "")
    with pytest.raises(InvalidArgument, match="does not give the directions"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif", dem="plane.tif")


def test_a_dem_is_refused_for_directions_that_need_none(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an argument accepted and ignored: dem with dinf directions is refused."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="dinf.tif", routing="dinf")
    with pytest.raises(InvalidArgument, match="need no DEM"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif", dem="funnel.tif")


@pytest.mark.parametrize("routing", ["dinf", "mfd"])
def test_watershed_refuses_multiple_flow_directions(
    ctx: OperationContext, workspace_dir: Path, routing: str
) -> None:
    """Guards against tracing catchments along one receiver of a grid whose values may happen to be D8
    codes (the funnel's MFD east cell holds 16): the LLMC_ROUTING tag is read and refused."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="dir.tif", routing=routing)
    with pytest.raises(InvalidArgument, match=f"holds {routing} flow directions"):
        call(WATERSHED, ctx, flow_dir="dir.tif", pour_points=[[500_035.0, 4_499_965.0]], dst="ws.tif")


# fill_flats


def test_fill_flats_makes_every_basin_cell_drain(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against flats left after filling (dinf and mfd route nothing across them): after
    fill_flats every interior cell has a strictly lower neighbour, the floor is at or above the 50 m
    spill point, and no cell rises more than 16 float32 steps (one per floor cell) above it."""
    write(workspace_dir / "basin.tif", basin())
    result = call(CONDITION, ctx, dem="basin.tif", dst="drained.tif", method="fill_flats")
    z = read(workspace_dir / "drained.tif")
    bound = np.float32(SPILL)
    for _ in range(16):
        bound = np.nextafter(bound, np.float32(np.inf))
    floor = z[1:5, 1:5]
    assert strictly_lower_neighbour(z).all()
    assert (floor > SPILL).all() and (floor <= bound).all()
    assert result.raised_cells == 16 and result.method == "fill_flats"


def test_fill_flats_leaves_no_sink_for_dinf(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a drained DEM that dinf still cannot leave: after fill_flats the basin has no
    sink, and all 36 cells' flow leaves through outlets on the edge."""
    write(workspace_dir / "basin.tif", basin())
    call(CONDITION, ctx, dem="basin.tif", dst="drained.tif", method="fill_flats")
    direction = call(FLOW_DIRECTION, ctx, dem="drained.tif", dst="dinf.tif", routing="dinf")
    call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif")
    acc, angles = read(workspace_dir / "acc.tif"), read(workspace_dir / "dinf.tif")
    assert direction.sink_cells == 0
    assert math.isclose(float(acc[angles == -1.0].sum()), 36.0, rel_tol=1e-9)
    assert acc[5, 2] > 16.0  # the notch gathers the whole floor


def test_fill_flats_refuses_max_depth(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against max_depth accepted and ignored: fill_flats fills every depression."""
    write(workspace_dir / "basin.tif", basin())
    with pytest.raises(InvalidArgument, match="max_depth was given with method 'fill_flats'"):
        call(CONDITION, ctx, dem="basin.tif", dst="d.tif", method="fill_flats", max_depth=5.0)


# D8 beside a kept pit


def test_d8_dam_cell_beside_a_kept_pit_drains_to_its_lower_neighbour(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the reported bug: pyflwdir's unfilled flood left the 12 m dam between a 5 m pit
    and a 4 m cell draining nowhere (0). It drains east (1) to the 4 m cell; the pit stays the one sink."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(FLOW_DIRECTION, ctx, dem="dam.tif", dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    assert (d8[2, 4], d8[2, 3]) == (1, 0)
    assert result.sink_cells == 1


# The gate


@pytest.fixture
def gate(workspace_dir: Path) -> Gate:
    return Gate(
        JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="persist"
    )


def test_a_d8_justification_does_not_unlock_dinf_or_mfd(
    ctx: OperationContext, workspace_dir: Path, gate: Gate
) -> None:
    """Guards against one routing's justification unlocking another: single-flow and multiple-flow
    are different hydrology, so dinf and mfd each ask for their own, naming the routing."""
    write(workspace_dir / "funnel.tif", funnel())
    args = {"dem": "funnel.tif", "dst": "dir.tif"}
    with pytest.raises(ReflectionRequired) as missing:
        invoke(FLOW_DIRECTION, ctx, gate, args)
    answer(gate, missing.value.hints[0])
    for routing in ("dinf", "mfd"):
        with pytest.raises(ReflectionRequired) as again:
            invoke(FLOW_DIRECTION, ctx, gate, {**args, "routing": routing})
        assert again.value.hints[0].prompt_args == {"routing": routing}


def test_a_fill_justification_does_not_unlock_breach_or_fill_flats(
    ctx: OperationContext, workspace_dir: Path, gate: Gate
) -> None:
    """Guards against 'fill' unlocking a cut through terrain or a drained flat: each method asks."""
    write(workspace_dir / "pit.tif", depression())
    args = {"dem": "pit.tif", "dst": "c.tif"}
    with pytest.raises(ReflectionRequired) as missing:
        invoke(CONDITION, ctx, gate, args)
    answer(gate, missing.value.hints[0])
    for method in ("breach", "fill_flats"):
        with pytest.raises(ReflectionRequired) as again:
            invoke(CONDITION, ctx, gate, {**args, "method": method})
        assert again.value.hints[0].prompt_args == {"method": method, "max_depth": "none"}


# Through a real server


@pytest.mark.anyio
async def test_code_mode_routes_dinf_in_a_confined_worker(workspace_dir: Path) -> None:
    """The kernels compile in memory inside a real sandboxed worker (no numba cache to write): the
    funnel's centre is its one sink and gathers its 49 cells."""
    write(workspace_dir / "funnel.tif", funnel())
    steps = (
        'hydrology.flow_direction("funnel.tif", "dinf.tif", routing="dinf")["sink_cells"]',
        'hydrology.flow_accumulation("dinf.tif", "acc.tif")["max_value"]',
    )
    async with Client(stdio_params(workspace_dir, "--exec-timeout", "300")) as client:
        results: list[dict[str, Any]] = [await run_gated(client, code) for code in steps]
    assert results[0]["result"] == 1
    assert math.isclose(results[1]["result"], 49.0, rel_tol=1e-9)


# breach


def test_breach_cuts_the_dam_just_below_the_pit_and_raises_nothing(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a breach that fills, or cuts deeper than needed: the 12 m dam between the 5 m pit
    and the 4 m cell is lowered to the float32 just below 5 m; no other cell changes, none rises."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(CONDITION, ctx, dem="dam.tif", dst="breached.tif", method="breach")
    z = read(workspace_dir / "breached.tif")
    expected = dammed()
    expected[2, 4] = np.nextafter(np.float32(5.0), np.float32(-np.inf))
    assert np.array_equal(z, expected)
    assert (result.lowered_cells, result.raised_cells) == (1, 0)
    assert result.max_lowering == pytest.approx(7.0, abs=1e-5)


def test_breached_dem_drains_the_pit_through_the_cut(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a cut that leaves the pit a sink: after breach D8 sends the pit east (1) through
    the lowered dam, and no sink remains."""
    write(workspace_dir / "dam.tif", dammed())
    call(CONDITION, ctx, dem="dam.tif", dst="breached.tif", method="breach")
    result = call(FLOW_DIRECTION, ctx, dem="breached.tif", dst="d8.tif")
    assert read(workspace_dir / "d8.tif")[2, 3] == 1 and result.sink_cells == 0


@pytest.mark.parametrize(("max_depth", "lowered", "raised"), [(8.0, 1, 0), (5.0, 0, 3)])
def test_breach_max_depth_bounds_the_cut_and_fills_what_needs_more(
    ctx: OperationContext, workspace_dir: Path, max_depth: float, lowered: int, raised: int
) -> None:
    """Guards against a max_depth ignored or a pit left undrained: the dam needs a 7 m cut. With
    max_depth 8 it is cut (one cell lowered); with 5 it is not, and the pit is filled instead: the pit
    and the two cells upstream of it (10, 9, 5 m) rise to the dam's 12 m."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(CONDITION, ctx, dem="dam.tif", dst="b.tif", method="breach", max_depth=max_depth)
    assert (result.lowered_cells, result.raised_cells) == (lowered, raised)
    if raised:
        assert (read(workspace_dir / "b.tif")[2, 1:4] == 12.0).all()
        assert "1 pit(s) needing a deeper cut filled" in result.note


def test_breach_cuts_a_closed_depression_over_its_saddle(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against the cheapest channel not taken: the 2 m pit inside a 5 m hollow walled at 20 m
    is cut out over the 12 m saddle to the 11 m edge cell (3 cells lowered: hollow, saddle, edge),
    not through the 20 m wall, and nothing is raised."""
    write(workspace_dir / "pit.tif", depression())
    result = call(CONDITION, ctx, dem="pit.tif", dst="b.tif", method="breach")
    z = read(workspace_dir / "b.tif")
    assert (result.lowered_cells, result.raised_cells) == (3, 0)
    assert z[1, 3] < 2.0 and z[0, 3] < z[1, 3]
    assert call(FLOW_DIRECTION, ctx, dem="b.tif", dst="d8.tif").sink_cells == 0
