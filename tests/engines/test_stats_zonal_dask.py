"""raster.stats and raster.zonal_stats on the Dask engine: the same pieces, folded in the same order,
give the same answer as the local engine, counts exactly and sums, means and percentiles to the bit.

Every raster here is larger than one piece (stats reads windows of ~1 M pixels; zone rasters go in
bands of rows; polygon zones in chunks of at most ~1 M cells, 1024 x 1024 on these 256-pixel blocks),
so pieces meet at edges, and the fixtures carry the classic traps: nodata, NaN, an internal mask, a
declared scale/offset (a negative scale too), integer classes, polygons whose edges cut cells and
cross chunk boundaries, zones in another CRS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import shapely
from affine import Affine
from pyproj import Transformer

from llmc_mcp.compute.polygons import hardened_pyogrio
from llmc_mcp.operations import OperationContext, get_operation
from tests.engines.same import run_on_both
from tests.rasters import NORTH_UP, write

ROWS, COLS = 1300, 1100
"""Over 1 M cells: two stats windows and four polygon chunks (1024 x 1024 blocks), two row bands."""
X0, Y0, CELL = NORTH_UP.c, NORTH_UP.f, NORTH_UP.a
UTM = "EPSG:32618"
EVERY = ["mean", "min", "max", "count", "sum", "median", "stdev", "majority", "minority", "variety"]


def field(seed: int = 5) -> np.ndarray:
    """A smooth float32 surface with noise, so sums and moments depend on the order they are added in."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:ROWS, 0:COLS]
    z = np.sin(rows / 90.0) * np.cos(cols / 70.0) * 100 + rng.normal(0, 3, (ROWS, COLS))
    return z.astype("float32")


def cells(c0: float, c1: float, r0: float, r1: float) -> Any:
    """The rectangle over columns [c0, c1) and rows [r0, r1) of the grid (fractions cut cells)."""
    return shapely.box(X0 + c0 * CELL, Y0 - r1 * CELL, X0 + c1 * CELL, Y0 - r0 * CELL)


def circle(col: float, row: float, radius_cells: float) -> Any:
    return shapely.Point(X0 + col * CELL, Y0 - row * CELL).buffer(radius_cells * CELL, quad_segs=16)


def write_zones(path: Path, geometries: list[Any], crs: str = UTM) -> str:
    hardened_pyogrio().raw.write(
        str(path),
        shapely.to_wkb(np.asarray(geometries, dtype=object)),
        [np.array([f"z{i}" for i in range(len(geometries))], dtype=object)],
        ["name"],
        driver="GeoJSON",
        geometry_type="Unknown",
        crs=crs,
    )
    return path.name


def zonal(ctx: OperationContext, **args: Any) -> Any:
    """raster.zonal_stats on ``ctx``'s engine alone."""
    op = get_operation("raster.zonal_stats")
    return op.run(ctx, op.validate(args))


def read(root: Path, name: str) -> np.ndarray:
    with rasterio.open(root / name) as ds:
        return ds.read(1, masked=True)


# ------------------------------------------------------------------------------------ raster.stats


@pytest.fixture
def holes(workspace_dir: Path) -> str:
    """float32 with nodata across the window edge at column 1024, NaN in a row, and -inf once."""
    z = field()
    z[500:520, 1000:1050] = -9999
    z[1100, :] = np.nan
    z[7, 7] = -np.inf
    write(workspace_dir / "holes.tif", z, nodata=-9999, block=256)
    return "holes.tif"


def test_float_stats_with_percentiles_and_histogram_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, holes: str, workspace_dir: Path
):
    """Guards against moments merged in the order pieces finish, or summed differently on a worker (a
    BLAS dot product splits its sum by the thread count, which is 1 on a Dask worker): mean, std, the
    65536-bin percentiles and the histogram are equal to the bit."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.stats", dst=None, path=holes, percentiles=[0.5, 50.0, 99.5], histogram_bins=64
    )
    band = left.bands[0]
    expected = read(workspace_dir, holes)
    finite = np.isfinite(expected.filled(np.nan))
    assert band.valid_count == int(finite.sum()) and band.nodata_count == ROWS * COLS - int(finite.sum())
    assert sum(band.histogram.counts) == band.valid_count
    assert "window(s)" in left.method and "in 1 window" not in left.method


def test_a_negative_scale_and_offset_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against the second pass's ranges (physical p is stored 100 - p under a negative scale)
    differing between engines: int16 counted exactly, scaled by -0.1 and offset by 20."""
    rng = np.random.default_rng(2)
    write(
        workspace_dir / "scaled.tif", rng.integers(-3000, 3000, (ROWS, COLS)).astype("int16"), nodata=-3000,
        scales=(-0.1,), offsets=(20.0,), block=256,
    )  # fmt: skip
    left, _ = run_on_both(ctx, dask_ctx, "raster.stats", dst=None, path="scaled.tif", histogram_bins=10)
    band = left.bands[0]
    assert band.raw is not None and band.min == band.raw.max * -0.1 + 20.0
    assert band.nodata_count == int((read(workspace_dir, "scaled.tif").mask).sum())


