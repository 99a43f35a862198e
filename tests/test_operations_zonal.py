"""raster.zonal_stats and the polygon reader it shares with raster.clip, specified on rasters and zones built
here whose answers are worked out on paper.

The raster is linear, value = column index (0..39), on a 10 m UTM grid, so the mean over any band of whole
columns is the middle column and a cell half inside a polygon shows up as a count of exactly 0.5. Each
test's docstring names the mistake it guards against. The last tests go through both faces (classic tool
and execute_code) with the SDK's in-process client.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import rasterio.windows
import shapely
from affine import Affine
from mcp import Client
from pyproj import Transformer

from llmc_mcp.compute.polygons import hardened_pyogrio
from llmc_mcp.config import Settings
from llmc_mcp.errors import CrsError, InvalidArgument, NotFound, RasterError, Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured

ZONAL = get_operation("raster.zonal_stats")
X0, Y0, CELL = 500_000.0, 4_500_000.0, 10.0
GRID = Affine(CELL, 0.0, X0, 0.0, -CELL, Y0)
H, W = 30, 40
UTM = "EPSG:32631"


def call(ctx: OperationContext, **args: Any) -> Any:
    return ZONAL.run(ctx, ZONAL.validate(args))


def columns() -> np.ndarray:
    """a[r, c] = c: the mean over whole columns c0..c1 is (c0 + c1) / 2."""
    return np.tile(np.arange(W, dtype="float32"), (H, 1))


def write_raster(
    path: Path,
    data: np.ndarray,
    *,
    transform: Affine = GRID,
    nodata: float | None = None,
    scale: float | None = None,
    offset: float | None = None,
) -> Path:
    profile = {
        "driver": "GTiff", "width": data.shape[1], "height": data.shape[0], "count": 1,
        "dtype": data.dtype.name, "crs": UTM, "transform": transform, "nodata": nodata,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data, 1)
        if scale is not None:
            ds.scales = (scale,)
        if offset is not None:
            ds.offsets = (offset,)
    return path


def write_zones(
    path: Path,
    geometries: list[Any],
    *,
    crs: str = UTM,
    layer: str | None = None,
    names: list[str] | None = None,
) -> Path:
    pyogrio = hardened_pyogrio()
    driver = {".gpkg": "GPKG", ".geojson": "GeoJSON", ".shp": "ESRI Shapefile"}[path.suffix]
    names = names or [f"z{i}" for i in range(len(geometries))]
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(np.asarray(geometries, dtype=object)),
        [np.array(names, dtype=object)],
        ["name"],
        layer=layer,
        driver=driver,
        geometry_type="Unknown",
        crs=crs,
        append=path.exists(),
    )
    return path


def cells(c0: float, c1: float, r0: float, r1: float) -> Any:
    """The polygon covering columns [c0, c1) and rows [r0, r1) of GRID (fractions allowed)."""
    return shapely.box(X0 + c0 * CELL, Y0 - r1 * CELL, X0 + c1 * CELL, Y0 - r0 * CELL)


def only(result: Any) -> dict[str, float | None]:
    assert len(result.results) == 1
    return dict(result.results[0].stats)


# --- polygon zones ---------------------------------------------------------------------------------


def test_a_square_over_known_columns_has_the_exact_mean(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against cells picked by centre or by touch: columns 10..19, rows 5..14 exactly, so 100 cells of
    mean 14.5, min 10 and max 19, and a sum of 1450."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 5, 15)])
    stats = only(call(ctx, path="v.tif", zones="z.geojson", stats=["mean", "min", "max", "count", "sum"]))
    assert stats == {"mean": 14.5, "min": 10.0, "max": 19.0, "count": 100.0, "sum": 1450.0}


def test_half_a_cell_counts_as_half(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against all-or-nothing cell membership: a polygon over the left half of cell (3, 7) counts 0.5
    cells of value 7, and a polygon over 2.5 columns weights the half column by half."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.gpkg", [cells(7, 7.5, 3, 4), cells(2, 4.5, 0, 2)])
    result = call(ctx, path="v.tif", zones="z.gpkg", stats=["count", "sum", "mean"])
    assert result.results[0].stats == {"count": 0.5, "sum": 3.5, "mean": 7.0}
    # Columns 2 and 3 fully, column 4 half, over two rows: count 5, sum 2*(2 + 3 + 0.5*4) = 14.
    assert result.results[1].stats == {"count": 5.0, "sum": 14.0, "mean": 2.8}


def test_zones_in_wgs84_over_a_utm_raster_are_transformed_and_reported(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against zones laid on the raster in the wrong CRS (degrees read as metres: no cell at all) or
    transformed silently: the square of columns 10..19 written in longitude/latitude comes back over the
    same cells, and the result names the operation used."""
    write_raster(workspace_dir / "v.tif", columns())
    to_degrees = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True)
    square = cells(10, 20, 5, 15)
    in_degrees = shapely.transform(
        square, lambda xy: np.column_stack(to_degrees.transform(xy[:, 0], xy[:, 1]))
    )
    write_zones(workspace_dir / "z.geojson", [in_degrees], crs="EPSG:4326")
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["mean", "count"])
    assert result.zones_crs == "EPSG:4326"
    assert result.transformation is not None and "UTM zone 31N" in result.transformation
    assert only(result)["count"] == pytest.approx(100.0, abs=1e-6)
    assert only(result)["mean"] == pytest.approx(14.5, abs=1e-6)


