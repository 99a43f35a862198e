"""``raster.reproject``: warp a raster to another CRS and write a tiled GeoTIFF, block by block.

The plan (:func:`_plan_warp`) resolves the target CRS, the coordinate operation
(:func:`~llmc_mcp.geodesy.routes.choose_operation` for a spread of the raster's points, as
``crs.transform`` chooses), grid (:mod:`.grid`), nodata and creation options from the source header;
writing warps the source into the output window by window (about 16 MB each, so rasters larger than
memory work) with GDAL's warper forced to that operation (its COORDINATE_OPERATION option), and
the provenance record names it. The atomic write and the src/dst checks are :mod:`.output`'s,
shared with ``raster.convert``.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import rasterio
import rasterio.warp
from affine import Affine
from pydantic import Field
from rasterio.crs import CRS as RioCRS
from rasterio.enums import ColorInterp
from rasterio.enums import Resampling as RioResampling
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.capture import note_transformation
from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.models import Compression, RasterInfo
from llmc_mcp.compute.output import creation_options, preflight_output, single_dtype, write_output
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument, RasterError
from llmc_mcp.gdal.datasets import GeoreferencingPolicy
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.geodesy.reference import raster_points
from llmc_mcp.geodesy.routes import ChosenOperation, choose_operation
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.grid import Resolution, check_grid_args, target_grid
from llmc_mcp.operations.raster.models import GeoreferencingChoice, OutputGeoTiff, Resampling
from llmc_mcp.reflection.specs import CONVERT_LOSSY, REPROJECT_CRS, REPROJECT_RESAMPLING, Facts, normalize_crs

OUTPUT_BLOCK = 512
WRITE_CHUNK_BYTES = 16 << 20
"""Pixel bytes (data and mask) reprojection holds per output window."""
WARP_MEM_MB = 256


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> Facts:
    """Refuse a reprojection that cannot run before the gate asks for its justification."""
    return preflight_output(ctx, args, _planner(args["georeferencing"] or "refuse"))


@operation(
    "raster",
    read_only=False,
    reflection=(REPROJECT_CRS, REPROJECT_RESAMPLING, CONVERT_LOSSY),
    inputs=("src",),
    outputs=("dst",),
    preflight=_preflight,
)
def reproject(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster (must have a CRS).")],
    dst: OutputGeoTiff,
    dst_crs: Annotated[
        str,
        Field(description="Target CRS: EPSG code ('EPSG:6933'), WKT, PROJ string or PROJJSON."),
    ],
    resampling: Annotated[
        Resampling,
        Field(
            description="How output pixels are computed: 'nearest' or 'mode' for categories; "
            "'bilinear'/'cubic'/'average' for continuous values; 'sum' to conserve totals."
        ),
    ] = "nearest",
    resolution: Annotated[
        Resolution | None,
        Field(description="Output pixel size in dst_crs units: [size] or [x, y]. Excludes width/height."),
    ] = None,
    width: Annotated[
        int | None,
        Field(description="Output columns. Without height, height keeps the extent's aspect ratio."),
    ] = None,
    height: Annotated[
        int | None,
        Field(description="Output rows. Without width, width keeps the extent's aspect ratio."),
    ] = None,
    bounds: Annotated[
        tuple[float, float, float, float] | None,
        Field(description="Output extent (left, bottom, right, top) in dst_crs units, like gdalwarp -te."),
    ] = None,
    src_nodata: Annotated[
        float | None, Field(description="Treat this source value as nodata (overrides the file's nodata).")
    ] = None,
    dst_nodata: Annotated[
        float | None,
        Field(
            description="Nodata value of the output; default: the source's, else NaN for float data, else "
            "none (an alpha band or internal mask then marks the data)."
        ),
    ] = None,
    compress: Annotated[
        Compression,
        Field(
            description="Output compression; JPEG/WEBP/LERC* are lossy and need a justification. Lossy "
            "data with nodata (the area outside the footprint): its edges become noise."
        ),
    ] = "DEFLATE",
    georeferencing: GeoreferencingChoice = None,
) -> RasterInfo:
    """Reproject a raster to another CRS and write a tiled GeoTIFF.

    The output grid defaults to GDAL's suggestion: the whole source footprint at about the source
    resolution. ``resolution`` or ``width``/``height`` (not both) set the pixel size or count; width
    or height alone derives the other from the extent's aspect ratio. ``bounds`` sets the extent
    like ``gdalwarp -te``: with a resolution (given or suggested) the top-left corner is kept and the
    size rounded to whole pixels; with width/height the pixels may be non-square. Without bounds, a
    resolution keeps the suggested top-left corner and rounds the size up to cover the footprint.

    The coordinate operation is the one crs.transform would choose for the raster's points: the most
    accurate whose area of use covers them, chained through the datum's Greenwich-meridian twin when
    PROJ offers none directly, a ballpark only where nothing else exists; GDAL is made to apply it, and
    the provenance record names its pipeline, accuracy and ballpark flag.

    Areas outside the source footprint are never silent zeros. Rule: the output nodata is
    ``dst_nodata``, else the source nodata (``src_nodata`` or the file's), else NaN for float
    data. An integer source without nodata gets no nodata value: a source alpha band carries
    validity through the warp, otherwise an internal mask (mask_flags 'per_dataset') marks where the
    output has data. Band descriptions, colour interpretation, colour map, scales/offsets/units and
    metadata tags are carried over (stale STATISTICS_* tags are not). The output is a 512x512-tiled
    GeoTIFF (BigTIFF when needed), predictor 2/3 with DEFLATE/LZW/ZSTD, written block by block so
    rasters larger than memory work, and renamed onto ``dst`` only when complete.

    Errors (ApiError, by e.type): invalid_argument for conflicting or out-of-range grid options,
    src == dst, a nodata value the data type cannot hold, a compression the data cannot use
    (JPEG/WEBP need uint8), or an output over 2**32 pixels per band; crs_error for an unknown
    dst_crs; raster_error when the source has no CRS, its extent cannot be expressed in dst_crs
    (pass bounds), or reading/writing fails.
    """
    policy = georeferencing or "refuse"
    return write_output(
        ctx,
        src,
        dst,
        _planner(policy),
        dst_crs=dst_crs,
        resampling=resampling,
        resolution=resolution,
        width=width,
        height=height,
        bounds=bounds,
        src_nodata=src_nodata,
        dst_nodata=dst_nodata,
        compress=compress,
        georeferencing=policy,
    )


@dataclass(frozen=True)
class WarpPlan:
    """A warp onto a fixed grid with one coordinate operation, written window by window."""

    dtype: np.dtype
    use_mask: bool
    profile: dict[str, Any]
    warp_options: dict[str, Any]
    operation: ChosenOperation
    engine: Engine
    source: SourceRaster

    def write(self, source: DatasetReader, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **self.profile) as out:
            carry_metadata(source, out)
            _warp_windows(out, self)
        note_transformation(self.operation.provenance())


def _planner(georeferencing: GeoreferencingPolicy) -> Any:
    """:func:`_plan_warp` for a source opened with ``georeferencing``, which its pieces reopen with."""
    return functools.partial(_plan_warp, georeferencing=georeferencing)


def _plan_warp(
    ctx: OperationContext,
    source: DatasetReader,
    *,
    georeferencing: GeoreferencingPolicy,
    dst_crs: str,
    resampling: str,
    resolution: float | tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
    src_nodata: float | None,
    dst_nodata: float | None,
    compress: str,
) -> WarpPlan:
    """Every check and choice of a reprojection, made on the source header without reading pixels;
    ``georeferencing`` is the policy ``source`` was opened with."""
    grid_args = check_grid_args(resolution, width, height, bounds)
    target = rio_crs(normalize_crs(dst_crs, "dst_crs"))
    require_crs(ctx, source, "src")
    chosen = raster_operation(source, target)
    grid = target_grid(ctx, source, target, dst_crs, chosen, *grid_args)
    return warp_onto(
        ctx,
        source,
        target,
        grid,
        chosen,
        georeferencing=georeferencing,
        resampling=resampling,
        src_nodata=src_nodata,
        dst_nodata=dst_nodata,
        compress=compress,
    )


def raster_operation(source: DatasetReader, target: RioCRS) -> ChosenOperation:
    """The coordinate operation for ``source``'s data into ``target``: the one crs.transform would
    choose for a spread of the raster's points (cell centres and edges)."""
    src = parse_crs(source.crs.to_wkt(), "src CRS")
    dst = parse_crs(target.to_wkt(), "dst_crs")
    return choose_operation(src, dst, *raster_points(source.transform, source.width, source.height))


def require_crs(ctx: OperationContext, source: DatasetReader, argument: str) -> None:
    """Refuse a raster without a CRS: there is nothing to warp from (or onto)."""
    if source.crs is None:
        shown = shown_dataset(ctx, source)
        raise RasterError(
            f"{argument}: '{shown}' has no CRS, so there is nothing to reproject from.",
            fix="Use a georeferenced raster (raster.info shows crs); GCP-only rasters are not supported.",
        )


def warp_onto(
    ctx: OperationContext,
    source: DatasetReader,
    target: RioCRS,
    grid: tuple[Affine, int, int],
    chosen: ChosenOperation,
    *,
    georeferencing: GeoreferencingPolicy,
    resampling: str,
    src_nodata: float | None,
    dst_nodata: float | None,
    compress: str,
) -> WarpPlan:
    """The warp of ``source`` onto ``grid`` (transform, width, height) in ``target`` with the operation
    ``chosen``: data type, the nodata rule of ``raster.reproject``, creation options and GDAL's warp
    options, from the header alone. ``georeferencing`` is the policy ``source`` was opened with: a
    piece run elsewhere opens it again so, and reads the same grid."""
    method = warp_resampling(resampling)
    shown = shown_dataset(ctx, source)
    dtype = single_dtype(source, shown)
    nodata = _output_nodata(source, dtype, src_nodata, dst_nodata)
    options = creation_options(ctx, compress, dtype, source.count, None, None, cog=False)
    transform, out_width, out_height = grid
    use_mask = nodata is None and ColorInterp.alpha not in source.colorinterp
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": out_width,
        "height": out_height,
        "count": source.count,
        "dtype": dtype.name,
        "crs": target,
        "transform": transform,
        "nodata": nodata,
        "tiled": True,
        "blockxsize": OUTPUT_BLOCK,
        "blockysize": OUTPUT_BLOCK,
        **options,
    }
    alpha = _alpha_band(source)
    warp_options: dict[str, Any] = {
        "dst_crs": target,
        "resampling": method,
        "init_dest_nodata": True,
        "warp_mem_limit": WARP_MEM_MB,
        # Threads in GDAL's warp kernel, one chunk at a time: rasterio's num_threads warps chunks in
        # parallel (ChunkAndWarpMulti) and then loses a failed read of the source.
        "NUM_THREADS": str(ctx.num_threads),
        # A source alpha band carries validity through the warp onto the same band of the output;
        # without nodata or alpha, an added alpha band (after the data) becomes the output's mask.
        "src_alpha": alpha,
        "dst_alpha": source.count + 1 if use_mask else alpha,
        **chosen.gdal_options(),
    }
    # Passing None would not mean "the file's value" to the warp but "no source nodata".
    if src_nodata is not None:
        warp_options["src_nodata"] = src_nodata
    warp_options["dst_nodata"] = nodata
    return WarpPlan(
        dtype=dtype,
        use_mask=use_mask,
        profile=profile,
        warp_options=warp_options,
        operation=chosen,
        engine=ctx.engine,
        source=SourceRaster.of(ctx, source, "src", georeferencing),
    )


