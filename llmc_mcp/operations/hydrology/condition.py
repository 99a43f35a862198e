"""``hydrology.condition``: handle a DEM's closed depressions so that flow can leave it.

Three methods (DD-MCP-052, DD-MCP-067):

- ``fill``: priority-flood filling (Wang & Liu 2006, pyflwdir's ``fill_depressions``): from the
  outlets on the edge of the data inwards in order of elevation, every cell lower than the lowest
  spill point it was reached over is raised to that spill point; flats stay flat. With ``max_depth``,
  where the flood steps down by at least that much into a depression, the depression is kept as a sink
  (lakes, karst); hollows inside it less than ``max_depth`` below their own rim are still filled.
- ``breach``: least-cost breaching (Lindsay & Dhun 2015, Whitebox's
  ``breach_depressions_least_cost``): a channel is cut from each pit through the barrier to the
  nearest lower cell, along the path that lowers the DEM least in total, descending by
  :data:`FLAT_INCREMENT` a cell. Whitebox first raises each pit cell to just below its lowest
  neighbour (so a one-cell pit is raised, not cut into). Channels are searched up to 100 cells long.
  ``max_depth`` bounds a channel's total cut (the sum over its cells of how far each is lowered; for a
  one-cell dam, the cut's depth); a depression whose cheapest channel cuts more, or needs more than 100
  cells, is left a sink. Without ``max_depth`` such depressions are filled instead, so every cell drains.
- ``fill_flats``: Whitebox's ``fill_depressions`` with flat fixing: every depression is filled to its
  spill height, then every flat (filled or original) gets a gradient towards its outlets, rising by
  about :data:`FLAT_INCREMENT` per cell step, so every cell has a lower neighbour or is an outlet.

``breach`` and ``fill_flats`` write float64: their gradients are far below float32's resolution.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.gdal_env import gdal_env, open_for_read
from llmc_mcp.operations.hydrology._grid import (
    check_dst,
    check_grid,
    pyflwdir,
    read_elevation,
    write_grid,
)
from llmc_mcp.operations.hydrology._whitebox import FLAT_INCREMENT, run, scratch
from llmc_mcp.operations.models import ConditionMethod, ConditionResult
from llmc_mcp.reflection.specs import HYDROLOGY_CONDITION

BREACH_LENGTH = 100
"""Longest breach channel searched, in cells (Whitebox's default)."""


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_depth(args["max_depth"], args["method"])
    check_dst(ctx, args["dst"], {"dem": args["dem"]})
    with gdal_env(ctx), open_for_read(ctx, args["dem"], "dem") as ds:
        check_grid(ds, ctx.workspace.relative(Path(ds.name)), "dem")


@operation(
    "hydrology",
    read_only=False,
    reflection=(HYDROLOGY_CONDITION,),
    inputs=("dem",),
    outputs=("dst",),
    preflight=_preflight,
)
def condition(
    ctx: OperationContext,
    dem: Annotated[str, Field(description="Workspace-relative DEM (one band, north-up).")],
    dst: Annotated[
        str, Field(description="Workspace-relative output GeoTIFF (.tif); replaced if it exists.")
    ],
    method: Annotated[
        ConditionMethod,
        Field(
            description="'fill': raise depressions to their spill height (priority flood; flats stay "
            "flat). 'breach': cut least-cost channels through barriers (pits first raised to just below "
            "their lowest neighbour). 'fill_flats': fill, then give flats a 1e-6-a-cell gradient so "
            "every cell drains."
        ),
    ] = "fill",
    max_depth: Annotated[
        float | None,
        Field(
            description="'fill': keep as sinks (lakes, karst) depressions at least this far (vertical "
            "units) below the spill point they are entered from. 'breach': cut no channel whose total "
            "lowering (summed over its cells) exceeds this; those depressions stay sinks. Not with "
            "'fill_flats'. Default: every depression filled or breached."
        ),
    ] = None,
) -> ConditionResult:
    """Fill, breach, or fill with drained flats a DEM's closed depressions (max_depth keeps some as sinks).
    Reads the whole grid into memory (routing needs it): at most 16,777,216 cells, refused above.

    'fill' (pyflwdir priority flood from the edge of the data, whose cells are outlets): every cell
    below the lowest spill point it is reached over is raised to it, so each depression becomes a
    flat; with ``max_depth`` a depression at least that far below the spill point it is entered over
    is kept (hollows inside it less than max_depth below their own rim are still filled); float32.
    'breach' (Whitebox least-cost breaching): each pit cell is first raised to just below its lowest
    neighbour, then a channel up to 100 cells long is cut to the nearest lower cell along the path of
    least total lowering, descending 1e-6 a cell; with ``max_depth`` no channel lowering the DEM by
    more than that in total is cut (those depressions stay sinks), without it depressions no channel
    drains are filled; float64. 'fill_flats' (Whitebox fill with flat fixing): every depression filled,
    then each flat rises away from its outlets by about 1e-6 per cell step (at most 1e-6 x the flat's
    cell count), so every cell has a lower neighbour or is an outlet; float64. Nodata stays nodata;
    scale and offset applied. The result counts cells raised and lowered. Gated (domain hydrology).

    Errors: InvalidArgument for a max_depth that is not positive or given with 'fill_flats', a
    rotated or multi-band grid, too many cells, or dst equal to dem; RasterError for unreadable pixels.
    """
    depth = _check_depth(max_depth, method)
    dst_path = check_dst(ctx, dst, {"dem": dem})
    with gdal_env(ctx), open_for_read(ctx, dem, "dem") as ds:
        shown = ctx.workspace.relative(Path(ds.name))
        check_grid(ds, shown, "dem")
        if method == "fill":
            elevation = read_elevation(ctx, ds)
            filled, _ = pyflwdir().dem.fill_depressions(
                elevation, nodata=np.nan, max_depth=-1.0 if depth is None else depth
            )
            result = filled.astype("float32")
        else:
            elevation = read_elevation(ctx, ds, "float64")
            valid = ~np.isnan(elevation)
            with scratch(ctx, ds, dst_path, elevation) as raster:
                if method == "breach":
                    result = run(
                        "breach_depressions_least_cost",
                        valid,
                        dem=raster,
                        max_cost=depth,
                        max_dist=BREACH_LENGTH,
                        flat_increment=FLAT_INCREMENT,
                        fill_deps=depth is None,
                    )
                else:
                    result = run(
                        "fill_depressions", valid, dem=raster, fix_flats=True, flat_increment=FLAT_INCREMENT
                    )
        change = np.where(np.isnan(elevation), 0.0, result.astype("float64") - elevation)
        output = write_grid(ctx, ds, dst, dst_path, result, float("nan"))
    raised, lowered = change > 0, change < 0
    return ConditionResult(
        output=output,
        method=method,
        max_depth=depth,
        raised_cells=int(raised.sum()),
        max_raise=float(change.max()) if raised.any() else 0.0,
        volume_cells=float(change[raised].sum()),
        lowered_cells=int(lowered.sum()),
        max_lowering=float(-change.min()) if lowered.any() else 0.0,
        note=_note(method, depth),
    )


def _note(method: str, depth: float | None) -> str:
    if method == "fill":
        kept = (
            "every depression filled"
            if depth is None
            else f"depressions entered by a drop of at least {depth:g} kept as sinks (hollows in them filled)"
        )
        return f"Priority-flood fill (pyflwdir, Wang & Liu 2006) from the edge of the data: {kept}; float32."
    if method == "breach":
        beyond = (
            "depressions no channel drains were filled"
            if depth is None
            else f"no channel lowering more than {depth:g} in total was cut: those depressions stay sinks"
        )
        return (
            "Least-cost breaching (Whitebox, Lindsay & Dhun 2015): pit cells raised to just below their "
            f"lowest neighbour, channels up to {BREACH_LENGTH} cells cut descending {FLAT_INCREMENT:g} a "
            f"cell; {beyond}; float64."
        )
    return (
        f"Depressions filled and flats given a gradient of about {FLAT_INCREMENT:g} a cell step towards "
        "their outlets (Whitebox fill_depressions, fix_flats); float64."
    )


def _check_depth(max_depth: float | None, method: str) -> float | None:
    if max_depth is None:
        return None
    if method == "fill_flats":
        raise InvalidArgument(
            "max_depth was given with method 'fill_flats', which fills every depression.",
            fix="Drop max_depth, or use method 'fill' (keeps deep sinks) or 'breach' (limits channel cuts).",
        )
    if not np.isfinite(max_depth) or max_depth <= 0:
        raise InvalidArgument(
            f"max_depth={max_depth} is not a positive depth.",
            fix="Pass a depth in the DEM's vertical units (e.g. 2.0), or null to fill every depression.",
        )
    return float(max_depth)
