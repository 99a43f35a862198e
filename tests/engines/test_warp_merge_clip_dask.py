"""raster.reproject, align, merge and clip on the Dask engine: the same pieces give the same cells.

Every source is larger than one output window (reproject and merge write 1024- to 1536-cell
windows, clip 512 x 2048), so pieces meet at window edges, where a window offset or a halo of source
pixels read wrong in another process would show. The classic traps are in the fixtures: nodata
holes across window edges, a declared scale, integer data without nodata (an internal mask), class
codes warped with mode, an RGBA image (alpha), and sidecars overriding the georeferencing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from tests.engines.same import run_on_both
from tests.rasters import write

CELL = 10.0
LEFT, TOP = 500_000.0, 4_500_000.0
"""UTM 18N (EPSG:32618), 10 m cells, the top-left corner of every fixture's lattice."""


def lattice(cell: float = CELL, col: float = 0, row: float = 0) -> Affine:
    """North-up, ``cell`` metres, its top-left corner ``col``/``row`` cells of 10 m from (LEFT, TOP)."""
    return Affine(cell, 0.0, LEFT + CELL * col, 0.0, -cell, TOP - CELL * row)


def surface(rows: int, cols: int, seed: int) -> np.ndarray:
    """A smooth field with noise: resampling methods give visibly different cells on it."""
    rng = np.random.default_rng(seed)
    r, c = np.mgrid[0:rows, 0:cols].astype("float32")
    return (r * 0.2 + np.sin(c / 30) * 40 + rng.normal(0, 2, (rows, cols))).astype("float32")


@pytest.fixture
def heights(workspace_dir: Path) -> str:
    """1300 x 1400 float32 with nodata holes on the 1024-cell window edges, and a declared scale."""
    z = surface(1300, 1400, seed=3)
    z[1000:1050, 1000:1050] = -9999
    z[:, 700:703] = -9999
    write(workspace_dir / "heights.tif", z, transform=lattice(), nodata=-9999, scales=(0.5,), block=256)
    return "heights.tif"


@pytest.fixture
def classes(workspace_dir: Path) -> str:
    """1700 x 1600 uint8 class codes without nodata: the warp's outside becomes an internal mask."""
    rows, cols = np.mgrid[0:1700, 0:1600]
    codes = (1 + (rows // 97 + cols // 113) % 7).astype("uint8")
    write(workspace_dir / "classes.tif", codes, transform=lattice(), block=256)
    return "classes.tif"


@pytest.mark.parametrize("resampling", ["nearest", "bilinear", "lanczos", "average"])
def test_reproject_on_dask_equals_local_for_each_resampling(
    ctx: OperationContext, dask_ctx: OperationContext, heights: str, resampling: str
):
    """Guards against a warp window given another source window, transform or nodata on a worker:
    a kernel reaching across the window edge (bilinear, lanczos, average) would differ there."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.reproject", src=heights, dst_crs="EPSG:4326", resampling=resampling
    )
    assert left.width > 1024 and left.height > 1024


def test_reproject_of_integers_without_nodata_on_dask_keeps_the_same_mask(
    ctx: OperationContext, dask_ctx: OperationContext, classes: str
):
    """Guards against the alpha band that becomes the internal mask lost or shifted on a worker: the
    footprint's edge in EPSG:3857 cuts through windows, cells outside it must be masked on both."""
    run_on_both(ctx, dask_ctx, "raster.reproject", src=classes, dst_crs="EPSG:3857", resampling="mode")


def test_reproject_with_src_nodata_and_a_resolution_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, heights: str
):
    """Guards against the warp options (src_nodata overriding the file's, dst_nodata, a finer grid)
    not reaching the worker: the nodata holes and the cells equal to src_nodata differ if they do."""
    run_on_both(
        ctx, dask_ctx, "raster.reproject", src=heights, dst_crs="EPSG:32617", resampling="cubic",
        resolution=[7.5], src_nodata=0.0, dst_nodata=-1.0,
    )  # fmt: skip


def test_align_onto_a_reference_grid_in_another_crs_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, heights: str, workspace_dir: Path
):
    """Guards against a worker warping onto its own idea of the grid rather than like's: the output
    takes like's transform (Web Mercator, 9 m cells) and every cell matches."""
    like = Affine(9.0, 0.0, -8_352_000.0, 0.0, -9.0, 4_958_000.0)  # past the source's west edge
    write(workspace_dir / "like.tif", np.zeros((1600, 1500), "uint8"), transform=like, crs="EPSG:3857")
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.align", src=heights, like="like.tif", dst="aligned.tif", resampling="bilinear"
    )
    assert (left.width, left.height) == (1500, 1600)