def test_zones_in_the_raster_crs_say_no_transformation(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a transformation reported (or applied) when none was needed."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(0, 1, 0, 1)])
    result = call(ctx, path="v.tif", zones="z.geojson")
    assert (result.zones_crs, result.transformation) == (UTM, None)


def test_nodata_cells_are_left_out_of_every_statistic(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against nodata averaged in as a value: in columns 10..19 of row 0, columns 10 and 11 are
    -9999 (nodata), so 8 cells of mean 15.5 remain, and min is 12, not -9999."""
    data = columns()
    data[0, 10:12] = -9999
    write_raster(workspace_dir / "v.tif", data, nodata=-9999)
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 0, 1)])
    stats = only(call(ctx, path="v.tif", zones="z.geojson", stats=["count", "mean", "min"]))
    assert stats == {"count": 8.0, "mean": 15.5, "min": 12.0}


def test_nan_cells_are_left_out_like_nodata(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against NaN in a float band without declared nodata poisoning the mean."""
    data = columns()
    data[0, 19] = np.nan
    write_raster(workspace_dir / "v.tif", data)
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 0, 1)])
    assert only(call(ctx, path="v.tif", zones="z.geojson", stats=["count", "mean"])) == {
        "count": 9.0,
        "mean": 14.0,
    }


def test_scale_and_offset_are_applied_and_flagged(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against statistics of stored counts reported as physical values: stored c, declared
    scale 0.5 and offset 100, over columns 10..19: physical mean 100 + 0.5 * 14.5 = 107.25."""
    write_raster(workspace_dir / "v.tif", columns().astype("uint16"), scale=0.5, offset=100.0)
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 5, 15)])
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["mean", "max"])
    assert (result.physical, result.scale, result.offset) == (True, 0.5, 100.0)
    assert only(result) == {"mean": 107.25, "max": 109.5}
    assert "raw * 0.5 + 100" in result.method


def test_physical_false_summarises_stored_values(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against physical=False accepted and ignored."""
    write_raster(workspace_dir / "v.tif", columns().astype("uint16"), scale=0.5, offset=100.0)
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 5, 15)])
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["mean"], physical=False)
    assert (result.physical, only(result)) == (False, {"mean": 14.5})


def test_south_up_raster_gives_the_same_answer(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against rows read upside down on a grid stored south-up: the zone covers rows 0..9 of a
    raster whose value is the row index (0..9, mean 4.5), stored bottom row first."""
    rows = np.repeat(np.arange(H, dtype="float32")[:, None], W, axis=1)
    south_up = Affine(CELL, 0.0, X0, 0.0, CELL, Y0 - H * CELL)
    write_raster(workspace_dir / "v.tif", rows[::-1].copy(), transform=south_up)
    write_zones(workspace_dir / "z.geojson", [cells(0, 40, 0, 10)])
    assert only(call(ctx, path="v.tif", zones="z.geojson", stats=["mean", "count"])) == {
        "mean": 4.5,
        "count": 400.0,
    }


def test_a_zone_outside_the_raster_has_count_zero_and_no_mean(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a zone with no cells reported as NaN (not JSON) or dropped (renumbering the rest)."""
    write_raster(workspace_dir / "v.tif", columns())
    far = shapely.box(X0 - 1000, Y0 + 1000, X0 - 900, Y0 + 1100)
    write_zones(workspace_dir / "z.geojson", [far, cells(0, 1, 0, 1)])
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["count", "mean"])
    assert [(z.zone, z.stats) for z in result.results] == [
        (0, {"count": 0.0, "mean": None}),
        (1, {"count": 1.0, "mean": 0.0}),
    ]


