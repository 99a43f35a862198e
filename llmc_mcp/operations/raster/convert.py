"""``raster.convert``: rewrite a raster as GeoTIFF or COG with another compression, layout, overviews.

Only the encoding changes (and, for lossy compressions, pixel values). The copy is GDAL's
``CreateCopy`` (:mod:`.gdal_copy`, which reports its progress), so pixels, georeferencing, masks and
metadata come across as GDAL carries them; on a Dask engine a GeoTIFF output is filled from pieces
the cluster reads instead, into the same file (:mod:`.convert_pieces`). GTiff overviews are built
inside the written file afterwards. The atomic write and the creation options are :mod:`.output`'s,
shared with ``raster.reproject``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import rasterio
from pydantic import Field
from rasterio.enums import OverviewResampling as RioOverviewResampling
from rasterio.io import DatasetReader

from llmc_mcp.compute import progress
from llmc_mcp.compute.models import Compression, RasterInfo
from llmc_mcp.compute.output import creation_options, preflight_output, single_dtype, write_output
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import GeoreferencingPolicy
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.convert_pieces import PieceCopy, copies_in_pieces
from llmc_mcp.operations.raster.gdal_copy import create_copy
from llmc_mcp.operations.raster.models import GeoreferencingChoice, OutputGeoTiff, OverviewResampling
from llmc_mcp.reflection.specs import CONVERT_LOSSY, CONVERT_OVERVIEWS, Facts

AUTO_OVERVIEW_MIN_SIDE = 256


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> Facts:
    """Refuse a conversion that cannot run before the gate asks for its justification."""
    return preflight_output(ctx, args, _planner(args["georeferencing"] or "refuse"))


@operation(
    "raster",
    read_only=False,
    reflection=(CONVERT_LOSSY, CONVERT_OVERVIEWS),
    inputs=("src",),
    outputs=("dst",),
    preflight=_preflight,
)
def convert(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster.")],
    dst: OutputGeoTiff,
    driver: Annotated[
        Literal["GTiff", "COG"],
        Field(
            description="'GTiff', or 'COG' for a Cloud Optimized GeoTIFF (always tiled, overviews last; "
            "the result reports driver 'GTiff' with layout 'COG')."
        ),
    ] = "GTiff",
    compress: Annotated[
        Compression,
        Field(
            description="Compression; JPEG/WEBP/LERC* are lossy and need a justification. Lossy data with "
            "nodata: the nodata edges become noise (values near, not equal to, nodata)."
        ),
    ] = "DEFLATE",
    predictor: Annotated[
        Literal[1, 2, 3] | None,
        Field(description="1 none, 2 integer, 3 floating point; null picks 2 or 3 for DEFLATE/LZW/ZSTD."),
    ] = None,
    tiled: Annotated[
        bool, Field(description="Tiled layout (blocksize x blocksize); False writes strips.")
    ] = True,
    blocksize: Annotated[
        int,
        Field(
            description="Tile size in pixels (rows per strip when not tiled): a multiple of 16 in 16..4096."
        ),
    ] = 512,
    overviews: Annotated[
        list[int] | Literal["auto"] | None,
        Field(
            description="Overview factors such as [2, 4, 8], or 'auto' (halve until the smaller side is "
            "under 256 pixels); null for none. COG accepts only 'auto' or null."
        ),
    ] = None,
    overview_resampling: Annotated[
        OverviewResampling,
        Field(
            description="How overview pixels are computed: 'nearest' or 'mode' for categories; 'average', "
            "'bilinear' or 'cubic' for continuous values."
        ),
    ] = "nearest",
    quality: Annotated[
        int | None,
        Field(description="JPEG/WEBP quality 1..100 (JPEG default 75); only with those compressions."),
    ] = None,
    georeferencing: GeoreferencingChoice = None,
) -> RasterInfo:
    """Rewrite a raster as GeoTIFF or Cloud Optimized GeoTIFF with a chosen compression, layout, overviews.

    Pixels, CRS, grid, nodata, masks, band descriptions, colour interpretation and tags are copied;
    only the encoding changes (and pixel values too for lossy JPEG/WEBP/LERC). COG goes through
    GDAL's COG driver and validates as a COG: the result says ``driver: 'GTiff'`` (the driver that
    reads it back) and ``layout: 'COG'``. Its overviews are 'auto' (regenerated with
    ``overview_resampling``) or none, and none is the default: GDAL alone would build them with its
    own resampling, but the method is a choice to justify, so ask for them (the result's
    ``overviews`` lists the factors built, [] for none). For GTiff, overviews are built inside the
    file after the copy. 'auto' factors are 2, 4, 8, ... until the overview's smaller side is under
    256 pixels; a raster already that small is refused (there would be no overview to justify a
    method for). The output is written beside ``dst`` and renamed onto it when complete. A lossy
    compression on data with a nodata value turns the nodata edges into noise (pixels near, no
    longer equal to, the nodata value): prefer a lossless compression for such data.

    Errors (ApiError, by e.type): invalid_argument for options that do not apply: COG with
    tiled=False or explicit factors, blocksize not a multiple of 16 in 16..4096, predictor 2 on float
    or 3 on integer data, predictor or quality with a compression that has none, JPEG/WEBP on
    non-uint8 data, WEBP without 3/4 bands, overview factors below 2, overview_resampling without
    overviews, src == dst; raster_error when reading or writing fails.
    """
    policy = georeferencing or "refuse"
    return write_output(
        ctx,
        src,
        dst,
        _planner(policy),
        driver=driver,
        compress=compress,
        predictor=predictor,
        tiled=tiled,
        blocksize=blocksize,
        overviews=overviews,
        overview_resampling=overview_resampling,
        quality=quality,
        georeferencing=policy,
    )


@dataclass(frozen=True)
class _CopyPlan:
    driver: str
    options: dict[str, str]
    overview_factors: list[int]
    overview_resampling: str
    pieces: PieceCopy | None
    """Set where the engine runs pieces elsewhere and the copy can be made in pieces
    (:mod:`.convert_pieces`); else GDAL's ``CreateCopy`` in this process."""

    def write(self, source: DatasetReader, tmp: Path) -> None:
        if self.pieces is not None:
            self.pieces.write(source, tmp)
        else:
            # GDAL's copy, with its progress (rasterio's copy takes no callback): the source is
            # reopened with the checked dataset's open options (its georeferencing choice among them).
            create_copy(
                source.name,
                source.options,
                tmp,
                self.driver,
                self.options,
                lambda fraction: progress.report(round(fraction * 1000), 1000),
            )
        if self.driver == "GTiff" and self.overview_factors:
            with rasterio.open(tmp, "r+") as out:
                out.build_overviews(self.overview_factors, RioOverviewResampling[self.overview_resampling])


