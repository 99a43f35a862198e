"""``raster.merge``'s grid: the mosaic's lattice (the first source's, over the union of all, or the
bounds asked for) and where each source lands on it: cell for cell when it is on the lattice, through
a warp onto it otherwise. A :class:`Placement` pickles (its source is a :class:`SourceRaster`), so
a window of the mosaic can be folded where the engine runs it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from affine import Affine
from rasterio.enums import ColorInterp
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.raster.grid import MAX_OUTPUT_PIXELS
from llmc_mcp.operations.raster.reproject import WARP_MEM_MB, warp_resampling

LATTICE_TOLERANCE = 1e-6
"""A source is on the mosaic's lattice when its cell size and its offset, in cells, are within this
of the mosaic's and of a whole number: float noise in a transform is not a fractional shift."""


@dataclass(frozen=True)
class Placement:
    """Where one source lands on the output grid, and how it is read there."""

    source: SourceRaster
    shown: str
    window: Window | None
    """Its footprint on the output grid, clipped to it; None when it falls outside."""
    origin: tuple[int, int]
    """The output (column, row) of pixel (0, 0) of what is read: the source, or its WarpedVRT."""
    vrt_options: dict[str, Any] | None
    """The warp onto the lattice, for a source off it; None: read cell for cell."""


def _envelope(ds: DatasetReader) -> tuple[float, float, float, float]:
    """(left, bottom, right, top) of a north-up or south-up grid."""
    t = ds.transform
    xs = (t.c, t.c + t.a * ds.width)
    ys = (t.f, t.f + t.e * ds.height)
    return min(xs), min(ys), max(xs), max(ys)


def mosaic_grid(
    datasets: Sequence[DatasetReader],
    bounds: tuple[float, float, float, float] | None,
    res: tuple[float, float],
) -> tuple[Affine, int, int]:
    """The mosaic's transform, width and height: ``bounds`` at ``res``, or the union of the sources
    on the first one's lattice; refused past :data:`MAX_OUTPUT_PIXELS` cells."""
    if bounds is not None:
        # As gdalwarp -te -tr: the top-left corner is kept and the size rounded to whole cells.
        left, bottom, right, top = bounds
        width = max(1, round((right - left) / res[0]))
        height = max(1, round((top - bottom) / res[1]))
    else:
        envelopes = [_envelope(ds) for ds in datasets]
        anchor = datasets[0].transform
        # The union, widened to whole cells of the first source's lattice.
        left = (
            anchor.c
            + math.floor((min(e[0] for e in envelopes) - anchor.c) / res[0] + LATTICE_TOLERANCE) * res[0]
        )
        top = (
            anchor.f
            - math.floor((anchor.f - max(e[3] for e in envelopes)) / res[1] + LATTICE_TOLERANCE) * res[1]
        )
        width = max(1, math.ceil((max(e[2] for e in envelopes) - left) / res[0] - LATTICE_TOLERANCE))
        height = max(1, math.ceil((top - min(e[1] for e in envelopes)) / res[1] - LATTICE_TOLERANCE))
    if width * height > MAX_OUTPUT_PIXELS:
        raise InvalidArgument(
            f"the mosaic would be {width}x{height} cells per band (over {MAX_OUTPUT_PIXELS}).",
            fix="Check bounds and resolution: they are in the sources' CRS units.",
        )
    return Affine(res[0], 0.0, left, 0.0, -res[1], top), width, height


def place(
    ctx: OperationContext,
    source: SourceRaster,
    shown: str,
    transform: Affine,
    width: int,
    height: int,
    resampling: str,
) -> Placement:
    """Where ``source`` lands on the mosaic's grid, and whether it is read cell for cell or warped."""
    ds = source.dataset()
    t = ds.transform
    col = (t.c - transform.c) / transform.a
    row = (t.f - transform.f) / transform.e
    on_lattice = (
        t.e < 0
        and abs(t.a - transform.a) <= LATTICE_TOLERANCE * transform.a / max(ds.width, 1)
        and abs(t.e - transform.e) <= LATTICE_TOLERANCE * -transform.e / max(ds.height, 1)
        and abs(col - round(col)) <= LATTICE_TOLERANCE
        and abs(row - round(row)) <= LATTICE_TOLERANCE
    )
    if on_lattice:
        origin = (round(col), round(row))
        window = _clip(origin[0], origin[1], origin[0] + ds.width, origin[1] + ds.height, width, height)
        return Placement(source, shown, window, origin, None)
    left, bottom, right, top = _envelope(ds)
    window = _clip(
        math.floor((left - transform.c) / transform.a + LATTICE_TOLERANCE),
        math.floor((transform.f - top) / -transform.e + LATTICE_TOLERANCE),
        math.ceil((right - transform.c) / transform.a - LATTICE_TOLERANCE),
        math.ceil((transform.f - bottom) / -transform.e - LATTICE_TOLERANCE),
        width,
        height,
    )
    if window is None:
        return Placement(source, shown, None, (0, 0), None)
    vrt_options: dict[str, Any] = {
        "crs": ds.crs,
        "transform": transform @ Affine.translation(window.col_off, window.row_off),
        "width": window.width,
        "height": window.height,
        "resampling": warp_resampling(resampling),
        # Without a nodata value, the alpha band is what tells the warp's edges from data.
        "add_alpha": ds.nodata is None and ColorInterp.alpha not in ds.colorinterp,
        "init_dest_nodata": True,
        "warp_mem_limit": WARP_MEM_MB,
        "NUM_THREADS": str(ctx.num_threads),
    }
    return Placement(source, shown, window, (window.col_off, window.row_off), vrt_options)


def _clip(col0: int, row0: int, col1: int, row1: int, width: int, height: int) -> Window | None:
    col0, row0, col1, row1 = max(col0, 0), max(row0, 0), min(col1, width), min(row1, height)
    if col0 >= col1 or row0 >= row1:
        return None
    return Window(col0, row0, col1 - col0, row1 - row0)


def intersection(a: Window | None, b: Window | None) -> Window | None:
    """The cells two windows share; None when they share none (or either is None)."""
    if a is None or b is None:
        return None
    col0, row0 = max(a.col_off, b.col_off), max(a.row_off, b.row_off)
    col1 = min(a.col_off + a.width, b.col_off + b.width)
    row1 = min(a.row_off + a.height, b.row_off + b.height)
    if col0 >= col1 or row0 >= row1:
        return None
    return Window(col0, row0, col1 - col0, row1 - row0)


def footprints_overlap(placements: Sequence[Placement]) -> bool:
    """Whether any two sources cover a common cell of the mosaic (the overlap fact of the gate)."""
    windows = [p.window for p in placements if p.window is not None]
    return any(intersection(a, b) is not None for i, a in enumerate(windows) for b in windows[i + 1 :])
