"""``hydrology.flow_accumulation``: how much drains through each cell of a flow direction grid.

The grid's band tag ``LLMC_ROUTING`` (written by ``hydrology.flow_direction``) says how to read it; a
grid without the tag is read as D8 only if every value is a D8 code (then one receiver per cell, which
is D8 whatever produced it), and refused otherwise.

D8: pyflwdir orders the cells from upstream to downstream once and adds each cell's value to the cell
it drains to (``accuflux``). The value is 1 (a count of cells), the cell's ground area on the ellipsoid
(:class:`~llmc_mcp.operations.raster.area.CellAreas`: a geographic or Mercator cell count times a
nominal size is no area), or a weight read from a raster on the same grid.

dinf and mfd (DD-MCP-067): Whitebox's ``dinf_flow_accum`` reads the angles themselves; FD8's shares
depend on slopes the pointer does not record, so ``fd8_flow_accum`` needs the DEM, which must give back
the same pointer. Both count cells only (fractions of cells, itself included): the library weighs
neither by ground area nor by a weight raster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.gdal_env import gdal_env, open_for_read
from llmc_mcp.operations.hydrology._grid import (
    ACCUMULATION_TAG,
    ROUTING_TAG,
    check_dst,
    check_grid,
    flow_network,
    read_elevation,
    write_grid,
)
from llmc_mcp.operations.hydrology._whitebox import WHITEBOX_TO_ESRI, check_planar, run, scratch
from llmc_mcp.operations.models import AccumulationUnits, FlowAccumulationResult
from llmc_mcp.operations.raster.area import CellAreas
from llmc_mcp.operations.raster.pixels import read_valid

_MISSING = -9999.0
ROUTINGS = ("d8", "dinf", "mfd")


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_options(args["weights"], args["units"])
    sources = {"flow_dir": args["flow_dir"]} | ({"weights": args["weights"]} if args["weights"] else {})
    sources |= {"dem": args["dem"]} if args["dem"] else {}
    check_dst(ctx, args["dst"], sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, args["flow_dir"], "flow_dir"))
        check_grid(ds, ctx.workspace.relative(Path(ds.name)), "flow_dir")
        if _routing(ds, ctx.workspace.relative(Path(ds.name)), args) != "d8":
            return
        if args["units"] == "m2":
            cell_areas(ds, ctx.workspace.relative(Path(ds.name)))
        if args["weights"]:
            source = stack.enter_context(open_for_read(ctx, args["weights"], "weights"))
            _check_same_grid(ctx, ds, source, "weights")


@operation(
    "hydrology",
    read_only=False,
    inputs=("flow_dir", "weights", "dem"),
    outputs=("dst",),
    preflight=_preflight,
)
def flow_accumulation(
    ctx: OperationContext,
    flow_dir: Annotated[
        str, Field(description="Workspace-relative flow directions from hydrology.flow_direction.")
    ],
    dst: Annotated[
        str, Field(description="Workspace-relative output GeoTIFF (.tif); replaced if it exists.")
    ],
    weights: Annotated[
        str | None,
        Field(
            description="Workspace-relative raster on the same grid whose values are summed instead of "
            "counting cells (e.g. runoff per cell); its nodata cells add nothing."
        ),
    ] = None,
    units: Annotated[
        AccumulationUnits,
        Field(
            description="'cells': count of cells draining through each cell (itself included); 'm2': "
            "their ground area in square metres on the ellipsoid, right on geographic grids too."
        ),
    ] = "cells",
    dem: Annotated[
        str | None,
        Field(
            description="Only for mfd directions: the DEM they were derived from (FD8 splits flow by its "
            "slopes, which the pointer does not record)."
        ),
    ] = None,
) -> FlowAccumulationResult:
    """Upstream cell counts, ground areas (m², on the ellipsoid) or weighted sums along D8, dinf or mfd
    flow (read from the grid's LLMC_ROUTING tag). Reads the whole grid: at most 16,777,216 cells.

    dinf and mfd grids (Whitebox, DD-MCP-067) give cell counts only (float64: shares of cells, itself
    included; no m2, no weights); mfd also needs ``dem``, the DEM the directions came from (checked: it
    must give the same pointer). A grid without the tag is read as D8 if every value is a D8 code.

    Each cell holds the sum over every cell draining through it, itself included: with units='cells'
    a count (int32, nodata -1), with units='m2' their ground area on the CRS's ellipsoid (float64,
    NaN nodata; each cell measured as raster.area does, so a lat/lon grid gives real areas), with
    ``weights`` the sum of the weights (float64; weights' nodata cells add 0 and are counted). The
    band is tagged LLMC_ACCUMULATION_UNITS (cells, m2 or weights) so hydrology.streams can check a
    threshold's units. Reads the whole grid (at most 16,777,216 cells; refused above).

    Errors: InvalidArgument for a grid that is not D8 codes (without a routing tag) or drains in a
    loop, an unknown routing tag, weights together with units='m2', weights on another grid, a grid
    without a CRS for m2, m2 or weights with dinf/mfd, mfd without its DEM (or with another), dem with
    d8 or dinf, too many cells, or dst equal to an input; RasterError for unreadable pixels.
    """
    _check_options(weights, units)
    sources = (
        {"flow_dir": flow_dir} | ({"weights": weights} if weights else {}) | ({"dem": dem} if dem else {})
    )
    dst_path = check_dst(ctx, dst, sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, flow_dir, "flow_dir"))
        shown = ctx.workspace.relative(Path(ds.name))
        check_grid(ds, shown, "flow_dir")
        args = {"weights": weights, "units": units, "dem": dem}
        routing = _routing(ds, shown, args)
        if routing != "d8":
            return _whitebox_accumulation(ctx, stack, ds, shown, dst, dst_path, routing, dem)
        network = flow_network(ctx, ds, shown, "flow_dir")
        valid = network.mask.reshape(ds.height, ds.width)
        skipped = 0
        if weights is None and units == "cells":
            accumulated = network.upstream_area(unit="cell")
            data = np.where(valid, accumulated, -1).astype("int32")
            nodata, kind = -1.0, "cells"
        else:
            if weights is not None:
                source = stack.enter_context(open_for_read(ctx, weights, "weights"))
                _check_same_grid(ctx, ds, source, "weights")
                values, skipped = _weights(ctx, source, valid)
                kind = "weights"
            else:
                values, kind = ground_areas(ds, shown, cell_areas(ds, shown)), "m2"
            accumulated = network.accuflux(np.where(valid, values, _MISSING), nodata=_MISSING)
            data = np.where(valid, accumulated, np.nan)
            nodata = float("nan")
        output = write_grid(ctx, ds, dst, dst_path, data, nodata, {ACCUMULATION_TAG: kind})
    return FlowAccumulationResult(
        output=output,
        units=kind,
        max_value=float(data[valid].max()) if valid.any() else 0.0,
        weight_nodata_cells=skipped,
        note=_note(kind),
    )


def _routing(ds: DatasetReader, shown: str, args: Mapping[str, Any]) -> str:
    """The grid's routing from its tag, refused with options that routing cannot honour."""
    routing = ds.tags(1).get(ROUTING_TAG, "d8")
    if routing not in ROUTINGS:
        raise InvalidArgument(
            f"flow_dir: '{shown}' has {ROUTING_TAG}={routing!r}, a routing this operation does not read.",
            fix="Derive the directions again with hydrology.flow_direction.",
        )
    if routing == "d8" or routing == "dinf":
        if args["dem"] is not None:
            raise InvalidArgument(
                f"dem was given, but '{shown}' holds {routing} directions, which need no DEM.",
                fix="Drop dem (it is read only for mfd directions).",
            )
        if routing == "d8":
            return routing
    if args["weights"] is not None or args["units"] != "cells":
        raise InvalidArgument(
            f"'{shown}' holds {routing} directions, whose accumulation (Whitebox) counts cells only; "
            f"{'weights were' if args['weights'] else 'units=' + repr(args['units']) + ' was'} asked.",
            fix="Use units='cells' without weights, or route with 'd8' (it sums weights and ground areas).",
        )
    if routing == "mfd" and args["dem"] is None:
        raise InvalidArgument(
            f"'{shown}' holds mfd (FD8) directions; their shares depend on the DEM's slopes, which the "
            "pointer does not record.",
            fix="Pass dem: the DEM the directions were derived from.",
        )
    check_planar(ds, shown, "flow_dir", routing)
    return routing


def _whitebox_accumulation(
    ctx: OperationContext,
    stack: contextlib.ExitStack[Any],
    ds: DatasetReader,
    shown: str,
    dst: str,
    dst_path: Path,
    routing: str,
    dem: str | None,
) -> FlowAccumulationResult:
    raw, valid = read_valid(ctx, ds, 1)
    if routing == "dinf":
        pointer = np.where(valid, raw.astype("float64"), np.nan)
        with scratch(ctx, ds, dst_path, pointer) as raster:
            counts = run("dinf_flow_accum", valid, input=raster, out_type="cells", input_is_pointer=True)
    else:
        assert dem is not None
        source = stack.enter_context(open_for_read(ctx, dem, "dem"))
        _check_same_grid(ctx, ds, source, "dem")
        elevation = read_elevation(ctx, source, "float64")
        with scratch(ctx, ds, dst_path, elevation) as raster:
            derived = run("fd8_pointer", valid, dem=raster)
            counts = run("fd8_flow_accum", valid, dem=raster, out_type="cells")
        same = valid & ~np.isnan(derived)
        expected = WHITEBOX_TO_ESRI[np.nan_to_num(derived).astype("uint8")]
        if (same.sum() != valid.sum()) or (raw[same].astype("int64") != expected[same]).any():
            raise InvalidArgument(
                f"dem: '{ctx.workspace.relative(Path(source.name))}' does not give the directions in "
                f"'{shown}' (other FD8 receivers, or other nodata cells).",
                fix="Pass the DEM the mfd directions were derived from, or derive them again from this one.",
            )
    data = np.where(valid, counts, np.nan)
    output = write_grid(ctx, ds, dst, dst_path, data, float("nan"), {ACCUMULATION_TAG: "cells"})
    how = (
        "D-infinity (Whitebox dinf_flow_accum from the angles): each cell's flow split between the two "
        "neighbours bracketing its angle"
        if routing == "dinf"
        else "FD8 (Whitebox fd8_flow_accum, exponent 1.1): each cell's flow split among its lower "
        "neighbours in proportion to slope^1.1"
    )
    return FlowAccumulationResult(
        output=output,
        units="cells",
        max_value=float(np.nanmax(data)) if valid.any() else 0.0,
        weight_nodata_cells=0,
        note=f"{how}; cells (shares of cells, itself included); flow that leaves the grid or reaches a "
        "cell without a lower neighbour ends there.",
    )


def cell_areas(ds: DatasetReader, shown: str) -> CellAreas:
    """How the grid's cells get their ground areas, refused without a CRS (or one without an ellipsoid)."""
    if ds.crs is None:
        raise InvalidArgument(
            f"flow_dir: '{shown}' has no CRS, so its cells have no known ground area.",
            fix="Use units='cells', or assign the DEM its CRS before deriving flow directions.",
        )
    return CellAreas(parse_crs(ds.crs.to_wkt()), ds.transform, ds.width, ds.height)


def ground_areas(ds: DatasetReader, shown: str, cells: CellAreas) -> np.ndarray:
    """Every cell's ground area (m²) on the ellipsoid of the grid's CRS (``cells``: :func:`cell_areas`)."""
    areas = np.array(cells.window(Window(0, 0, ds.width, ds.height)), dtype="float64")
    if np.isnan(areas).any():
        raise InvalidArgument(
            f"flow_dir: some cells of '{shown}' lie outside its projection's domain and have no ground area.",
            fix="Clip the DEM to the CRS's area of use, or use units='cells'.",
        )
    return areas


def _check_options(weights: str | None, units: str) -> None:
    if weights is not None and units == "m2":
        raise InvalidArgument(
            "weights and units='m2' were both given; an accumulation sums either weights or ground areas.",
            fix="Drop weights for upstream area, or keep weights with units='cells' (the default).",
        )


def _check_same_grid(
    ctx: OperationContext, flow: DatasetReader, weights: DatasetReader, argument: str
) -> None:
    same = (flow.width, flow.height, flow.transform, flow.crs) == (
        weights.width,
        weights.height,
        weights.transform,
        weights.crs,
    )
    if not same:
        raise InvalidArgument(
            f"{argument}: '{ctx.workspace.relative(Path(weights.name))}' is not on the grid of flow_dir "
            f"({weights.width} x {weights.height} vs {flow.width} x {flow.height}, or another transform "
            "or CRS).",
            fix="Align it first (raster.reproject onto the DEM's grid), then accumulate.",
        )


def _weights(ctx: OperationContext, ds: DatasetReader, valid: np.ndarray) -> tuple[np.ndarray, int]:
    raw, readable = read_valid(ctx, ds, 1)
    scale = ds.scales[0] if ds.scales[0] is not None else 1.0
    offset = ds.offsets[0] if ds.offsets[0] is not None else 0.0
    values = np.where(readable, raw.astype("float64") * scale + offset, 0.0)
    return values, int((valid & ~readable).sum())


def _note(kind: str) -> str:
    what = {
        "cells": "a count of the cells draining through each cell, itself included",
        "m2": "the ground area (m², on the ellipsoid, each cell measured) of the cells draining through "
        "each cell, itself included",
        "weights": "the sum of the weights of the cells draining through each cell, itself included",
    }[kind]
    return f"D8 accumulation (pyflwdir accuflux): {what}; cells that drain nowhere end their path."
