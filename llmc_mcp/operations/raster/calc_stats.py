"""``raster.calc_stats``: the statistics of a band-math expression, computed window by window and never
written.

An agent that wants the mean NDVI of a scene, or its percentiles, would otherwise write the NDVI with
``raster.calc`` and read it back with ``raster.stats``: the expression's values compressed, written,
decoded and read twice. Here the two steps are one call: each window of the inputs is evaluated as
``raster.calc`` evaluates it (:class:`~.calc_evaluation.WindowProgram`, the same checks, scale and
offset, nodata rules and cast to ``dtype``) and counted as ``raster.stats`` counts a band
(:func:`~.stats.accumulate`, the same accumulators), over the windows ``raster.stats`` would read from
the file ``raster.calc`` writes, in the same order. So the answer equals ``raster.calc`` then
``raster.stats`` to the bit, without the file. A second pass, when the accumulator needs one (bins
over [min, max] for a float's percentiles), evaluates the expression again: the inputs are read twice,
as the written file would have been.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Annotated

import numexpr
import numpy as np
from pydantic import Field

from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.accumulate import BandAccumulator
from llmc_mcp.operations.raster.calc import (
    OUTPUT_BLOCK,
    CalcDtype,
    CalcInputs,
    Expression,
    Physical,
    bind_inputs,
    calc_note,
    check_expression,
    input_locations,
    output_nodata,
)
from llmc_mcp.operations.raster.calc_evaluation import WindowProgram
from llmc_mcp.operations.raster.models import CalcStatsResult, GeoreferencingChoice
from llmc_mcp.operations.raster.stats import (
    CHUNK_PIXELS,
    Counted,
    HistogramBins,
    Percentiles,
    Read,
    Tally,
    accumulate,
    block_windows,
    check_summary,
    requested_only,
)


@operation("raster", read_only=True)
def calc_stats(
    ctx: OperationContext,
    expression: Expression,
    inputs: CalcInputs,
    dtype: Annotated[
        CalcDtype,
        Field(description="Type the values are cast to before they are counted, as raster.calc writes them."),
    ] = "float32",
    nodata: Annotated[
        float | None,
        Field(description="Nodata value as raster.calc's; default NaN for floats. Integer types need one."),
    ] = None,
    physical: Physical = True,
    percentiles: Percentiles = [2.0, 25.0, 50.0, 75.0, 98.0],  # noqa: B006  # the stub shows it; validation copies it
    histogram_bins: HistogramBins = None,
    georeferencing: GeoreferencingChoice = None,
) -> CalcStatsResult:
    """Statistics of a band-math expression without writing it: raster.calc then raster.stats in one call.

    Takes raster.calc's ``expression``, ``inputs``, ``dtype``, ``nodata`` and ``physical`` (same
    allowlist, same one-grid rule, same nodata: a cell nodata in any input, or not finite, is not
    counted) and raster.stats' ``percentiles`` and ``histogram_bins``; answers as raster.stats answers
    for the band raster.calc would write (min, max, mean, std, counts, percentiles, histogram), equal
    to calc then stats to the bit, with nothing written: use it for a summary (mean NDVI, the 98th
    percentile of a difference) when the raster itself is not needed. Streams over windows of ~1 M
    cells; a float's percentiles take a second pass, which evaluates the expression again.

    Errors (ApiError, by e.type): as raster.calc's (expression, inputs, dtype, nodata, grids) and
    raster.stats' (percentiles, histogram_bins).
    """
    out_dtype = np.dtype(dtype)
    specs, program = check_expression(expression, inputs)
    out_nodata = output_nodata(out_dtype, nodata)
    wanted = check_summary(percentiles, histogram_bins)
    computed = list(wanted)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        bound = bind_inputs(
            ctx, stack, specs, input_locations(ctx, specs), physical, georeferencing or "refuse"
        )
        first = bound[0].dataset
        evaluation = WindowProgram.prepare(program, bound, physical, out_dtype, out_nodata)
        numexpr.set_num_threads(max(1, ctx.num_threads))
        # The windows raster.stats reads from raster.calc's output (512 x 512 tiles), so the moments
        # are merged in the same order and agree to the bit.
        windows = list(block_windows(first.width, first.height, (OUTPUT_BLOCK, OUTPUT_BLOCK), CHUNK_PIXELS))
        reads: list[Read] = [(window, None) for window in windows]
        accumulator = BandAccumulator(out_dtype, bool(computed), histogram_bins)
        accumulate(ctx.engine, reads, {1: accumulator}, lambda tallies: ExpressionTally(evaluation, tallies))
    stored = accumulator.result(1, computed, histogram_bins)
    method = (
        f"Exact: the expression evaluated in {len(windows)} window(s) of at most ~{CHUNK_PIXELS} cells, each "
        f"value cast to {out_dtype.name} and counted as raster.stats counts a band; nothing was written. "
        f"Mean/std: {accumulator.mean_method}."
    )
    if wanted:
        method += f" Percentiles: {accumulator.percentile_method}."
    return CalcStatsResult(
        expression=program,
        physical=physical,
        inputs=[b.used for b in bound],
        dtype=out_dtype.name,
        stats=requested_only(stored, wanted, 1.0, 0.0),
        method=method,
        note=calc_note(bound, physical, out_dtype, kept="counted"),
    )


@dataclass(frozen=True)
class ExpressionTally:
    """One pass's work on one window, wherever the engine runs it: the expression evaluated there and its
    valid values counted; what it counted comes back, never the values."""

    evaluation: WindowProgram
    tallies: dict[int, Tally]

    def __call__(self, piece: tuple[Read, int]) -> Counted:
        (window, _), band = piece
        assert window is not None  # every read of an expression is a window, never a decimated read
        values, valid = self.evaluation.evaluate(window)
        return self.tallies[band].count(values, valid)