def _alpha_band(source: DatasetReader) -> int:
    """The 1-based index of the source's alpha band; 0 when it has none."""
    for index, interpretation in enumerate(source.colorinterp, start=1):
        if interpretation == ColorInterp.alpha:
            return index
    return 0


def rio_crs(normalized: str) -> RioCRS:
    """A rasterio CRS from :func:`normalize_crs` text, without letting GDAL read a file name."""
    # Never from_user_input on raw text: GDAL would accept a file name there and read it. EPSG codes
    # go straight in; other authorities (OGC:CRS84, IGNF:LAMB93) go through PROJ's WKT, not GDAL.
    if normalized.startswith("EPSG:") and normalized[5:].isdigit():
        return RioCRS.from_epsg(int(normalized[5:]))
    return RioCRS.from_wkt(parse_crs(normalized).to_wkt())


def warp_resampling(name: str) -> RioResampling:
    """GDAL's warp method of that name, refused when this GDAL build lacks it."""
    try:
        return RioResampling[name]
    except KeyError:
        raise InvalidArgument(
            f"resampling '{name}' is not available in this GDAL build.",
            fix="Use one of: " + ", ".join(r.name for r in RioResampling if r.name != "gauss") + ".",
        ) from None


def _output_nodata(
    source: DatasetReader, dtype: np.dtype, src_nodata: float | None, dst_nodata: float | None
) -> float | None:
    if src_nodata is not None:
        check_nodata(src_nodata, dtype, "src_nodata")
    if dst_nodata is not None:
        check_nodata(dst_nodata, dtype, "dst_nodata")
        return dst_nodata
    inherited = src_nodata if src_nodata is not None else source.nodata
    if inherited is not None:
        return inherited
    return math.nan if dtype.kind == "f" else None


