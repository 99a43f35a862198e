"""``hydrology.flow_direction``: the direction(s) each cell of a DEM drains in, without changing the DEM.

``d8``: pyflwdir derives D8 directions during a priority flood (``fill_depressions``): each cell
drains to the neighbour the flood reached it from, which on a DEM without depressions is its lowest
neighbour, and across a flat is the way towards the flat's spill point. Run with the smallest positive
``max_depth``, every cell lower than the cell it was reached from starts a sink instead of being
raised: the directions never fill a depression the caller kept (``hydrology.condition``'s choice).

``dinf`` and ``mfd`` are Whitebox's ``dinf_pointer`` (Tarboton 1997) and ``fd8_pointer`` (Freeman
1991) on the DEM as given (DD-MCP-067): flats and depressions drain nowhere there, so condition first
(``breach`` or ``fill_flats``). Every output carries its routing in the band tag ``LLMC_ROUTING``, which
``hydrology.flow_accumulation`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.gdal_env import gdal_env, open_for_read
from llmc_mcp.operations.hydrology._grid import (
    D8_ENCODING,
    D8_NODATA,
    D8_PIT,
    ROUTING_TAG,
    check_dst,
    check_grid,
    pyflwdir,
    read_elevation,
    write_grid,
)
from llmc_mcp.operations.hydrology._whitebox import WHITEBOX_TO_ESRI, check_planar, run, scratch
from llmc_mcp.operations.models import FlowDirectionResult, FlowRouting
from llmc_mcp.reflection.specs import HYDROLOGY_ROUTING

DINF_NONE = -1.0
DINF_ENCODING = (
    "D-infinity (float32): the flow angle in degrees clockwise from north, in [0, 360): 0 N, 90 E, "
    "180 S, 270 W (south = next row on a north-up grid); the flow is split between the two neighbours "
    "whose directions bracket it, in proportion to the angle; -1 = no downslope neighbour (a pit, a flat, "
    "or an edge cell draining off the grid); NaN = nodata"
)
MFD_NODATA = 65535
MFD_ENCODING = (
    "FD8 pointer (uint16): the sum of the ESRI D8 codes of every neighbour that receives flow, i.e. "
    "each downslope neighbour (1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE; 11 = E + SE + SW); flow "
    "is split among them in proportion to slope^1.1 (Freeman 1991), which the pointer does not record; "
    "0 = drains nowhere (a pit, a flat, or an edge cell without a lower neighbour); 65535 = nodata"
)
SMALLEST_DEPTH = float(np.nextafter(np.float32(0), np.float32(1)))
"""A depression depth every real depression exceeds: with it, the flood fills nothing."""


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    check_dst(ctx, args["dst"], {"dem": args["dem"]})
    with gdal_env(ctx), open_for_read(ctx, args["dem"], "dem") as ds:
        check_grid(ds, ctx.workspace.relative(Path(ds.name)), "dem")
        if args["routing"] != "d8":
            check_planar(ds, ctx.workspace.relative(Path(ds.name)), "dem", args["routing"])


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
        Field(
            description="'d8': all of a cell's flow to its steepest neighbour (uint8 ESRI codes). 'dinf': "
            "D-infinity angle in degrees from north, flow split between two neighbours (float32). 'mfd': "
            "FD8, flow split among all downslope neighbours (uint16 sum of their D8 codes)."
        ),
    ] = "d8",
) -> FlowDirectionResult:
    """Flow directions: d8 ESRI codes (uint8), dinf angles in degrees from north (float32), or mfd (FD8)
    pointers (uint16, the sum of receiving neighbours' D8 codes). Depressions are not filled. Reads the
    whole grid: at most 16,777,216 cells. The band is tagged LLMC_ROUTING for flow_accumulation.

    dinf (Tarboton 1997): degrees clockwise from north in [0, 360) (0 N, 90 E, 180 S, 270 W), -1 where
    no neighbour is lower, NaN nodata. mfd (FD8, Freeman 1991): sum of the D8 codes of every lower
    neighbour (each receives a share proportional to slope^1.1), 0 none, 65535 nodata. Both come from
    Whitebox on the DEM as given: flats and depressions drain nowhere, so condition with 'breach' or
    'fill_flats' first; geographic grids and non-square cells are refused (slopes need distances).
    d8 details follow.

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

    Errors: InvalidArgument for a rotated or multi-band grid, too many cells, dst equal to dem, or
    (dinf, mfd) a geographic grid or non-square cells; RasterError for unreadable pixels.
    """
    dst_path = check_dst(ctx, dst, {"dem": dem})
    with gdal_env(ctx), open_for_read(ctx, dem, "dem") as ds:
        shown = ctx.workspace.relative(Path(ds.name))
        check_grid(ds, shown, "dem")
        if routing != "d8":
            check_planar(ds, shown, "dem", routing)
            return _whitebox_routing(ctx, ds, dst, dst_path, routing)
        elevation = read_elevation(ctx, ds)
        _, d8 = pyflwdir().dem.fill_depressions(elevation, nodata=np.nan, max_depth=SMALLEST_DEPTH)
        valid = ~np.isnan(elevation)
        d8 = np.where(valid, d8, np.uint8(D8_NODATA)).astype("uint8")
        output = write_grid(ctx, ds, dst, dst_path, d8, D8_NODATA, {ROUTING_TAG: "d8"})
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


def _whitebox_routing(
    ctx: OperationContext, ds: DatasetReader, dst: str, dst_path: Path, routing: str
) -> FlowDirectionResult:
    elevation = read_elevation(ctx, ds, "float64")
    valid = ~np.isnan(elevation)
    with scratch(ctx, ds, dst_path, elevation) as raster:
        tool = "dinf_pointer" if routing == "dinf" else "fd8_pointer"
        pointer = run(tool, valid, dem=raster)
    if routing == "dinf":
        # Whitebox writes due north as 360 where a cell's only lower neighbour is north; one value per angle.
        data = np.where(pointer >= 360.0, pointer - 360.0, pointer).astype("float32")
        pits, nodata, encoding = valid & (data == DINF_NONE), float("nan"), DINF_ENCODING
        note = "D-infinity (Whitebox dinf_pointer, Tarboton 1997): steepest descent over 8 triangular facets"
    else:
        data = np.where(valid, WHITEBOX_TO_ESRI[np.nan_to_num(pointer).astype("uint8")], MFD_NODATA)
        data = data.astype("uint16")
        pits, nodata, encoding = valid & (data == 0), float(MFD_NODATA), MFD_ENCODING
        note = "FD8 (Whitebox fd8_pointer, Freeman 1991): every lower neighbour receives a share"
    output = write_grid(ctx, ds, dst, dst_path, data, nodata, {ROUTING_TAG: routing})
    edge = _data_edge(valid)
    return FlowDirectionResult(
        output=output,
        routing=routing,  # type: ignore[arg-type]
        encoding=encoding,
        outlet_cells=int((pits & edge).sum()),
        sink_cells=int((pits & ~edge).sum()),
        note=f"{note}, on the DEM as given (flats and depressions drain nowhere: condition first); band "
        f"tagged {ROUTING_TAG}={routing}.",
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
