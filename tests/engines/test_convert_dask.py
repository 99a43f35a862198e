"""raster.convert on the Dask engine: the workers read and decode, the writer encodes; the file
reads back as the local engine's CreateCopy does, cell for cell, mask for mask, tag for tag.

The sources are several pieces large (pieces are windows of whole output blocks, about 8 MiB;
the fixtures that assert it make two or more), with the traps a copy can lose: nodata, a declared scale
and offset and unit, an internal mask on integers without nodata, a colour table, metadata in the
default and a custom domain, band descriptions, strips instead of tiles.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from distributed import get_task_stream

from llmc_mcp.compute.dask_engine import DaskEngine
from llmc_mcp.operations import OperationContext
from tests.engines.same import run_on_both

TRANSFORM = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
GDAL_DOMAINS = {"IMAGE_STRUCTURE", "DERIVED_SUBDATASETS"}


def describe(path: Path) -> dict[str, Any]:
    """Everything of a GeoTIFF but its pixels (compared by ``run_on_both``)."""
    with rasterio.open(path) as ds:
        colormap = None
        with contextlib.suppress(ValueError):
            colormap = ds.colormap(1)
        return {
            "tags": {ns: ds.tags(ns=ns) for ns in [None, *ds.tag_namespaces()] if ns not in GDAL_DOMAINS},
            "band_tags": [
                {ns: ds.tags(i, ns=ns) for ns in [None, *ds.tag_namespaces(i)] if ns not in GDAL_DOMAINS}
                for i in ds.indexes
            ],
            "descriptions": ds.descriptions,
            "colorinterp": ds.colorinterp,
            "scales": ds.scales,
            "offsets": ds.offsets,
            "units": ds.units,
            "colormap": colormap,
            "mask_flags": ds.mask_flag_enums,
            "blocks": ds.block_shapes,
            "compression": ds.compression,
            "overviews": [ds.overviews(i) for i in ds.indexes],
            "structure": ds.tags(ns="IMAGE_STRUCTURE"),
        }


def convert_on_both(
    ctx: OperationContext, dask_ctx: OperationContext, engine: DaskEngine, **args: Any
) -> int:
    """Convert on each engine, assert equal outputs, pixels and metadata; the tasks the cluster ran."""
    with get_task_stream(client=engine.client()) as stream:
        run_on_both(ctx, dask_ctx, "raster.convert", **args)
    root = ctx.workspace.root
    assert describe(root / "local-out.tif") == describe(root / "dask-out.tif")
    return sum(1 for task in stream.data if str(task["key"]).startswith("run_pieces"))


def test_a_float_raster_with_nodata_scale_and_metadata_converts_in_pieces_as_locally(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine, workspace_dir: Path
):
    """Guards against a Dask conversion that drops what CreateCopy carries (nodata, scale, offset,
    unit, description, tags of any domain, statistics) or shifts a piece at a block edge."""
    rows, cols = np.mgrid[0:1500, 0:1700].astype("float32")
    z = np.sin(rows / 40) * 100 + cols * 0.3
    z[700:760, 1000:1100] = -9999
    with rasterio.open(
        workspace_dir / "heights.tif", "w", driver="GTiff", width=1700, height=1500, count=1,
        dtype="float32", crs="EPSG:32618", transform=TRANSFORM, nodata=-9999, tiled=True,
        blockxsize=256, blockysize=256, compress="LZW",
    ) as ds:  # fmt: skip
        ds.write(z, 1)
        ds.scales, ds.offsets, ds.units = (0.5,), (10.0,), ("metre",)
        ds.set_band_description(1, "height above datum")
        ds.update_tags(SOURCE="survey 2024")
        ds.update_tags(ns="LLMC_TEST", LEVEL="2")
        ds.update_tags(1, STATISTICS_MEAN="12.5", KIND="dem")
    tasks = convert_on_both(ctx, dask_ctx, dask_engine, src="heights.tif", compress="ZSTD")
    assert tasks >= 2


def test_integers_with_an_internal_mask_in_strips_with_overviews_convert_as_locally(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine, workspace_dir: Path
):
    """Guards against the per-dataset mask left behind by the pieces (it is not a band) and against
    strips cut at another row than CreateCopy's."""
    rows, cols = np.mgrid[0:2100, 0:2300]
    data = np.stack([(rows + cols) % 65000, (rows * 3) % 1000]).astype("uint16")
    valid = ((rows - 1000) ** 2 + (cols - 1100) ** 2 < 900**2).astype("uint8") * 255
    with rasterio.open(
        workspace_dir / "counts.tif", "w", driver="GTiff", width=2300, height=2100, count=2,
        dtype="uint16", crs="EPSG:32618", transform=TRANSFORM, tiled=True,
    ) as ds:  # fmt: skip
        ds.write(data)
        ds.write_mask(valid)
    tasks = convert_on_both(
        ctx, dask_ctx, dask_engine, src="counts.tif", tiled=False, blocksize=64, overviews=[2, 4],
        overview_resampling="nearest",
    )  # fmt: skip
    assert tasks >= 2


