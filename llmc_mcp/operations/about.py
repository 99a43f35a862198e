"""What a gated decision is about, in words: the data of the operation's input files.

When the server asks the host's model for a justification (:mod:`llmc_mcp.reflection.sampling`), the
model must reason about this data, not resampling or CRSs in general. The worker, which may parse
workspace files, describes each input's header here (the server never opens them): size, bands,
data type, CRS, extent, nodata, and the data kind the gate scopes the decision by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.errors import LlmcError
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.messages import GDAL_ERRORS
from llmc_mcp.operations.catalog import Operation, OperationContext


def describe_inputs(
    ctx: OperationContext, op: Operation, args: Mapping[str, Any], facts: Mapping[str, str]
) -> str:
    """One line per input raster, then the data kind; an input that cannot be read is left out."""
    lines = []
    for name in op.inputs:
        value = args.get(name)
        if not isinstance(value, str):
            continue
        try:
            with open_for_read(ctx, value, name, georeferencing="unchecked") as ds:
                crs = _label(ds.crs.to_wkt()) if ds.crs else "no CRS"
                left, bottom, right, top = ds.bounds
                lines.append(
                    f"{name} '{value}': {ds.width} x {ds.height} cells, {ds.count} band(s) of "
                    f"{','.join(dict.fromkeys(ds.dtypes))}, {crs}, extent ({left:.6g}, {bottom:.6g}, "
                    f"{right:.6g}, {top:.6g}), cell {abs(ds.res[0]):.6g} x {abs(ds.res[1]):.6g}, "
                    f"nodata {ds.nodata}"
                )
        except (LlmcError, *GDAL_ERRORS):
            continue
    if "data" in facts:
        lines.append(f"values: {facts['data']}")
    return "; ".join(lines)


def _label(wkt: str) -> str:
    parsed = parse_crs(wkt)
    _, authority = identify(parsed)
    return f"{authority} ({parsed.name})" if authority else parsed.name
