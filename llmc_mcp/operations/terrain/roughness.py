"""``terrain.roughness``: TRI, TPI or roughness of each cell's 3x3 neighbourhood, as gdaldem defines them."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.terrain.dem import Spans, run
from llmc_mcp.operations.terrain.models import TerrainResult
from llmc_mcp.operations.terrain.slope import DEM_FIELD, DST_FIELD

RoughnessKind = Literal["tri", "tpi", "roughness"]

_DEFINITIONS: dict[str, str] = {
    "tri": "TRI (Wilson et al. 2007; gdaldem TRI -alg Wilson): mean |neighbour - centre| over the 8 "
    "neighbours",
    "tpi": "TPI: centre minus the mean of its 8 neighbours (gdaldem TPI)",
    "roughness": "roughness: largest minus smallest of the 3x3 window, centre included (gdaldem roughness)",
}


def _neighbours(z: np.ndarray) -> list[np.ndarray]:
    rows, cols = z.shape[0] - 2, z.shape[1] - 2
    return [z[r : r + rows, c : c + cols] for r in range(3) for c in range(3) if (r, c) != (1, 1)]


def _tri(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    centre = z[1:-1, 1:-1]
    return sum(np.abs(n - centre) for n in _neighbours(z)) / 8.0


def _tpi(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    return z[1:-1, 1:-1] - sum(_neighbours(z)) / 8.0


def _range(z: np.ndarray, spans: Spans, z_factor: float) -> np.ndarray:
    window = [*_neighbours(z), z[1:-1, 1:-1]]
    return np.maximum.reduce(window) - np.minimum.reduce(window)


_KERNELS = {"tri": _tri, "tpi": _tpi, "roughness": _range}


@operation("terrain", read_only=False, inputs=("dem",), outputs=("dst",))
def roughness(
    ctx: OperationContext,
    dem: Annotated[str, DEM_FIELD],
    dst: Annotated[str, DST_FIELD],
    kind: Annotated[
        RoughnessKind,
        Field(
            description="'tri': mean |neighbour - centre| (Wilson et al. 2007); 'tpi': centre minus the mean "
            "of the 8 neighbours; 'roughness': max - min of the 3x3 window."
        ),
    ] = "tri",
) -> TerrainResult:
    """Terrain ruggedness (TRI), topographic position (TPI) or roughness of a DEM, as gdaldem defines them.

    Each cell's 3x3 window: 'tri' is the mean absolute difference between the centre and its 8
    neighbours (Wilson et al. 2007, gdaldem TRI -alg Wilson), 'tpi' the centre minus the mean of the 8
    neighbours (positive on ridges, negative in valleys), 'roughness' the largest minus the smallest
    of the 9 cells. Values are in the DEM's elevation units (its declared scale and offset applied),
    not converted: no distances are involved. The outer ring, and any cell whose 3x3 window holds
    nodata, are NaN. Streams over windows with a one-cell halo; tiled DEFLATE output written
    atomically.

    Errors: InvalidArgument for a DEM without CRS, a rotated grid, or dst equal to dem;
    NotFound/RasterError for an unreadable DEM.
    """
    return run(
        ctx, dem, dst, _KERNELS[kind], z_factor=None, measure=kind, gradient=False,
        note=_DEFINITIONS[kind] + ".",
    )  # fmt: skip
