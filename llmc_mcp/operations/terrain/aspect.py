"""``terrain.aspect``: the compass direction each cell faces (downslope), clockwise from north."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.terrain.dem import Spans, horn_gradient, run
from llmc_mcp.operations.terrain.models import TerrainResult
from llmc_mcp.operations.terrain.slope import DEM_FIELD, DST_FIELD

FLAT = -1.0
"""Aspect of a cell with no gradient: a value no direction takes, and not nodata (the cell is known)."""


def _aspect(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    east, north = horn_gradient(z, spans, z_factor)
    # Downslope is minus the gradient; its azimuth, clockwise from north, is atan2(east part, north part).
    facing = np.degrees(np.arctan2(-east, -north)) % 360.0
    return np.where((east == 0) & (north == 0), FLAT, facing)


@operation("terrain", read_only=False, inputs=("dem",), outputs=("dst",))
def aspect(
    ctx: OperationContext,
    dem: Annotated[str, DEM_FIELD],
    dst: Annotated[str, DST_FIELD],
) -> TerrainResult:
    """Aspect of a DEM: the downslope direction in degrees clockwise from geographic north; flat = -1.

    0 faces north, 90 east, 180 south, 270 west (gdaldem aspect's convention), from Horn's 3x3
    gradient in ground metres, so a south-up, mirrored or geographic grid gives true compass
    directions, not array directions. A cell with no gradient at all is -1 (``flat_value``), not
    nodata. The outer ring, and any cell whose 3x3 window holds nodata, are NaN. Streams over windows
    with a one-cell halo; float32 tiled DEFLATE GeoTIFF written atomically.

    Errors: InvalidArgument for a DEM without CRS, a rotated grid, an unknown declared elevation unit,
    a projection more than 1 % off true scale (Web Mercator: reproject to UTM), or dst equal to dem;
    NotFound/RasterError for an unreadable DEM.
    """
    return run(
        ctx, dem, dst, _aspect, z_factor=None, measure="aspect (degrees clockwise from north, -1 flat)",
        flat_value=FLAT,
        note="Downslope azimuth by Horn's 3x3 gradient, toward geographic north and east (0 north, 90 east); "
        f"flat cells {FLAT:g}.",
    )  # fmt: skip