def test_an_internal_mask_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against the mask not read where the piece runs (a worker reading only the values would
    count masked pixels as valid)."""
    z = field(9)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        write(workspace_dir / "masked.tif", z, block=256)
        with rasterio.open(workspace_dir / "masked.tif", "r+") as ds:
            mask = np.full((ROWS, COLS), 255, np.uint8)
            mask[::3, 1020:1030] = 0
            ds.write_mask(mask)
    left, _ = run_on_both(ctx, dask_ctx, "raster.stats", dst=None, path="masked.tif", histogram_bins=16)
    assert left.bands[0].nodata_count == int((mask == 0).sum())


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("narrow", 100_000, 101_000), ("wide", -(10**9), 10**9)],
)
def test_int32_percentiles_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path, name: str, low: int, high: int
):
    """Guards against the second pass's value counts (narrow range: exact percentiles) or fine bins
    (wide range) offset differently in a worker than here."""
    data = np.random.default_rng(4).integers(low, high, (ROWS, COLS)).astype("int32")
    write(workspace_dir / f"{name}.tif", data, block=256)
    left, _ = run_on_both(
        ctx,
        dask_ctx,
        "raster.stats",
        dst=None,
        path=f"{name}.tif",
        percentiles=[10, 50, 90],
        histogram_bins=7,
    )
    if name == "narrow":
        exact = {f"p{p}": float(np.percentile(data, p)) for p in (10, 50, 90)}
        assert left.bands[0].percentiles == exact


def test_uint8_bands_and_an_approximate_read_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against bands mixed up among pieces and against the decimated read (approx) taken from
    another overview level or resampling on a worker."""
    data = np.random.default_rng(6).integers(0, 255, (3, ROWS, COLS)).astype("uint8")
    write(workspace_dir / "rgb.tif", data, nodata=0, block=256)
    exact, _ = run_on_both(
        ctx, dask_ctx, "raster.stats", dst=None, path="rgb.tif", bands=[3, 1], histogram_bins=5
    )
    assert [b.valid_count for b in exact.bands] == [int((data[2] != 0).sum()), int((data[0] != 0).sum())]
    approx, _ = run_on_both(ctx, dask_ctx, "raster.stats", dst=None, path="rgb.tif", approx=True)
    assert approx.approx


# ------------------------------------------------------------------------------ raster.zonal_stats


@pytest.fixture
def values(workspace_dir: Path) -> str:
    """The surface with a nodata hole inside zone 2 / the central circle, across the chunk edges, and a
    run of ten nodata cells in row 200 across the column edge."""
    z = field()
    z[1015:1035, 1015:1035] = -9999
    z[200, 1020:1030] = -9999
    write(workspace_dir / "values.tif", z, nodata=-9999, block=256)
    return "values.tif"


def test_a_zone_raster_on_dask_equals_local_on_every_statistic(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path, values: str
):
    """Guards against row bands' partials merged in another order, or distribution pairs lost, when the
    bands are reduced on workers: zone 2 spans both bands and holds the nodata hole."""
    ids = np.zeros((ROWS, COLS), "int16")
    ids[:, :500] = 1
    ids[600:, 500:] = 2
    ids[:200, 900:] = 3
    write(workspace_dir / "zones.tif", ids, nodata=0, block=256)
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.zonal_stats", dst=None, path=values, zones="zones.tif", stats=EVERY
    )
    hole = 20 * 20
    assert [z.stats["count"] for z in left.results] == [ROWS * 500.0, 700 * 600.0 - hole, 200 * 200.0]


def zones_across_chunks() -> list[Any]:
    """Polygons whose edges cut cells, over the chunk corner at (1024, 1024) and its edges."""
    return [
        cells(1000.5, 1050.25, 990.5, 1060.75),  # across both chunk edges, over the nodata hole
        circle(1024.3, 1024.7, 37.2),
        circle(300.4, 1024.0, 50.5),  # across the row edge only
        cells(10.5, 1090.5, 100.25, 101.75),  # a thin strip across the column edge
        cells(10.5, 1090.5, 200.25, 200.75),  # one cell high, over ten nodata cells
        cells(2000, 2010, 0, 10),  # outside the raster: count 0
    ]


def test_polygon_zones_across_chunks_on_dask_equal_local_on_every_statistic(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path, values: str
):
    """Guards against coverage partials of one zone merged in the order chunks finish, or a chunk's
    cells weighted on a shifted grid in a worker: every statistic is equal to the bit."""
    zones = write_zones(workspace_dir / "z.geojson", zones_across_chunks())
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.zonal_stats", dst=None, path=values, zones=zones, stats=EVERY
    )
    assert left.results[5].stats["count"] == 0.0 and left.results[5].stats["mean"] is None


def test_a_cell_on_a_chunk_edge_counts_once(ctx: OperationContext, workspace_dir: Path, values: str):
    """Guards against chunks that overlap or leave a gap: the rectangle over columns 1000.5..1050.25 and
    rows 990.5..1060.75 (across both edges at 1024) covers 49.75 x 70.25 cells, less the 20 x 20 hole."""
    zones = write_zones(workspace_dir / "z.geojson", zones_across_chunks()[:1])
    result = zonal(ctx, path=values, zones=zones, stats=["count"])
    assert result.results[0].stats["count"] == 49.75 * 70.25 - 400


