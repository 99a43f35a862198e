"""D8 as the field defines it: each cell drains to the neighbour down the steepest slope.

O'Callaghan & Mark (1984) and Jenson & Domingue (1988), as ArcGIS, GRASS, TauDEM and WhiteboxTools
compute it: the slope to a neighbour is its drop divided by the ground distance between the two cell
centres, so a diagonal neighbour, farther away, must be lower by more to win. Draining to the lowest
neighbour instead picks a diagonal whenever it is lower but not steeper.

Planes: a plane falling towards bearing b (degrees clockwise from north) drains, by the definition,
to the neighbour whose direction on the ground is closest to b. Neighbour directions on the ground:
N 0, E 90, S 180, W 270, and the diagonals at atan(width / height) from the nearest north or south.
The answer changes half-way between two neighbour directions (the "tie lines"), so the bearings are
chosen at least 4.5 degrees from every tie line of the three grids:

- square cells (10 x 10 m): diagonals at 45 degrees; tie lines at 22.5 + 45 k.
- wide cells (20 m wide, 10 m tall): diagonals at atan(2) = 63.4 degrees from N/S; tie lines (first
  quadrant) at 31.7 (N|NE) and 76.7 (NE|E), mirrored in the others.
- geographic cells of 0.001 x 0.001 degrees at 60 N: a degree of longitude is cos 60 = 1/2 of one of
  latitude on the ground (55.8 vs 111.4 km on WGS 84), so the cells are about 56 m wide, 111 m tall;
  diagonals at atan(1/2) = 26.6 degrees from N/S; tie lines at 13.3 (N|NE) and 58.3 (NE|E), mirrored.

Bearings 18, 27, 63, 72 past each of N, E, S, W: 16 planes on each grid. The expected codes are read
off those tie lines in the table below, not computed by the operation's formula.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine

from llmc_mcp.errors import Refused
from llmc_mcp.operations import OperationContext, get_operation
from tests.rasters import write

CONDITION = get_operation("hydrology.condition")
FLOW_DIRECTION = get_operation("hydrology.flow_direction")
FLOW_ACCUMULATION = get_operation("hydrology.flow_accumulation")
STREAMS = get_operation("hydrology.streams")

E, SE, S, SW, W, NW, N, NE = 1, 2, 4, 8, 16, 32, 64, 128
SQUARE = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
WIDE = Affine(20.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
GEOGRAPHIC = Affine(0.001, 0.0, 10.0, 0.0, -0.001, 60.0035)
"""7 x 7 cells of 0.001 degrees whose middle row is centred on 60 N."""
EARTH_RADIUS = 6_371_000.0

BEARINGS = (18, 27, 63, 72, 108, 117, 153, 162, 198, 207, 243, 252, 288, 297, 333, 342)
EXPECTED = {
    # bearing: (square, wide, geographic)
    18: (N, N, NE),
    27: (NE, N, NE),
    63: (NE, NE, E),
    72: (E, NE, E),
    108: (E, SE, E),
    117: (SE, SE, E),
    153: (SE, S, SE),
    162: (S, S, SE),
    198: (S, S, SW),
    207: (SW, S, SW),
    243: (SW, SW, W),
    252: (W, SW, W),
    288: (W, NW, W),
    297: (NW, NW, W),
    333: (NW, N, NW),
    342: (N, N, NW),
}
GRIDS = ("square", "wide", "geographic")


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def plane(grid: str, bearing: float, size: int = 7) -> tuple[np.ndarray, Affine, str]:
    """Elevations (m) of a plane falling 0.1 m per metre towards ``bearing``, sampled at the cell centres'
    ground positions (east and north of the first cell, in metres), with its transform and CRS."""
    rows, cols = np.mgrid[0:size, 0:size].astype("float64")
    if grid == "geographic":
        latitude = GEOGRAPHIC.f + GEOGRAPHIC.e * (rows + 0.5)
        east = np.radians(GEOGRAPHIC.a * cols) * EARTH_RADIUS * np.cos(np.radians(latitude))
        north = np.radians(-GEOGRAPHIC.e * -rows) * EARTH_RADIUS
        transform, crs = GEOGRAPHIC, "EPSG:4326"
    else:
        transform = SQUARE if grid == "square" else WIDE
        east, north = cols * transform.a, rows * transform.e
        crs = "EPSG:32633"
    b = math.radians(bearing)
    z = 1000.0 - 0.1 * (east * math.sin(b) + north * math.cos(b))
    return z.astype("float32"), transform, crs


@pytest.mark.parametrize("grid", GRIDS)
def test_planes_drain_to_the_neighbour_closest_to_their_downhill_bearing(
    ctx: OperationContext, workspace_dir: Path, grid: str
) -> None:
    """Guards against draining to the lowest neighbour (a farther diagonal that is lower but not
    steeper) and against slopes over cell counts or degrees instead of ground metres (wide and
    geographic cells): on each of the 16 planes every interior cell gets the code in the table."""
    column = GRIDS.index(grid)
    found: dict[int, list[int]] = {}
    for bearing in BEARINGS:
        z, transform, crs = plane(grid, bearing)
        write(workspace_dir / f"plane{bearing}.tif", z, transform=transform, crs=crs)
        call(FLOW_DIRECTION, ctx, dem=f"plane{bearing}.tif", dst=f"d8_{bearing}.tif")
        found[bearing] = np.unique(read(workspace_dir / f"d8_{bearing}.tif")[1:-1, 1:-1]).tolist()
    assert found == {bearing: [EXPECTED[bearing][column]] for bearing in BEARINGS}


def test_a_plane_ten_degrees_north_of_east_drains_east(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against issue 19's example: on square cells a plane falling towards bearing 80 drains east
    (1), 10 degrees off, not north-east (128), 35 degrees off, though the north-east neighbour is lower
    (by 0.1 x 14.14 x cos 35 = 1.16 m against 0.1 x 10 x cos 10 = 0.98 m)."""
    z, transform, crs = plane("square", 80)
    write(workspace_dir / "plane.tif", z, transform=transform, crs=crs)
    call(FLOW_DIRECTION, ctx, dem="plane.tif", dst="d8.tif")
    assert (read(workspace_dir / "d8.tif")[1:-1, 1:-1] == E).all()


