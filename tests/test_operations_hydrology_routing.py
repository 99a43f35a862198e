"""Breaching, drained flats, D-infinity and FD8 (Whitebox, DD-MCP-067), on DEMs worked out on paper.

Fixtures (10 m cells, UTM): a channel along one row that falls to an outlet in the east edge, dammed
by one 12 m cell holding a 5 m pit behind it; a 50 m plateau walled by a 100 m rim with one 40 m
notch in the south edge; inclined planes; a funnel (elevation = distance from the centre cell).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.hydrology._whitebox import FLAT_INCREMENT
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, stdio_params, structured
from tests.test_operations_hydrology import call, read, run_gated, write

CONDITION = get_operation("hydrology.condition")
FLOW_DIRECTION = get_operation("hydrology.flow_direction")
FLOW_ACCUMULATION = get_operation("hydrology.flow_accumulation")
WATERSHED = get_operation("hydrology.watershed")
DAM_ROW = 2


def dammed() -> np.ndarray:
    """5 x 7, 100 m rim; row 2 runs 10, 9, then a 5 m pit, a 12 m dam, 4, and a 3 m outlet on the edge.

    Filling raises the pit and the two cells upstream of it to the dam's 12 m (the spill point);
    breaching cuts the dam instead: 3 m down to just below the 9 m upstream cell.
    """
    z = np.full((5, 7), 100.0)
    z[DAM_ROW, 1:] = [10.0, 9.0, 5.0, 12.0, 4.0, 3.0]
    return z


def plateau() -> np.ndarray:
    """6 x 6: a 4 x 4 plateau at 50 m inside a 100 m rim, with a 40 m notch in the south edge (row 5,
    column 2). The plateau is flat: only its three cells beside the notch have a lower neighbour."""
    z = np.full((6, 6), 100.0)
    z[1:5, 1:5] = 50.0
    z[5, 2] = 40.0
    return z


def plane(dz_row: float, dz_col: float, size: int = 7) -> np.ndarray:
    """Elevation rising ``dz_row`` a row (southwards) and ``dz_col`` a column (eastwards)."""
    r, c = np.mgrid[0:size, 0:size]
    return 100.0 + dz_row * r + dz_col * c


def funnel(size: int = 7) -> np.ndarray:
    """Elevation = distance (cells) from the centre: every cell but the centre has a lower neighbour."""
    r, c = np.mgrid[0:size, 0:size]
    centre = size // 2
    return np.hypot(r - centre, c - centre)


def lower_neighbour_everywhere(z: np.ndarray) -> bool:
    """Whether every interior cell has a strictly lower 8-neighbour (edge cells are outlets)."""
    rows, cols = z.shape
    padded = np.pad(z, 1, constant_values=np.inf)
    lowest = np.full(z.shape, np.inf)
    for dr in (0, 1, 2):
        for dc in (0, 1, 2):
            if (dr, dc) != (1, 1):
                lowest = np.minimum(lowest, padded[dr : dr + rows, dc : dc + cols])
    return bool((lowest[1:-1, 1:-1] < z[1:-1, 1:-1]).all())


# condition: breach, fill, fill_flats


def test_breach_cuts_the_dam_instead_of_raising_the_pit_to_it(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a 'breach' that fills: the dam cell is cut from 12 m to just below the 9 m cell
    upstream (9 - 2e-6), the pit is raised only to just below that cell (9 - 1e-6, Whitebox's first
    step), and no other cell changes."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(CONDITION, ctx, dem="dam.tif", dst="breached.tif", method="breach")
    out = read(workspace_dir / "breached.tif")
    expected = dammed()
    expected[DAM_ROW, 3] = 9.0 - FLAT_INCREMENT
    expected[DAM_ROW, 4] = 9.0 - 2 * FLAT_INCREMENT
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-9)
    assert (result.lowered_cells, result.raised_cells) == (1, 1)
    assert math.isclose(result.max_lowering, 3.0 + 2 * FLAT_INCREMENT, abs_tol=1e-9)
    assert lower_neighbour_everywhere(out[1:4, :]) or out[DAM_ROW, 4] > out[DAM_ROW, 5]


def test_fill_raises_the_pit_and_its_upstream_to_the_dam(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against 'fill' and 'breach' doing the same: filling leaves the dam at 12 m and raises the
    pit and the two cells upstream of it (10 m, 9 m, 5 m) to 12 m; nothing is lowered."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(CONDITION, ctx, dem="dam.tif", dst="filled.tif", method="fill")
    expected = dammed()
    expected[DAM_ROW, 1:4] = 12.0
    np.testing.assert_array_equal(read(workspace_dir / "filled.tif"), expected.astype("float32"))
    assert (result.raised_cells, result.lowered_cells, result.max_raise) == (3, 0, 7.0)


def test_a_breach_deeper_than_max_depth_is_not_cut(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against max_depth being ignored for 'breach': the dam needs a 3 m cut, more than 2, so it
    stays 12 m and the pit stays a sink (raised by Whitebox's first step only)."""
    write(workspace_dir / "dam.tif", dammed())
    result = call(CONDITION, ctx, dem="dam.tif", dst="kept.tif", method="breach", max_depth=2.0)
    out = read(workspace_dir / "kept.tif")
    assert out[DAM_ROW, 4] == 12.0 and result.lowered_cells == 0
    assert out[DAM_ROW, 3] < min(out[DAM_ROW, 2], out[DAM_ROW, 4]) and result.raised_cells == 1
    d8 = call(FLOW_DIRECTION, ctx, dem="kept.tif", dst="d8.tif")
    assert read(workspace_dir / "d8.tif")[DAM_ROW, 3] == 0 and d8.sink_cells >= 1


