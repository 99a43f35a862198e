"""``raster.align``: resample and reproject a raster onto exactly the grid of another raster.

The grid (CRS, transform, width, height) is copied from ``like``'s header, never recomputed from
bounds and a resolution, so the output's cells are ``like``'s bit for bit and ``raster.calc`` takes
the two as one grid. Everything else is ``raster.reproject``'s warp (:func:`.reproject.warp_onto`):
the coordinate operation (chosen for a spread of ``src``'s points, as ``crs.transform`` chooses, and
named in the provenance record), the nodata rule, the metadata carried over, the warp window by
window and the atomic write of :mod:`.output`. The gate asks what ``raster.reproject`` asks: the
resampling method for this kind of data, and the target CRS when ``like``'s is not ``src``'s
(DD-MCP-043).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any

from affine import Affine
from pydantic import Field
from rasterio.crs import CRS as RioCRS
from rasterio.io import DatasetReader

from llmc_mcp.compute.models import Compression, RasterInfo
from llmc_mcp.compute.output import check_src_dst, data_kind, write_output
from llmc_mcp.crs_text import normalize_crs
from llmc_mcp.errors import InvalidArgument, RasterError
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import input_location, same_file
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import GeoreferencingChoice, OutputGeoTiff, Resampling
from llmc_mcp.operations.raster.reproject import WarpPlan, raster_operation, require_crs, warp_onto
from llmc_mcp.reflection.specs import ALIGN_CRS, CONVERT_LOSSY, REPROJECT_RESAMPLING, Facts


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> Facts:
    """Refuse an alignment that cannot run before the gate asks; the data kind and any change of CRS."""
    policy = args["georeferencing"] or "refuse"
    target, grid = _like_grid(ctx, args["like"], args["dst"], policy)
    src_path, _ = check_src_dst(ctx, args["src"], args["dst"])
    options = {name: args[name] for name in ("resampling", "src_nodata", "dst_nodata", "compress")}
    with (
        gdal_env(ctx),
        open_for_read(ctx, args["src"], "src", resolved=src_path, georeferencing=policy) as source,
    ):
        _plan_align(ctx, source, georeferencing=policy, target=target, grid=grid, **options)
        facts = {"data": data_kind(source)}
        if source.crs != target:
            # The CRS the output lands in, normalized as dst_crs is: a justification of that target
            # CRS given to raster.reproject is the same decision, and unlocks this one.
            facts["crs"] = normalize_crs(target.to_wkt(), "like")
    return facts


@operation(
    "raster",
    read_only=False,
    reflection=(ALIGN_CRS, REPROJECT_RESAMPLING, CONVERT_LOSSY),
    inputs=("src", "like"),
    outputs=("dst",),
    preflight=_preflight,
)
def align(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative raster to resample (must have a CRS).")],
    like: Annotated[
        str,
        Field(description="Workspace-relative raster whose grid (CRS, transform, size) the output takes."),
    ],
    dst: OutputGeoTiff,
    resampling: Annotated[
        Resampling,
        Field(
            description="How output pixels are computed: 'nearest' or 'mode' for categories; "
            "'bilinear'/'cubic'/'average' for continuous values; 'sum' to conserve totals."
        ),
    ] = "nearest",
    src_nodata: Annotated[
        float | None, Field(description="Treat this source value as nodata (overrides the file's nodata).")
    ] = None,
    dst_nodata: Annotated[
        float | None,
        Field(description="Output nodata; default as raster.reproject: the source's, else NaN for floats."),
    ] = None,
    compress: Annotated[
        Compression,
        Field(description="Output compression; JPEG/WEBP/LERC* are lossy and need a justification."),
    ] = "DEFLATE",
    georeferencing: GeoreferencingChoice = None,
) -> RasterInfo:
    """Resample and reproject ``src`` onto exactly the grid of ``like``; returns the output's raster.info.

    The output's CRS, transform, width and height are ``like``'s, copied from its header, so it lines
    up cell for cell with ``like`` (raster.calc accepts both). Only ``like``'s grid is used, never its
    pixels. Cells of ``like``'s grid outside ``src``'s footprint are nodata; the nodata rule, the band
    metadata carried over and the tiled, compressed, atomic output are raster.reproject's. The gate
    asks for the resampling method for this kind of data, and for ``like``'s CRS when it is not
    ``src``'s (the same decision as raster.reproject into that CRS).

    ``georeferencing`` applies to both src and like.

    Errors: invalid_argument when dst is src or like, or for a nodata value the data type cannot
    hold; refused when a sidecar overrides the georeferencing of either (pass georeferencing);
    raster_error when src or like has no CRS, or reading/writing fails.
    """
    policy = georeferencing or "refuse"
    target, grid = _like_grid(ctx, like, dst, policy)
    return write_output(
        ctx,
        src,
        dst,
        functools.partial(_plan_align, georeferencing=policy),
        georeferencing=policy,
        target=target,
        grid=grid,
        resampling=resampling,
        src_nodata=src_nodata,
        dst_nodata=dst_nodata,
        compress=compress,
    )


def _like_grid(
    ctx: OperationContext, like: str, dst: str, policy: GeoreferencingPolicy
) -> tuple[RioCRS, tuple[Affine, int, int]]:
    """``like``'s CRS and grid (transform, width, height), read from its header as they are."""
    like_path = input_location(ctx, like, "like")
    dst_path = ctx.workspace.output_path(dst, argument="dst")
    if same_file(like_path, dst_path):
        raise InvalidArgument(
            f"dst is the same file as like ('{like}'); writing would replace the grid being aligned to.",
            fix="Write to a new name, e.g. 'out/aligned.tif'.",
        )
    with (
        gdal_env(ctx),
        open_for_read(ctx, like, "like", resolved=like_path, georeferencing=policy) as reference,
    ):
        if reference.crs is None:
            raise RasterError(
                f"like: '{like}' has no CRS, so its grid is not a place on Earth to align onto.",
                fix="Use a georeferenced raster as like (raster.info shows crs).",
            )
        return reference.crs, (reference.transform, reference.width, reference.height)


def _plan_align(
    ctx: OperationContext,
    source: DatasetReader,
    *,
    georeferencing: GeoreferencingPolicy,
    target: RioCRS,
    grid: tuple[Affine, int, int],
    resampling: str,
    src_nodata: float | None,
    dst_nodata: float | None,
    compress: str,
) -> WarpPlan:
    """The warp onto ``like``'s grid, planned on the source header without reading pixels;
    ``georeferencing`` is the policy ``source`` was opened with."""
    require_crs(ctx, source, "src")
    return warp_onto(
        ctx,
        source,
        target,
        grid,
        raster_operation(source, target),
        georeferencing=georeferencing,
        resampling=resampling,
        src_nodata=src_nodata,
        dst_nodata=dst_nodata,
        compress=compress,
    )
