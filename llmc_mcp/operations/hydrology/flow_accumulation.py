"""``hydrology.flow_accumulation``: how much drains through each cell of a D8 grid.

pyflwdir orders the cells from upstream to downstream once and adds each cell's value to the cell it
drains to (``accuflux``). The value is 1 (a count of cells), the cell's ground area on the ellipsoid
(:class:`~llmc_mcp.operations.raster.area.CellAreas`: a geographic or Mercator cell count times a
nominal size is no area), or a weight read from a raster on the same grid.
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
    check_dst,
    check_grid,
    flow_network,
    write_grid,
)
from llmc_mcp.operations.models import AccumulationUnits, FlowAccumulationResult
from llmc_mcp.operations.raster.area import CellAreas
from llmc_mcp.operations.raster.pixels import read_valid

_MISSING = -9999.0


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_options(args["weights"], args["units"])
    sources = {"flow_dir": args["flow_dir"]} | ({"weights": args["weights"]} if args["weights"] else {})
    check_dst(ctx, args["dst"], sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, args["flow_dir"], "flow_dir"))
        check_grid(ds, ctx.workspace.relative(Path(ds.name)), "flow_dir")
        if args["units"] == "m2":
            cell_areas(ds, ctx.workspace.relative(Path(ds.name)))
        if args["weights"]:
            _check_same_grid(ctx, ds, stack.enter_context(open_for_read(ctx, args["weights"], "weights")))


@operation(
    "hydrology",
    read_only=False,
    inputs=("flow_dir", "weights"),
    outputs=("dst",),
    preflight=_preflight,
)
def flow_accumulation(
    ctx: OperationContext,
    flow_dir: Annotated[str, Field(description="Workspace-relative D8 grid from hydrology.flow_direction.")],
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
) -> FlowAccumulationResult:
    """Upstream cell counts, ground areas (m², on the ellipsoid) or weighted sums along D8 flow.
    Reads the whole grid into memory (routing needs it): at most 16,777,216 cells, refused above.

    Each cell holds the sum over every cell draining through it, itself included: with units='cells'
    a count (int32, nodata -1), with units='m2' their ground area on the CRS's ellipsoid (float64,
    NaN nodata; each cell measured as raster.area does, so a lat/lon grid gives real areas), with
    ``weights`` the sum of the weights (float64; weights' nodata cells add 0 and are counted). The
    band is tagged LLMC_ACCUMULATION_UNITS (cells, m2 or weights) so hydrology.streams can check a
    threshold's units. Reads the whole grid (at most 16,777,216 cells; refused above).

    Errors: InvalidArgument for a grid that is not D8 codes or drains in a loop, weights together
    with units='m2', weights on another grid, a grid without a CRS for m2, too many cells, or dst
    equal to an input; RasterError for unreadable pixels.
    """
    _check_options(weights, units)
    sources = {"flow_dir": flow_dir} | ({"weights": weights} if weights else {})
    dst_path = check_dst(ctx, dst, sources)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        ds = stack.enter_context(open_for_read(ctx, flow_dir, "flow_dir"))
        shown = ctx.workspace.relative(Path(ds.name))
        check_grid(ds, shown, "flow_dir")
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
                _check_same_grid(ctx, ds, source)
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


def _check_same_grid(ctx: OperationContext, flow: DatasetReader, weights: DatasetReader) -> None:
    same = (flow.width, flow.height, flow.transform, flow.crs) == (
        weights.width,
        weights.height,
        weights.transform,
        weights.crs,
    )
    if not same:
        raise InvalidArgument(
            f"weights: '{ctx.workspace.relative(Path(weights.name))}' is not on the grid of flow_dir "
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
