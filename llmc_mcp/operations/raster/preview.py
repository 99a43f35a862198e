"""``raster.preview``: a PNG quicklook of a raster, small enough for a model to look at.

One decimated read through GDAL (overviews where the file has them): the raster is never read at full
resolution into memory, and GDAL streams the source blocks through its cache when it has no overview.
Classes are decimated with nearest, so a class map keeps only colours it has; measurements and RGB
imagery with average, which GDAL computes over valid pixels only. The result carries the PNG as base64
in a field the faces attach as image content (:data:`~llmc_mcp.operations.raster.models.PNG_BASE64`).
"""

from __future__ import annotations

import base64
import io
from typing import Annotated

import numpy as np
from pydantic import Field
from rasterio.enums import ColorInterp, Resampling
from rasterio.io import DatasetReader

from llmc_mcp.compute.output import data_kind
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.scaling import scales_offsets
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import RasterPreview, Stretch
from llmc_mcp.operations.raster.stats import check_bands

PERCENTILES = (2.0, 98.0)
"""The percentile stretch's limits: the darkest and brightest 2% of valid pixels saturate."""
MAX_PREVIEW_SIZE = 2048
FLAT_LEVEL = 128
"""The level of a band whose values are all one: mid-grey, neither 'no data' black nor saturated."""


@operation("raster", read_only=True, inputs=("path",))
def preview(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file.")],
    bands: Annotated[
        list[int] | None,
        Field(
            description="One band (grey, or its colour table) or three (red, green, blue); default: the "
            "red/green/blue bands by colour interpretation, else 1,2,3, or band 1 of a 1-2 band raster."
        ),
    ] = None,
    max_size: Annotated[
        int, Field(ge=16, le=MAX_PREVIEW_SIZE, description="Longest side of the PNG in pixels (16-2048).")
    ] = 512,
    stretch: Annotated[
        Stretch,
        Field(
            description="'percentile': 2nd-98th percentile of valid pixels per band to 0-255; 'minmax': "
            "min-max per band; 'none': uint8 values as stored."
        ),
    ] = "percentile",
) -> RasterPreview:
    """A PNG quicklook of a raster to look at: nodata transparent, classes unsmoothed.

    In code mode show() attaches the image to the call's result, e.g. raster.preview("in.tif",
    max_size=256); a classic tool returns it as image content. The longest side is at most
    ``max_size`` and the aspect ratio is kept; a raster smaller than that is drawn at its own size
    (never enlarged). Pixels are decimated by one GDAL read (overviews where the file has them):
    nearest for classes (a colour table, LAYER_TYPE=thematic, or one integer band without scale, which
    may be class codes), so every drawn value is one the raster has; average of valid pixels for float
    or scaled bands and for RGB. A pixel with no valid value (nodata, mask, alpha band, NaN) is
    transparent.

    One band with a colour table is drawn in its colours (their alpha kept; a value missing from the
    table is transparent) and ``stretch`` does not apply. Otherwise each band is stretched to 0-255:
    'percentile' maps its 2nd and 98th percentiles (of the preview's valid pixels, linear
    interpolation) to 0 and 255 and clips beyond; 'minmax' maps min and max; 'none' writes uint8
    values as they are and refuses other types. Percentile and minmax limits are physical values
    (stored * scale + offset): a positive scale draws the same picture as the stored values, and a
    negative one is not drawn upside down. Limits that coincide fall back to min-max; a band of one
    value is drawn mid-grey (128).

    Errors (ApiError, by e.type): not_found if the file does not exist; invalid_argument for bands that
    are not 1 or 3 valid band numbers, or stretch 'none' on bands that are not uint8; raster_error if
    the pixels cannot be read.
    """
    # A picture of the pixels does not depend on where they are: a sidecar overriding the file's
    # georeferencing is no reason to refuse one.
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing="unchecked") as ds:
        shown = shown_dataset(ctx, ds)
        indexes = _choose_bands(ds, bands, shown)
        table = _colour_table(ds, indexes[0]) if len(indexes) == 1 else None
        if table is None and stretch == "none":
            _check_uint8(ds, indexes, shown)
        kind = data_kind(ds)
        classes = table is not None or kind == "categorical" or (kind == "integer" and len(indexes) == 1)
        resampling = Resampling.nearest if classes else Resampling.average
        height, width = _preview_shape(ds.height, ds.width, max_size)
        raw, valid = read_valid(ctx, ds, indexes, out_shape=(height, width), resampling=resampling)
        scales, offsets = scales_offsets(ds, indexes)
        source_width, source_height = ds.width, ds.height
    opaque = valid.all(axis=0)
    if table is not None:
        pixels = _paint(raw[0], opaque, table)
        limits, used, how = None, None, "colours from the band's colour table"
    else:
        levels, limits = _stretch(raw, opaque, stretch, scales, offsets)
        pixels = np.concatenate([levels, opaque[None].astype(np.uint8) * 255])
        used, how = stretch, _STRETCH_NOTES[stretch]
    png = _encode(pixels)
    transparent = int((pixels[-1] == 0).sum())
    rendering = "colour_table" if table is not None else "grey" if len(indexes) == 1 else "rgb"
    note = (
        f"{width}x{height} PNG of the {source_width}x{source_height} raster, bands {indexes} as {rendering}: "
        f"{how}; decimated with {resampling.name}; {transparent} pixels transparent (no valid value)."
    )
    return RasterPreview(
        path=shown,
        width=width,
        height=height,
        source_width=source_width,
        source_height=source_height,
        bands=indexes,
        rendering=rendering,
        stretch=used,
        limits=limits,
        resampling=resampling.name,
        transparent_pixels=transparent,
        png_bytes=len(png),
        png_base64=base64.b64encode(png).decode("ascii"),
        note=note,
    )