def check_nodata(value: float, dtype: np.dtype, argument: str) -> None:
    """Refuse a nodata value ``dtype`` cannot hold exactly (a fraction, out of range, too large)."""
    if dtype.kind == "f":
        if math.isfinite(value) and abs(value) > float(np.finfo(dtype).max):
            raise InvalidArgument(
                f"{argument}={value} does not fit in {dtype.name}.",
                fix=f"Pass a value {dtype.name} can hold.",
            )
        return
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        if not (math.isfinite(value) and value == int(value) and limits.min <= value <= limits.max):
            raise InvalidArgument(
                f"{argument}={value} is not a {dtype.name} value (whole number, {limits.min}..{limits.max}).",
                fix=f"Pass a whole number in {limits.min}..{limits.max} that the data does not use.",
            )


def carry_metadata(source: DatasetReader, out: Any, *, statistics: bool = False) -> None:
    """Band descriptions, colour interpretation and table, scales/offsets/units and tags of ``source``,
    onto the output being written; STATISTICS_* tags only with ``statistics`` (a copy of the same
    pixels), since new pixels make them stale."""
    out.colorinterp = source.colorinterp
    for i in source.indexes:
        if source.descriptions[i - 1]:
            out.set_band_description(i, source.descriptions[i - 1])
        band_tags = {k: v for k, v in source.tags(i).items() if statistics or not k.startswith("STATISTICS_")}
        if band_tags:
            out.update_tags(i, **band_tags)
    out.update_tags(**source.tags())
    if any(s != 1 for s in source.scales) or any(o != 0 for o in source.offsets):
        out.scales = source.scales
        out.offsets = source.offsets
    if any(source.units):
        out.units = [u or "" for u in source.units]
    if source.colorinterp[0] == ColorInterp.palette:
        # A palette interpretation without a table (ValueError) leaves nothing to carry.
        with contextlib.suppress(ValueError):
            out.write_colormap(1, source.colormap(1))


