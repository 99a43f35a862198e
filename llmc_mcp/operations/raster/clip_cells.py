"""Which cells of the source ``raster.clip`` keeps.

A box in the raster's CRS on a grid that is not rotated needs no rasterizing: its cells are a
rectangle worked out from the inverse geotransform (north-up and south-up grids are the same
arithmetic), and a cell whose centre lies exactly on its edge is inside. Polygons (and a box on a
rotated grid) are rasterized with ``geometry_mask`` window by window: a first pass over their
envelope finds the exact rows and columns holding inside cells, so memory is one window whatever
the raster's size. A window's rasterizing is a picklable piece (:class:`InsideCells`: the grid's
transform and the shapes, which pickle), so the engine may run it in another process.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import rasterio
from rasterio.features import geometry_mask
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.pixels import grid_windows

if TYPE_CHECKING:
    import shapely


WINDOW_ROWS = 512


WINDOW_COLS = 2048
"""Windows of 512 rows (one row of output tiles) by up to 2048 columns: about 1 M cells per band."""


SNAP = 1e-6
"""A box edge within a millionth of a cell of a cell edge is on it (float noise of the CRS units)."""


def _snap(value: float) -> float:
    nearest = round(value)
    return float(nearest) if abs(value - nearest) < SNAP else value


def box_window(source: DatasetReader, box: tuple[float, float, float, float], all_touched: bool) -> Window:
    """The cells of a grid that is not rotated inside an axis-aligned box, clipped to the raster
    (possibly empty). Inverse geotransform of the corners, so any sign of pixel size works."""
    left, bottom, right, top = box
    cols, rows = ~source.transform @ (np.array([left, right]), np.array([top, bottom]))
    c0, c1 = sorted(_snap(float(c)) for c in cols)
    r0, r1 = sorted(_snap(float(r)) for r in rows)
    if all_touched:  # every cell overlapping the box (by more than its edge)
        first_col, end_col, first_row, end_row = math.floor(c0), math.ceil(c1), math.floor(r0), math.ceil(r1)
    else:  # cells whose centre (k + 0.5) is inside, edges included
        first_col, end_col = math.ceil(c0 - 0.5), math.floor(c1 - 0.5) + 1
        first_row, end_row = math.ceil(r0 - 0.5), math.floor(r1 - 0.5) + 1
    return _clamp(source, first_col, end_col, first_row, end_row)


def _clamp(source: DatasetReader, first_col: int, end_col: int, first_row: int, end_row: int) -> Window:
    first_col, end_col = max(first_col, 0), min(end_col, source.width)
    first_row, end_row = max(first_row, 0), min(end_row, source.height)
    return Window(first_col, first_row, max(end_col - first_col, 0), max(end_row - first_row, 0))


def shapes_window(
    source: DatasetReader,
    rect: Window,
    shapes: Sequence[Sequence[shapely.Geometry]],
    all_touched: bool,
    engine: Engine,
) -> Window:
    """The smallest window holding every cell inside ``rect`` and inside each group of shapes.

    Starts from the shapes' envelope in pixel space (every cell they can touch), then rasterizes it
    window by window and keeps the rows and columns that hold an inside cell.
    """
    import shapely

    envelope = rect
    for group in shapes:
        minx, miny, maxx, maxy = shapely.total_bounds(np.asarray(group, dtype=object))
        cols, rows = ~source.transform @ (
            np.array([minx, maxx, minx, maxx]),
            np.array([miny, miny, maxy, maxy]),
        )
        touched = _clamp(
            source,
            math.floor(_snap(float(cols.min()))),
            math.ceil(_snap(float(cols.max()))),
            math.floor(_snap(float(rows.min()))),
            math.ceil(_snap(float(rows.max()))),
        )
        envelope = _intersect(envelope, touched)
    if envelope.width == 0 or envelope.height == 0:
        return envelope
    any_row = np.zeros(int(envelope.height), dtype=bool)
    any_col = np.zeros(int(envelope.width), dtype=bool)
    rasterized = InsideCells(source.transform, rect, shapes, all_touched)
    for window, inside in engine.map(clip_windows(envelope), rasterized, progress=False):
        r0, c0 = int(window.row_off - envelope.row_off), int(window.col_off - envelope.col_off)
        any_row[r0 : r0 + int(window.height)] |= inside.any(axis=1)
        any_col[c0 : c0 + int(window.width)] |= inside.any(axis=0)
    if not any_row.any():
        return Window(envelope.col_off, envelope.row_off, 0, 0)
    rows, cols = np.flatnonzero(any_row), np.flatnonzero(any_col)
    return Window(
        int(envelope.col_off + cols[0]),
        int(envelope.row_off + rows[0]),
        int(cols[-1] - cols[0] + 1),
        int(rows[-1] - rows[0] + 1),
    )


def _intersect(a: Window, b: Window) -> Window:
    col0, row0 = max(a.col_off, b.col_off), max(a.row_off, b.row_off)
    col1 = min(a.col_off + a.width, b.col_off + b.width)
    row1 = min(a.row_off + a.height, b.row_off + b.height)
    return Window(col0, row0, max(col1 - col0, 0), max(row1 - row0, 0))


@dataclass(frozen=True)
class InsideCells:
    """Which cells of a window are inside: :func:`inside_mask` for one grid and set of shapes, as a
    piece the engine can send elsewhere (it holds no dataset, only the grid's transform)."""

    transform: Any
    rect: Window
    shapes: Sequence[Sequence[shapely.Geometry]]
    all_touched: bool

    def __call__(self, window: Window) -> np.ndarray:
        return inside_mask(self.transform, window, self.rect, self.shapes, self.all_touched)


def inside_mask(
    transform: Any,
    window: Window,
    rect: Window,
    shapes: Sequence[Sequence[shapely.Geometry]],
    all_touched: bool,
) -> np.ndarray:
    """Which cells of ``window`` (source pixel coordinates) are inside ``rect`` and every shape group."""
    import shapely

    height, width = int(window.height), int(window.width)
    rows = np.arange(window.row_off, window.row_off + height)
    cols = np.arange(window.col_off, window.col_off + width)
    inside = ((rows >= rect.row_off) & (rows < rect.row_off + rect.height))[:, None] & (
        (cols >= rect.col_off) & (cols < rect.col_off + rect.width)
    )[None, :]
    if not shapes or not inside.any():
        return inside
    window_transform = rasterio.windows.transform(window, transform)
    corners_x, corners_y = window_transform @ (
        np.array([0, width, 0, width]),
        np.array([0, 0, height, height]),
    )
    frame = shapely.box(corners_x.min(), corners_y.min(), corners_x.max(), corners_y.max())
    for group in shapes:
        candidates = np.asarray(group, dtype=object)
        candidates = candidates[shapely.intersects(candidates, frame)]
        if candidates.size == 0:
            return np.zeros_like(inside)
        inside &= geometry_mask(
            list(candidates),
            out_shape=(height, width),
            transform=window_transform,
            all_touched=all_touched,
            invert=True,
        )
    return inside


def clip_windows(area: Window) -> Iterator[Window]:
    return grid_windows(area, WINDOW_ROWS, WINDOW_COLS)
