"""``terrain.slope``: the steepest gradient of each cell, in degrees or percent, from Horn's 3x3 method."""

from __future__ import annotations

from typing import Annotated, Literal

import numexpr as ne
import numpy as np
from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.terrain.dem import HORN_EAST, HORN_NORTH, Spans, horn_neighbours, run
from llmc_mcp.operations.terrain.models import TerrainResult

DEM_FIELD = Field(description="Workspace-relative elevation raster (band 1 is used), e.g. 'dem.tif'.")
DST_FIELD = Field(
    description="Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced."
)
Z_FACTOR_FIELD = Field(
    description="Metres per elevation unit (0.3048 for feet; also a vertical exaggeration). Default: from "
    "the band's declared unit, the CRS's vertical unit, or the unit of a projected CRS."
)


_MAGNITUDE = f"sqrt(({HORN_EAST}) ** 2 + ({HORN_NORTH}) ** 2)"
"""The gradient's magnitude in one numexpr pass over the window (float64 throughout; within an ulp of
numpy's hypot, below float32's resolution)."""


def _degrees(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    operands = {**horn_neighbours(z, spans, z_factor), "DEGREES": 180.0 / np.pi}
    return ne.evaluate(f"arctan({_MAGNITUDE}) * DEGREES", local_dict=operands)


def _percent(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    return ne.evaluate(f"100.0 * {_MAGNITUDE}", local_dict=horn_neighbours(z, spans, z_factor))


@operation("terrain", read_only=False, inputs=("dem",), outputs=("dst",))
def slope(
    ctx: OperationContext,
    dem: Annotated[str, DEM_FIELD],
    dst: Annotated[str, DST_FIELD],
    units: Annotated[
        Literal["degrees", "percent"],
        Field(description="'degrees' (0..90) or 'percent' (100 x rise/run; 45 degrees is 100)."),
    ] = "degrees",
    z_factor: Annotated[float | None, Z_FACTOR_FIELD] = None,
) -> TerrainResult:
    """Slope of a DEM in degrees or percent, with horizontal and vertical units reconciled; float32 GeoTIFF.

    Horn's (1981) 3x3 weighted gradient, as gdaldem slope, with distances in ground metres: a
    projected CRS's cell size times its unit (feet CRSs too), or for a geographic DEM each row's own
    east-west and north-south spacing on the ellipsoid. Elevations are put in metres by ``z_factor``:
    given, or from the band's declared unit ('m', 'ft', 'US survey foot'...), the CRS's vertical
    unit, or, for a projected CRS, its horizontal unit (as gdaldem assumes); ``z_factor_source`` says
    which. South-up and mirrored grids give the same slope as north-up. The outer ring of cells, and
    any cell whose 3x3 window holds nodata, are NaN (never an invented gradient). Streams over
    windows with a one-cell halo, so memory does not grow with the raster; the output is a
    512x512-tiled DEFLATE float32 GeoTIFF written atomically.

    Errors: InvalidArgument for a DEM without CRS, a rotated grid, an unknown declared elevation unit
    (pass z_factor), a projection whose scale is more than 1 % off true inside the raster (Web
    Mercator: reproject to UTM), or dst equal to dem; NotFound/RasterError for an unreadable DEM.
    """
    kernel = _degrees if units == "degrees" else _percent
    return run(
        ctx, dem, dst, kernel, z_factor=z_factor, measure=f"slope in {units}",
        note=f"Slope in {units} by Horn's 3x3 method (gdaldem slope's formula), distances in ground metres.",
    )  # fmt: skip
