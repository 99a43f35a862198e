"""``hydrology.streams``: the channel network, every cell whose drainage area reaches a threshold.

The threshold is where the agent decides what a river is, so it is gated. An accumulation written by
``hydrology.flow_accumulation`` carries its units in a band tag: a threshold in other units (square
metres against a cell count, anything against weights) is refused, never compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader

from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.hydrology._grid import ACCUMULATION_TAG, check_dst, check_grid, write_grid
from llmc_mcp.operations.hydrology.models import OutputGrid, StreamsResult, ThresholdUnits
from llmc_mcp.reflection.specs import HYDROLOGY_STREAM_THRESHOLD

STREAM_NODATA = 255


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_threshold(args["threshold"])
    check_dst(ctx, args["dst"], {"accumulation": args["accumulation"]})
    with gdal_env(ctx), open_for_read(ctx, args["accumulation"], "accumulation") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "accumulation")
        _check_units(ds, shown, args["threshold_units"])


@operation(
    "hydrology",
    read_only=False,
    reflection=(HYDROLOGY_STREAM_THRESHOLD,),
    inputs=("accumulation",),
    outputs=("dst",),
    preflight=_preflight,
)
def streams(
    ctx: OperationContext,
    accumulation: Annotated[
        str, Field(description="Workspace-relative output of hydrology.flow_accumulation.")
    ],
    dst: OutputGrid,
    threshold: Annotated[
        float, Field(description="Drainage area that makes a cell a channel (>= threshold).")
    ],
    threshold_units: Annotated[
        ThresholdUnits,
        Field(description="'cells' or 'm2': must be the accumulation's own units (checked from its tag)."),
    ] = "cells",
) -> StreamsResult:
    """Channel cells: 1 where the accumulation is at least ``threshold``, else 0 (uint8; 255 nodata).
    Reads the whole grid: at most what the worker's memory holds (4096² in 2 GiB).

    The threshold is the drainage area that defines a channel here (gated, domain hydrology).
    An accumulation written by hydrology.flow_accumulation records its units; a threshold in other
    units is refused (compute the accumulation with units='m2' for an area threshold). Other rasters
    have no such tag and are taken to be in threshold_units (the note says so). Reads the whole grid.

    Errors: InvalidArgument for a threshold that is not a positive number, units that differ from the
    accumulation's (or a weighted accumulation), too many cells, or dst equal to the input.
    """
    limit = _check_threshold(threshold)
    dst_path = check_dst(ctx, dst, {"accumulation": accumulation})
    with gdal_env(ctx), open_for_read(ctx, accumulation, "accumulation") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "accumulation")
        tagged = _check_units(ds, shown, threshold_units)
        raw, valid = read_valid(ctx, ds, 1)
        channel = valid & (raw >= limit)
        data = np.where(valid, channel, STREAM_NODATA).astype("uint8")
        output = write_grid(ctx, ds, dst, dst_path, data, STREAM_NODATA)
    source = "its LLMC_ACCUMULATION_UNITS tag" if tagged else "not recorded in the file: taken as given"
    return StreamsResult(
        output=output,
        threshold=limit,
        threshold_units=threshold_units,
        stream_cells=int(channel.sum()),
        note=f"1 where accumulation >= {limit:g} {threshold_units} (units: {source}), 0 elsewhere, "
        "255 nodata.",
    )


def _check_threshold(threshold: float) -> float:
    if not math.isfinite(threshold) or threshold <= 0:
        raise InvalidArgument(
            f"threshold={threshold} is not a positive drainage area.",
            fix="Pass the drainage area of a channel head here, e.g. 1000 (cells) or 1e6 (m2).",
        )
    return float(threshold)


def _check_units(ds: DatasetReader, shown: str, units: str) -> bool:
    """Whether the file records its units; refused when they are not ``units``."""
    recorded = ds.tags(1).get(ACCUMULATION_TAG)
    if recorded is None:
        return False
    if recorded != units:
        fix = (
            "Recompute the accumulation with hydrology.flow_accumulation(..., units='m2'), or give the "
            "threshold in cells."
            if recorded == "cells"
            else f"Give the threshold in {recorded}."
        )
        if recorded == "weights":
            fix = "Use an accumulation of cells or m2 (no weights): a channel is defined by drainage area."
        raise InvalidArgument(
            f"threshold_units='{units}' but '{shown}' accumulates {recorded}.",
            fix=fix,
        )
    return True