def _warp_windows(out: Any, plan: WarpPlan) -> None:
    """Warp the plan's source into ``out`` one window at a time, each through GDAL's warper with the
    plan's operation (a WarpedVRT would not take it: rasterio gives it no transformer options)."""
    count = out.count
    layers = count + 1 if plan.use_mask else count
    # The alpha band has the data type; the mask written from it is one byte per pixel. rasterio
    # warps into a copy of the window's array (a MEM dataset): the pixels are held twice.
    per_pixel = 2 * (layers * plan.dtype.itemsize) + (1 if plan.use_mask else 0)
    warp = WarpPiece(plan.source, out.transform, count, layers, plan.dtype, plan.warp_options)
    for window, warped in plan.engine.map(write_windows(out.width, out.height, per_pixel), warp, writes=True):
        out.write(warped[:count], window=window)
        if plan.use_mask:
            out.write_mask(warped[count] > 0, window=window)


@dataclass(frozen=True)
class WarpPiece:
    """One output window's warp, wherever the engine runs it: the source by its checked path, the
    output grid and GDAL's warp options (target CRS, resampling, nodata, coordinate operation).

    GDAL's warper works out from the destination window which source pixels it needs and reads only
    those, so a window warped here or on a Dask worker is the same cells."""

    source: SourceRaster
    transform: Affine
    """The whole output grid's; each window's is derived from it."""
    count: int
    layers: int
    """The source's bands, plus the alpha band that becomes the output's mask when it has one."""
    dtype: np.dtype
    warp_options: dict[str, Any]

    def __call__(self, window: Window) -> np.ndarray:
        warped = np.empty((self.layers, int(window.height), int(window.width)), dtype=self.dtype)
        rasterio.warp.reproject(
            rasterio.band(self.source.dataset(), list(range(1, self.count + 1))),
            warped,
            dst_transform=rasterio.windows.transform(window, self.transform),
            **self.warp_options,
        )
        return warped


def write_windows(width: int, height: int, bytes_per_pixel: int) -> Iterator[Window]:
    """Windows aligned to the 512-pixel output tiles, about WRITE_CHUNK_BYTES each."""
    tiles = max(1, math.isqrt(max(1, WRITE_CHUNK_BYTES // bytes_per_pixel)) // OUTPUT_BLOCK)
    side = tiles * OUTPUT_BLOCK
    for row in range(0, height, side):
        for col in range(0, width, side):
            yield Window(col, row, min(side, width - col), min(side, height - row))
