"""raster.calc and raster.reclassify on the Dask engine: the same windows give the same cells and counts.

Every raster is larger than one window of these operations (512 x 2048), 1100 x 2200 here, so pieces
meet along rows and columns; nodata holes straddle those edges. calc reads two inputs from two files
(each piece opens both where it runs), with the classic traps: nodata in each, a declared scale and
offset, NaN, an integer output whose range some results leave. reclassify gets class codes with values
no rule matches, and a scaled band matched in physical units.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio

from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import OperationContext, get_operation
from tests.engines.same import run_on_both
from tests.rasters import write

ROWS, COLS = 1100, 2200
"""Three rows of windows by two columns: edges at rows 512 and 1024 and at column 2048."""

EDGE = (slice(505, 520), slice(2040, 2056))
"""A hole across the corner where four windows meet."""


@pytest.fixture
def two_files(workspace_dir: Path) -> list[dict[str, object]]:
    """``a``: uint16 counts with nodata 0 and a declared scale and offset; ``b``, in another file:
    float32 with nodata -9999 (in a different hole), a few NaN cells and its own scale and offset."""
    rows, cols = np.mgrid[0:ROWS, 0:COLS]
    a = (1000 + (rows * 7 + cols * 3) % 3000).astype(np.uint16)
    a[EDGE] = 0
    a[1020:1030, :40] = 0
    write(workspace_dir / "a.tif", a, nodata=0, scales=(0.0001,), offsets=(-0.05,), block=256)
    b = (0.2 + 0.3 * np.sin(cols / 300.0) * np.cos(rows / 200.0) ** 2).astype(np.float32)
    b[300:310, 2045:2052] = -9999
    b[600, 100:110] = np.nan
    write(workspace_dir / "b.tif", b, nodata=-9999, scales=(2.0,), offsets=(0.1,), block=256)
    return [{"name": "a", "path": "a.tif"}, {"name": "b", "path": "b.tif"}]


def test_calc_of_two_files_with_nodata_and_scale_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, two_files: list[dict[str, object]]
):
    """Guards against a piece that reads one file only, drops a mask or a NaN, or loses the folded
    scale and offset when the program is pickled to a worker."""
    left, _ = run_on_both(ctx, dask_ctx, "raster.calc", expression="(a - b) / (a + b)", inputs=two_files)
    assert left.physical and all(used.applied for used in left.inputs)
    assert left.nodata_count >= 15 * 16 + 10 * 40 + 10 * 7 + 10
    assert left.valid_count + left.nodata_count == ROWS * COLS


def test_calc_stats_of_two_files_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, two_files: list[dict[str, object]]
):
    """Guards against a fused summary that counts other windows, or folds them in another order, when
    its pieces run on workers: they send back counts, never values."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.calc_stats", dst=None, expression="(a - b) / (a + b)", inputs=two_files,
        percentiles=[5, 50, 95], histogram_bins=9,
    )  # fmt: skip
    assert left.stats.valid_count + left.stats.nodata_count == ROWS * COLS


def test_calc_of_stored_values_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, two_files: list[dict[str, object]]
):
    """Guards against physical=False not reaching the worker (scale and offset applied anyway)."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.calc", expression="a - b * 1000", inputs=two_files, physical=False
    )
    assert not any(used.applied for used in left.inputs)


def test_calc_integer_output_with_nodata_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, two_files: list[dict[str, object]]
):
    """Guards against rounding, the range check (results below 0 do not fit uint8) or the nodata fill
    differing between a worker's pieces and the local ones."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.calc", expression="a * 1000 - 100 + b", inputs=two_files,
        dtype="uint8", nodata=255,
    )  # fmt: skip
    holes = 15 * 16 + 10 * 40 + 10 * 7 + 10
    assert left.nodata_count > holes  # the negative results too
    assert left.valid_count > 0


