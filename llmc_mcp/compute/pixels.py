"""Reading pixels: one window of one or more bands, and which of them are valid.

Every operation that reads pixel values (stats, area, calc, sample) needs the same three things, so
they are done once, here: nodata, masks and alpha all come through GDAL's mask (a masked read, unless
GDAL says every band read is all valid), NaN and infinities are never valid values, and a read GDAL
cannot complete becomes a :class:`RasterError` naming the file, not a library exception with an
absolute path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from rasterio.enums import MaskFlags, Resampling
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.context import ComputeContext
from llmc_mcp.errors import RasterError
from llmc_mcp.gdal.messages import GDAL_ERRORS, translate_gdal_error
from llmc_mcp.gdal.remote_datasets import shown_dataset


def read_valid(
    ctx: ComputeContext,
    ds: DatasetReader,
    bands: int | Sequence[int],
    window: Window | None = None,
    out_shape: tuple[int, int] | None = None,
    resampling: Resampling = Resampling.nearest,
) -> tuple[np.ndarray, np.ndarray]:
    """The stored values of ``bands`` in ``window`` and a same-shaped mask of the valid ones.

    ``out_shape`` decimates through GDAL (overviews where the file has them) with ``resampling``; GDAL's
    average leaves invalid pixels out, and a decimated pixel is valid when any pixel it covers is.
    """
    indexes = bands if isinstance(bands, int) else list(bands)
    listed = [indexes] if isinstance(indexes, int) else indexes
    masked = any(_needs_mask(ds, band) for band in listed)
    try:
        data = ds.read(indexes, window=window, out_shape=out_shape, resampling=resampling, masked=masked)
    except GDAL_ERRORS as exc:
        which = f"band {indexes}" if isinstance(indexes, int) else f"bands {indexes}"
        raise unreadable(ctx, ds, which, exc) from None
    raw = np.ma.getdata(data)
    floating = raw.dtype.kind in "fc"
    if not masked:
        return raw, np.isfinite(raw) if floating else np.ones(raw.shape, dtype=bool)
    valid = ~np.ma.getmaskarray(data)
    if floating:
        valid &= np.isfinite(raw)
    return raw, valid


def _needs_mask(ds: DatasetReader, band: int) -> bool:
    """Whether GDAL's mask of ``band`` can say more than :func:`numpy.isfinite` of its values.

    Not for a band GDAL says is all valid (the mask would be a window of 255s to decode), nor for a
    floating-point band whose only mask is a NaN nodata value: that mask is exactly the band's NaNs,
    which the finite check excludes anyway, and computing it costs another pass over every window.
    """
    flags = ds.mask_flag_enums[band - 1]
    if flags == [MaskFlags.all_valid]:
        return False
    nodata = ds.nodatavals[band - 1]
    floating = np.dtype(ds.dtypes[band - 1]).kind == "f"
    return not (flags == [MaskFlags.nodata] and floating and nodata is not None and math.isnan(nodata))


def unreadable(ctx: ComputeContext, ds: DatasetReader, which: str, exc: Exception) -> RasterError:
    """The error for pixels of ``ds`` (``which``: "band 2", "the mask") GDAL could not read."""
    return RasterError(
        f"'{shown_dataset(ctx, ds)}': the pixel data of {which} could not be read "
        f"({translate_gdal_error(exc, ctx, Path(ds.name))}).",
        fix="The file is damaged or truncated: re-create or re-download it. raster.info still works "
        "on it because it reads only the header.",
    )


def grid_windows(area: Window, rows: int, cols: int) -> Iterator[Window]:
    """``area`` cut into windows of at most ``rows`` x ``cols``, row by row: the streaming unit of the
    operations that read or write in windows (their sizes are theirs: a row of output tiles, a budget
    of cells)."""
    row_end, col_end = int(area.row_off + area.height), int(area.col_off + area.width)
    for row in range(int(area.row_off), row_end, rows):
        for col in range(int(area.col_off), col_end, cols):
            yield Window(col, row, min(cols, col_end - col), min(rows, row_end - row))
