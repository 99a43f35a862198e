"""crs.transform and raster.area against answers worked out on paper, not against the code's own formulas.

Paper values used below:

- EPSG:4326 (lon 3°, lat 0°) is on the central meridian of UTM zone 31N at the equator: by the
  definition of UTM (false easting 500,000 m, false northing 0 in the north), (500000, 0) exactly.
- The ground area of the cell 0°..1°E x 45°..46°N on the WGS 84 ellipsoid (a = 6378137 m,
  1/f = 298.257223563): the zone between two parallels per radian of longitude is
  S(φ) = b²/2 · [sin φ / (1 - e² sin² φ) + ln((1 + e sin φ) / (1 - e sin φ)) / (2e)], so the cell is
  (π/180) · (S(46°) - S(45°)) = 8,686,494,956.67 m². Checked independently with pyproj.Geod on the
  polygon whose parallel edges are densified to 2,000 points each: 8,686,494,956.64 m² (3e-12 apart;
  the 4-corner geodesic polygon is 8,686,379,301.7 m², because geodesics are not parallels).
- The 1° cell 0°..1°E x 0°..1°N: (π/180) · S(1°) = 12,308,463,893.98 m² by the same formula.
- A 100 x 100 US survey foot cell is 929.0341 m² on the map (1 ftUS = 1200/3937 m); near (79°W,
  35.5°N) in EPSG:2264 (NC State Plane, ftUS) its ground area is 929.2535 m² (the corners taken to
  latitude/longitude and measured with pyproj.Geod, and independently the planar area divided by
  PROJ's areal scale factor 0.99976390 there): never 10,000 (square feet read as metres).
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
from pyproj import Geod, Transformer

from llmc_mcp.config import Settings
from llmc_mcp.errors import CrsError, InvalidArgument
from llmc_mcp.operations import crs, raster
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured

CELL_45_46 = 8_686_494_956.67
"""m², cell 0..1°E x 45..46°N on WGS 84 (module docstring)."""
CELL_0_1 = 12_308_463_893.98
"""m², cell 0..1°E x 0..1°N on WGS 84."""
FOOT_CELL = 929.2535
"""m², a 100 x 100 ftUS cell of EPSG:2264 near (79°W, 35.5°N)."""


def transform(ctx: OperationContext, **args: Any) -> Any:
    return crs.transform.run(ctx, crs.transform.validate(args))


def area(ctx: OperationContext, **args: Any) -> Any:
    return raster.area.run(ctx, raster.area.validate(args))


def write(
    folder: Path, name: str, data: np.ndarray, crs_text: str, transform: Affine, nodata: Any = None
) -> str:
    profile = {"driver": "GTiff", "width": data.shape[1], "height": data.shape[0], "count": 1}
    with rasterio.open(
        folder / name, "w", **profile, dtype=data.dtype, crs=crs_text, transform=transform, nodata=nodata
    ) as dst:
        dst.write(data, 1)
    return name


# -- crs.transform ------------------------------------------------------------------------------------


def test_lon_3_lat_0_is_the_origin_of_utm_31n(ctx: OperationContext) -> None:
    """Guards against a wrong projection or swapped axes: the paper answer is (500000, 0) exactly."""
    result = transform(ctx, points=[[3.0, 0.0]], src_crs="EPSG:4326", dst_crs="EPSG:32631")
    x, y = result.points[0]
    assert x == pytest.approx(500_000, abs=1e-6) and y == pytest.approx(0, abs=1e-6)
    assert result.operation.name == "UTM zone 31N"
    assert (result.operation.accuracy_m, result.operation.ballpark, result.failed) == (0.0, False, 0)


def test_axis_order_is_x_first_even_for_epsg_4326(ctx: OperationContext) -> None:
    """Guards against EPSG:4326's official latitude-first order leaking in: (lon, lat) in, (lon, lat) out.

    UTM 31N (500000, 1105854.83...) is on the central meridian 3°E at 10°N; read latitude first, the
    answer would be (10, 3)."""
    northing = Transformer.from_crs("EPSG:4326", "EPSG:32631", always_xy=True).transform(3, 10)[1]
    result = transform(ctx, points=[[500_000.0, northing]], src_crs="EPSG:32631", dst_crs="EPSG:4326")
    lon, lat = result.points[0]
    assert lon == pytest.approx(3.0, abs=1e-9) and lat == pytest.approx(10.0, abs=1e-9)
    back = transform(ctx, points=[[3.0, 10.0]], src_crs="EPSG:4326", dst_crs="EPSG:4326")
    assert back.points == [(3.0, 10.0)]


def test_a_real_datum_shift_is_named_with_its_accuracy(ctx: OperationContext) -> None:
    """Guards against reporting a Helmert shift as ballpark (or as exact): WGS 84 to ED50 in northern France
    has EPSG transformations of stated accuracy; the point moves by about 100 m, as ED50 does there."""
    result = transform(ctx, points=[[3.0, 50.0]], src_crs="EPSG:4326", dst_crs="EPSG:4230")
    op = result.operation
    assert not op.ballpark and "ED50 to WGS 84" in op.name and op.accuracy_m is not None
    assert 0 < op.accuracy_m <= 10
    lon, lat = result.points[0]
    moved = Geod(ellps="WGS84").inv(3.0, 50.0, lon, lat)[2]
    assert 50 < moved < 200


def test_a_datum_with_no_known_shift_is_flagged_ballpark(ctx: OperationContext) -> None:
    """Guards against silent ballpark results: EPSG has no transformation from WGS 84 to Xian 1980
    (EPSG:4610), so PROJ can only take the datums as equal; the result must say so."""
    result = transform(ctx, points=[[116.4, 39.9]], src_crs="EPSG:4326", dst_crs="EPSG:4610")
    assert result.operation.ballpark is True
    assert result.operation.accuracy_m is None
    assert "ballpark" in result.note
    assert result.points[0] == pytest.approx((116.4, 39.9))  # a ballpark geographic offset is a no-op


def test_a_better_operation_whose_grid_is_missing_is_reported(ctx: OperationContext) -> None:
    """Guards against hiding that PROJ would do better with a grid: NAD27 to NAD83 in Kansas is a 0.15 m
    NADCON grid shift; this pyproj ships no conus grid (and never downloads), so the result is a
    ballpark offset, and the grid it lacks is named."""
    result = transform(ctx, points=[[-98.0, 38.0]], src_crs="EPSG:4267", dst_crs="EPSG:4269")
    assert result.operation.ballpark is True
    assert result.better_unavailable, result.note
    best = result.better_unavailable[0]
    assert best.accuracy_m == pytest.approx(0.15) and "NAD27 to NAD83" in best.name
    grids = {grid for op in result.better_unavailable for grid in op.missing_grids}
    assert "us_noaa_conus.tif" in grids
    assert "us_noaa_conus.tif" in result.note
    # The Canadian grids are for other points: not reported for a point in Kansas.
    assert not any(grid.startswith("ca_") for grid in grids)


def test_points_spread_over_several_grids_name_each_missing_grid(ctx: OperationContext) -> None:
    """Guards against reporting only the grid of the first area: Kansas and Alaska points are served by
    different NADCON grids (conus, alaska), both missing here; both are named."""
    result = transform(ctx, points=[[-98.0, 38.0], [-150.0, 61.0]], src_crs="EPSG:4267", dst_crs="EPSG:4269")
    grids = {grid for op in result.better_unavailable for grid in op.missing_grids}
    assert {"us_noaa_conus.tif", "us_noaa_alaska.tif"} <= grids
    assert result.operation.ballpark and result.failed == 0


def test_a_point_outside_the_projection_is_null_not_infinity(ctx: OperationContext) -> None:
    """Guards against inf leaking into JSON: the antipode of an orthographic projection's centre has no
    image; its slot is null and counted, the other point is transformed."""
    ortho = "+proj=ortho +lat_0=0 +lon_0=0 +datum=WGS84 +units=m +type=crs"
    result = transform(ctx, points=[[0.0, 0.0], [180.0, 0.0]], src_crs="EPSG:4326", dst_crs=ortho)
    assert result.points[0] == pytest.approx((0.0, 0.0), abs=1e-6)
    assert result.points[1] is None and result.failed == 1


@pytest.mark.parametrize(
    ("points", "match"),
    [
        ([], "empty"),
        ([[0.0, math.nan]], "finite"),
        ([[1.0, 2.0], [math.inf, 0.0]], "index 1"),
    ],
)
def test_points_are_validated_with_a_fix(ctx: OperationContext, points: list, match: str) -> None:
    """Guards against NaN/Inf or empty input reaching PROJ and coming back as nonsense coordinates."""
    with pytest.raises(InvalidArgument, match=match) as caught:
        transform(ctx, points=points, src_crs="EPSG:4326", dst_crs="EPSG:3857")
    assert caught.value.fix


def test_too_many_points_are_refused_with_the_limit(ctx: OperationContext) -> None:
    """Guards against unbounded server work: more than 100,000 points is refused, naming the limit."""
    with pytest.raises(InvalidArgument, match="100,000") as caught:
        transform(ctx, points=[[0.0, 0.0]] * 100_001, src_crs="EPSG:4326", dst_crs="EPSG:3857")
    assert "Split" in caught.value.fix


def test_a_point_that_is_not_a_pair_is_a_validation_error(ctx: OperationContext) -> None:
    """Guards against a silently reshaped list: [x, y, z] is not an (x, y) pair."""
    with pytest.raises(InvalidArgument, match="points"):
        transform(ctx, points=[[1.0, 2.0, 3.0]], src_crs="EPSG:4326", dst_crs="EPSG:3857")


def test_crs_text_follows_the_project_rules(ctx: OperationContext) -> None:
    """Guards against a second CRS parser: +init= is refused here as everywhere, and so is a geocentric CRS
    (its points have three coordinates)."""
    with pytest.raises(CrsError, match="init"):
        transform(ctx, points=[[0.0, 0.0]], src_crs="+init=epsg:4326", dst_crs="EPSG:3857")
    with pytest.raises(CrsError, match="geocentric"):
        transform(ctx, points=[[0.0, 0.0]], src_crs="EPSG:4326", dst_crs="EPSG:4978")


# -- raster.area --------------------------------------------------------------------------------------


def test_a_one_degree_cell_at_45n_has_its_ellipsoidal_area(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a spherical or planar cell area: the WGS 84 cell 0..1°E x 45..46°N is 8,686,494,956.67
    m² (module docstring); a sphere of radius 6371 km would give 8.70e9, a 'degree = 111 km' count 1.23e10."""
    name = write(workspace_dir, "deg.tif", np.ones((1, 1), "uint8"), "EPSG:4326", Affine(1, 0, 0, 0, -1, 46))
    result = area(ctx, path=name)
    assert result.method == "ellipsoidal_quadrangle" and result.ellipsoid == "WGS 84"
    (entry,) = result.areas
    assert (entry.value, entry.cells) == (1.0, 1)
    assert entry.area_m2 == pytest.approx(CELL_45_46, rel=1e-12)
    assert entry.area_ha == pytest.approx(CELL_45_46 / 10_000, rel=1e-12)