def _planner(georeferencing: GeoreferencingPolicy) -> Any:
    """:func:`_plan_copy` for a source opened with ``georeferencing``, which its pieces reopen with."""
    return functools.partial(_plan_copy, georeferencing=georeferencing)


def _plan_copy(
    ctx: OperationContext,
    source: DatasetReader,
    *,
    georeferencing: GeoreferencingPolicy,
    driver: str,
    compress: str,
    predictor: int | None,
    tiled: bool,
    blocksize: int,
    overviews: list[int] | str | None,
    overview_resampling: str,
    quality: int | None,
) -> _CopyPlan:
    """Every check of a conversion, and the creation options and overview factors it resolves to."""
    if driver == "COG" and not tiled:
        raise InvalidArgument(
            "driver='COG' is always tiled; tiled=False does not apply.", fix="Drop tiled=False."
        )
    if not (16 <= blocksize <= 4096 and blocksize % 16 == 0):
        raise InvalidArgument(
            f"blocksize={blocksize} must be a multiple of 16 in 16..4096.",
            fix="Pass 256 or 512 (the default).",
        )
    requested = _check_overviews(overviews, driver, overview_resampling)
    dtype = single_dtype(source, shown_dataset(ctx, source))
    options = creation_options(ctx, compress, dtype, source.count, predictor, quality, cog=driver == "COG")
    factors = _auto_factors(source.width, source.height) if requested == "auto" else (requested or [])
    if requested == "auto" and not factors:
        # Refused rather than skipped: the gate would otherwise ask to justify a method never used.
        raise InvalidArgument(
            "overviews='auto' builds none: the smaller side of this raster is under "
            f"{AUTO_OVERVIEW_MIN_SIDE} pixels.",
            fix="Drop overviews and overview_resampling.",
        )
    if driver == "COG":
        options["BLOCKSIZE"] = str(blocksize)
        if factors:
            options.update(
                OVERVIEWS="IGNORE_EXISTING",
                OVERVIEW_COUNT=str(len(factors)),
                OVERVIEW_RESAMPLING=_gdal_resampling_name(overview_resampling),
            )
        else:
            options["OVERVIEWS"] = "NONE"
    else:
        options["BLOCKYSIZE"] = str(blocksize)
        if tiled:
            options.update(TILED="YES", BLOCKXSIZE=str(blocksize))
    pieces = None
    if copies_in_pieces(ctx, source, driver):
        pieces = PieceCopy.plan(ctx, source, georeferencing, options)
    return _CopyPlan(driver, options, factors, overview_resampling, pieces)


def _check_overviews(
    overviews: list[int] | str | None, driver: str, resampling: str
) -> list[int] | Literal["auto"] | None:
    if overviews is None or (isinstance(overviews, list) and not overviews):
        if resampling != "nearest":
            raise InvalidArgument(
                f"overview_resampling='{resampling}' was given but no overviews are built.",
                fix="Pass overviews='auto' (or factors such as [2, 4, 8]), or drop overview_resampling.",
            )
        return None
    if overviews == "auto":
        return "auto"
    assert isinstance(overviews, list)
    if driver == "COG":
        raise InvalidArgument(
            f"driver='COG' builds its own power-of-two overviews; explicit factors {overviews} do not apply.",
            fix="With driver='COG' pass overviews='auto' (or null for none); use driver='GTiff' for factors.",
        )
    bad = [f for f in overviews if f < 2]
    if bad:
        raise InvalidArgument(
            f"overview factors {bad} must be 2 or more.", fix="Pass factors such as [2, 4, 8]."
        )
    return sorted(set(overviews))


def _auto_factors(width: int, height: int) -> list[int]:
    factors: list[int] = []
    factor = 1
    while math.ceil(min(width, height) / factor) >= AUTO_OVERVIEW_MIN_SIDE:
        factor *= 2
        factors.append(factor)
    return factors


def _gdal_resampling_name(name: str) -> str:
    return name.replace("_", "").upper()
