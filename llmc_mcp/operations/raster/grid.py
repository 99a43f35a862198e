"""The output grid of ``raster.reproject``: extent, pixel size and pixel count in the target CRS.

Without grid options the grid is GDAL's suggestion (the whole source footprint at about the source
resolution, through the coordinate operation the warp will apply); ``resolution``,
``width``/``height`` and ``bounds`` override parts of it the way ``gdalwarp -tr``/``-ts``/``-te`` do.
Computed from the source header alone, so a preflight can refuse an absurd grid before anything is
written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import numpy as np
from affine import Affine
from pydantic import AfterValidator, BeforeValidator, Field
from rasterio.crs import CRS as RioCRS
from rasterio.io import DatasetReader
from rasterio.vrt import WarpedVRT
from rasterio.warp import transform as gdal_transform

from llmc_mcp.errors import InvalidArgument, RasterError
from llmc_mcp.gdal.messages import GDAL_ERRORS, translate_gdal_error
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.geodesy.reference import RASTER_SPREAD
from llmc_mcp.geodesy.routes import ChosenOperation
from llmc_mcp.operations.catalog import OperationContext


def _listed(value: object) -> object:
    """A bare number is the one-number form, [size]."""
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else value


def _size(value: list[float]) -> float | tuple[float, float]:
    return value[0] if len(value) == 1 else (value[0], value[1])


Resolution = Annotated[
    list[float],
    BeforeValidator(_listed),
    Field(min_length=1, max_length=2),
    AfterValidator(_size),
]
"""A pixel size: one number for square pixels or an (x, y) pair, published as ONE schema type, an array
of one or two numbers (``[30]``, ``[30, 20]``): a union of number and array is what converters to
Gemini's function declarations collapse, dropping one form. A bare number is still accepted."""

MAX_OUTPUT_PIXELS = 1 << 32
"""Per band. A typo in a resolution (metres vs degrees) should fail fast, not fill the disk."""


def check_grid_args(
    resolution: float | tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
) -> tuple[tuple[float, float] | None, int | None, int | None, tuple[float, float, float, float] | None]:
    """Each grid option alone is sane, and resolution is not combined with width/height; resolution
    comes back as an (x, y) pair."""
    if resolution is not None and (width is not None or height is not None):
        raise InvalidArgument(
            "resolution conflicts with width/height: both set the pixel size.",
            fix="Pass either resolution or width/height, not both.",
        )
    res = None
    if resolution is not None:
        res = (float(resolution), float(resolution)) if isinstance(resolution, int | float) else resolution
        if not all(math.isfinite(r) and r > 0 for r in res):
            raise InvalidArgument(
                f"resolution {resolution} must be positive and finite.",
                fix="Pass the pixel size in dst_crs units, e.g. 30 (metres) or 0.00025 (degrees).",
            )
    for name, value in (("width", width), ("height", height)):
        if value is not None and value < 1:
            raise InvalidArgument(
                f"{name}={value} must be at least 1.", fix=f"Pass a positive {name} in pixels."
            )
    if bounds is not None:
        left, bottom, right, top = bounds
        if not all(math.isfinite(v) for v in bounds):
            raise InvalidArgument(
                f"bounds {bounds} must be finite numbers.", fix="Pass (left, bottom, right, top)."
            )
        if left >= right or bottom >= top:
            raise InvalidArgument(
                f"bounds {bounds} are empty: they need left < right and bottom < top.",
                fix="Pass (left, bottom, right, top) in dst_crs units, e.g. (-10, 35, 30, 60) in degrees.",
            )
    return res, width, height, bounds