def test_distribution_statistics_follow_exactextract(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against median/majority/variety computed on the wrong cells: columns 0..3 of row 0 with
    column 3 twice as wide in coverage (rows 0..1 for column 3): values 0, 1, 2 once and 3 twice."""
    write_raster(workspace_dir / "v.tif", columns())
    zone = shapely.union(cells(0, 4, 0, 1), cells(3, 4, 1, 2))
    write_zones(workspace_dir / "z.geojson", [zone])
    stats = only(
        call(
            ctx, path="v.tif", zones="z.geojson", stats=["majority", "minority", "variety", "median", "stdev"]
        )
    )
    # Weighted median over distinct values 0..3 with weights 1, 1, 1, 2 (exactextract's definition):
    # positions s = 0, 4, 8, 15 on a scale of 3 * 5 = 15, half of it 7.5 -> 1 + 3.5/4 = 1.875.
    assert stats["majority"] == 3.0 and stats["variety"] == 4.0 and stats["median"] == 1.875
    assert stats["stdev"] == pytest.approx(np.std([0, 1, 2, 3, 3]), abs=1e-12)


def test_zone_field_names_the_zones(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against results in an order the agent cannot map back: each zone carries its field value."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(0, 2, 0, 1), cells(4, 6, 0, 1)], names=["west", "east"])
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["mean"], zone_field="name")
    assert [(z.zone, z.stats["mean"]) for z in result.results] == [("west", 0.5), ("east", 4.5)]


def test_a_shapefile_with_its_dbf_field_as_zone_field(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against the .dbf not being read with the .shp: zone names come from it."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "parcels.shp", [cells(10, 20, 5, 15)], names=["field-7"])
    result = call(ctx, path="v.tif", zones="parcels.shp", zone_field="name", stats=["mean"])
    assert [(z.zone, z.stats["mean"]) for z in result.results] == [("field-7", 14.5)]


def test_an_unknown_zone_field_is_refused_listing_the_fields(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a misspelt field silently falling back to feature indices."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(0, 1, 0, 1)])
    with pytest.raises(InvalidArgument, match=r"no field 'nmae' \(fields: name\)"):
        call(ctx, path="v.tif", zones="z.geojson", zone_field="nmae")


def test_a_multi_layer_geopackage_needs_layer(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against the first layer taken silently when the file holds several."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.gpkg", [cells(0, 2, 0, 1)], layer="fields")
    write_zones(workspace_dir / "z.gpkg", [cells(10, 20, 0, 1)], layer="forests")
    with pytest.raises(InvalidArgument, match=r"2 layers .*'fields', 'forests'.*layer="):
        call(ctx, path="v.tif", zones="z.gpkg")
    result = call(ctx, path="v.tif", zones="z.gpkg", layer="forests", stats=["mean"])
    assert (result.layer, only(result)) == ("forests", {"mean": 14.5})
    with pytest.raises(NotFound, match="no layer 'roads'"):
        call(ctx, path="v.tif", zones="z.gpkg", layer="roads")


@pytest.mark.parametrize(
    ("geometry", "kind"),
    [
        (shapely.LineString([(X0, Y0 - 5), (X0 + 100, Y0 - 5)]), "LineString"),
        (shapely.Point(X0 + 5, Y0 - 5), "Point"),
        (shapely.MultiPoint([(X0 + 5, Y0 - 5), (X0 + 15, Y0 - 5)]), "MultiPoint"),
    ],
)
def test_lines_and_points_are_refused_naming_the_type(
    ctx: OperationContext, workspace_dir: Path, geometry: Any, kind: str
) -> None:
    """Guards against zones with no area giving statistics of zero cells (or of touched cells)."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [geometry])
    with pytest.raises(Refused, match=f"holds {kind} geometries.*no area"):
        call(ctx, path="v.tif", zones="z.geojson")


def test_an_invalid_bow_tie_is_repaired_and_counted(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a self-intersecting polygon giving GEOS-dependent garbage: repaired into its two
    triangles (each a quarter of the 2 x 2 cell square, so 2 cells in all) and reported."""
    write_raster(workspace_dir / "v.tif", columns())
    a, b = (X0, Y0 - 20), (X0 + 20, Y0)
    bow_tie = shapely.Polygon([a, b, (X0 + 20, Y0 - 20), (X0, Y0), a])
    write_zones(workspace_dir / "z.geojson", [bow_tie])
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["count"])
    assert result.repaired_zones == 1 and only(result) == {"count": 2.0}
    assert "repaired" in result.method


def test_an_empty_stats_list_and_an_unknown_stat_are_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an unknown statistic ignored (or passed to exactextract, which knows others)."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(0, 1, 0, 1)])
    with pytest.raises(InvalidArgument, match="'mean', 'min', 'max'"):
        call(ctx, path="v.tif", zones="z.geojson", stats=["quantile"])
    with pytest.raises(InvalidArgument, match="stats is empty"):
        call(ctx, path="v.tif", zones="z.geojson", stats=[])


def test_a_raster_without_crs_refuses_polygon_zones(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against polygons laid on pixel coordinates when the raster does not say where it is."""
    with rasterio.open(
        workspace_dir / "v.tif", "w", driver="GTiff", width=W, height=H, count=1, dtype="float32",
        transform=GRID,
    ) as ds:  # fmt: skip
        ds.write(columns(), 1)
    write_zones(workspace_dir / "z.geojson", [cells(0, 1, 0, 1)])
    with pytest.raises(RasterError, match="no CRS"):
        call(ctx, path="v.tif", zones="z.geojson")


def test_zones_that_cannot_reach_the_raster_crs_are_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against infinite coordinates handed to exactextract: a vertex on the equator 90 degrees
    from UTM zone 31's central meridian (3 E) has no transverse Mercator coordinates."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [shapely.Polygon([(93, 0), (94, 1), (92, 1)])], crs="EPSG:4326")
    with pytest.raises(CrsError, match=r"vertices of 'z.geojson' cannot be transformed"):
        call(ctx, path="v.tif", zones="z.geojson", stats=["count"])


def test_a_sidecar_moving_the_grid_is_refused_unless_a_side_is_chosen(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against zones laid on a grid that a sidecar moved without anyone saying: the .aux.xml
    shifts the raster 10 columns east, so columns 10..19 of the file hold values 0..9 there."""
    write_raster(workspace_dir / "v.tif", columns())
    moved = f"{X0 + 10 * CELL}, {CELL}, 0, {Y0}, 0, {-CELL}"
    (workspace_dir / "v.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{moved}</GeoTransform></PAMDataset>"
    )
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 5, 15)])
    with pytest.raises(Refused, match="two georeferencings") as caught:
        call(ctx, path="v.tif", zones="z.geojson")
    assert "georeferencing='file'" in (caught.value.fix or "")
    assert only(call(ctx, path="v.tif", zones="z.geojson", stats=["mean"], georeferencing="file")) == {
        "mean": 14.5
    }
    assert only(call(ctx, path="v.tif", zones="z.geojson", stats=["mean"], georeferencing="sidecar")) == {
        "mean": 4.5
    }


def test_memory_follows_the_window_budget_not_the_raster(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a zone covering the whole raster read in one piece: with a budget of 50,000 cells
    a polygon over all of a 2000 x 2000 float32 raster (15 MiB) is read in pieces; the peak of the
    arrays allocated stays under 2 MiB and the count is exact ((2000 - 1)^2 after a half-cell inset)."""
    import tracemalloc

    monkeypatch.setattr(
        importlib.import_module("llmc_mcp.operations.raster.zonal"), "MAX_CELLS_IN_MEMORY", 50_000
    )
    size = 2000
    profile = {
        "driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32", "crs": UTM,
        "transform": GRID, "tiled": True, "blockxsize": 256, "blockysize": 256,
    }  # fmt: skip
    with rasterio.open(workspace_dir / "big.tif", "w", **profile) as ds:
        for top in range(0, size, 250):
            ds.write(np.ones((250, size), "float32"), 1, window=rasterio.windows.Window(0, top, size, 250))
    write_zones(workspace_dir / "z.geojson", [cells(0.5, size - 0.5, 0.5, size - 0.5)])
    tracemalloc.start()
    try:
        result = call(ctx, path="big.tif", zones="z.geojson", stats=["count", "mean"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert only(result) == {"count": float((size - 1) ** 2), "mean": 1.0}
    assert peak < 2 << 20, peak


# --- a raster of zone ids --------------------------------------------------------------------------


def zone_ids() -> np.ndarray:
    """Zone 1: columns 0..9; zone 2: columns 10..19; 0 (nodata): columns 20..39."""
    ids = np.zeros((H, W), dtype="int16")
    ids[:, :10] = 1
    ids[:, 10:20] = 2
    return ids


def test_a_zone_raster_gives_per_zone_statistics_by_cell(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against zone-id nodata treated as a zone and against partial coverage on a zone raster:
    zone 1 is columns 0..9 (300 cells, mean 4.5), zone 2 columns 10..19 (mean 14.5), 0 is no zone."""
    write_raster(workspace_dir / "v.tif", columns())
    write_raster(workspace_dir / "zones.tif", zone_ids(), nodata=0)
    result = call(ctx, path="v.tif", zones="zones.tif", stats=["count", "mean", "min", "max", "sum"])
    assert result.zones_kind == "raster"
    assert [(z.zone, z.stats) for z in result.results] == [
        (1, {"count": 300.0, "mean": 4.5, "min": 0.0, "max": 9.0, "sum": 1350.0}),
        (2, {"count": 300.0, "mean": 14.5, "min": 10.0, "max": 19.0, "sum": 4350.0}),
    ]


def test_zone_raster_and_polygons_agree_on_every_statistic(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against two definitions of one statistic: the same zones as a raster (read in bands of
    rows, merged) and as polygons give the same numbers, distribution statistics included."""
    # The package exports the Operation under the module's name.
    zonal_module = importlib.import_module("llmc_mcp.operations.raster.zonal")
    monkeypatch.setattr(zonal_module, "CHUNK_PIXELS", 7 * W)  # 5 bands of rows, the last one short
    # floor(sqrt(c)): zone 1 holds 0, 1, 2, 3 in 1, 3, 5, 1 columns, zone 2 holds 3, 4 in 6, 4 columns.
    data = np.floor(np.sqrt(columns())).astype("float32")
    data[3, 3] = -1
    write_raster(workspace_dir / "v.tif", data, nodata=-1)
    write_raster(workspace_dir / "zones.tif", zone_ids(), nodata=0)
    write_zones(workspace_dir / "z.geojson", [cells(0, 10, 0, H), cells(10, 20, 0, H)])
    every = ["mean", "min", "max", "count", "sum", "median", "stdev", "majority", "minority", "variety"]
    by_raster = call(ctx, path="v.tif", zones="zones.tif", stats=every)
    by_polygons = call(ctx, path="v.tif", zones="z.geojson", stats=every)
    for r, p in zip(by_raster.results, by_polygons.results, strict=True):
        for name in every:
            if name == "minority" and r.zone == 1:
                continue  # a tie (0 and 3): exactextract's pick is unspecified, here the smallest wins
            # exactextract keeps quantiles in the band's type (float32 here).
            assert r.stats[name] == pytest.approx(p.stats[name], rel=1e-7), name


def test_a_zone_raster_on_another_grid_is_refused_naming_align(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against zone ids read cell by cell from a grid shifted by one cell."""
    write_raster(workspace_dir / "v.tif", columns())
    write_raster(workspace_dir / "zones.tif", zone_ids(), transform=GRID @ Affine.translation(1, 0), nodata=0)
    with pytest.raises(Refused, match="not on the grid") as caught:
        call(ctx, path="v.tif", zones="zones.tif")
    assert "raster.align" in (caught.value.fix or "")


def test_a_float_zone_raster_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against measurements passed as zones (every distinct float a zone)."""
    write_raster(workspace_dir / "v.tif", columns())
    write_raster(workspace_dir / "zones.tif", columns())
    with pytest.raises(RasterError, match="zone ids must be integers"):
        call(ctx, path="v.tif", zones="zones.tif")


def test_zone_field_with_a_zone_raster_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an option accepted and silently ignored."""
    write_raster(workspace_dir / "v.tif", columns())
    write_raster(workspace_dir / "zones.tif", zone_ids(), nodata=0)
    with pytest.raises(InvalidArgument, match="zone_field applies to polygon zones"):
        call(ctx, path="v.tif", zones="zones.tif", zone_field="name")


# --- both faces ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_tool_zonal_stats(workspace_dir: Path) -> None:
    """Guards against the operation missing from the classic face or its result not crossing the worker."""
    write_raster(workspace_dir / "v.tif", columns())
    write_zones(workspace_dir / "z.geojson", [cells(10, 20, 5, 15)])
    (workspace_dir / "z.kml").write_text("<kml/>")
    async with Client(
        build_server(Settings(mode="classic", workspace=workspace_dir, exec_timeout=120))
    ) as client:
        done = structured(
            await client.call_tool("raster_zonal_stats", {"path": "v.tif", "zones": "z.geojson"})
        )
        refused = await client.call_tool("raster_zonal_stats", {"path": "v.tif", "zones": "z.kml"})
    assert "results" in done, done
    assert done["results"] == [{"zone": 0, "stats": {"mean": 14.5, "min": 10.0, "max": 19.0, "count": 100.0}}]
    assert refused.is_error and "GeoPackage (.gpkg)" in refused.content[0].text


@pytest.mark.anyio
async def test_code_mode_zonal_stats(workspace_dir: Path) -> None:
    """Guards against the stub and the sandbox binding disagreeing with the catalog: zones in WGS 84, a
    named field, from agent code in a worker (pyogrio's GDAL hardened there too)."""
    write_raster(workspace_dir / "v.tif", columns())
    to_degrees = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True)
    square = shapely.transform(
        cells(10, 20, 5, 15), lambda xy: np.column_stack(to_degrees.transform(xy[:, 0], xy[:, 1]))
    )
    write_zones(workspace_dir / "z.geojson", [square], crs="EPSG:4326", names=["plot"])
    code = (
        "r = raster.zonal_stats('v.tif', 'z.geojson', stats=['mean', 'count'], zone_field='name')\n"
        "[r['results'][0]['zone'], r['results'][0]['stats']['mean'], r['transformation'] is not None]"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=120, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    zone, mean, transformed = answer["result"]
    assert (zone, transformed) == ("plot", True) and mean == pytest.approx(14.5, abs=1e-6)


def test_geojson_written_by_hand_is_read_like_the_rest(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against depending on how the fixture writer lays files out: a plain RFC 7946 document."""
    write_raster(workspace_dir / "v.tif", columns())
    to_degrees = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True)
    square = shapely.transform(
        cells(0, 2, 0, 2), lambda xy: np.column_stack(to_degrees.transform(xy[:, 0], xy[:, 1]))
    )
    document = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"id": 7}, "geometry": json.loads(shapely.to_geojson(square))},
    ]}  # fmt: skip
    (workspace_dir / "z.geojson").write_text(json.dumps(document))
    result = call(ctx, path="v.tif", zones="z.geojson", stats=["count", "mean"], zone_field="id")
    assert result.results[0].zone == 7
    assert result.results[0].stats["count"] == pytest.approx(4.0, abs=1e-6)
    assert result.results[0].stats["mean"] == pytest.approx(0.5, abs=1e-6)


def test_a_date_field_names_zones_in_iso_8601(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a zone_field of dates crashing the result (a datetime is not JSON)."""
    write_raster(workspace_dir / "v.tif", columns())
    pyogrio = hardened_pyogrio()
    pyogrio.raw.write(
        str(workspace_dir / "z.gpkg"),
        shapely.to_wkb(np.asarray([cells(0, 2, 0, 1)], dtype=object)),
        [np.array(["2026-11-23"], dtype="datetime64[D]")],
        ["surveyed"],
        driver="GPKG",
        geometry_type="Polygon",
        crs=UTM,
    )
    result = call(ctx, path="v.tif", zones="z.gpkg", zone_field="surveyed", stats=["mean"])
    assert [(z.zone, z.stats["mean"]) for z in result.results] == [("2026-11-23", 0.5)]