_STRETCH_NOTES = {
    "percentile": "2nd-98th percentile of valid physical values per band to 0-255, clipped",
    "minmax": "min-max of valid physical values per band to 0-255",
    "none": "stored uint8 values as levels",
}


def _choose_bands(ds: DatasetReader, bands: list[int] | None, shown: str) -> list[int]:
    if bands is not None:
        indexes = check_bands(ds, bands, shown)
        if len(indexes) not in (1, 3):
            raise InvalidArgument(
                f"bands {indexes} lists {len(indexes)} bands; a preview draws 1 (grey) or 3 "
                "(red, green, blue).",
                fix="Pass one band, e.g. [1], or three, e.g. [3, 2, 1].",
            )
        return indexes
    if ds.count < 3:
        return [1]
    first: dict[ColorInterp, int] = {}
    for index, interp in zip(ds.indexes, ds.colorinterp, strict=True):
        first.setdefault(interp, index)
    rgb = [first.get(c) for c in (ColorInterp.red, ColorInterp.green, ColorInterp.blue)]
    return [i for i in rgb if i is not None] if None not in rgb else [1, 2, 3]


def _colour_table(ds: DatasetReader, band: int) -> dict[int, tuple[int, int, int, int]] | None:
    try:
        return ds.colormap(band)
    except ValueError:  # the band has none
        return None


def _check_uint8(ds: DatasetReader, indexes: list[int], shown: str) -> None:
    wrong = {b: ds.dtypes[b - 1] for b in indexes if ds.dtypes[b - 1] != "uint8"}
    if wrong:
        raise InvalidArgument(
            f"stretch 'none' draws stored values as 0-255 levels, but bands {list(wrong)} of '{shown}' are "
            f"{', '.join(sorted(set(wrong.values())))}.",
            fix="Use stretch='percentile' or 'minmax' for bands that are not uint8.",
        )


def _preview_shape(height: int, width: int, max_size: int) -> tuple[int, int]:
    """The PNG's (height, width): the longest side ``max_size``, the aspect kept, never enlarged."""
    longest = max(height, width)
    if longest <= max_size:
        return height, width
    return max(1, round(height * max_size / longest)), max(1, round(width * max_size / longest))


def _stretch(
    raw: np.ndarray, opaque: np.ndarray, stretch: Stretch, scales: list[float], offsets: list[float]
) -> tuple[np.ndarray, list[tuple[float, float]] | None]:
    """0-255 levels per band (bands, rows, cols) and the (low, high) values each band's levels span."""
    levels = np.zeros(raw.shape, dtype=np.uint8)
    if stretch == "none":
        levels[:] = np.where(opaque, raw, 0)
        return levels, [(0.0, 255.0)] * raw.shape[0]
    if not opaque.any():
        return levels, None
    limits = []
    for i in range(raw.shape[0]):
        values = raw[i].astype(np.float64) * scales[i] + offsets[i]
        good = values[opaque]
        low, high = float(good.min()), float(good.max())
        if stretch == "percentile":
            p_low, p_high = (float(v) for v in np.percentile(good, PERCENTILES))
            if p_high > p_low:
                low, high = p_low, p_high
        if high > low:
            with np.errstate(invalid="ignore", over="ignore"):
                scaled = np.clip((values - low) / (high - low), 0.0, 1.0) * 255.0
            levels[i] = np.where(opaque, np.rint(np.nan_to_num(scaled)), 0).astype(np.uint8)
        else:
            levels[i] = np.where(opaque, FLAT_LEVEL, 0)
        limits.append((low, high))
    return levels, limits


def _paint(values: np.ndarray, opaque: np.ndarray, table: dict[int, tuple[int, int, int, int]]) -> np.ndarray:
    """RGBA (4, rows, cols) from a colour table; values missing from it are transparent."""
    lut = np.zeros((max(table) + 1, 4), dtype=np.uint8)
    for value, colour in table.items():
        lut[value] = colour
    known = opaque & (values >= 0) & (values < len(lut))
    rgba = lut[np.where(known, values, 0).astype(np.int64)]
    rgba[~known] = 0
    return np.moveaxis(rgba, -1, 0)


def _encode(pixels: np.ndarray) -> bytes:
    """PNG bytes of (bands + alpha, rows, cols) uint8 levels; the alpha channel only when needed."""
    from PIL import Image

    if pixels[-1].all():
        pixels = pixels[:-1]
    planes = np.ascontiguousarray(np.moveaxis(pixels, 0, -1))
    image = Image.fromarray(planes[..., 0] if planes.shape[-1] == 1 else planes)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
