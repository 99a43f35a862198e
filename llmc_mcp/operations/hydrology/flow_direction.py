"""``hydrology.flow_direction``: the D8 direction each cell of a DEM drains in, without changing the DEM.

pyflwdir derives D8 directions during a priority flood (``fill_depressions``): each cell drains to
the neighbour the flood reached it from, which on a DEM without depressions is its lowest neighbour,
and across a flat is the way towards the flat's spill point. Run with the smallest positive
``max_depth``, every cell lower than the cell it was reached from starts a sink instead of being
raised: the directions never fill a depression the caller kept (``hydrology.condition``'s choice).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.gdal_env import gdal_env, open_for_read
from llmc_mcp.operations.hydrology._grid import (
    D8_ENCODING,
    D8_NODATA,
    D8_PIT,
    check_dst,
    check_grid,
    pyflwdir,
    read_elevation,
    unsupported,
    write_grid,
)
from llmc_mcp.operations.models import FlowDirectionResult, FlowRouting
from llmc_mcp.reflection.specs import HYDROLOGY_ROUTING

UNSUPPORTED = {
    name: f"routing '{name}' ({what}) is not supported: pyflwdir is single-flow (D8) only, the library "
    "that has it (whitebox-workflows) links AGPL-3.0 code into its binary, and flow routing is not "
    "written by hand here (DD-MCP-067). Use 'd8'."
    for name, what in (("dinf", "D-infinity, Tarboton 1997"), ("mfd", "multiple flow direction"))
}
SMALLEST_DEPTH = float(np.nextafter(np.float32(0), np.float32(1)))
"""A depression depth every real depression exceeds: with it, the flood fills nothing."""


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    check_dst(ctx, args["dst"], {"dem": args["dem"]})
    with gdal_env(ctx), open_for_read(ctx, args["dem"], "dem") as ds:
        check_grid(ds, ctx.workspace.relative(Path(ds.name)), "dem")


@operation(
    "hydrology",
    read_only=False,
    reflection=(HYDROLOGY_ROUTING,),
    inputs=("dem",),
    outputs=("dst",),
    preflight=_preflight,
)
def flow_direction(
    ctx: OperationContext,
    dem: Annotated[
        str, Field(description="Workspace-relative DEM, conditioned first (hydrology.condition).")
    ],
    dst: Annotated[
        str, Field(description="Workspace-relative output GeoTIFF (.tif); replaced if it exists.")
    ],
    routing: Annotated[
        FlowRouting,
        unsupported(UNSUPPORTED),
        Field(
            description="'d8': all of a cell's flow to one neighbour. 'dinf' and 'mfd' are not supported "
            "(refused with the reason)."
        ),
    ] = "d8",
) -> FlowDirectionResult:
    """D8 flow directions as ESRI codes, uint8: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE, 0 none,
    247 nodata. Depressions are not filled. Reads the whole grid: at most 16,777,216 cells.

    Output values: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE (south = next row on a north-up
    grid); 0 = drains nowhere: a cell on the edge of the grid or beside nodata without a lower
    neighbour is an outlet (flow leaves the data), an interior one a sink; 247 = nodata. Each cell
    drains to the neighbour a
    priority flood from the outlets reached it from: its lowest neighbour where there is no
    depression, and across flats towards their spill point. Depressions are NOT filled here: a
    depression left in the DEM drains into its lowest cell, a sink (condition the DEM first). On a
    geographic grid D8 is fine (neighbours are rows and columns), but areas downstream must be
    ground areas (flow_accumulation units='m2'). Reads the whole grid (at most 16,777,216 cells).
    The routing model is gated (domain hydrology).

    Errors: InvalidArgument for an unsupported routing, a rotated or multi-band grid, too many
    cells, or dst equal to dem; RasterError for unreadable pixels.
    """
    dst_path = check_dst(ctx, dst, {"dem": dem})
    with gdal_env(ctx), open_for_read(ctx, dem, "dem") as ds:
        shown = ctx.workspace.relative(Path(ds.name))
        check_grid(ds, shown, "dem")
        elevation = read_elevation(ctx, ds)
        _, d8 = pyflwdir().dem.fill_depressions(elevation, nodata=np.nan, max_depth=SMALLEST_DEPTH)
        valid = ~np.isnan(elevation)
        d8 = np.where(valid, d8, np.uint8(D8_NODATA)).astype("uint8")
        output = write_grid(ctx, ds, dst, dst_path, d8, D8_NODATA)
    pits = valid & ((d8 == D8_PIT) | (d8 == 255))
    edge = _data_edge(valid)
    return FlowDirectionResult(
        output=output,
        routing=routing,
        encoding=D8_ENCODING,
        outlet_cells=int((pits & edge).sum()),
        sink_cells=int((pits & ~edge).sum()),
        note="D8 from a priority flood (pyflwdir) without filling: each cell drains to the neighbour the "
        "flood reached it from (its lowest neighbour off flats; towards the spill point on flats); "
        "edge cells without a lower neighbour are outlets, unfilled depressions end in sinks.",
    )


def _data_edge(valid: np.ndarray) -> np.ndarray:
    """Valid cells on the grid's border or with a nodata neighbour (8-connected): where outlets can be."""
    padded = np.pad(valid, 1, constant_values=False)
    rows, cols = valid.shape
    all_neighbours = np.ones_like(valid)
    for dr in (0, 1, 2):
        for dc in (0, 1, 2):
            all_neighbours &= padded[dr : dr + rows, dc : dc + cols]
    return valid & ~all_neighbours
