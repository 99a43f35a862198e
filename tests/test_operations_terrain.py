"""terrain.slope, aspect, hillshade and roughness, specified on DEMs built here with answers on paper.

The main fixture is an inclined plane z = p E + q N (E, N: metres east and north) with p = 0.03 and
q = 0.04: its gradient is 0.05, so its slope is atan(0.05) = 2.8624052° or 5 %, and it falls toward
(-p, -q), so its aspect is atan2(-0.03, -0.04) = 216.8699° (south-west of south). Each test's
docstring names the mistake it guards against. The last tests go through both faces (classic tools
and execute_code) with the SDK's in-process client.
"""

from __future__ import annotations

import importlib
import math
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from pyproj import Geod

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, PathRefused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured

SLOPE = get_operation("terrain.slope")
ASPECT = get_operation("terrain.aspect")
HILLSHADE = get_operation("terrain.hillshade")
ROUGHNESS = get_operation("terrain.roughness")
dem_module = importlib.import_module("llmc_mcp.operations.terrain.dem")

P, Q = 0.03, 0.04
PLANE_SLOPE_DEG = math.degrees(math.atan(0.05))  # 2.862405226...
PLANE_ASPECT = math.degrees(math.atan2(-P, -Q)) % 360  # 216.869897...
UTM = "EPSG:32618"
NORTH_UP = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
H, W = 30, 40
FLOAT32_DEG = 1e-5
"""Outputs are float32: 2.86° is held to 2.4e-7, 216.87° to 1.5e-5; gradients are computed in float64."""


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def write(
    path: Path,
    data: np.ndarray,
    *,
    transform: Affine = NORTH_UP,
    crs: str | None = UTM,
    nodata: float | None = None,
    unit: str | None = None,
) -> Path:
    height, width = data.shape
    profile = {
        "driver": "GTiff", "width": width, "height": height, "count": 1, "dtype": data.dtype.name,
        "crs": crs, "transform": transform, "nodata": nodata, "tiled": True, "blockxsize": 16,
        "blockysize": 16,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data, 1)
        if unit is not None:
            ds.set_band_unit(1, unit)
    return path


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def plane_on(transform: Affine, rows: int = H, cols: int = W, p: float = P, q: float = Q) -> np.ndarray:
    """z = p (x - x0) + q (y - y0) + 100 at every cell centre, in the grid's own map units."""
    cc, rr = np.meshgrid(np.arange(cols) + 0.5, np.arange(rows) + 0.5)
    x, y = transform @ (cc, rr)
    return p * (np.asarray(x) - transform.c) + q * (np.asarray(y) - transform.f) + 100.0


def interior(a: np.ndarray) -> np.ndarray:
    return a[1:-1, 1:-1]


def ring(a: np.ndarray) -> np.ndarray:
    return np.concatenate([a[0], a[-1], a[1:-1, 0], a[1:-1, -1]])


# --- slope and aspect of a plane ------------------------------------------------------------------


