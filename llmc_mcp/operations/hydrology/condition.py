"""``hydrology.condition``: handle a DEM's closed depressions so that flow can leave it.

Priority-flood filling (Wang & Liu 2006, pyflwdir's ``fill_depressions``): from the outlets on the
edge of the data inwards in order of elevation, every cell lower than the lowest spill point it was
reached over is raised to that spill point. With ``max_depth``, where the flood steps down by at least
that much into a depression, the depression is kept as a sink (lakes, karst) that flow ends in; hollows
inside it less than ``max_depth`` below their own rim are still filled (pyflwdir's rule).

``fill_flats``: Priority-Flood+epsilon (Barnes et al. 2014, written here: :mod:`._routing`, DD-MCP-068):
the same flood, but a cell reached from a cell not lower than it is raised to the next float32 above
that cell, so filled depressions and flats slope (by one float32 step a cell) towards their spill
point and every cell has a strictly lower neighbour, as dinf and mfd need.

``breach``: least-cost breaching after Lindsay (2016), simplified (written here, DD-MCP-068): from
each pit, lowest first, a Dijkstra search over the sum of cut depths finds the cheapest path to a
lower cell or the edge of the data, and the path is lowered to one float32 step a cell below the pit.
``max_depth`` bounds each cut; a pit that needs a deeper one is filled instead (Lindsay's hybrid).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.hydrology._grid import check_dst, check_grid, pyflwdir, read_elevation, write_grid
from llmc_mcp.operations.hydrology._routing import kernels
from llmc_mcp.operations.hydrology.models import ConditionMethod, ConditionResult, OutputGrid
from llmc_mcp.reflection.specs import HYDROLOGY_CONDITION


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_depth(args["max_depth"], args["method"])
    check_dst(ctx, args["dst"], {"dem": args["dem"]})
    with gdal_env(ctx), open_for_read(ctx, args["dem"], "dem") as ds:
        check_grid(ds, shown_dataset(ctx, ds), "dem")


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
    dst: OutputGrid,
    method: Annotated[
        ConditionMethod,
        Field(
            description="'fill': raise depressions to their spill height (priority flood). 'fill_flats': "
            "the same, plus a float32 step a cell towards the spill point so every cell drains (for "
            "dinf, mfd). 'breach': cut the cheapest channel out of each pit instead of raising it."
        ),
    ] = "fill",
    max_depth: Annotated[
        float | None,
        Field(
            description="fill: keep as sinks (lakes, karst) depressions at least this far (vertical units) "
            "below the spill point they are entered from. breach: the deepest cut allowed; pits needing "
            "more are filled. Default: no limit. Not with fill_flats."
        ),
    ] = None,
) -> ConditionResult:
    """Fill a DEM's closed depressions to their spill height (max_depth keeps deep ones as sinks);
    'fill_flats' also slopes every flat towards its outlet; 'breach' cuts channels out of pits instead.
    Reads the whole grid: at most what the worker's memory holds.

    breach (least-cost, after Lindsay 2016): from each pit, lowest first, the path to a lower cell or
    the data's edge with the least summed cut depth is lowered to one float32 step a cell below the
    pit; nothing is raised. max_depth bounds each cut: a pit needing more is filled (the note says how
    many).

    fill_flats (Barnes et al. 2014 Priority-Flood+epsilon): a cell reached from a cell not lower than
    it is raised to the next float32 above that cell, so a flat of n cells rises by at most n float32
    steps above its spill point and every cell has a strictly lower neighbour; no max_depth.

    Priority flood from the edge of the data (the grid's edge and cells beside nodata are outlets):
    every cell below the lowest spill point it is reached over is raised to it, so each depression
    becomes a flat draining through its spill point. With ``max_depth``, a depression whose cells lie
    at least that far below the spill point the flood enters it over is kept: flow ends in it; smaller
    hollows inside it (less than max_depth below their own rim) are still filled. Elevations
    are float32 (scale and offset applied); nodata stays nodata. Reads the whole grid (4096² in
    2 GiB; refused above). The choice of handling is gated (domain hydrology).

    Errors: InvalidArgument for a max_depth that is not positive (or given with fill_flats), a rotated
    or multi-band grid, too many cells, or dst equal to dem; RasterError for unreadable pixels.
    """
    depth = _check_depth(max_depth, method)
    dst_path = check_dst(ctx, dst, {"dem": dem})
    with gdal_env(ctx), open_for_read(ctx, dem, "dem") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "dem")
        elevation = read_elevation(ctx, ds)
        uncut = 0
        if method == "fill_flats":
            filled = kernels().fill_flats(elevation, ~np.isnan(elevation))
        elif method == "breach":
            limit = np.inf if depth is None else depth
            filled, uncut = kernels().breach(elevation, ~np.isnan(elevation), limit)
            if uncut:
                filled, _ = pyflwdir().dem.fill_depressions(filled, nodata=np.nan, max_depth=-1.0)
        else:
            filled, _ = pyflwdir().dem.fill_depressions(
                elevation, nodata=np.nan, max_depth=-1.0 if depth is None else depth
            )
        filled = filled.astype("float32", copy=False)
        change = filled - elevation  # float32 like both grids; NaN on nodata, which compares False
        raise_by, lower_by = change[change > 0], -change[change < 0]
        del change
        output = write_grid(ctx, ds, dst, dst_path, filled, float("nan"))
    kept = (
        "every depression filled"
        if depth is None
        else f"depressions entered by a drop of at least {depth:g} kept as sinks (hollows in them filled)"
    )
    how = "Priority-flood fill (pyflwdir, Wang & Liu 2006) from the edge of the data"
    if method == "fill_flats":
        how = (
            "Priority-Flood+epsilon (Barnes et al. 2014) from the edge of the data, flats sloped one "
            "float32 step a cell"
        )
    elif method == "breach":
        bound = "" if depth is None else f" no deeper than {depth:g}"
        how = f"Least-cost breaching (after Lindsay 2016): a channel cut{bound} out of every pit"
        kept = f"{uncut} pit(s) needing a deeper cut filled instead (priority flood)"
    return ConditionResult(
        output=output,
        method=method,
        max_depth=depth,
        raised_cells=raise_by.size,
        max_raise=float(raise_by.max()) if raise_by.size else 0.0,
        volume_cells=float(raise_by.sum(dtype="float64")),
        lowered_cells=lower_by.size,
        max_lowering=float(lower_by.max()) if lower_by.size else 0.0,
        note=f"{how}; {kept}; float32 elevations, nodata kept.",
    )


def _check_depth(max_depth: float | None, method: str) -> float | None:
    if max_depth is None:
        return None
    if method == "fill_flats":
        raise InvalidArgument(
            f"max_depth was given with method '{method}', which fills every depression.",
            fix="Drop max_depth, or use method 'fill' to keep deep depressions as sinks.",
        )
    if not np.isfinite(max_depth) or max_depth <= 0:
        raise InvalidArgument(
            f"max_depth={max_depth} is not a positive depth.",
            fix="Pass a depth in the DEM's vertical units (e.g. 2.0), or null to fill every depression.",
        )
    return float(max_depth)