def test_calc_of_integer_bands_works_in_float64_on_both_engines(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against integer bands handed to numexpr as stored (no float64 copy is made of them) being
    computed in numexpr's int32: ``a * a * a`` of uint16 values past 1290 would overflow there."""
    rows, cols = np.mgrid[0:ROWS, 0:COLS]
    a = ((rows * 31 + cols * 17) % 65535).astype(np.uint16)
    write(workspace_dir / "counts.tif", a, block=256)
    inputs = [{"name": "a", "path": "counts.tif"}]
    run_on_both(ctx, dask_ctx, "raster.calc", expression="a * a * a - a", inputs=inputs, dtype="float64")
    with rasterio.open(workspace_dir / "local-out.tif") as out:
        expected = a.astype(np.float64) ** 3 - a
        assert np.array_equal(out.read(1), expected)


def test_calc_refusal_inside_a_piece_is_the_same_on_dask(
    ctx: OperationContext, dask_ctx: OperationContext, two_files: list[dict[str, object]]
):
    """Guards against an error raised in a worker's piece (a result equal to the output's nodata)
    coming back as another error, or naming another window."""
    op = get_operation("raster.calc")
    args = {"expression": "a * 0 + 7", "inputs": two_files[:1], "dtype": "uint8", "nodata": 7}
    refusals = []
    for run_ctx, dst in ((ctx, "local.tif"), (dask_ctx, "dask.tif")):
        with pytest.raises(InvalidArgument) as caught:
            op.run(run_ctx, op.validate({**args, "dst": dst}))
        refusals.append(str(caught.value))
    assert refusals[0] == refusals[1]
    assert "Window(col_off=0, row_off=0" in refusals[0]


@pytest.fixture
def classes(workspace_dir: Path) -> str:
    """Class codes 1..6 and 9, nodata 0 in a hole across the windows' corner and in one column."""
    rng = np.random.default_rng(24)
    codes = rng.choice(np.array([1, 2, 3, 4, 5, 6, 9], dtype=np.uint8), size=(ROWS, COLS))
    codes[EDGE] = 0
    codes[:, 2047] = 0
    write(workspace_dir / "classes.tif", codes, nodata=0, block=256)
    return "classes.tif"


RULES = [
    {"value": 1, "to": 10},
    {"value": 2, "to": 10},
    {"value": 3, "to": 20},
    {"min": 4, "max": 6, "to": 30},
]
"""6 and 9 match no rule."""


def test_reclassify_unmatched_to_nodata_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, classes: str
):
    """Guards against per-window counts (per rule, unmatched, nodata) lost or added twice when they
    come back from workers instead of being added up in the piece."""
    left, _ = run_on_both(ctx, dask_ctx, "raster.reclassify", src=classes, rules=RULES)
    assert left.unmatched_cells > 0
    assert left.nodata_cells == left.unmatched_cells + 15 * 16 + ROWS - 15  # the hole crosses the column
    assert sum(rule.cells for rule in left.rules) + left.nodata_cells == ROWS * COLS


def test_reclassify_with_default_class_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, classes: str
):
    """Guards against the default class or the chosen nodata not reaching the worker."""
    left, _ = run_on_both(
        ctx, dask_ctx, "raster.reclassify", src=classes, rules=RULES, default=99, dst="default.tif"
    )
    assert dict((c.value, c.cells) for c in left.classes)[99] == left.unmatched_cells > 0


def test_reclassify_scaled_band_on_dask_equals_local(
    ctx: OperationContext, dask_ctx: OperationContext, workspace_dir: Path
):
    """Guards against a worker matching rules against stored values when the band declares a scale and
    offset (kelvin stored as hundredths above 200 K)."""
    rows, cols = np.mgrid[0:ROWS, 0:COLS]
    stored = (5000 + (rows * 11 + cols * 13) % 12000).astype(np.uint16)  # 250 K to 370 K
    stored[EDGE] = 65535
    write(workspace_dir / "kelvin.tif", stored, nodata=65535, scales=(0.01,), offsets=(200.0,), block=256)
    rules = [{"max": 273.15, "to": 1}, {"min": 273.15, "max": 300.0, "to": 2}, {"min": 300.0, "to": 3}]
    left, _ = run_on_both(ctx, dask_ctx, "raster.reclassify", src="kelvin.tif", rules=rules)
    assert left.physical
    assert left.nodata_cells == 15 * 16
    assert all(rule.cells > 0 for rule in left.rules)
