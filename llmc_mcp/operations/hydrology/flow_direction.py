"""``hydrology.flow_direction``: the direction(s) each cell of a DEM drains in, without changing the DEM.

``d8`` (DD-MCP-069): each cell with a lower neighbour drains to the one down the steepest slope, the
greatest drop per unit of ground distance between the cell centres (O'Callaghan & Mark 1984, Jenson
& Domingue 1988; what ArcGIS, GRASS, TauDEM and WhiteboxTools compute). Distances are measured on
the ellipsoid per row (:func:`._grid.neighbour_distances`), so non-square cells and geographic grids
are right; equal slopes (within one part in a million: ``_routing.SLOPE_TOLERANCE``) go to the first
in ESRI order (E, SE, S, SW, W, NW, N, NE). A cell without a lower neighbour that lies on a flat
(a neighbour of equal height) drains to an equal neighbour one step nearer the flat's nearest way
out (DD-MCP-095): a cell of the flat's height beside it that drains downhill, or a flat cell on the
edge of the data, an outlet; a flat with no way out (the floor of a depression the caller kept,
``hydrology.condition``'s choice) drains to one sink, its first cell in row order. Any other cell
without a lower neighbour drains nowhere: an outlet on the edge of the data, a sink inside it.

``dinf`` (Tarboton 1997) and ``mfd`` (Freeman 1991) are written here (:mod:`._routing`, DD-MCP-068),
on the DEM as given: flats and depressions drain nowhere, so condition first (``fill_flats``). Their
slopes take a cell as the unit of distance (a diagonal sqrt(2)), right on square cells of a projected
grid only, so other grids are refused. Every output carries its routing in the band tag
``LLMC_ROUTING``, which ``hydrology.flow_accumulation`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader

from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.hydrology._grid import (
    D8_ENCODING,
    D8_NODATA,
    D8_PIT,
    ROUTING_TAG,
    NeighbourDistances,
    check_dst,
    check_grid,
    check_square,
    neighbour_distances,
    read_elevation,
    write_grid,
)
from llmc_mcp.operations.hydrology._routing import FREEMAN_EXPONENT, kernels
from llmc_mcp.operations.hydrology.models import FlowDirectionResult, FlowRouting, OutputGrid
from llmc_mcp.reflection.specs import HYDROLOGY_ROUTING

DINF_ENCODING = (
    "D-infinity (float32): the flow angle in degrees clockwise from north, in [0, 360): 0 N, 90 E, "
    "180 S, 270 W (south = next row on a north-up grid); the flow is split between the two neighbours "
    "whose directions bracket it, in proportion to the angle's closeness to each; -1 = no lower "
    "neighbour (a pit, a flat, or an edge cell draining off the grid); NaN = nodata"
)
MFD_NODATA = 65535
MFD_ENCODING = (
    "MFD mask (uint16): the sum of the ESRI D8 codes of every neighbour that receives flow, i.e. every "
    "lower neighbour (1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE; 11 = E + SE + SW); flow is split "
    f"among them in proportion to slope^{FREEMAN_EXPONENT} (Freeman 1991), which the mask does not "
    "record (flow_accumulation recomputes it from the DEM); 0 = drains nowhere (a pit, a flat, or an "
    "edge cell without a lower neighbour); 65535 = nodata"
)
TIE_RULE = (
    "equal slopes (within one part in a million) go to the first in ESRI order (E, SE, S, SW, W, NW, N, NE)"
)


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    check_dst(ctx, args["dst"], {"dem": args["dem"]})
    with gdal_env(ctx), open_for_read(ctx, args["dem"], "dem") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "dem")
        if args["routing"] != "d8":
            check_square(ds, shown, "dem", args["routing"])
        else:
            neighbour_distances(ds, shown, "dem")


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
    dst: OutputGrid,
    routing: Annotated[
        FlowRouting,
        Field(
            description="'d8': all of a cell's flow to one neighbour (uint8 ESRI codes). 'dinf': "
            "D-infinity angle in degrees clockwise from north, flow split between two neighbours "
            "(float32). 'mfd': flow split among every lower neighbour (uint16 sum of their D8 codes)."
        ),
    ] = "d8",
) -> FlowDirectionResult:
    """Flow directions: d8 ESRI codes (uint8), dinf angles in degrees from north (float32), or mfd masks
    (uint16, the sum of receiving neighbours' D8 codes). Depressions are not filled. Reads the whole
    grid: at most what the worker's memory holds (4096² in 2 GiB). The band is tagged LLMC_ROUTING for
    flow_accumulation.

    dinf (Tarboton 1997): degrees clockwise from north in [0, 360) (0 N, 90 E, 180 S, 270 W), -1 where
    no neighbour is lower, NaN nodata. mfd (Freeman 1991): sum of the D8 codes of every lower
    neighbour (each receives a share proportional to slope^1.1), 0 none, 65535 nodata. Both on the
    DEM as given: flats and depressions drain nowhere, so condition with fill_flats or breach first;
    geographic grids and non-square cells are refused (slopes need ground distances). d8 follows.

    Output values: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE (south = next row on a north-up
    grid); 0 = drains nowhere: a cell on the edge of the grid or beside nodata without a lower
    neighbour is an outlet (flow leaves the data), an interior one a sink; 247 = nodata. A cell with
    a lower neighbour drains to the steepest one: the greatest drop per metre of ground between the
    cell centres (a diagonal neighbour is farther, so it must be lower by more), with distances
    measured on the ellipsoid row by row, so non-square cells and geographic grids are measured
    right; equal slopes (to one part in a million) go to the first in ESRI order (E, SE, S, SW, W,
    NW, N, NE). A cell on a flat drains across it, one step at a time, to the nearest cell where
    flow leaves it (a flat with no way out drains to one sink). Depressions are NOT filled here: a
    depression left in the DEM drains into its lowest cell, a sink (condition the DEM first). Areas
    downstream of a geographic grid must be ground areas (flow_accumulation units='m2'). Without a
    CRS a cell's width and height are taken as lengths in one unit. The routing model is gated
    (domain hydrology).

    Errors: InvalidArgument for a rotated or multi-band grid, too many cells, dst equal to dem, or
    (dinf, mfd) a geographic grid or non-square cells; Refused (d8) for a CRS whose cells have no
    ground size somewhere or change shape along a row by over 1%; RasterError for unreadable pixels.
    """
    dst_path = check_dst(ctx, dst, {"dem": dem})
    with gdal_env(ctx), open_for_read(ctx, dem, "dem") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "dem")
        if routing != "d8":
            check_square(ds, shown, "dem", routing)
            return _multiple_flow(ctx, ds, dst, dst_path, routing)
        distances = neighbour_distances(ds, shown, "dem")
        elevation = read_elevation(ctx, ds)
        valid = ~np.isnan(elevation)
        d8 = np.where(valid, _d8_directions(elevation, valid, distances), np.uint8(D8_NODATA)).astype("uint8")
        output = write_grid(ctx, ds, dst, dst_path, d8, D8_NODATA, {ROUTING_TAG: "d8"})
    pits = valid & (d8 == D8_PIT)
    edge = _data_edge(valid)
    return FlowDirectionResult(
        output=output,
        routing=routing,
        encoding=D8_ENCODING,
        outlet_cells=int((pits & edge).sum()),
        sink_cells=int((pits & ~edge).sum()),
        note="D8 by steepest descent: each cell with a lower neighbour drains to the one with the greatest "
        "drop per metre of ground between cell centres (distances on the ellipsoid, row by row), "
        f"{TIE_RULE}; cells on flats drain one step at a time to the nearest cell where flow leaves the "
        "flat (nothing is filled); edge cells without a lower neighbour are outlets, unfilled "
        "depressions end in sinks.",
    )


def _d8_directions(elevation: np.ndarray, valid: np.ndarray, distances: NeighbourDistances) -> np.ndarray:
    """D8 codes of the valid cells: the steepest lower neighbour where a cell has one; across a flat,
    one step nearer its nearest way out (:func:`._routing.kernels` ``route_flats``); 0 elsewhere."""
    routing = kernels()
    codes = routing.steepest_d8(
        elevation, valid, distances.east, distances.south, distances.south_east, distances.south_west
    )
    routing.route_flats(elevation, valid, codes)
    return codes


def _multiple_flow(
    ctx: OperationContext, ds: DatasetReader, dst: str, dst_path: Path, routing: str
) -> FlowDirectionResult:
    elevation = read_elevation(ctx, ds).astype("float64")
    valid = ~np.isnan(elevation)
    if routing == "dinf":
        data = kernels().dinf_angles(elevation, valid)
        pits, nodata, encoding = valid & (data == -1.0), float("nan"), DINF_ENCODING
        note = "D-infinity (Tarboton 1997): steepest descent over the 8 triangular facets"
    else:
        data = np.where(valid, kernels().mfd_mask(elevation, valid), np.uint16(MFD_NODATA)).astype("uint16")
        pits, nodata, encoding = valid & (data == 0), float(MFD_NODATA), MFD_ENCODING
        note = (
            "MFD (Freeman 1991): every lower neighbour receives a share in proportion to "
            f"slope^{FREEMAN_EXPONENT}"
        )
    output = write_grid(ctx, ds, dst, dst_path, data, nodata, {ROUTING_TAG: routing})
    edge = _data_edge(valid)
    return FlowDirectionResult(
        output=output,
        routing=routing,  # type: ignore[arg-type]
        encoding=encoding,
        outlet_cells=int((pits & edge).sum()),
        sink_cells=int((pits & ~edge).sum()),
        note=f"{note}, on the DEM as given (flats and depressions drain nowhere: condition with fill_flats "
        f"first); band tagged {ROUTING_TAG}={routing}.",
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
