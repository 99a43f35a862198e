"""The grid checks and scale/offset defaults several namespaces share (compute.grid_checks, compute.scaling):
the texts agents see through raster.area and terrain stay those each operation wrote before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine

from llmc_mcp.compute.grid_checks import check_cell_size, is_rotated
from llmc_mcp.compute.scaling import scale_offset, scales_offsets
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from tests.rasters import write

ROTATED = Affine(10.0, 2.0, 500_000.0, 0.5, -10.0, 4_500_000.0)


def call(name: str, ctx: OperationContext, **args: Any) -> Any:
    op = get_operation(name)
    return op.run(ctx, op.validate(args))


@pytest.mark.parametrize(
    ("transform", "rotated"),
    [
        (Affine(10.0, 0.0, 0.0, 0.0, -10.0, 0.0), False),  # north-up
        (Affine(10.0, 0.0, 0.0, 0.0, 10.0, 0.0), False),  # south-up
        (Affine(-10.0, 0.0, 0.0, 0.0, -10.0, 0.0), False),  # mirrored east-west
        (Affine(10.0, 2.0, 0.0, 0.0, -10.0, 0.0), True),  # sheared
        (Affine(10.0, 0.0, 0.0, 0.5, -10.0, 0.0), True),  # sheared the other way
        (Affine.rotation(30.0) @ Affine.scale(10.0, -10.0), True),
    ],
)
def test_only_a_non_zero_b_or_d_makes_a_grid_rotated(transform: Affine, rotated: bool) -> None:
    """Guards against refusing south-up or mirrored grids, which every operation here handles."""
    assert is_rotated(transform) is rotated


def test_a_zero_cell_size_is_refused() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_cell_size(Affine(0.0, 0.0, 0.0, 0.0, -10.0, 0.0), "z.tif")
    assert caught.value.message == "'z.tif' has a zero cell size in its geotransform."


def test_area_and_terrain_keep_their_own_reasons_for_refusing_a_rotated_grid(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the shared refusal losing what each operation needs of rows and columns."""
    write(workspace_dir / "turned.tif", np.ones((4, 4), "float32"), transform=ROTATED)
    with pytest.raises(InvalidArgument) as area:
        call("raster.area", ctx, path="turned.tif")
    assert area.value.message == (
        "'turned.tif' has a rotated or sheared grid (geotransform b=2, d=0.5); raster.area measures "
        "north-up (or south-up) grids only."
    )
    assert area.value.fix is not None and "'nearest' for classes" in area.value.fix
    with pytest.raises(InvalidArgument) as slope:
        call("terrain.slope", ctx, dem="turned.tif", dst="slope.tif")
    assert slope.value.message == (
        "'turned.tif' has a rotated or sheared grid (geotransform b=2, d=0.5): its rows and columns are "
        "not east-west and north-south, which the 3x3 gradient needs."
    )
    assert slope.value.fix is not None and "'bilinear'" in slope.value.fix


def test_declared_scale_and_offset_are_read_and_undeclared_ones_are_1_and_0(workspace_dir: Path) -> None:
    data = np.ones((2, 3, 3), "int16")
    write(workspace_dir / "scaled.tif", data, scales=(0.5, 1.0), offsets=(-10.0, 0.0))
    with rasterio.open(workspace_dir / "scaled.tif") as ds:
        assert scale_offset(ds, 1) == (0.5, -10.0)
        assert scale_offset(ds, 2) == (1.0, 0.0)
        assert scales_offsets(ds, [2, 1]) == ([1.0, 0.5], [0.0, -10.0])