def test_fill_flats_makes_every_plateau_cell_drain(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against flats left flat (no direction for dinf or mfd): after 'fill_flats' every interior
    cell has a lower neighbour; only plateau cells rise, each by more than 0 and at most 1e-6 x the
    plateau's 16 cells, except the three beside the notch, which already drained; the rim is untouched."""
    write(workspace_dir / "flat.tif", plateau())
    result = call(CONDITION, ctx, dem="flat.tif", dst="drained.tif", method="fill_flats")
    out = read(workspace_dir / "drained.tif")
    rise = out - plateau()
    assert lower_neighbour_everywhere(out)
    assert (rise >= 0).all() and rise.max() <= 16 * FLAT_INCREMENT
    raised = np.zeros(rise.shape, dtype=bool)
    raised[1:5, 1:5] = True
    raised[4, 1:4] = False
    np.testing.assert_array_equal(rise > 0, raised)
    assert result.raised_cells == 13 and result.lowered_cells == 0


def test_fill_flats_refuses_max_depth(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a max_depth silently ignored: 'fill_flats' fills every depression."""
    write(workspace_dir / "flat.tif", plateau())
    with pytest.raises(InvalidArgument, match="max_depth was given with method 'fill_flats'"):
        call(CONDITION, ctx, dem="flat.tif", dst="x.tif", method="fill_flats", max_depth=1.0)


# flow_direction: dinf, mfd


@pytest.mark.parametrize(
    ("dz_row", "dz_col", "angle"),
    [
        (0.0, 1.0, 270.0),
        (1.0, 0.0, 0.0),
        (-1.0, 0.0, 180.0),
        (1.0, 0.5, 360.0 - math.degrees(math.atan(0.5))),
    ],
)
def test_dinf_on_an_inclined_plane_gives_its_downhill_azimuth(
    ctx: OperationContext, workspace_dir: Path, dz_row: float, dz_col: float, angle: float
) -> None:
    """Guards against another angle convention (radians, counter-clockwise, from east): on a plane
    rising east the interior flows west (270); rising south, north (0, not 360); rising north, south
    (180); rising 1 a row south and 0.5 a column east, at 360 - atan(0.5) = 333.43 degrees."""
    write(workspace_dir / "plane.tif", plane(dz_row, dz_col))
    result = call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="dinf.tif", routing="dinf")
    with rasterio.open(workspace_dir / "dinf.tif") as ds:
        assert ds.tags(1)["LLMC_ROUTING"] == "dinf" and ds.dtypes[0] == "float32"
        interior = ds.read(1)[1:-1, 1:-1]
    np.testing.assert_allclose(interior, angle, atol=1e-4)
    assert "degrees clockwise from north" in result.encoding


def test_mfd_splits_flow_among_every_lower_neighbour(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an MFD that is D8 in disguise or a Whitebox bit order left undocumented: on a
    funnel, the cell east of the centre sends all to the centre (W: 16); the cell north-east of it
    (1.41 from the centre) to W, S and SW (16 + 4 + 8 = 28); the centre drains nowhere (0, a sink)."""
    write(workspace_dir / "funnel.tif", funnel())
    result = call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="mfd.tif", routing="mfd")
    with rasterio.open(workspace_dir / "mfd.tif") as ds:
        assert ds.tags(1)["LLMC_ROUTING"] == "mfd"
        mfd = ds.read(1)
    assert (mfd[3, 4], mfd[2, 4], mfd[3, 3]) == (16, 28, 0)
    assert result.sink_cells == 1


@pytest.mark.parametrize("routing", ["dinf", "mfd"])
def test_multiple_flow_accumulation_conserves_the_cells(
    ctx: OperationContext, workspace_dir: Path, routing: str
) -> None:
    """Guards against flow lost or counted twice when it is split: everything on the funnel ends in
    its centre, which gathers all 49 cells; a cell on the rim holds only its own 1 (nothing flows up)."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="dir.tif", routing=routing)
    extra = {"dem": "funnel.tif"} if routing == "mfd" else {}
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="dir.tif", dst="acc.tif", **extra)
    acc = read(workspace_dir / "acc.tif")
    assert math.isclose(acc[3, 3], 49.0, rel_tol=1e-9) and math.isclose(result.max_value, 49.0, rel_tol=1e-9)
    assert acc[0, 0] == 1.0


def test_mfd_accumulation_needs_the_dem_the_directions_came_from(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against FD8 shares guessed from the pointer (equal splits): without dem it is refused,
    and a DEM giving other receivers (a plane instead of the funnel) is refused too."""
    write(workspace_dir / "funnel.tif", funnel())
    write(workspace_dir / "plane.tif", plane(0.0, 1.0))
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="mfd.tif", routing="mfd")
    with pytest.raises(InvalidArgument, match="Pass dem"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif")
    with pytest.raises(InvalidArgument, match="does not give the directions"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="mfd.tif", dst="acc.tif", dem="plane.tif")


def test_dinf_accumulation_refuses_ground_areas(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a units='m2' silently answered in cells: the library counts cells only."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="dinf.tif", routing="dinf")
    with pytest.raises(InvalidArgument, match="counts cells only"):
        call(FLOW_ACCUMULATION, ctx, flow_dir="dinf.tif", dst="acc.tif", units="m2")


def test_watershed_refuses_multiple_flow_directions(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against tracing catchments along one receiver of an MFD pointer whose values happen to be
    D8 codes (the funnel's east cell holds 16): the LLMC_ROUTING tag says mfd, and that is refused."""
    write(workspace_dir / "funnel.tif", funnel())
    call(FLOW_DIRECTION, ctx, dem="funnel.tif", dst="mfd.tif", routing="mfd")
    with pytest.raises(InvalidArgument, match="holds mfd flow directions"):
        call(WATERSHED, ctx, flow_dir="mfd.tif", pour_points=[[500_035.0, 4_499_965.0]], dst="ws.tif")


def test_dinf_refuses_a_geographic_grid(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against angles from slopes whose horizontal distances are degrees."""
    from affine import Affine

    write(
        workspace_dir / "geo.tif",
        plane(0.0, 1.0),
        crs="EPSG:4326",
        transform=Affine(0.001, 0, 10, 0, -0.001, 50),
    )
    with pytest.raises(InvalidArgument, match="geographic grid"):
        call(FLOW_DIRECTION, ctx, dem="geo.tif", dst="dinf.tif", routing="dinf")


# Both faces, through a real server


@pytest.mark.anyio
async def test_classic_mode_breaches_after_the_justification(workspace_dir: Path) -> None:
    """The classic face: a miss names method 'breach'; justified, the dam is cut."""
    write(workspace_dir / "dam.tif", dammed())
    arguments = {"dem": "dam.tif", "dst": "breached.tif", "method": "breach"}
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        miss = structured(await client.call_tool("hydrology_condition", arguments))
        (hint,) = miss["reflection_required"]
        assert hint["prompt_args"]["method"] == "breach"
        answer: dict[str, Any] = {"hash": hint["hash"], "domain": hint["domain"]}
        answer["justification"] = justification_for(hint)
        assert not (await client.call_tool("persist_justification", answer)).is_error
        done = await client.call_tool("hydrology_condition", arguments)
    assert not done.is_error and structured(done)["lowered_cells"] == 1
    assert read(workspace_dir / "breached.tif")[DAM_ROW, 4] < 9.0


@pytest.mark.anyio
async def test_code_mode_routes_dinf_in_a_confined_worker(workspace_dir: Path) -> None:
    """Whitebox inside a real sandboxed (Landlock-confined, no network) worker: its scratch file is the
    write grant's, in the workspace, and removed; the funnel's centre gathers its 49 cells."""
    write(workspace_dir / "funnel.tif", funnel())
    steps = (
        'hydrology.flow_direction("funnel.tif", "dinf.tif", routing="dinf")["sink_cells"]',
        'hydrology.flow_accumulation("dinf.tif", "acc.tif")["max_value"]',
    )
    async with Client(stdio_params(workspace_dir, "--exec-timeout", "300")) as client:
        results = [await run_gated(client, code) for code in steps]
    assert results[0]["result"] == 1
    assert math.isclose(results[1]["result"], 49.0, rel_tol=1e-9)
    assert not list(workspace_dir.glob(".*partial*"))