def test_slope_of_a_plane_is_atan_of_its_gradient_in_degrees_and_percent(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a gradient divided by the wrong distance (Horn's 8 x cell size) or percent
    taken as tan x 90: every interior cell of the plane is 2.8624052° and 5 %."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    degrees = call(SLOPE, ctx, dem="dem.tif", dst="deg.tif")
    call(SLOPE, ctx, dem="dem.tif", dst="pct.tif", units="percent")
    assert interior(read(workspace_dir / "deg.tif")) == pytest.approx(PLANE_SLOPE_DEG, abs=FLOAT32_DEG)
    assert interior(read(workspace_dir / "pct.tif")) == pytest.approx(5.0, abs=1e-5)
    assert degrees.z_factor == 1.0 and degrees.z_factor_source == "horizontal_unit"
    assert degrees.cell_size_m == (10.0, 10.0) and degrees.ground_spacing == "projected"
    assert degrees.output.dtypes == ["float32"]


def test_aspect_is_the_downslope_compass_direction(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against aspect reported as the upslope direction, counter-clockwise from east, or in
    array directions: the plane rising north-east at (0.03, 0.04) faces 216.8699°, and a plane rising
    to the east (z = 0.1 x) faces due west, 270°."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    write(workspace_dir / "east.tif", plane_on(NORTH_UP, p=0.1, q=0.0))
    call(ASPECT, ctx, dem="dem.tif", dst="aspect.tif")
    call(ASPECT, ctx, dem="east.tif", dst="west.tif")
    call(SLOPE, ctx, dem="east.tif", dst="east_slope.tif")
    assert interior(read(workspace_dir / "aspect.tif")) == pytest.approx(PLANE_ASPECT, abs=FLOAT32_DEG)
    assert interior(read(workspace_dir / "west.tif")) == pytest.approx(270.0, abs=FLOAT32_DEG)
    assert interior(read(workspace_dir / "east_slope.tif")) == pytest.approx(5.7105931, abs=FLOAT32_DEG)


def test_south_up_and_mirrored_grids_give_the_north_up_slope_and_aspect(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against gradients taken in array directions: the same plane stored south-up (positive
    pixel height) or with columns running east to west (negative pixel width) has the same slope,
    and its aspect still points south-west (216.87°), not to its mirror image (323.13° or 143.13°)."""
    south_up = Affine(10.0, 0.0, 500_000.0, 0.0, 10.0, 4_500_000.0 - 10.0 * H)
    mirrored = Affine(-10.0, 0.0, 500_000.0 + 10.0 * W, 0.0, -10.0, 4_500_000.0)
    for name, transform in (("south_up", south_up), ("mirrored", mirrored)):
        write(workspace_dir / f"{name}.tif", plane_on(transform), transform=transform)
        call(SLOPE, ctx, dem=f"{name}.tif", dst=f"{name}_slope.tif")
        call(ASPECT, ctx, dem=f"{name}.tif", dst=f"{name}_aspect.tif")
        assert interior(read(workspace_dir / f"{name}_slope.tif")) == pytest.approx(
            PLANE_SLOPE_DEG, abs=FLOAT32_DEG
        )
        assert interior(read(workspace_dir / f"{name}_aspect.tif")) == pytest.approx(
            PLANE_ASPECT, abs=FLOAT32_DEG
        )


def test_geographic_dem_uses_each_rows_ground_spacing_on_the_ellipsoid(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against degrees taken as metres, or one cell size for the whole grid: near 45°N a 1"
    cell is 21.9 m east-west and 30.9 m north-south, so treating it as square turns the plane's
    aspect by 8°. The plane is built on the WGS 84 ellipsoid (E: metres along each row's parallel from
    the middle meridian, N: metres along the meridian, both with pyproj.Geod). Tolerance 0.005° for
    aspect, 1e-4° for slope: on the ellipsoid that surface bends, 10" off its middle meridian its
    north gradient differs by p Δλ sin φ ≈ 1.1e-6 (0.0013° of aspect, 5e-5° of slope)."""
    geod = Geod(ellps="WGS84")
    step = 1 / 3600
    rows, cols = 21, 21
    lon0, lat0 = 10.0, 45.0
    transform = Affine(step, 0.0, lon0 - step * cols / 2, 0.0, -step, lat0 + step * rows / 2)
    lats = lat0 + step * rows / 2 - step * (np.arange(rows) + 0.5)
    lons = lon0 - step * cols / 2 + step * (np.arange(cols) + 0.5)
    lon_grid, lat_grid = np.meshgrid(lons, lats)
    flat = np.full(lat_grid.shape, lon0)
    _, _, east = geod.inv(flat, lat_grid, lon_grid, lat_grid)
    _, _, north = geod.inv(flat, np.full(lat_grid.shape, lat0), flat, lat_grid)
    z = P * np.sign(lon_grid - lon0) * east + Q * np.sign(lat_grid - lat0) * north + 100.0
    write(workspace_dir / "geo.tif", z, transform=transform, crs="EPSG:4326")
    result = call(SLOPE, ctx, dem="geo.tif", dst="geo_slope.tif")
    call(ASPECT, ctx, dem="geo.tif", dst="geo_aspect.tif")
    assert interior(read(workspace_dir / "geo_slope.tif")) == pytest.approx(PLANE_SLOPE_DEG, abs=1e-4)
    assert interior(read(workspace_dir / "geo_aspect.tif")) == pytest.approx(PLANE_ASPECT, abs=5e-3)
    assert result.ground_spacing == "geographic_per_row" and result.z_factor_source == "assumed_metres"
    across, along = result.cell_size_m
    assert across == pytest.approx(21.9, abs=0.05) and along == pytest.approx(30.87, abs=0.05)


# --- vertical units -------------------------------------------------------------------------------


def test_elevations_declared_in_feet_are_converted_to_metres(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against feet divided by metres: a UTM DEM whose band declares 'ft' holds the plane in
    feet; unconverted, its slope would read atan(0.05 / 0.3048) = 9.31° instead of 2.8624°."""
    write(workspace_dir / "ft.tif", plane_on(NORTH_UP) / 0.3048, unit="ft")
    result = call(SLOPE, ctx, dem="ft.tif", dst="slope.tif")
    assert interior(read(workspace_dir / "slope.tif")) == pytest.approx(PLANE_SLOPE_DEG, abs=FLOAT32_DEG)
    assert (result.z_factor, result.z_factor_source) == (0.3048, "band_unit")


def test_an_explicit_z_factor_converts_undeclared_feet(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against z_factor accepted and ignored: the same feet DEM with no declared unit and
    z_factor=0.3048 has the plane's slope, and says the argument set it."""
    write(workspace_dir / "ft.tif", plane_on(NORTH_UP) / 0.3048)
    result = call(SLOPE, ctx, dem="ft.tif", dst="slope.tif", z_factor=0.3048)
    assert interior(read(workspace_dir / "slope.tif")) == pytest.approx(PLANE_SLOPE_DEG, abs=FLOAT32_DEG)
    assert (result.z_factor, result.z_factor_source) == (0.3048, "argument")


def test_a_z_factor_that_is_not_positive_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a zero or negative z_factor flattening or inverting the terrain (a negative
    one would turn every aspect around) instead of being refused."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    for bad in (0.0, -0.3048):
        with pytest.raises(InvalidArgument, match="z_factor"):
            call(SLOPE, ctx, dem="dem.tif", dst="slope.tif", z_factor=bad)


def test_a_projected_crs_in_us_survey_feet_is_measured_in_its_own_unit(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a feet CRS's cell size read as metres, or feet elevations divided by metres:
    in EPSG:2277 (Texas Central, US survey feet) a 30 ft grid holding the plane in feet has the
    plane's slope, each axis converted by 1200/3937 m per foot."""
    transform = Affine(30.0, 0.0, 2_300_000.0, 0.0, -30.0, 10_000_000.0)
    write(workspace_dir / "tx.tif", plane_on(transform), transform=transform, crs="EPSG:2277")
    result = call(SLOPE, ctx, dem="tx.tif", dst="slope.tif")
    assert interior(read(workspace_dir / "slope.tif")) == pytest.approx(PLANE_SLOPE_DEG, abs=FLOAT32_DEG)
    assert result.z_factor == pytest.approx(1200 / 3937) and result.z_factor_source == "horizontal_unit"
    assert result.cell_size_m[0] == pytest.approx(30 * 1200 / 3937)


def test_an_unknown_elevation_unit_is_refused_naming_z_factor(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against guessing the vertical unit: a band declaring 'fathoms' is refused, and the fix
    names z_factor."""
    write(workspace_dir / "odd.tif", plane_on(NORTH_UP), unit="fathoms")
    with pytest.raises(InvalidArgument, match="fathoms") as err:
        call(SLOPE, ctx, dem="odd.tif", dst="slope.tif")
    assert "z_factor" in (err.value.fix or "")


def test_web_mercator_away_from_the_equator_is_refused_naming_reproject(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against map metres taken as ground metres: at 60°N a Web Mercator metre is half a
    ground metre, which would halve every gradient; the DEM is refused and the fix names reproject."""
    transform = Affine(30.0, 0.0, 1_000_000.0, 0.0, -30.0, 8_400_000.0)  # about 60°N
    write(workspace_dir / "merc.tif", plane_on(transform), transform=transform, crs="EPSG:3857")
    with pytest.raises(InvalidArgument, match="ground") as err:
        call(SLOPE, ctx, dem="merc.tif", dst="slope.tif")
    assert "reproject" in (err.value.fix or "")


def test_a_dem_without_crs_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against slopes computed with an unknown horizontal unit."""
    write(workspace_dir / "bare.tif", plane_on(NORTH_UP), crs=None)
    with pytest.raises(InvalidArgument, match="no CRS"):
        call(SLOPE, ctx, dem="bare.tif", dst="slope.tif")


# --- flat cells, hillshade ------------------------------------------------------------------------


def test_flat_ground_has_slope_zero_and_the_documented_flat_aspect(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against flat cells made nodata or given a direction (atan2(0, 0) = 0 reads 'north'):
    a flat DEM has slope 0 and aspect -1 everywhere inside, and the result says -1 is the flat value."""
    write(workspace_dir / "flat.tif", np.full((H, W), 250.0, "float32"))
    result = call(ASPECT, ctx, dem="flat.tif", dst="aspect.tif")
    call(SLOPE, ctx, dem="flat.tif", dst="slope.tif")
    assert (interior(read(workspace_dir / "aspect.tif")) == -1.0).all()
    assert (interior(read(workspace_dir / "slope.tif")) == 0.0).all()
    assert result.flat_value == -1.0 and result.valid_cells == (H - 2) * (W - 2)


def test_hillshade_of_flat_ground_is_gdaldems_1_plus_254_sin_altitude(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against another scale (0..1, or 255 sin alt) or the zenith used as the altitude: gdaldem
    writes 1 + 254 cos(incidence), and on flat ground the incidence is 90° - altitude, so 45° gives
    1 + 254 sin 45° = 180.6051 and 30° gives 128."""
    write(workspace_dir / "flat.tif", np.full((H, W), 250.0, "float32"))
    call(HILLSHADE, ctx, dem="flat.tif", dst="hs45.tif")
    call(HILLSHADE, ctx, dem="flat.tif", dst="hs30.tif", altitude=30)
    assert interior(read(workspace_dir / "hs45.tif")) == pytest.approx(1 + 254 * math.sqrt(0.5), abs=1e-4)
    assert interior(read(workspace_dir / "hs30.tif")) == pytest.approx(128.0, abs=1e-4)


def test_hillshade_is_brightest_on_a_slope_facing_the_sun_squarely(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the sun's azimuth measured from the wrong axis or the wrong way round: a 45°
    slope facing west (z rises 1 m per metre eastward) under a sun in the west (azimuth 270) at 45°
    is lit head-on, 255; with the sun in the east (azimuth 90) it is in shadow, 1."""
    write(workspace_dir / "west.tif", plane_on(NORTH_UP, p=1.0, q=0.0))
    call(HILLSHADE, ctx, dem="west.tif", dst="lit.tif", azimuth=270, altitude=45)
    call(HILLSHADE, ctx, dem="west.tif", dst="dark.tif", azimuth=90, altitude=45)
    assert interior(read(workspace_dir / "lit.tif")) == pytest.approx(255.0, abs=1e-4)
    assert (interior(read(workspace_dir / "dark.tif")) == 1.0).all()


# --- roughness ------------------------------------------------------------------------------------

HAND = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 20.0]])
"""Centre 5; neighbours 1 2 3 4 6 7 8 20 (sum 51, |differences| 4 3 2 1 1 2 3 15, sum 31)."""


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("tri", 31 / 8), ("tpi", 5 - 51 / 8), ("roughness", 20.0 - 1.0)],
)
def test_tri_tpi_and_roughness_of_a_hand_computed_window(
    ctx: OperationContext, workspace_dir: Path, kind: str, expected: float
) -> None:
    """Guards against TRI as Riley's root of squares, TPI with the centre in its own mean, or
    roughness without the centre: on the 3x3 window above TRI = 31/8 = 3.875, TPI = 5 - 51/8 =
    -1.375, roughness = 20 - 1 = 19, and the 8 edge cells around it are NaN."""
    write(workspace_dir / "hand.tif", HAND)
    result = call(ROUGHNESS, ctx, dem="hand.tif", dst=f"{kind}.tif", kind=kind)
    out = read(workspace_dir / f"{kind}.tif")
    assert out[1, 1] == pytest.approx(expected, abs=1e-6)
    assert np.isnan(ring(out)).all()
    assert (result.valid_cells, result.nodata_cells, result.z_factor) == (1, 8, None)


# --- nodata, edges, windows, memory ---------------------------------------------------------------


def test_cells_whose_window_touches_nodata_and_the_edges_are_nodata(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against gradients made up from a nodata value or from cells beyond the edge: one nodata
    cell at (3, 4) of a 10 x 10 plane blanks the 3x3 block around it, the outer ring is NaN, and
    every other cell has the plane's slope (64 inside, 9 blanked: 55 valid)."""
    data = plane_on(NORTH_UP, 10, 10)
    data[3, 4] = -9999.0
    write(workspace_dir / "holes.tif", data, nodata=-9999.0)
    result = call(SLOPE, ctx, dem="holes.tif", dst="slope.tif")
    out = read(workspace_dir / "slope.tif")
    blanked = np.zeros(out.shape, dtype=bool)
    blanked[2:5, 3:6] = True
    assert np.isnan(ring(out)).all()
    assert np.isnan(out[blanked]).all()
    inside = np.zeros(out.shape, dtype=bool)
    inside[1:-1, 1:-1] = True
    assert out[inside & ~blanked] == pytest.approx(PLANE_SLOPE_DEG, abs=FLOAT32_DEG)
    assert (result.valid_cells, result.nodata_cells) == (55, 45)


def test_window_seams_do_not_change_any_cell(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a halo off by one at window seams: a curved surface computed in 7 x 11 windows
    (ragged at the edges) is identical, cell for cell, to one window over the whole raster."""
    rows, cols = np.mgrid[0:H, 0:W]
    write(workspace_dir / "bowl.tif", (0.5 * (rows - 12.0) ** 2 + 0.3 * (cols - 17.0) ** 2).astype("float32"))
    for kind in ("slope", "aspect"):
        op = SLOPE if kind == "slope" else ASPECT
        call(op, ctx, dem="bowl.tif", dst=f"whole_{kind}.tif")
        with monkeypatch.context() as patch:
            patch.setattr(dem_module, "WINDOW_ROWS", 7)
            patch.setattr(dem_module, "WINDOW_COLS", 11)
            call(op, ctx, dem="bowl.tif", dst=f"tiled_{kind}.tif")
        np.testing.assert_array_equal(
            read(workspace_dir / f"tiled_{kind}.tif"), read(workspace_dir / f"whole_{kind}.tif")
        )


def test_slope_memory_does_not_grow_with_the_raster(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against reading the whole DEM: a 2048 x 2048 DEM (32 MiB as float64) in 128 x 512
    windows must peak well below it (the write's read-back takes 8 MiB chunks)."""
    monkeypatch.setattr(dem_module, "WINDOW_ROWS", 128)
    monkeypatch.setattr(dem_module, "WINDOW_COLS", 512)
    big = np.zeros((2048, 2048), "float32")
    with rasterio.open(
        workspace_dir / "big.tif", "w", driver="GTiff", width=2048, height=2048, count=1, dtype="float32",
        crs=UTM, transform=NORTH_UP, tiled=True, blockxsize=256, blockysize=256,
    ) as ds:  # fmt: skip
        ds.write(big, 1)
    tracemalloc.start()
    try:
        result = call(SLOPE, ctx, dem="big.tif", dst="big_slope.tif")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024
    assert result.valid_cells == 2046 * 2046


def test_dst_equal_to_dem_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against the write destroying its own input."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    with pytest.raises(InvalidArgument, match="same file"):
        call(SLOPE, ctx, dem="dem.tif", dst="dem.tif")


def test_a_dem_whose_metadata_names_another_file_is_refused_before_any_pixel(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the DEM opened without the hostile-file checks: an OVERVIEW_FILE naming
    /etc/passwd would make GDAL read it by itself, so the operation refuses and writes nothing."""
    write(workspace_dir / "hostile.tif", plane_on(NORTH_UP))
    with rasterio.open(workspace_dir / "hostile.tif", "r+") as ds:
        ds.update_tags(ns="OVERVIEWS", OVERVIEW_FILE="/etc/passwd")
    with pytest.raises(PathRefused, match="OVERVIEW_FILE"):
        call(SLOPE, ctx, dem="hostile.tif", dst="slope.tif")
    assert not (workspace_dir / "slope.tif").exists()


# --- both faces -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_tool_terrain_slope(workspace_dir: Path) -> None:
    """Guards against the terrain namespace missing from the classic face."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        done = structured(
            await client.call_tool(
                "terrain_slope", {"dem": "dem.tif", "dst": "slope.tif", "units": "percent"}
            )
        )
    assert done["output"]["path"] == "slope.tif" and done["measure"] == "slope in percent"
    assert interior(read(workspace_dir / "slope.tif")) == pytest.approx(5.0, abs=1e-5)


@pytest.mark.anyio
async def test_code_mode_terrain_aspect_and_roughness(workspace_dir: Path) -> None:
    """Guards against the stubs' functions and the sandbox bindings disagreeing with the catalog."""
    write(workspace_dir / "dem.tif", plane_on(NORTH_UP))
    code = (
        "a = terrain.aspect('dem.tif', 'aspect.tif')\n"
        "r = terrain.roughness('dem.tif', 'tpi.tif', kind='tpi')\n"
        "[a['flat_value'], a['valid_cells'], r['measure']]"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    assert answer["result"] == [-1.0, (H - 2) * (W - 2), "tpi"]
    assert interior(read(workspace_dir / "aspect.tif")) == pytest.approx(PLANE_ASPECT, abs=FLOAT32_DEG)
    assert interior(read(workspace_dir / "tpi.tif")) == pytest.approx(0.0, abs=1e-9)
