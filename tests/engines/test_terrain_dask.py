"""terrain.* on the Dask engine: the same kernels over the same windows give the same cells.

Each DEM is larger than one window (512 x 1024), so pieces meet at window edges, where a halo read
wrong would show; it has nodata holes and a declared scale, two of the classic traps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llmc_mcp.operations import OperationContext
from tests.engines.same import run_on_both
from tests.rasters import write


@pytest.fixture
def dem(workspace_dir: Path) -> str:
    rng = np.random.default_rng(7)
    rows, cols = np.mgrid[0:1300, 0:1100].astype("float32")
    z = (rows * 0.3 + np.sin(cols / 40) * 30 + rng.normal(0, 0.5, rows.shape)).astype("float32")
    z[600:610, 1020:1030] = -9999  # a hole across a window edge
    write(workspace_dir / "dem.tif", z, nodata=-9999, scales=(0.5,), block=256)
    return "dem.tif"


def test_slope_on_dask_equals_local_cell_for_cell(
    ctx: OperationContext, dask_ctx: OperationContext, dem: str
):
    """Guards against a halo or window offset lost when a window is computed in another process."""
    left, _ = run_on_both(ctx, dask_ctx, "terrain.slope", dem=dem, units="percent")
    assert left.nodata_cells > 0


def test_aspect_hillshade_roughness_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, dem: str
):
    """Guards against a kernel's parameters (hillshade's sun, roughness' measure) not reaching a worker."""
    run_on_both(ctx, dask_ctx, "terrain.aspect", dem=dem, dst="aspect.tif")
    run_on_both(ctx, dask_ctx, "terrain.hillshade", dem=dem, dst="shade.tif", azimuth=200.0, altitude=30.0)
    run_on_both(ctx, dask_ctx, "terrain.roughness", dem=dem, dst="tpi.tif", kind="tpi")