@pytest.fixture
def tiles(workspace_dir: Path) -> list[str]:
    """Three overlapping float32 tiles with nodata and a scale: a on the lattice (1300 x 1200), b off
    it (13.7 m cells, a fractional offset: warped), c on it again, overlapping b and reaching past it;
    holes on window edges."""
    a = surface(1300, 1200, seed=1)
    a[1000:1060, 900:1100] = -9999
    write(workspace_dir / "a.tif", a, transform=lattice(), nodata=-9999, scales=(0.5,), block=256)
    b = surface(900, 1000, seed=2) + 30
    b[:40, :] = -9999
    shifted = Affine(13.7, 0.0, LEFT + 3333.3, 0.0, -13.7, TOP - 6789.9)
    write(workspace_dir / "b.tif", b, transform=shifted, nodata=-9999, scales=(0.5,), block=256)
    c = surface(800, 900, seed=4) - 30
    c[300:330, :] = -9999
    write(workspace_dir / "c.tif", c, transform=lattice(col=1300, row=1400), nodata=-9999, scales=(0.5,))
    return ["a.tif", "b.tif", "c.tif"]


@pytest.mark.parametrize("method", ["first", "last", "min", "max", "mean", "sum", "count"])
def test_merge_on_dask_equals_local_for_each_method(
    ctx: OperationContext, dask_ctx: OperationContext, tiles: list[str], method: str
):
    """Guards against overlaps resolved out of list order, or per-source counts lost, when windows
    are folded on workers: every cell and every source's valid and used counts must match."""
    left, _ = run_on_both(ctx, dask_ctx, "raster.merge", sources=tiles, method=method, resampling="bilinear")
    assert left.overlap_cells > 0 and all(s.used_cells > 0 for s in left.sources)


def test_merge_first_keeps_list_order_on_dask(
    ctx: OperationContext, dask_ctx: OperationContext, tiles: list[str]
):
    """Guards against the first source winning by arrival rather than by list order: the reversed
    list gives other cells in the overlap, the same on both engines."""
    run_on_both(ctx, dask_ctx, "raster.merge", sources=tiles[::-1], resampling="cubic")


def test_merge_of_integers_without_nodata_on_dask_keeps_the_same_mask(
    ctx: OperationContext, dask_ctx: OperationContext, classes: str, workspace_dir: Path
):
    """Guards against the internal mask of cells no source covers written from another window, and
    the warped source's alpha lost on a worker (codes warped off the lattice with mode)."""
    codes = (np.arange(700 * 800).reshape(700, 800) % 5 + 1).astype("uint8")
    off = Affine(7.3, 0.0, LEFT + 17_001.1, 0.0, -7.3, TOP - 4_001.7)  # beyond classes' east edge
    write(workspace_dir / "off.tif", codes, transform=off, block=128)
    run_on_both(ctx, dask_ctx, "raster.merge", sources=[classes, "off.tif"], resampling="mode")


def test_merge_refuses_a_computed_nodata_on_dask_as_locally(
    ctx: OperationContext, dask_ctx: OperationContext, tiles: list[str]
):
    """Guards against a piece's refusal lost on a worker (an output with data read as nodata): a sum
    equal to the given nodata is refused on both engines with the same message."""
    op = get_operation("raster.merge")
    args = {"sources": tiles[:1], "method": "max", "nodata": float(np.float32(surface(1300, 1200, 1)[0, 0]))}
    messages = []
    for engine_ctx, prefix in ((ctx, "local"), (dask_ctx, "dask")):
        with pytest.raises(InvalidArgument) as raised:
            op.run(engine_ctx, op.validate({**args, "dst": f"{prefix}-m.tif"}))
        messages.append(raised.value.message)
    assert messages[0] == messages[1]


def ring(col: float, row: float, radius: float, points: int, phase: float = 0.3) -> list[list[float]]:
    """A closed ring of ``points`` vertices around the cell (col, row) of the lattice, radius in cells,
    its vertices at fractions of cells so its edges cut cells anywhere."""
    angles = phase + np.linspace(0, 2 * np.pi, points, endpoint=False)
    xs = LEFT + CELL * (col + radius * np.cos(angles))
    ys = TOP - CELL * (row + radius * np.sin(angles))
    coords = [[float(x), float(y)] for x, y in zip(xs, ys, strict=True)]
    return [*coords, coords[0]]