def test_each_row_of_a_geographic_grid_has_its_own_cell_area(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against one nominal cell size for the whole raster: in a column of 1° cells from 46°N down
    to 0°, the cell at 45-46°N and the one at 0-1°N differ by 30 %; each gets its own paper value."""
    name = write(
        workspace_dir,
        "rows.tif",
        np.array([[1]] + [[0]] * 44 + [[2]], dtype="uint8"),
        "EPSG:4326",
        Affine(1, 0, 0, 0, -1, 46),
        nodata=0,
    )
    result = area(ctx, path=name)
    by_value = {a.value: a.area_m2 for a in result.areas}
    assert by_value[1.0] == pytest.approx(CELL_45_46, rel=1e-12)
    assert by_value[2.0] == pytest.approx(CELL_0_1, rel=1e-12)
    assert result.nodata_cells == 44


def test_web_mercator_gives_the_ground_area_not_the_planar_one(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against measuring Mercator metres: the same 1° cell stored in EPSG:3857 is 1.77e10 m² on
    the map (inflated about 1/cos²(45.5°) = 2.04 times) but 8,686,494,956.67 m² on the ground."""
    to_3857 = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    (x0, x1), (y0, y1) = to_3857.transform([0, 1], [45, 46])
    assert (x1 - x0) * (y1 - y0) > 1.7e10  # the inflated planar area this test must not get
    name = write(
        workspace_dir,
        "merc.tif",
        np.ones((1, 1), "uint8"),
        "EPSG:3857",
        Affine(x1 - x0, 0, x0, 0, y0 - y1, y1),
    )
    result = area(ctx, path=name)
    assert result.method == "ellipsoidal_quadrangle"
    assert result.total_area_m2 == pytest.approx(CELL_45_46, rel=1e-9)


def test_a_raster_in_us_survey_feet_gives_square_metres(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against square feet reported as square metres: 100 x 100 ftUS cells of EPSG:2264 are
    929.2535 m² each on the ground (929.03 on the map), never 10,000."""
    x, y = Transformer.from_crs("EPSG:4326", "EPSG:2264", always_xy=True).transform(-79.0, 35.5)
    data = np.ones((4, 4), dtype="uint8")
    name = write(workspace_dir, "ft.tif", data, "EPSG:2264", Affine(100, 0, x - 200, 0, -100, y + 200))
    result = area(ctx, path=name)
    assert result.method == "geodesic_cells" and result.ellipsoid == "GRS 1980"
    (entry,) = result.areas
    assert entry.cells == 16
    assert entry.area_m2 / 16 == pytest.approx(FOOT_CELL, rel=2e-6)


def test_nodata_and_nan_cells_are_excluded(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against counting nodata as a class: the nodata value and NaN add no area, and are counted."""
    data = np.array([[5.0, -9999.0], [np.nan, 5.0]], dtype="float32")
    name = write(workspace_dir, "nd.tif", data, "EPSG:4326", Affine(1, 0, 0, 0, -1, 1), nodata=-9999.0)
    result = area(ctx, path=name)
    assert [(a.value, a.cells) for a in result.areas] == [(5.0, 2)]
    assert result.nodata_cells == 2
    # Rows 1..0°N and 0..1°S hold one valid cell each: by symmetry, twice the 0..1°N cell.
    assert result.total_area_m2 == pytest.approx(2 * CELL_0_1, rel=1e-12)


def test_the_values_filter_reports_each_requested_value(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a filter that drops values silently or matches by float accident: only the asked
    values are measured, an absent one is reported with 0 cells, and 0.1 matches a float32 0.1."""
    ints = np.array([[1, 2], [3, 3]], dtype="uint8")
    name = write(workspace_dir, "cls.tif", ints, "EPSG:4326", Affine(1, 0, 0, 0, -1, 1))
    result = area(ctx, path=name, values=[3, 7, 2.5])
    assert [(a.value, a.cells) for a in result.areas] == [(3.0, 2), (7.0, 0), (2.5, 0)]
    assert result.total_cells == 2
    floats = np.array([[0.1, 0.2]], dtype="float32")
    name = write(workspace_dir, "f32.tif", floats, "EPSG:4326", Affine(1, 0, 0, 0, -1, 1))
    assert [(a.value, a.cells) for a in area(ctx, path=name, values=[0.1]).areas] == [(0.1, 1)]


def test_a_south_up_geographic_raster_gives_the_same_areas(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a negative area or a row order assumption: the 45..46°N cell stored south-up
    (positive row step) is the same ground."""
    name = write(workspace_dir, "south.tif", np.ones((1, 1), "uint8"), "EPSG:4326", Affine(1, 0, 0, 0, 1, 45))
    assert area(ctx, path=name).total_area_m2 == pytest.approx(CELL_45_46, rel=1e-12)


def test_a_large_projected_raster_is_measured_on_a_lattice_that_agrees(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the lattice shortcut drifting from per-cell measurement: 300 x 300 cells of 100 m in
    UTM 31N, 200 km east of its central meridian (lattice every 2 cells), against the sum of every
    cell's own geodesic area; and against the planar area (there the scale is 1.0002, area 1.0004)."""
    n, size, west, north = 300, 100.0, 700_000.0, 5_100_000.0
    data = np.ones((n, n), dtype="uint8")
    name = write(workspace_dir, "utm.tif", data, "EPSG:32631", Affine(size, 0, west, 0, -size, north))
    result = area(ctx, path=name)
    assert result.method == "geodesic_cells" and "lattice" in result.method_note
    edges = np.arange(n + 1) * size
    lon, lat = Transformer.from_crs("EPSG:32631", "EPSG:4326", always_xy=True).transform(
        *np.meshgrid(west + edges, north - edges)
    )
    geod = Geod(ellps="WGS84")
    total = math.fsum(
        abs(
            geod.polygon_area_perimeter(
                [lon[r, c], lon[r, c + 1], lon[r + 1, c + 1], lon[r + 1, c]],
                [lat[r, c], lat[r, c + 1], lat[r + 1, c + 1], lat[r + 1, c]],
            )[0]
        )
        for r in range(n)
        for c in range(n)
    )
    assert result.total_area_m2 == pytest.approx(total, rel=1e-9)
    planar = n * n * size * size
    assert abs(result.total_area_m2 / planar - 1) > 3e-4


def test_rotated_grids_and_missing_crs_are_refused_with_a_fix(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against measuring a rotated grid as if it were north-up, or a grid with no CRS at all."""
    for name, crs_text in (("rotated.tif", None), ("turned.tif", "EPSG:4326")):
        if crs_text:
            write(workspace_dir, name, np.ones((2, 2), "uint8"), crs_text, Affine(1, 0.2, 0, 0.2, -1, 46))
        with pytest.raises(InvalidArgument, match="rotated or sheared grid") as caught:
            area(ctx, path=name)
        assert "raster.reproject" in caught.value.fix
    with rasterio.open(
        workspace_dir / "nocrs.tif",
        "w",
        driver="GTiff",
        width=1,
        height=1,
        count=1,
        dtype="uint8",
        transform=Affine(1, 0, 0, 0, -1, 1),
    ) as dst:
        dst.write(np.ones((1, 1, 1), "uint8"))
    with pytest.raises(InvalidArgument, match="no CRS") as caught:
        area(ctx, path="nocrs.tif")
    assert "CRS" in caught.value.fix


def test_too_many_distinct_values_are_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an unbounded result: a continuous band has a value per cell; areas are for classes."""
    data = np.arange(120 * 100, dtype="float32").reshape(120, 100)
    name = write(workspace_dir, "cont.tif", data, "EPSG:4326", Affine(0.01, 0, 0, 0, -0.01, 1))
    with pytest.raises(InvalidArgument, match="distinct values") as caught:
        area(ctx, path=name)
    assert "values=" in caught.value.fix


def test_paths_follow_the_workspace_policy(ctx: OperationContext) -> None:
    """Guards against a new operation reading outside the workspace."""
    from llmc_mcp.errors import PathRefused

    with pytest.raises(PathRefused):
        area(ctx, path="../etc/passwd")


# -- both faces -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_face_transforms_and_measures(classic_settings: Settings, workspace_dir: Path) -> None:
    """Guards against an operation missing from a face: both tools exist in classic mode and answer."""
    write(workspace_dir, "deg.tif", np.ones((1, 1), "uint8"), "EPSG:4326", Affine(1, 0, 0, 0, -1, 46))
    async with Client(build_server(classic_settings)) as client:
        moved = structured(
            await client.call_tool(
                "crs_transform", {"points": [[3, 0]], "src_crs": "EPSG:4326", "dst_crs": "EPSG:32631"}
            )
        )
        measured = structured(await client.call_tool("raster_area", {"path": "deg.tif"}))
    assert moved["points"][0] == pytest.approx([500_000, 0], abs=1e-6)
    assert measured["areas"][0]["area_m2"] == pytest.approx(CELL_45_46, rel=1e-12)


@pytest.mark.anyio
async def test_code_face_transforms_and_measures(code_settings: Settings, workspace_dir: Path) -> None:
    """Guards against a sandbox binding that differs from the catalog: the same calls from agent code."""
    write(workspace_dir, "deg.tif", np.ones((1, 1), "uint8"), "EPSG:4326", Affine(1, 0, 0, 0, -1, 46))
    code = (
        'moved = crs.transform([(3, 0)], "EPSG:4326", "EPSG:32631")\n'
        'measured = raster.area("deg.tif", values=[1])\n'
        'first = measured["areas"][0]\n'
        '[moved["points"][0], moved["operation"]["ballpark"], first["area_m2"], measured["method"]]'
    )
    async with Client(build_server(code_settings)) as client:
        result = structured(await client.call_tool("execute_code", {"code": code}))
    assert result["ok"], result["error"]
    point, ballpark, square_metres, method = result["result"]
    assert point == pytest.approx([500_000, 0], abs=1e-6) and ballpark is False
    assert square_metres == pytest.approx(CELL_45_46, rel=1e-12) and method == "ellipsoidal_quadrangle"


def test_areas_of_interest_are_in_longitudes_from_greenwich() -> None:
    """Guards against a Paris-meridian CRS (EPSG:27572) putting the area of interest 2.34 degrees off,
    and with it the choice of transformation: Paris itself is at 2.3372 E of Greenwich."""
    from pyproj import CRS, Transformer

    from llmc_mcp.geodesy.reference import geographic_degrees

    lon, lat = Transformer.from_crs(
        CRS.from_epsg(27572), geographic_degrees(CRS.from_epsg(27572)), always_xy=True
    ).transform(600000, 2428000)
    assert abs(lon - 2.3372) < 1e-3 and abs(lat - 48.85) < 1e-2