def target_grid(
    ctx: OperationContext,
    source: DatasetReader,
    target: RioCRS,
    dst_crs: str,
    chosen: ChosenOperation,
    res: tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
) -> tuple[Affine, int, int]:
    """The output transform, width and height: GDAL's suggested grid with the given options applied.

    Refuses a grid over MAX_OUTPUT_PIXELS per band: a resolution typed in the wrong units should fail
    here, not fill the disk.
    """
    if bounds is not None and (width is not None or height is not None):
        extent = bounds
    else:
        default, default_w, default_h = _default_grid(ctx, source, target, dst_crs, chosen)
        if bounds is None and res is None and width is None and height is None:
            return default, default_w, default_h
        extent = bounds or (
            default.c,
            default.f + default_h * default.e,
            default.c + default_w * default.a,
            default.f,
        )
        if res is None and width is None and height is None:
            res = (default.a, -default.e)
    left, bottom, right, top = extent
    if res is not None:
        # gdalwarp -te -tr keeps the top-left corner and rounds the size; without bounds, cover the
        # footprint (the tolerance keeps float noise in an exact fit from adding a pixel).
        def fit(pixels: float) -> int:
            return max(1, round(pixels) if bounds is not None else math.ceil(pixels - 1e-6))

        out_w, out_h = fit((right - left) / res[0]), fit((top - bottom) / res[1])
        transform = Affine(res[0], 0.0, left, 0.0, -res[1], top)
    else:
        aspect = (right - left) / (top - bottom)
        if width is not None and height is not None:
            out_w, out_h = width, height
        elif width is not None:
            out_w, out_h = width, max(1, round(width / aspect))
        else:
            assert height is not None
            out_w, out_h = max(1, round(height * aspect)), height
        transform = Affine((right - left) / out_w, 0.0, left, 0.0, -(top - bottom) / out_h, top)
    if out_w * out_h > MAX_OUTPUT_PIXELS:
        raise InvalidArgument(
            f"the output would be {out_w}x{out_h} pixels per band (over {MAX_OUTPUT_PIXELS}).",
            fix="Check resolution/width/height: the pixel size is in dst_crs units (degrees or metres).",
        )
    return transform, out_w, out_h


def _default_grid(
    ctx: OperationContext, source: DatasetReader, target: RioCRS, dst_crs: str, chosen: ChosenOperation
) -> tuple[Affine, int, int]:
    # A WarpedVRT suggests the grid from the source's full geotransform; calculate_default_transform
    # would only see the bounds and lose a rotation (and needs the VRT driver, not registered here).
    try:
        with WarpedVRT(source, crs=target) as vrt:
            suggested = vrt.transform, vrt.width, vrt.height
        return _onto_footprint(suggested, source, target, chosen)
    except (*GDAL_ERRORS, ValueError) as exc:
        shown = shown_dataset(ctx, source)
        raise RasterError(
            f"The extent of '{shown}' cannot be computed in {dst_crs[:100]!r} "
            f"({translate_gdal_error(exc, ctx, Path(source.name))}).",
            fix="Pass bounds (left, bottom, right, top) in dst_crs units together with resolution or "
            "width/height, or choose a CRS whose area of use covers the raster (crs.info).",
        ) from None


def _onto_footprint(
    grid: tuple[Affine, int, int], source: DatasetReader, target: RioCRS, chosen: ChosenOperation
) -> tuple[Affine, int, int]:
    """GDAL's suggested grid, moved to cover the footprint under the operation the warp applies.

    GDAL suggests the grid with its own operation, which differs from the chosen one where PROJ's
    best needs a route (Monte Mario (Rome): GDAL's ballpark is 74 m off). Where the two footprints'
    edges agree to half a pixel the suggestion stands as GDAL made it; otherwise its pixel size is
    kept and its extent moved and grown to the footprint the warp will fill.
    """
    transform = grid[0]
    edge = np.linspace(0.0, 1.0, RASTER_SPREAD)
    cols = np.concatenate(
        [
            edge * source.width,
            np.full(edge.size, float(source.width)),
            edge * source.width,
            np.zeros(edge.size),
        ]
    )
    rows = np.concatenate(
        [
            np.zeros(edge.size),
            edge * source.height,
            np.full(edge.size, float(source.height)),
            edge * source.height,
        ]
    )
    xs, ys = source.transform @ (cols, rows)
    gx, gy = gdal_transform(source.crs, target, list(xs), list(ys))
    cx, cy = chosen.transformer.transform(np.asarray(xs), np.asarray(ys), errcheck=False)
    ours = _extent(np.asarray(cx), np.asarray(cy))
    gdal = _extent(np.asarray(gx), np.asarray(gy))
    res_x, res_y = transform.a, -transform.e
    if ours is None or gdal is None or transform.b or transform.d:
        return grid  # a footprint crossing a projection's edge, or a rotated suggestion: GDAL's stands
    shifts = np.abs(np.subtract(ours, gdal)) / np.array([res_x, res_y, res_x, res_y])
    if shifts.max() < 0.5:
        return grid
    left, bottom, right, top = ours
    out_w = max(1, math.ceil((right - left) / res_x - 1e-6))
    out_h = max(1, math.ceil((top - bottom) / res_y - 1e-6))
    return Affine(res_x, 0.0, left, 0.0, -res_y, top), out_w, out_h


def _extent(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float] | None:
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.all():
        return None
    return float(x.min()), float(y.min()), float(x.max()), float(y.max())
