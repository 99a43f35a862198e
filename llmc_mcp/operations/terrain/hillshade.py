"""``terrain.hillshade``: how lit each cell is by a sun at a given azimuth and altitude, as gdaldem."""

from __future__ import annotations

import math
from functools import partial
from typing import Annotated

import numpy as np
from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.terrain.dem import Spans, horn_gradient, run
from llmc_mcp.operations.terrain.models import TerrainResult
from llmc_mcp.operations.terrain.slope import DEM_FIELD, DST_FIELD, Z_FACTOR_FIELD


def _shade(z: np.ndarray, spans: Spans, z_factor: float, *, azimuth: float, altitude: float) -> np.ndarray:
    """1 + 254 cos(incidence), clipped at 1 where the sun is behind the slope (gdaldem's scale).

    cos i = cos(zenith) cos(slope) + sin(zenith) sin(slope) cos(sun azimuth - aspect), written with the
    gradient (p, q toward east, north): (sin alt - cos alt (sin az p + cos az q)) / sqrt(1 + p² + q²).
    """
    east, north = horn_gradient(z, spans, z_factor)
    az, alt = math.radians(azimuth), math.radians(altitude)
    cos_i = (math.sin(alt) - math.cos(alt) * (math.sin(az) * east + math.cos(az) * north)) / np.sqrt(
        1.0 + east * east + north * north
    )
    return 1.0 + 254.0 * np.maximum(cos_i, 0.0)


@operation("terrain", read_only=False, inputs=("dem",), outputs=("dst",))
def hillshade(
    ctx: OperationContext,
    dem: Annotated[str, DEM_FIELD],
    dst: Annotated[str, DST_FIELD],
    azimuth: Annotated[
        float,
        Field(ge=0, le=360, description="Sun direction, degrees clockwise from north (315: north-west)."),
    ] = 315.0,
    altitude: Annotated[
        float, Field(ge=0, le=90, description="Sun height above the horizon, degrees (90: overhead).")
    ] = 45.0,
    z_factor: Annotated[float | None, Z_FACTOR_FIELD] = None,
) -> TerrainResult:
    """Hillshade of a DEM on gdaldem's scale: 1 + 254 x cos(sun incidence), 1 in shadow; float32 GeoTIFF.

    A flat cell is 1 + 254 sin(altitude) (180.6 at the default 45°); a slope facing the sun squarely
    is 255. The gradient is Horn's 3x3 in ground metres (geographic DEMs per row on the ellipsoid,
    feet converted, south-up grids oriented), so the sun comes from the true compass direction.
    ``z_factor`` beyond the units' own exaggerates relief. The outer ring, and any cell whose 3x3
    window holds nodata, are NaN. Streams over windows with a one-cell halo; tiled DEFLATE output
    written atomically.

    Errors: InvalidArgument for a DEM without CRS, a rotated grid, an unknown declared elevation unit,
    a projection more than 1 % off true scale (Web Mercator: reproject to UTM), or dst equal to dem;
    NotFound/RasterError for an unreadable DEM.
    """
    kernel = partial(_shade, azimuth=azimuth, altitude=altitude)
    return run(
        ctx, dem, dst, kernel, z_factor=z_factor,
        measure=f"hillshade (sun azimuth {azimuth:g}, altitude {altitude:g})",
        note=f"1 + 254 cos(incidence) for a sun at azimuth {azimuth:g}, altitude {altitude:g} (gdaldem "
        "hillshade's scale, Horn gradient); 1 where the slope faces away.",
    )  # fmt: skip