@pytest.fixture
def polygons(workspace_dir: Path) -> str:
    """A polygon over the corner where four clip windows meet (row 512, column 2048) and a polygon
    with a hole across the row-1024 window edge, in the raster's CRS."""
    shapes = [
        [ring(2048.4, 512.6, 300.3, 23)],
        [ring(600.2, 1024.7, 260.9, 41), ring(600.2, 1024.7, 80.5, 13, phase=0.1)[::-1]],
    ]
    features = [
        {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": rings}}
        for rings in shapes
    ]
    crs = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32618"}}
    (workspace_dir / "mask.geojson").write_text(
        json.dumps({"type": "FeatureCollection", "crs": crs, "features": features})
    )
    return "mask.geojson"


@pytest.fixture
def wide(workspace_dir: Path) -> str:
    """1300 x 2400 float32 with nodata inside the polygons and a scale: clip windows (512 x 2048)
    meet inside both polygons."""
    z = surface(1300, 2400, seed=5)
    z[500:530, 2030:2070] = -9999
    write(workspace_dir / "wide.tif", z, transform=lattice(), nodata=-9999, scales=(0.25,), block=256)
    return "wide.tif"


@pytest.mark.parametrize("all_touched", [False, True])
@pytest.mark.parametrize("crop", [True, False])
def test_clip_to_polygons_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, wide: str, polygons: str, all_touched: bool, crop: bool
):
    """Guards against a window rasterized with another transform, or inside cells counted twice or
    lost, when the mask scan and the write run on workers: cells, window and counts must match."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.clip", src=wide, mask=polygons, all_touched=all_touched, crop=crop
    )
    assert left.outside_as == "nodata" and left.inside_cells > 0 and left.outside_cells > 0


def test_clip_of_integers_without_nodata_on_dask_keeps_the_same_internal_mask(
    ctx: OperationContext, dask_ctx: OperationContext, classes: str, polygons: str
):
    """Guards against the internal mask (outside_as 'internal_mask') written from a worker's other
    window: polygons and a box together, class codes kept where both hold."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.clip", src=classes, mask=polygons, all_touched=True,
        bounds=(LEFT + 3000.5, TOP - 16_000.0, LEFT + 22_000.0, TOP - 2_000.0),
    )  # fmt: skip
    assert left.outside_as == "internal_mask"


def test_clip_of_an_rgba_image_on_dask_gives_the_same_alpha(
    ctx: OperationContext, dask_ctx: OperationContext, polygons: str, workspace_dir: Path
):
    """Guards against alpha (outside_as 'alpha') set on a worker for cells other than the outside
    ones: colour and alpha of every cell must match."""
    rows, cols = np.mgrid[0:1100, 0:2200]
    rgba = np.stack([(rows % 251), (cols % 241), ((rows + cols) % 239), np.full(rows.shape, 255)])
    with rasterio.open(
        workspace_dir / "rgba.tif", "w", driver="GTiff", width=2200, height=1100, count=4, dtype="uint8",
        crs="EPSG:32618", transform=lattice(), photometric="RGB", alpha="YES", tiled=True,
    ) as ds:  # fmt: skip
        ds.write(rgba.astype("uint8"))
    left, _ = run_on_both(ctx, dask_ctx, "raster.clip", src="rgba.tif", mask=polygons, crop=False)
    assert left.outside_as == "alpha"


def overriding_sidecar(path: Path) -> None:
    """An .aux.xml whose geotransform (20 m cells, 2 km east) overrides the file's own."""
    gt = ", ".join(f"{v:.1f}" for v in lattice(20.0, col=200).to_gdal())
    Path(f"{path}.aux.xml").write_text(f"<PAMDataset><GeoTransform>{gt}</GeoTransform></PAMDataset>")


@pytest.mark.parametrize("side", ["file", "sidecar"])
def test_reproject_reads_the_chosen_side_of_a_sidecar_on_dask(
    ctx: OperationContext, dask_ctx: OperationContext, heights: str, workspace_dir: Path, side: str
):
    """Guards against a worker reopening the source with another georeferencing policy than the
    caller's: it would refuse the sidecar, or warp from the other side's place."""
    overriding_sidecar(workspace_dir / heights)
    run_on_both(
        ctx, dask_ctx, "raster.reproject", src=heights, dst_crs="EPSG:3857", resampling="bilinear",
        georeferencing=side,
    )  # fmt: skip


def test_merge_and_clip_read_the_chosen_side_of_a_sidecar_on_dask(
    ctx: OperationContext, dask_ctx: OperationContext, tiles: list[str], polygons: str, workspace_dir: Path
):
    """Guards against a worker reopening a mosaic's source, or a clip's, without georeferencing='file':
    it would refuse the sidecar of b.tif and a.tif."""
    overriding_sidecar(workspace_dir / "b.tif")
    run_on_both(ctx, dask_ctx, "raster.merge", sources=tiles, resampling="bilinear", georeferencing="file")
    overriding_sidecar(workspace_dir / "a.tif")
    run_on_both(ctx, dask_ctx, "raster.clip", src="a.tif", dst="c.tif", mask=polygons, georeferencing="file")