def test_polygon_zones_across_chunks_match_exactextract_on_the_whole_raster(
    ctx: OperationContext, workspace_dir: Path, values: str
):
    """Guards against partials combined with the wrong weights: exactextract run over the whole raster
    (no chunks) gives the same counts, sums, means and stdevs within rounding, min and max exactly."""
    from exactextract import exact_extract
    from exactextract.raster import RasterioRasterSource

    geometries = zones_across_chunks()[:4]
    zones = write_zones(workspace_dir / "z.geojson", geometries)
    ours = zonal(ctx, path=values, zones=zones, stats=["count", "sum", "mean", "stdev", "min", "max"])
    features = [{"type": "Feature", "properties": {}, "geometry": g.__geo_interface__} for g in geometries]
    with rasterio.open(workspace_dir / values) as ds:
        whole = exact_extract(
            RasterioRasterSource(ds),
            features,
            ["count", "sum", "mean", "stdev", "min", "max"],
            output="geojson",
        )
    for mine, theirs in zip(ours.results, whole, strict=True):
        expected = theirs["properties"]
        for name in ("count", "sum", "mean", "stdev"):
            assert mine.stats[name] == pytest.approx(expected[name], rel=1e-12), name
        assert (mine.stats["min"], mine.stats["max"]) == (expected["min"], expected["max"])


def test_zones_in_another_crs_with_scale_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against the transformed polygons or the physical values (scale and offset applied where
    the chunk is read) differing on a worker: zones in WGS 84 over a UTM raster of scaled uint16."""
    rng = np.random.default_rng(8)
    write(
        workspace_dir / "scaled.tif", rng.integers(0, 5000, (ROWS, COLS)).astype("uint16"), nodata=0,
        scales=(0.01,), offsets=(-5.0,), block=256,
    )  # fmt: skip
    to_degrees = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True)
    in_degrees = [
        shapely.transform(g, lambda xy: np.column_stack(to_degrees.transform(xy[:, 0], xy[:, 1])))
        for g in zones_across_chunks()[:4]
    ]
    zones = write_zones(workspace_dir / "wgs84.geojson", in_degrees, crs="EPSG:4326")
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.zonal_stats", dst=None, path="scaled.tif", zones=zones, stats=EVERY
    )
    assert left.transformation is not None and left.physical
    assert all(z.stats["count"] > 0 for z in left.results)


def test_a_zone_one_cell_high_leaves_its_nodata_cells_out(
    ctx: OperationContext, workspace_dir: Path, values: str
):
    """Guards against exactextract's masked-array path (isciences/exactextract#193: a window whose grid
    differs from the zone's coverage grid loses its mask): the strip over half of row 200, columns
    10.5..1090.5, covers 1080 half cells, ten of them nodata, so its count is 535 exactly."""
    zones = write_zones(workspace_dir / "z.geojson", [zones_across_chunks()[4]])
    stats = zonal(ctx, path=values, zones=zones, stats=["count", "min"]).results[0].stats
    assert stats["count"] == 535.0 and stats["min"] > -9999


def test_a_south_up_raster_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against a chunk of a grid stored south-up placed upside down on a worker: its rows are
    flipped north first where the chunk is read."""
    z = field()
    z[1015:1035, 1015:1035] = -9999
    south_up = NORTH_UP @ Affine.translation(0, ROWS) @ Affine.scale(1, -1)
    write(workspace_dir / "south.tif", z[::-1].copy(), nodata=-9999, transform=south_up, block=256)
    zones = write_zones(workspace_dir / "z.geojson", zones_across_chunks())
    run_on_both(ctx, dask_ctx, "raster.zonal_stats", dst=None, path="south.tif", zones=zones, stats=EVERY)


def test_a_south_up_raster_gives_the_answers_of_its_north_up_twin(
    ctx: OperationContext, workspace_dir: Path, values: str
):
    """Guards against a chunk's extent or rows taken in file order on a south-up grid: the same surface
    stored bottom row first gives the same counts, minima and maxima, and means within rounding (its
    chunks split the zones at other rows)."""
    z = read(workspace_dir, values).filled(-9999)
    south_up = NORTH_UP @ Affine.translation(0, ROWS) @ Affine.scale(1, -1)
    write(workspace_dir / "south.tif", z[::-1].copy(), nodata=-9999, transform=south_up, block=256)
    zones = write_zones(workspace_dir / "z.geojson", zones_across_chunks()[:5])  # the ones on the raster
    asked = ["count", "mean", "min", "max"]
    north = zonal(ctx, path=values, zones=zones, stats=asked).results
    south = zonal(ctx, path="south.tif", zones=zones, stats=asked).results
    for n, s in zip(north, south, strict=True):
        assert (n.stats["count"], n.stats["min"], n.stats["max"]) == (
            s.stats["count"],
            s.stats["min"],
            s.stats["max"],
        )
        assert n.stats["mean"] == pytest.approx(s.stats["mean"], rel=1e-12)
