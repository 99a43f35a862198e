"""Whitebox Workflows (DD-MCP-067): breaching, flat resolution, D-infinity and FD8, on arrays already checked.

The library (whitebox-workflows, MIT OR Apache-2.0, a Rust extension; open tier, no licence key, no
network, no files of its own) reads rasters only from files, chosen by extension and read when a tool
runs. It must never open a workspace file by itself: that would bypass :func:`open_for_read`'s
hostile-file checks. So each call writes the array the operation already read and checked into a
fresh GeoTIFF made here, runs the tool on it, copies the memory-backed result into numpy and deletes
the file. The file is the temporary of a write grant of the output ledger (a hidden random name beside
``dst``): a confined worker may write nowhere but the workspace, the grant counts its bytes in the
quotas, and aborting the grant removes it whatever happened (the server does, after a crash too). No
CRS is written: the tools need only the cell size, and grids whose cells are not square metres-like
units are refused before (:func:`check_planar`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.io import DatasetReader

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations.catalog import OperationContext

FLAT_INCREMENT = 1e-6
"""Vertical units added per cell step across a flat (and along a breach channel) so every cell drains.
Far below any DEM's accuracy; representable because these outputs are float64."""
SCRATCH_NODATA = -1.0e30
"""Nodata of the scratch file: below any elevation, angle or pointer, so no valid value is taken for it."""

WHITEBOX_TO_ESRI = np.array([(b >> 1) | ((b & 1) << 7) for b in range(256)], dtype="uint16")
"""Whitebox numbers the FD8 bits from north-east (1 NE, 2 E, ... 128 N); ESRI from east (1 E ... 128 NE)."""

_lock = threading.Lock()
_environment: Any = None


def _wbe() -> Any:
    """The library's open-tier environment, created once per process (import is lazy: a 57 MB extension)."""
    global _environment
    if _environment is None:
        import whitebox_workflows

        _environment = whitebox_workflows.WbEnvironment()
        _environment.verbose = False  # progress goes to stdout, the MCP channel of a stdio server
    return _environment


def check_planar(ds: DatasetReader, shown: str, argument: str, routing: str) -> None:
    """Refuse grids where the library's slopes would be wrong: geographic or non-square cells."""
    if ds.crs is not None and ds.crs.is_geographic:
        raise InvalidArgument(
            f"{argument}: '{shown}' is on a geographic grid (degrees); {routing} splits flow by slopes, "
            "which need horizontal distances in the units of the elevations.",
            fix="Reproject the DEM to a projected CRS in metres (raster.reproject), or use routing 'd8'.",
        )
    width, height = abs(ds.transform.a), abs(ds.transform.e)
    if not math.isclose(width, height, rel_tol=1e-9):
        raise InvalidArgument(
            f"{argument}: '{shown}' has {width:g} x {height:g} cells; {routing} is computed here on square "
            "cells only.",
            fix="Resample to square cells (raster.reproject with one resolution), or use routing 'd8'.",
        )


@contextlib.contextmanager
def scratch(ctx: OperationContext, ds: DatasetReader, dst: Path, data: np.ndarray) -> Iterator[Any]:
    """``data`` (NaN = nodata) on the grid of ``ds`` as a library raster, from a file made here."""
    guard = ctx.outputs
    assert guard is not None
    grant = guard.begin(ctx.workspace.relative(dst))
    tmp = ctx.workspace.root / grant.tmp
    try:
        profile = {
            "driver": "GTiff",
            "width": ds.width,
            "height": ds.height,
            "count": 1,
            "dtype": "float64",
            "transform": ds.transform,
            "nodata": SCRATCH_NODATA,
        }
        with guard.limit(grant), rasterio.open(tmp, "w", **profile) as out:
            out.write(np.where(np.isnan(data), SCRATCH_NODATA, data).astype("float64"), 1)
        with _lock:
            raster = _wbe().read_raster(str(tmp))
            try:
                yield raster
            finally:
                _wbe().remove_raster_from_memory(raster)
    finally:
        guard.abort(grant)


def run(tool: str, valid: np.ndarray, **args: Any) -> np.ndarray:
    """Run hydrology ``tool`` (keyword arguments only) and return its result as float64, NaN off ``valid``.

    Called inside :func:`scratch` (which holds the lock: the library's raster store is process-wide).
    """
    wbe = _wbe()
    result = getattr(wbe.hydrology, tool)(**args)
    try:
        values = np.asarray(result.to_numpy(dtype="float64"), dtype="float64")
        nodata = result.metadata().nodata
    finally:
        wbe.remove_raster_from_memory(result)
    if values.shape != valid.shape:
        raise RuntimeError(f"whitebox {tool} returned a {values.shape} grid for a {valid.shape} input")
    return np.where(valid & (values != nodata), values, np.nan)