def test_a_colour_table_survives_the_pieces(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine, workspace_dir: Path
):
    """Guards against a palette raster whose colours are lost when the writer makes the file."""
    rows, cols = np.mgrid[0:1300, 0:2600]
    with rasterio.open(
        workspace_dir / "classes.tif", "w", driver="GTiff", width=2600, height=1300, count=1,
        dtype="uint8", crs="EPSG:32618", transform=TRANSFORM, nodata=0, photometric="PALETTE",
    ) as ds:  # fmt: skip
        ds.write((1 + (rows // 50 + cols // 70) % 4).astype("uint8"), 1)
        ds.write_colormap(1, {0: (0, 0, 0, 0), 1: (255, 0, 0, 255), 2: (0, 255, 0, 255), 3: (0, 0, 255, 255)})
    convert_on_both(ctx, dask_ctx, dask_engine, src="classes.tif", compress="LZW", blocksize=256)


def test_rgb_to_jpeg_on_dask_gives_the_local_pixels(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine, workspace_dir: Path
):
    """Guards against a lossy encoding fed other blocks than CreateCopy feeds it (YCbCr JPEG of the
    same tiles gives the same pixels)."""
    rows, cols = np.mgrid[0:1100, 0:2400]
    rgb = np.stack([rows % 251, cols % 241, (rows + cols) % 239]).astype("uint8")
    with rasterio.open(
        workspace_dir / "photo.tif", "w", driver="GTiff", width=2400, height=1100, count=3, dtype="uint8",
        crs="EPSG:32618", transform=TRANSFORM, photometric="RGB",
    ) as ds:  # fmt: skip
        ds.write(rgb)
    convert_on_both(ctx, dask_ctx, dask_engine, src="photo.tif", compress="JPEG", quality=80)


@pytest.mark.parametrize("case", ["cog", "sidecar"])
def test_what_pieces_cannot_carry_is_copied_by_gdal_as_locally(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine, workspace_dir: Path, case: str
):
    """Guards against a COG (GDAL writes one only by copying a whole dataset) or a source whose
    sidecar may hold what rasterio cannot carry (a raster attribute table) converted in pieces: both
    are GDAL's CreateCopy in the writer, and equal to the local engine's output."""
    z = np.arange(600 * 700, dtype="float32").reshape(600, 700)
    with rasterio.open(
        workspace_dir / "plain.tif", "w", driver="GTiff", width=700, height=600, count=1, dtype="float32",
        crs="EPSG:32618", transform=TRANSFORM, nodata=-1,
    ) as ds:  # fmt: skip
        ds.write(z, 1)
    if case == "sidecar":
        (workspace_dir / "plain.tif.aux.xml").write_text(
            '<PAMDataset><PAMRasterBand band="1"><Description>from the sidecar</Description>'
            "</PAMRasterBand></PAMDataset>"
        )
    driver = "COG" if case == "cog" else "GTiff"
    tasks = convert_on_both(ctx, dask_ctx, dask_engine, src="plain.tif", driver=driver)
    assert tasks == 0


def test_an_alpha_band_stays_a_band_on_dask(
    ctx: OperationContext, dask_ctx: OperationContext, dask_engine: DaskEngine
):
    """Guards against an alpha band's validity written a second time as an internal mask (GDAL
    reports alpha as a per-dataset mask too), or its colour interpretation lost."""
    convert_on_both(ctx, dask_ctx, dask_engine, src="RGBA.uint16.tif", compress="LZW")
