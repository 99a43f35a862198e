"""Points on a raster's grid: carried into the raster's CRS, then to the row and column of the cell
holding each. What ``raster.sample`` reads values at and what ``hydrology.watershed`` snaps pour
points with."""

from __future__ import annotations

import numpy as np
import pyproj
from rasterio.io import DatasetReader

from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import RasterError


def to_raster_crs(
    ds: DatasetReader, given: np.ndarray, crs: str | None, shown: str
) -> tuple[np.ndarray, np.ndarray]:
    """Points given in ``crs`` (the raster's own when None) carried into the raster's CRS, x first."""
    xs, ys = given[:, 0].copy(), given[:, 1].copy()
    if crs is None:
        return xs, ys
    source = parse_crs(crs, "crs")
    if ds.crs is None:
        raise RasterError(
            f"'{shown}' has no CRS, so points in {crs!r} cannot be placed on it.",
            fix="Omit crs and pass points in the raster's pixel-grid coordinates (its transform).",
        )
    target = parse_crs(ds.crs.to_wkt(), "raster CRS")
    transformer = pyproj.Transformer.from_crs(source, target, always_xy=True)
    # errcheck=False: a point the operation cannot take (out of the projection's domain) becomes inf,
    # and inf is outside every raster.
    tx, ty = transformer.transform(xs, ys, errcheck=False)
    return np.asarray(tx, dtype=np.float64), np.asarray(ty, dtype=np.float64)


def cells_of(ds: DatasetReader, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row and column of each point by the inverse geotransform, and whether it is on the raster.

    Not ``rasterio.transform.rowcol``: it casts to int32 before any range check, so a point far away
    can wrap around onto the raster. Floor of the fractional pixel position is right for any sign of
    pixel size and for rotation.
    """
    with np.errstate(invalid="ignore"):
        fcols, frows = ~ds.transform @ (xs, ys)
        fcols, frows = np.asarray(fcols, dtype=np.float64), np.asarray(frows, dtype=np.float64)
        inside = (
            np.isfinite(fcols)
            & np.isfinite(frows)
            & (fcols >= 0)
            & (fcols < ds.width)
            & (frows >= 0)
            & (frows < ds.height)
        )
    cols = np.where(inside, np.floor(np.where(inside, fcols, 0)), 0).astype(np.int64)
    rows = np.where(inside, np.floor(np.where(inside, frows, 0)), 0).astype(np.int64)
    # floor(x) of a value just below width can round up to width in float arithmetic: keep it on the grid.
    np.minimum(cols, ds.width - 1, out=cols)
    np.minimum(rows, ds.height - 1, out=rows)
    return rows, cols, inside
