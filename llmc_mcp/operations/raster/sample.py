"""``raster.sample``: the values of a raster at points, with the cell each point fell in.

Points are placed with the inverse of the dataset's affine transform, then floored: that is right for
any sign of pixel size (south-up grids), for rotated grids, and for point-registered GeoTIFFs
(``AREA_OR_POINT=Point``), whose geotransform GDAL already reports with its origin at the corner of
the first cell (it moves the file's tie point by half a cell when reading), so no half-cell shift is
added here. Reads are grouped by block: one read per block holding points, of the smallest window
around them, so a call costs one decoded block per block touched, whatever the number of points.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.points import cells_of, to_raster_crs
from llmc_mcp.compute.scaling import scales_offsets
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import GeoreferencingChoice, SampleResult
from llmc_mcp.operations.raster.stats import check_bands

MAX_POINTS = 100_000
"""Points per call: the answer is about 150 bytes a point and band, so this keeps it to a few MB."""


@operation("raster", read_only=True, inputs=("path",))
def sample(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file.")],
    points: Annotated[
        list[tuple[float, float]],
        Field(description="Points as [[x, y], ...] (x = easting or longitude), at most 100,000."),
    ],
    crs: Annotated[
        str | None,
        Field(
            description="CRS of the points (EPSG code, WKT, PROJ string), x first even for EPSG:4326; "
            "default: the raster's own."
        ),
    ] = None,
    bands: Annotated[
        list[int] | None, Field(description="Band numbers (1-based) to sample; default: all bands.")
    ] = None,
    georeferencing: GeoreferencingChoice = None,
) -> SampleResult:
    """The values of a raster at points: each point's cell (row, column, centre) and its band values.

    ``values`` are physical (raw * scale + offset, with each band's declared scale and offset) and
    ``raw`` holds the stored values beside them; both are null where the cell is nodata (nodata value,
    mask, alpha or NaN) or the point is outside the raster. A point on the edge between two cells
    belongs to the cell to its right and below in pixel terms (the one whose corner it is). Points in
    another CRS (``crs``) are transformed to the raster's CRS first, x (longitude) first. Positions
    are right for south-up and rotated grids and for point-registered rasters (AREA_OR_POINT=Point):
    the centre of the cell a point falls in is ``cell_x, cell_y``. Reads one window per block that
    holds points, so 100,000 points cost about one decoded block per block touched.

    Errors (ApiError, by e.type): invalid_argument for no points or more than 100,000, or a band
    outside 1..count; crs_error for an unknown crs; raster_error when crs is given but the raster has
    none or pixels cannot be read; refused when a sidecar overrides the file's georeferencing (pass
    georeferencing).
    """
    if not points:
        raise InvalidArgument("points is empty.", fix="Pass points as [[x, y], ...].")
    if len(points) > MAX_POINTS:
        raise InvalidArgument(
            f"points holds {len(points):,} points; at most {MAX_POINTS:,} per call.",
            fix=f"Split the points into calls of at most {MAX_POINTS:,}.",
        )
    given = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing=georeferencing or "refuse") as ds:
        shown = shown_dataset(ctx, ds)
        indexes = check_bands(ds, bands, shown)
        xs, ys = to_raster_crs(ds, given, crs, shown)
        rows, cols, inside = cells_of(ds, xs, ys)
        raw, valid = _read_points(ctx, ds, indexes, rows, cols, inside)
        scales, offsets = scales_offsets(ds, indexes)
        units = [ds.units[b - 1] or None for b in indexes]
        centres_x, centres_y = ds.transform @ (cols + 0.5, rows + 0.5)
    physical = raw * np.asarray(scales)[None, :] + np.asarray(offsets)[None, :]
    results = _points(given, rows, cols, inside, centres_x, centres_y, physical, raw, valid)
    outside = int((~inside).sum())
    where = f"transformed from {crs} to the raster's CRS" if crs is not None else "in the raster's CRS"
    note = (
        f"Points {where}, placed by the inverse geotransform (cell = floor); values = raw * scale + offset "
        f"per band, raw beside them; null where nodata or outside ({outside} outside)."
    )
    return SampleResult.model_validate(
        {
            "path": shown,
            "bands": indexes,
            "scales": scales,
            "offsets": offsets,
            "units": units,
            "points": results,
            "outside_count": outside,
            "note": note,
        }
    )


def _points(
    given: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    inside: np.ndarray,
    centres_x: np.ndarray,
    centres_y: np.ndarray,
    physical: np.ndarray,
    raw: np.ndarray,
    valid: np.ndarray,
) -> list[dict[str, Any]]:
    """One entry per point as plain data, built from Python lists (iterating numpy scalars costs several
    times more); the result model validates them all in one call."""
    out = []
    columns = (given[:, 0], given[:, 1], rows, cols, inside, centres_x, centres_y, physical, raw, valid)
    for x, y, row, col, on, cx, cy, phys, stored, ok in zip(*(c.tolist() for c in columns), strict=True):
        out.append(
            {
                "x": x,
                "y": y,
                "row": row if on else None,
                "col": col if on else None,
                "cell_x": cx if on else None,
                "cell_y": cy if on else None,
                "values": [v if k else None for v, k in zip(phys, ok, strict=True)],
                "raw": [v if k else None for v, k in zip(stored, ok, strict=True)],
            }
        )
    return out


def _read_points(
    ctx: OperationContext,
    ds: DatasetReader,
    indexes: list[int],
    rows: np.ndarray,
    cols: np.ndarray,
    inside: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Raw values (points x bands, float64) and where they are valid, one read per block touched."""
    raw = np.zeros((len(rows), len(indexes)), dtype=np.float64)
    valid = np.zeros((len(rows), len(indexes)), dtype=bool)
    where = np.flatnonzero(inside)
    if where.size == 0:
        return raw, valid
    block_h, block_w = ds.block_shapes[indexes[0] - 1]
    blocks_across = math.ceil(ds.width / block_w)
    keys = (rows[where] // block_h) * blocks_across + cols[where] // block_w
    order = np.argsort(keys, kind="stable")
    where, keys = where[order], keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], where.size]
    for start, end in zip(starts, ends, strict=True):
        members = where[start:end]
        r, c = rows[members], cols[members]
        r0, c0 = int(r.min()), int(c.min())
        window = Window(c0, r0, int(c.max()) - c0 + 1, int(r.max()) - r0 + 1)
        data, readable = read_valid(ctx, ds, indexes, window)
        raw[members] = data[:, r - r0, c - c0].T
        valid[members] = readable[:, r - r0, c - c0].T
    return raw, valid
