"""Hydrology with ``--engine dask``: routing needs the whole grid in one process, so it runs in the
process that runs the operation (an engine worker), whose memory sets the cell limit; its answers
equal the local engine's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llmc_mcp.operations import OperationContext
from tests.engines.same import run_on_both
from tests.rasters import write


@pytest.fixture
def dem(workspace_dir: Path) -> str:
    rows, cols = np.mgrid[0:700, 0:600].astype("float32")
    z = (1000 - rows * 0.4 + np.abs(cols - 300) * 0.2 + np.sin(rows / 15) * 3).astype("float32")
    z[100:104, 200:204] = 900  # a pit
    write(workspace_dir / "dem.tif", z, nodata=-9999, block=256)
    return "dem.tif"


def test_flow_directions_on_dask_equal_local(
    ctx: OperationContext, dask_ctx: OperationContext, dem: str
) -> None:
    """Guards against a routing step that cannot run on the Dask engine (its write loop shipping the
    routed grid to the cluster), or whose grid differs from the local engine's. Conditioning and
    accumulation write through the same grid writer."""
    run_on_both(ctx, dask_ctx, "hydrology.flow_direction", dem=dem, dst="d8.tif")
