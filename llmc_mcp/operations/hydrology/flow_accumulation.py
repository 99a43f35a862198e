"""``hydrology.flow_accumulation``: how much drains through each cell of a flow direction grid.

The grid's band tag ``LLMC_ROUTING`` (written by ``hydrology.flow_direction``) says how to read it; a
grid without the tag is read as D8, and refused unless every value is a D8 code.

D8: pyflwdir orders the cells from upstream to downstream once and adds each cell's value to the cell it
drains to (``accuflux``). The value is 1 (a count of cells), the cell's ground area on the ellipsoid
(:class:`~llmc_mcp.operations.raster.area.CellAreas`: a geographic or Mercator cell count times a
nominal size is no area), or a weight read from a raster on the same grid.

dinf and mfd (:mod:`._routing`, DD-MCP-068): the same values, passed on in shares in topological order.
D-infinity's shares follow from the angles; MFD's depend on slopes the mask does not record, so its
accumulation needs the DEM, which must give back the same mask (checked).
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

from llmc_mcp.compute.cell_areas import CellAreas
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.hydrology._grid import (
    ACCUMULATION_TAG,
    ROUTING_TAG,
    check_dst,
    check_grid,
    check_square,
    flow_network,
    read_elevation,
    require_data,
    write_grid,
)
from llmc_mcp.operations.hydrology._routing import FREEMAN_EXPONENT, kernels
from llmc_mcp.operations.hydrology.models import AccumulationUnits, FlowAccumulationResult, OutputGrid

_MISSING = -9999.0
ROUTINGS = ("d8", "dinf", "mfd")


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_options(args["weights"], args["units"])
    sources = {"flow_dir": args["flow_dir"]} | ({"weights": args["weights"]} if args["weights"] else {})
    sources |= {"dem": args["dem"]} if args["dem"] else {}
    check_dst(ctx, args["dst"], sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, args["flow_dir"], "flow_dir"))
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "flow_dir")
        _routing(ds, shown, args["dem"])
        if args["units"] == "m2":
            cell_areas(ds, shown)
        for argument in ("weights", "dem"):
            if args[argument]:
                source = stack.enter_context(open_for_read(ctx, args[argument], argument))
                _check_same_grid(ctx, ds, source, argument)


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
    dst: OutputGrid,
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
            description="Only for mfd directions, and required there: the DEM they were derived from "
            "(MFD splits flow by its slopes, which the mask does not record)."
        ),
    ] = None,
) -> FlowAccumulationResult:
    """Upstream cell counts, ground areas (m², on the ellipsoid) or weighted sums along D8, dinf or mfd
    flow (read from the grid's LLMC_ROUTING tag). Reads the whole grid: at most what the worker's memory
    holds.

    dinf and mfd pass each cell's total on in shares (float64 output, also for cells); mfd needs
    ``dem``, the DEM the directions came from (checked: it must give the same mask). A grid without
    the tag is read as D8 if every value is a D8 code.

    Each cell holds the sum over every cell draining through it, itself included: with units='cells'
    a count (int32, nodata -1), with units='m2' their ground area on the CRS's ellipsoid (float64,
    NaN nodata; each cell measured as raster.area does, so a lat/lon grid gives real areas), with
    ``weights`` the sum of the weights (float64; weights' nodata cells add 0 and are counted). The
    band is tagged LLMC_ACCUMULATION_UNITS (cells, m2 or weights) so hydrology.streams can check a
    threshold's units. Reads the whole grid (4096² in 2 GiB; refused above).

    Errors (ApiError, by e.type): invalid_argument for a grid that is not D8 codes (without a routing
    tag), not dinf angles, or drains in a loop, an unknown routing tag, weights together with
    units='m2', a grid without a CRS for m2, mfd without its DEM (or with another), dem with d8 or
    dinf, too many cells, or dst equal to an input; refused for weights or dem on another grid, or
    an input whose sidecar overrides its georeferencing; raster_error for unreadable pixels.
    """
    _check_options(weights, units)
    sources = (
        {"flow_dir": flow_dir} | ({"weights": weights} if weights else {}) | ({"dem": dem} if dem else {})
    )
    dst_path = check_dst(ctx, dst, sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, flow_dir, "flow_dir"))
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "flow_dir")
        routing = _routing(ds, shown, dem)
        if routing != "d8":
            weight_source = stack.enter_context(open_for_read(ctx, weights, "weights")) if weights else None
            dem_source = stack.enter_context(open_for_read(ctx, dem, "dem")) if dem else None
            return _multiple_flow(ctx, ds, shown, dst, dst_path, routing, units, weight_source, dem_source)
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
        max_value=float(data[valid].max()),
        weight_nodata_cells=skipped,
        note=_note(kind),
    )


def _routing(ds: DatasetReader, shown: str, dem: str | None) -> str:
    """The grid's routing from its tag, refused when ``dem`` is missing (mfd) or pointless (d8, dinf)."""
    routing = ds.tags(1).get(ROUTING_TAG, "d8")
    if routing not in ROUTINGS:
        raise InvalidArgument(
            f"flow_dir: '{shown}' has {ROUTING_TAG}={routing!r}, a routing this operation does not read.",
            fix="Derive the directions again with hydrology.flow_direction.",
        )
    if routing != "mfd" and dem is not None:
        raise InvalidArgument(
            f"dem was given, but '{shown}' holds {routing} directions, which need no DEM.",
            fix="Drop dem (it is read only for mfd directions).",
        )
    if routing == "mfd" and dem is None:
        raise InvalidArgument(
            f"'{shown}' holds mfd directions; their shares depend on the DEM's slopes, which the mask "
            "does not record.",
            fix="Pass dem: the DEM the directions were derived from.",
        )
    if routing != "d8":
        check_square(ds, shown, "flow_dir", routing)
    return routing


def _multiple_flow(
    ctx: OperationContext,
    ds: DatasetReader,
    shown: str,
    dst: str,
    dst_path: Path,
    routing: str,
    units: str,
    weight_source: DatasetReader | None,
    dem_source: DatasetReader | None,
) -> FlowAccumulationResult:
    raw, valid = read_valid(ctx, ds, 1)
    require_data(valid, shown, "flow_dir")
    if routing == "dinf":
        field = raw.astype("float32", copy=False)  # the kernel reads valid cells only
        angles = field[valid]
        bad = ~((angles == -1.0) | ((angles >= 0.0) & (angles < 360.0)))
        if bad.any():
            raise InvalidArgument(
                f"flow_dir: '{shown}' is tagged dinf but holds values that are no angle in [0, 360) nor -1 "
                f"(e.g. {float(angles[bad][0]):g}).",
                fix="Derive the directions again with hydrology.flow_direction(routing='dinf').",
            )
        del angles, bad
    else:
        assert dem_source is not None
        _check_same_grid(ctx, ds, dem_source, "dem")
        elevation = read_elevation(ctx, dem_source)
        same_cells = np.array_equal(valid, ~np.isnan(elevation))
        mask = kernels().mfd_mask(elevation, valid)
        if not same_cells or (raw[valid].astype("int64") != mask[valid]).any():
            raise InvalidArgument(
                f"dem: '{shown_dataset(ctx, dem_source)}' does not give the directions in "
                f"'{shown}' (other receiving neighbours, or other nodata cells).",
                fix="Pass the DEM the mfd directions were derived from, or derive them again from this one.",
            )
        field = elevation
    skipped = 0
    if weight_source is not None:
        _check_same_grid(ctx, ds, weight_source, "weights")
        values, skipped = _weights(ctx, weight_source, valid)
        kind = "weights"
    elif units == "m2":
        values, kind = ground_areas(ds, shown, cell_areas(ds, shown)), "m2"
    else:
        values, kind = valid.astype("float64"), "cells"
    # In place from here: at the cell limit each float64 copy of the grid is 128 MiB.
    values[~valid] = 0.0
    done = kernels().accumulate(field, valid, values, routing == "dinf", FREEMAN_EXPONENT)
    if done < int(valid.sum()):
        raise InvalidArgument(
            f"flow_dir: {int(valid.sum()) - done:,} cells of '{shown}' drain into a loop, so they reach no "
            "outlet and have no defined accumulation.",
            fix="Recompute the directions with hydrology.flow_direction from a conditioned DEM.",
        )
    values[~valid] = np.nan
    output = write_grid(ctx, ds, dst, dst_path, values, float("nan"), {ACCUMULATION_TAG: kind})
    how = (
        "D-infinity accumulation (Tarboton 1997; each total split between the two neighbours bracketing "
        "its angle)"
        if routing == "dinf"
        else f"MFD accumulation (Freeman 1991; each total split among the lower neighbours by slope^"
        f"{FREEMAN_EXPONENT})"
    )
    return FlowAccumulationResult(
        output=output,
        units=kind,
        max_value=float(np.nanmax(values)),
        weight_nodata_cells=skipped,
        note=_note(kind, how),
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
        raise Refused(
            f"{argument}: '{shown_dataset(ctx, weights)}' is not on the grid of flow_dir "
            f"({weights.width} x {weights.height} vs {flow.width} x {flow.height}, or another transform "
            "or CRS).",
            fix="Align it first (raster.reproject onto the DEM's grid), then accumulate.",
        )


def _weights(ctx: OperationContext, ds: DatasetReader, valid: np.ndarray) -> tuple[np.ndarray, int]:
    raw, readable = read_valid(ctx, ds, 1)
    scale, offset = scale_offset(ds, 1)
    values = np.where(readable, raw.astype("float64") * scale + offset, 0.0)
    return values, int((valid & ~readable).sum())


def _note(kind: str, how: str = "D8 accumulation (pyflwdir accuflux)") -> str:
    what = {
        "cells": "a count of the cells draining through each cell, itself included",
        "m2": "the ground area (m², on the ellipsoid, each cell measured) of the cells draining through "
        "each cell, itself included",
        "weights": "the sum of the weights of the cells draining through each cell, itself included",
    }[kind]
    return f"{how}: {what}; cells that drain nowhere end their path."