def test_equal_slopes_go_to_the_first_neighbour_in_esri_order(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an undocumented tie rule, and against the lowest neighbour winning a tie: on cells
    30 m wide and 40 m tall (diagonal 50 m) a cell 3 m above its east neighbour, 4 m above its south
    one and 5 m above its south-east one falls 0.1 m per metre to all three and drains east (1), the
    first of E, SE, S in ESRI order, not to the lowest (SE); one 3 m above its west, 4 m above its
    south and 5 m above its south-west neighbour drains south (4), before SW and W."""
    z = np.full((4, 7), 10.0, dtype="float32")
    z[1, 2], z[2, 1], z[2, 2] = 7.0, 6.0, 5.0  # around the cell (1, 1)
    z[1, 4], z[2, 5], z[2, 4] = 7.0, 6.0, 5.0  # around the cell (1, 5)
    write(workspace_dir / "tie.tif", z, transform=Affine(30.0, 0.0, 500_000.0, 0.0, -40.0, 4_500_000.0))
    call(FLOW_DIRECTION, ctx, dem="tie.tif", dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    assert (d8[1, 1], d8[1, 5]) == (E, S)


def v_valley() -> np.ndarray:
    """60 x 41 cells of 10 m: sides rising 10 m a column from the floor (column 20), which falls 1 m a
    row to 0 m in the bottom row."""
    r, c = np.mgrid[0:60, 0:41]
    return (10.0 * np.abs(c - 20) + (59 - r)).astype("float32")


def test_a_v_valley_channels_only_its_floor(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against side cells draining diagonally down-valley (lower, not steeper) and so gathering
    channels of their own: every side cell drains across to the floor (10 m over 10 m, against 11 m
    over 14.1 m diagonally), the floor drains south, so the floor cell of row r gathers its row's 41
    cells for each row down to it, 41 (r + 1); at 100 cells the streams are the floor from row 2
    (123 cells) to row 59: 58 cells, nothing else."""
    write(workspace_dir / "valley.tif", v_valley())
    call(FLOW_DIRECTION, ctx, dem="valley.tif", dst="d8.tif")
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
    call(STREAMS, ctx, accumulation="acc.tif", dst="streams.tif", threshold=100.0)
    channel = read(workspace_dir / "streams.tif") == 1
    expected = np.zeros((60, 41), dtype=bool)
    expected[2:, 20] = True
    assert channel.sum() == 58
    assert (channel == expected).all()


OFFSETS = {E: (0, 1), SE: (1, 1), S: (1, 0), SW: (1, -1), W: (0, -1), NW: (-1, -1), N: (-1, 0), NE: (-1, 1)}
"""ESRI code: (row, column) step, in ESRI order."""


def reference_d8(z: np.ndarray, width: float, height: float) -> np.ndarray:
    """D8 from the definition, cell by cell: the code of the neighbour with the greatest drop per metre
    between centres (ties, within one part in a million, to the first in ESRI order); 0 where no
    valid neighbour is lower."""
    rows, cols = z.shape
    out = np.zeros(z.shape, dtype="uint8")
    for r in range(rows):
        for c in range(cols):
            slopes = {E: 0.0}  # nodata cells, and cells of nodata neighbours only, drain nowhere
            for code, (dr, dc) in OFFSETS.items():
                if 0 <= r + dr < rows and 0 <= c + dc < cols and not np.isnan(z[r + dr, c + dc]):
                    drop = float(z[r, c]) - float(z[r + dr, c + dc])
                    slopes[code] = drop / math.hypot(dr * height, dc * width)
            steepest = max(slopes.values())
            if steepest > 0:
                out[r, c] = next(code for code, s in slopes.items() if s >= steepest * (1 - 1e-6))
    return out


def fractal(seed: int, size: int = 96) -> np.ndarray:
    """A random fractal surface (power spectrum falling as frequency^-3, the spectrum of real terrain),
    scaled to 0-300 m: ridges, valleys and closed depressions everywhere."""
    rng = np.random.default_rng(seed)
    fy, fx = np.meshgrid(np.fft.fftfreq(size), np.fft.fftfreq(size), indexing="ij")
    frequency = np.hypot(fx, fy)
    frequency[0, 0] = 1.0
    spectrum = np.fft.fft2(rng.standard_normal((size, size))) * frequency**-1.5
    surface = np.fft.ifft2(spectrum).real
    return (300.0 * (surface - surface.min()) / np.ptp(surface)).astype("float32")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_d8_matches_the_definition_cell_by_cell_on_conditioned_fractal_dems(
    ctx: OperationContext, workspace_dir: Path, seed: int
) -> None:
    """Guards against any cell where the operation and the definition part: on a fractal DEM
    conditioned with fill_flats (every cell but outlets has a strictly lower neighbour, so no cell is
    left to the flood), every cell's code equals the reference's, written above from the definition
    on 10 m square cells."""
    write(workspace_dir / "dem.tif", fractal(seed))
    call(CONDITION, ctx, dem="dem.tif", dst="sloped.tif", method="fill_flats")
    call(FLOW_DIRECTION, ctx, dem="sloped.tif", dst="d8.tif")
    expected = reference_d8(read(workspace_dir / "sloped.tif"), 10.0, 10.0)
    d8 = read(workspace_dir / "d8.tif")
    assert (d8 == expected).sum() == d8.size


@pytest.mark.parametrize("seed", [4, 5])
def test_d8_matches_the_definition_off_the_flats_of_a_filled_fractal_dem(
    ctx: OperationContext, workspace_dir: Path, seed: int
) -> None:
    """Guards against the steepest descent and the flood's flat routing getting in each other's way: on a
    fractal DEM filled flat (fill), every cell with a lower neighbour has the reference's code, every
    cell without one drains to a neighbour at its own height or nowhere (never uphill), and no cell
    drains into a loop (the accumulation would refuse the grid)."""
    write(workspace_dir / "dem.tif", fractal(seed, 64))
    call(CONDITION, ctx, dem="dem.tif", dst="filled.tif", method="fill")
    call(FLOW_DIRECTION, ctx, dem="filled.tif", dst="d8.tif")
    z = read(workspace_dir / "filled.tif")
    d8 = read(workspace_dir / "d8.tif")
    expected = reference_d8(z, 10.0, 10.0)
    sloping = expected > 0
    assert (d8[sloping] == expected[sloping]).all()
    for r, c in zip(*np.nonzero(~sloping), strict=True):
        if d8[r, c] != 0:
            dr, dc = OFFSETS[int(d8[r, c])]
            assert z[r + dr, c + dc] == z[r, c], (r, c)
    result = call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
    assert result.max_value <= z.size


def test_a_projection_that_changes_the_cells_shape_along_a_row_is_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against one set of neighbour distances per row where they do not hold: 100 km cells of
    the Lambert azimuthal equal-area grid of Europe (EPSG:3035) 3000 km west of its centre stretch one
    way on the ground and shrink the other, differently at each end of a row, so D8 is refused with
    the fix (a conformal or geographic CRS) instead of computed on wrong distances."""
    z = np.arange(45, dtype="float32").reshape(5, 9)
    grid = Affine(100_000.0, 0.0, 1_000_000.0, 0.0, -100_000.0, 3_500_000.0)
    write(workspace_dir / "wide_area.tif", z, transform=grid, crs="EPSG:3035")
    with pytest.raises(Refused) as refused:
        call(FLOW_DIRECTION, ctx, dem="wide_area.tif", dst="d8.tif")
    assert "along a row" in str(refused.value) and "conformal" in refused.value.fix


def square(rows: list[list[float]]) -> np.ndarray:
    return np.array(rows, dtype="float32")


def test_a_flat_drains_one_step_at_a_time_to_its_nearest_way_out(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against flat cells left draining nowhere, or sent the long way round: the 5 m flat's two
    cells beside the 4 m outlet drain down to it (SE, E), and each other cell to a neighbour one
    step nearer them, worked breadth first from those ways out in row order, neighbours in ESRI order:
    (1,2) E and (2,2) NE from (1,3); then (1,1) SE and (2,1) E from (2,2)."""
    z = square([[9, 9, 9, 9, 9], [9, 5, 5, 5, 9], [9, 5, 5, 5, 4], [9, 9, 9, 9, 9]])
    write(workspace_dir / "flat.tif", z)
    call(FLOW_DIRECTION, ctx, dem="flat.tif", dst="d8.tif")
    assert read(workspace_dir / "d8.tif")[1:3, 1:4].tolist() == [[SE, E, SE], [E, NE, E]]


def test_cells_of_a_flat_on_the_edge_of_the_grid_are_outlets(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against edge cells without a lower neighbour draining along the edge to one another
    (what a priority flood does, seeded from every edge cell): each is an outlet, flow leaving the
    grid there, as the encoding says; the rows below drain north onto them."""
    z = square([[5, 5, 5], [6, 6, 6], [7, 7, 7]])
    write(workspace_dir / "edge.tif", z)
    result = call(FLOW_DIRECTION, ctx, dem="edge.tif", dst="d8.tif")
    assert read(workspace_dir / "d8.tif").tolist() == [[0, 0, 0], [N, N, N], [N, N, N]]
    assert (result.outlet_cells, result.sink_cells) == (3, 0)


def test_a_flat_without_a_way_out_drains_to_one_sink(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a kept depression with a flat floor becoming as many sinks as it has cells: its
    first cell in row order is the one sink, and the others drain to it (W, N, NW)."""
    z = square([[9, 9, 9, 9], [9, 3, 3, 9], [9, 3, 3, 9], [9, 9, 9, 9]])
    write(workspace_dir / "pit.tif", z)
    result = call(FLOW_DIRECTION, ctx, dem="pit.tif", dst="d8.tif")
    assert read(workspace_dir / "d8.tif")[1:3, 1:3].tolist() == [[0, W], [N, NW]]
    assert result.sink_cells == 1


def steps_to_a_way_out(z: np.ndarray, steepest: np.ndarray) -> dict[tuple[int, int], int]:
    """For each cell on a flat (valid, no lower neighbour, one of equal height): the fewest steps across
    equal cells to a way out (a cell of the flat's height that has a lower neighbour, or a flat cell
    on the edge of the data), by a plain breadth-first search; absent when there is none."""
    rows, cols = z.shape

    def neighbours(r: int, c: int) -> list[tuple[int, int]]:
        return [(r + dr, c + dc) for dr, dc in OFFSETS.values() if 0 <= r + dr < rows and 0 <= c + dc < cols]

    def equal(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return bool(z[a] == z[b])  # NaN equals nothing

    flat = {
        (r, c)
        for r in range(rows)
        for c in range(cols)
        if not np.isnan(z[r, c]) and steepest[r, c] == 0 and any(equal((r, c), n) for n in neighbours(r, c))
    }
    edge = {p for p in flat if len(neighbours(*p)) < 8 or any(np.isnan(z[n]) for n in neighbours(*p))}
    exits = {n for p in flat for n in neighbours(*p) if n not in flat and steepest[n] > 0 and equal(n, p)}
    distance = {p: 0 for p in edge | exits}
    frontier = sorted(distance)
    while frontier:
        reached = []
        for p in frontier:
            for n in neighbours(*p):
                if n in flat and n not in distance and equal(n, p):
                    distance[n] = distance[p] + 1
                    reached.append(n)
        frontier = reached
    return {p: distance[p] for p in flat if p in distance}


@pytest.mark.parametrize("holed", [False, True])
def test_every_flat_cell_steps_nearer_its_nearest_way_out_on_a_terraced_dem(
    ctx: OperationContext, workspace_dir: Path, holed: bool
) -> None:
    """Guards against flat routing that wanders (a step that is not nearer), leaves a reachable flat
    cell draining nowhere, or loops: on a fractal DEM terraced to whole 20 m (flats everywhere, on the
    edges too; with NaN holes, flats beside nodata), each flat cell with a way out drains to an equal
    neighbour one step nearer it (0 steps: an outlet on the edge of the data drains nowhere), and
    the accumulation finds no loop."""
    z = (np.round(fractal(6, 64) / 20.0) * 20.0).astype("float32")
    if holed:
        z[20:26, 30:41] = np.nan
        z[0:5, 10:20] = np.nan
    write(workspace_dir / "terraced.tif", z)
    call(FLOW_DIRECTION, ctx, dem="terraced.tif", dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    steepest = reference_d8(z, 10.0, 10.0)
    valid = ~np.isnan(z)
    assert (d8[valid & (steepest > 0)] == steepest[valid & (steepest > 0)]).all()
    steps = steps_to_a_way_out(z, steepest)
    assert len(steps) > 100, "the DEM has too few flat cells to test"
    for (r, c), distance in steps.items():
        if distance == 0:
            assert d8[r, c] == 0, (r, c)
            continue
        dr, dc = OFFSETS[int(d8[r, c])]
        assert steps.get((r + dr, c + dc), 0) == distance - 1 and z[r + dr, c + dc] == z[r, c], (r, c)
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")


DEGENERATE = {
    "two cells": [[5.0, 5.0]],
    "one row": [[5.0, 5.0, 5.0, 5.0, 4.0, 5.0]],
    "one column": [[5.0], [5.0], [6.0], [5.0]],
    "all flat": [[2.0] * 6] * 5,
    "flat ring round nodata": [[3, 3, 3, 3], [3, np.nan, np.nan, 3], [3, 3, 3, 3], [1, 3, 3, 3]],
}


@pytest.mark.parametrize("shape", sorted(DEGENERATE))
def test_flats_of_degenerate_grids_drain_to_equal_neighbours_without_loops(
    ctx: OperationContext, workspace_dir: Path, shape: str
) -> None:
    """Guards against the flat routing's edge cases (a single cell, a single row or column, a grid all
    one height, a flat wrapped round a nodata hole): every cell it routes drains to a valid neighbour
    of its own height, every cell on the edge of the data without a lower neighbour is an outlet,
    and the accumulation finds no loop."""
    z = np.array(DEGENERATE[shape], dtype="float32")
    write(workspace_dir / "dem.tif", z)
    call(FLOW_DIRECTION, ctx, dem="dem.tif", dst="d8.tif")
    d8 = read(workspace_dir / "d8.tif")
    steepest = reference_d8(z, 10.0, 10.0)
    rows, cols = z.shape
    for r, c in zip(*np.nonzero(~np.isnan(z) & (steepest == 0)), strict=True):
        around = [(r + dr, c + dc) for dr, dc in OFFSETS.values()]
        on_edge = any(not (0 <= rr < rows and 0 <= cc < cols) or np.isnan(z[rr, cc]) for rr, cc in around)
        if on_edge:
            assert d8[r, c] == 0, (r, c)
        elif d8[r, c] != 0:
            dr, dc = OFFSETS[int(d8[r, c])]
            assert z[r + dr, c + dc] == z[r, c], (r, c)
    call(FLOW_ACCUMULATION, ctx, flow_dir="d8.tif", dst="acc.tif")
