"""raster.calc_stats: the statistics of an expression that is never written equal raster.calc then
raster.stats to the bit, on paper-worked values and on the classic traps (nodata in one input, a declared
scale and offset, integer outputs, several windows), and leave nothing behind."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from affine import Affine

from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.operations import OperationContext, get_operation
from tests.rasters import write

CALC = get_operation("raster.calc")
STATS = get_operation("raster.stats")
CALC_STATS = get_operation("raster.calc_stats")
# The package exports the Operations; the modules hold the window size.
stats_module = importlib.import_module("llmc_mcp.operations.raster.stats")
calc_stats_module = importlib.import_module("llmc_mcp.operations.raster.calc_stats")


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def calc_then_stats(ctx: OperationContext, dst: str, percentiles: list[float], **args: Any) -> dict[str, Any]:
    """What an agent got before: the expression written by raster.calc, read back by raster.stats."""
    call(CALC, ctx, dst=dst, **args)
    band = call(STATS, ctx, path=dst, percentiles=percentiles, histogram_bins=7).bands[0]
    return band.model_dump()


@pytest.fixture
def scenes(workspace_dir: Path) -> list[dict[str, Any]]:
    """Two bands of 1100 x 1300 (more than one ~1 M-cell window), red with a nodata hole and nir with a
    declared scale and offset (reflectance stored as integers)."""
    rng = np.random.default_rng(5)
    red = rng.integers(200, 3000, (1100, 1300)).astype("uint16")
    red[400:420, 600:650] = 0
    nir = rng.integers(2000, 6000, (1100, 1300)).astype("uint16")
    write(workspace_dir / "red.tif", red, nodata=0, block=256)
    write(workspace_dir / "nir.tif", nir, scales=(0.0001,), offsets=(-0.1,), block=256)
    return [{"name": "red", "path": "red.tif"}, {"name": "nir", "path": "nir.tif"}]


def test_statistics_of_a_written_expression_equal_those_never_written_to_the_bit(
    ctx: OperationContext, scenes: list[dict[str, Any]]
):
    """Guards against a fused summary that differs from calc then stats (other windows, another fold
    order, values counted before the cast to float32, the nodata hole counted)."""
    expression = "(nir - red * 0.0001) / (nir + red * 0.0001)"
    before = calc_then_stats(ctx, "ndvi.tif", [2, 50, 98], expression=expression, inputs=scenes)
    fused = call(
        CALC_STATS, ctx, expression=expression, inputs=scenes, percentiles=[2, 50, 98], histogram_bins=7
    )
    assert fused.stats.model_dump() == before
    assert fused.stats.nodata_count == 20 * 50
    assert fused.inputs[1].applied and fused.inputs[1].scale == 0.0001


def test_integer_statistics_equal_calc_then_stats_and_skip_the_nodata_value(
    ctx: OperationContext, scenes: list[dict[str, Any]]
):
    """Guards against integer results counted before rounding, or the output's nodata counted as a class."""
    args = {"expression": "floor(red / 1000)", "inputs": scenes[:1], "dtype": "uint8", "nodata": 255}
    before = calc_then_stats(ctx, "classes.tif", [50], **args)
    fused = call(CALC_STATS, ctx, percentiles=[50], histogram_bins=7, **args)
    assert fused.stats.model_dump() == before
    assert fused.dtype == "uint8" and fused.stats.max == 2


def test_a_small_expression_has_the_statistics_worked_on_paper(ctx: OperationContext, workspace_dir: Path):
    """Guards against off-by-one windows or a dropped cell: 2a + 1 over a = 0..11 is 1, 3, ..., 23."""
    write(workspace_dir / "a.tif", np.arange(12, dtype="int16").reshape(3, 4))
    result = call(
        CALC_STATS,
        ctx,
        expression="2 * a + 1",
        inputs=[{"name": "a", "path": "a.tif"}],
        percentiles=[0, 50, 100],
    )
    stats = result.stats
    assert (stats.min, stats.max, stats.mean, stats.valid_count) == (1.0, 23.0, 12.0, 12)
    assert stats.std == pytest.approx(np.std(np.arange(1, 24, 2)))
    assert stats.percentiles["p0"] == 1.0 and stats.percentiles["p100"] == 23.0
    assert stats.percentiles["p50"] == pytest.approx(12.0, abs=22 / 65536)


def test_many_windows_fold_in_stats_order(
    ctx: OperationContext, scenes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
):
    """Guards against a fused summary whose windows are not raster.stats' windows over the written file:
    with windows of ~4 k cells (hundreds of them), the moments still agree to the bit."""
    monkeypatch.setattr(stats_module, "CHUNK_PIXELS", 4096)
    monkeypatch.setattr(calc_stats_module, "CHUNK_PIXELS", 4096)
    before = calc_then_stats(ctx, "sum.tif", [25], expression="red + nir", inputs=scenes)
    fused = call(CALC_STATS, ctx, expression="red + nir", inputs=scenes, percentiles=[25], histogram_bins=7)
    assert fused.stats.model_dump() == before
    assert "window(s)" in fused.method and "nothing was written" in fused.method


def test_nothing_is_written(ctx: OperationContext, scenes: list[dict[str, Any]], workspace_dir: Path):
    """Guards against a summary that leaves an intermediate raster (or its temporary file) behind."""
    before = sorted(p.relative_to(workspace_dir) for p in workspace_dir.rglob("*"))
    call(CALC_STATS, ctx, expression="red * 2", inputs=scenes[:1])
    assert sorted(p.relative_to(workspace_dir) for p in workspace_dir.rglob("*")) == before


def test_refusals_are_calcs_and_stats(
    ctx: OperationContext, scenes: list[dict[str, Any]], workspace_dir: Path
):
    """Guards against the fused operation skipping a check either operation makes."""
    with pytest.raises(InvalidArgument, match="Allowed"):
        call(CALC_STATS, ctx, expression="__import__('os')", inputs=scenes[:1])
    with pytest.raises(InvalidArgument, match="outside"):
        call(CALC_STATS, ctx, expression="red", inputs=scenes[:1], percentiles=[101])
    with pytest.raises(InvalidArgument, match="nodata"):
        call(CALC_STATS, ctx, expression="red", inputs=scenes[:1], dtype="uint8")
    moved = Affine(10.0, 0.0, 500_050.0, 0.0, -10.0, 4_500_000.0)  # NORTH_UP five cells east
    write(workspace_dir / "moved.tif", np.zeros((1100, 1300), "uint16"), transform=moved)
    with pytest.raises(Refused, match="one grid"):
        call(CALC_STATS, ctx, expression="red + m", inputs=[*scenes[:1], {"name": "m", "path": "moved.tif"}])
