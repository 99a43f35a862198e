"""Comparing one operation run on each engine: outputs cell by cell, results field by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from pydantic import BaseModel

from llmc_mcp.operations import OperationContext, get_operation

PATH_FIELDS = frozenset({"path", "output", "dst", "provenance", "record", "written_at", "finished_at"})


def assert_same_raster(a: Path, b: Path) -> None:
    """Same grid, type, nodata and every cell (NaN equal to NaN), band by band."""
    with rasterio.open(a) as left, rasterio.open(b) as right:
        assert (left.count, left.width, left.height) == (right.count, right.width, right.height)
        assert left.dtypes == right.dtypes
        assert left.transform == right.transform
        assert left.crs == right.crs
        assert str(left.nodatavals) == str(right.nodatavals)  # NaN nodata is equal to itself here
        for band in range(1, left.count + 1):
            x, y = left.read(band), right.read(band)
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"band {band} differs"
            assert np.array_equal(left.read_masks(band), right.read_masks(band)), f"mask {band} differs"


def plain(result: BaseModel | dict[str, Any]) -> Any:
    """A result without what names its own output (paths, records, times)."""
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    return _strip(data)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in PATH_FIELDS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def run_on_both(
    local: OperationContext,
    dask: OperationContext,
    operation: str,
    *,
    dst: str | None = "out.tif",
    **args: Any,
) -> tuple[Any, Any]:
    """The catalog's ``operation`` with ``args`` on each engine (its work only, not the gate), writing
    ``local-<dst>`` and ``dask-<dst>``; asserts equal outputs and results; returns both results."""
    op = get_operation(operation)

    def run(ctx: OperationContext, prefix: str) -> Any:
        given = dict(args) if dst is None else {**args, "dst": f"{prefix}-{dst}"}
        return op.run(ctx, op.validate(given))

    left, right = run(local, "local"), run(dask, "dask")
    if dst is not None:
        root = local.workspace.root
        assert_same_raster(root / f"local-{dst}", root / f"dask-{dst}")
    assert plain(left) == plain(right)
    return left, right
