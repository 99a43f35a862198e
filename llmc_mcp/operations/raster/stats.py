"""``raster.stats``: per-band statistics of valid pixels, streamed window by window.

This module decides what to read (every pixel in block-aligned windows of ~1 M pixels, or one
decimated read with ``approx=True``) and what counts as valid; the arithmetic is
:mod:`~llmc_mcp.operations.raster.accumulate`'s. Each (read, band) is a piece (:class:`StatsPiece`)
that returns what it counted, never its pixels, and the counts are folded into the accumulators in the
pieces' order, so every engine (local, Dask) gives the same answer to the bit, percentiles and
histograms included.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.accumulate import FINE_BINS, BandAccumulator, _key
from llmc_mcp.operations.raster.models import BandStats, Histogram, RasterStats, RawStats

CHUNK_PIXELS = 1 << 20
"""Pixels per band read at once by stats (and the pixel budget of approx=True)."""
MAX_HISTOGRAM_BINS = 10_000


Percentiles = Annotated[
    list[float], Field(description="Percentiles to compute, each in [0, 100]; [] for none.")
]
HistogramBins = Annotated[
    int | None,
    Field(description="Also count valid values in this many equal bins over [min, max] (1-10000)."),
]


@operation("raster", read_only=True, inputs=("path",))
def stats(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file.")],
    bands: Annotated[
        list[int] | None, Field(description="Band numbers (1-based) to summarise; default: all bands.")
    ] = None,
    percentiles: Percentiles = [2.0, 25.0, 50.0, 75.0, 98.0],  # noqa: B006  # the stub shows it; validation copies it
    histogram_bins: HistogramBins = None,
    approx: Annotated[
        bool,
        Field(
            description="Summarise a decimated read of at most ~1 M pixels per band (using overviews where "
            "the file has them) instead of every pixel: fast on huge files, but not exact."
        ),
    ] = False,
    physical: Annotated[
        bool,
        Field(
            description="Report bands that declare a scale/offset in physical values (raw * scale + offset), "
            "with the stored-value statistics in 'raw'; False reports stored values only."
        ),
    ] = True,
) -> RasterStats:
    """Per-band statistics of valid pixels: min, max, mean, std, counts, percentiles, optional histogram.

    Valid means not nodata: pixels equal to the band's nodata value, masked by an internal mask or
    alpha band, and (for floating-point bands) NaN or ±Inf are counted in ``nodata_count`` and
    excluded from everything else. Streams over windows of ~1 M pixels, so memory stays flat on any
    file size; mean and std are merged per window in float64 (numerically stable). Percentiles use
    numpy's default linear interpolation and are exact for 8/16-bit integer bands and integer bands
    with a value range under ~1 M; other bands take a second pass through a 65536-bin histogram, so
    a percentile may be off by (max - min) / 65536. ``method`` says which applied. With
    ``approx=True`` the answer describes a decimated sample (``approx`` and ``method`` say so).
    A band that declares a scale or offset (raster.info's ``scales``/``offsets``) is reported in
    physical values, raw * scale + offset, with the stored-value statistics beside them in ``raw``;
    ``physical=False`` reports stored values (``method`` says which).

    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, a percentile outside
    [0, 100] or histogram_bins outside 1..10000; raster_error when pixel data cannot be read (damaged
    file).
    """
    wanted = check_summary(percentiles, histogram_bins)
    # Statistics of the pixels do not depend on where they are: a disagreeing sidecar is not refused.
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing="unchecked") as ds:
        shown = shown_dataset(ctx, ds)
        indexes = check_bands(ds, bands, shown)
        complex_bands = [b for b in indexes if np.dtype(ds.dtypes[b - 1]).kind == "c"]
        if complex_bands:
            raise InvalidArgument(
                f"bands {complex_bands} of '{shown}' are complex-valued: they have no order or percentiles.",
                fix="Summarise the other bands (pass bands=[...]).",
            )
        reads, how, approximate = _plan_reads(ds, approx)
        linear = {b: scale_offset(ds, b) for b in indexes}
        applied = [b for b in indexes if physical and linear[b] != (1.0, 0.0)]
        # A negative scale reverses the order: physical p is stored (100 - p), so that is computed too.
        mirrored = [100.0 - p for p in wanted if any(linear[b][0] < 0 for b in applied)]
        computed = list(dict.fromkeys([*wanted, *mirrored]))
        accumulators = {
            b: BandAccumulator(np.dtype(ds.dtypes[b - 1]), bool(computed), histogram_bins) for b in indexes
        }
        source = SourceRaster.of(ctx, ds, "path", "unchecked")
        accumulate(
            ctx.engine, reads, accumulators, lambda tallies: StatsPiece(source, source.context, tallies)
        )
        results = []
        for b in indexes:
            stored = accumulators[b].result(b, computed, histogram_bins)
            scale, offset = linear[b]
            results.append(
                _apply(stored, wanted, scale, offset)
                if b in applied
                else requested_only(stored, wanted, *linear[b])
            )
        mean_methods = sorted({accumulators[b].mean_method for b in indexes})
        percentile_methods = sorted({accumulators[b].percentile_method for b in indexes if wanted})
    method = how + " Nodata values, mask/alpha-masked pixels and (float bands) NaN/±Inf are excluded."
    method += " Mean/std: " + "; ".join(mean_methods) + "."
    if percentile_methods:
        method += " Percentiles: " + "; ".join(percentile_methods) + "."
    method += _scaling_sentence(indexes, linear, applied, physical)
    return RasterStats(path=shown, bands=results, approx=approximate, method=method)


def requested_only(stored: BandStats, wanted: list[float], scale: float, offset: float) -> BandStats:
    """Stored-value statistics as the answer (nothing to apply, or physical=False): requested keys only."""
    keys = {_key(p) for p in wanted}
    percentiles = {k: v for k, v in stored.percentiles.items() if k in keys}
    return stored.model_copy(update={"percentiles": percentiles, "scale": scale, "offset": offset})


def _apply(stored: BandStats, wanted: list[float], scale: float, offset: float) -> BandStats:
    """Physical statistics from stored ones: every figure is a linear map of the stored figure.

    min/max/mean/percentiles map through raw * scale + offset (a negative scale swaps min and max and
    turns percentile p into stored percentile 100 - p); std scales by |scale|; counts are unchanged.
    """

    def f(value: float | None) -> float | None:
        return None if value is None else value * scale + offset

    raw_percentiles = {_key(p): stored.percentiles[_key(p)] for p in wanted if _key(p) in stored.percentiles}
    source = {p: (100.0 - p if scale < 0 else p) for p in wanted}
    percentiles = {
        _key(p): f(stored.percentiles[_key(q)]) for p, q in source.items() if _key(q) in stored.percentiles
    }
    low, high = f(stored.min), f(stored.max)
    if scale < 0:
        low, high = high, low
    histogram = stored.histogram
    if histogram is not None:
        edges = [e * scale + offset for e in histogram.edges]
        counts = list(histogram.counts)
        if scale < 0:
            edges, counts = edges[::-1], counts[::-1]
        histogram = Histogram(edges=edges, counts=counts)
    raw = RawStats(
        min=stored.min, max=stored.max, mean=stored.mean, std=stored.std, percentiles=raw_percentiles
    )
    return stored.model_copy(
        update={
            "min": low,
            "max": high,
            "mean": f(stored.mean),
            "std": None if stored.std is None else stored.std * abs(scale),
            "percentiles": percentiles,
            "histogram": histogram,
            "scale": scale,
            "offset": offset,
            "raw": raw,
        }
    )


def _scaling_sentence(
    indexes: list[int], linear: dict[int, tuple[float, float]], applied: list[int], physical: bool
) -> str:
    declared = [b for b in indexes if linear[b] != (1.0, 0.0)]
    if not declared:
        return ""
    forms = ", ".join(f"band {b} = raw * {linear[b][0]:g} + {linear[b][1]:g}" for b in declared)
    if applied:
        return f" Physical values: scale and offset applied ({forms}); stored-value statistics in 'raw'."
    return f" physical=False: stored values, although the bands declare scale/offset ({forms})."


def accumulate(
    engine: Engine,
    reads: Sequence[Read],
    accumulators: Mapping[int, BandAccumulator],
    piece: Callable[[dict[int, Tally]], Callable[[tuple[Read, int]], Counted]],
) -> None:
    """Every (read, band) counted into its band's accumulator: a first pass, then a second for the bands
    whose accumulator asks for one (bins over the first pass's [min, max]), each folded in the pieces'
    order. ``piece(tallies)`` is what one pass runs on each (read, band): it counts the band's valid
    values there as ``tallies[band]`` says, wherever the engine runs it."""
    bands = list(accumulators)
    first = piece({b: Tally.first(accumulators[b]) for b in bands})
    for (_, b), counted in engine.map([(read, b) for read in reads for b in bands], first):
        counted.fold_first(accumulators[b])
    second = [b for b in bands if accumulators[b].begin_second()]
    if second:
        again = piece({b: Tally.second(accumulators[b]) for b in second})
        for (_, b), counted in engine.map([(read, b) for read in reads for b in second], again):
            counted.fold_second(accumulators[b])


def check_summary(percentiles: Sequence[float], histogram_bins: int | None) -> list[float]:
    """The percentiles asked for, each once, after checking them and the histogram's bin count."""
    bad = [p for p in percentiles if not (math.isfinite(p) and 0 <= p <= 100)]
    if bad:
        raise InvalidArgument(
            f"percentiles {bad} are outside [0, 100].",
            fix="Pass values such as [5, 50, 95] (50 is the median).",
        )
    if histogram_bins is not None and not 1 <= histogram_bins <= MAX_HISTOGRAM_BINS:
        raise InvalidArgument(
            f"histogram_bins={histogram_bins} is outside 1..{MAX_HISTOGRAM_BINS}.",
            fix="Pass a bin count such as 256, or null for no histogram.",
        )
    return list(dict.fromkeys(float(p) for p in percentiles))


def check_bands(ds: DatasetReader, bands: Sequence[int] | None, shown: str) -> list[int]:
    if bands is None:
        return list(ds.indexes)
    if not bands:
        raise InvalidArgument("bands is an empty list.", fix="Omit bands (null) for all bands, or list some.")
    bad = [b for b in bands if not 1 <= b <= ds.count]
    if bad:
        raise InvalidArgument(
            f"bands {bad} do not exist in '{shown}', which has {ds.count} band(s).",
            fix=f"Band numbers start at 1: pass values in 1..{ds.count}.",
        )
    if len(set(bands)) != len(bands):
        raise InvalidArgument(f"bands {list(bands)} lists a band twice.", fix="List each band once.")
    return list(bands)


Read = tuple[Window | None, tuple[int, int] | None]


def _plan_reads(ds: DatasetReader, approx: bool) -> tuple[list[Read], str, bool]:
    """The windows (or the single decimated read) to make, a sentence saying so, and whether it samples."""
    pixels = ds.width * ds.height
    if approx:
        factor = math.ceil(math.sqrt(pixels / CHUNK_PIXELS))
        if factor > 1:
            shape = (math.ceil(ds.height / factor), math.ceil(ds.width / factor))
            overviews = ds.overviews(1)
            source = (
                f"GDAL served it from the file's overviews {overviews} where one fits"
                if overviews
                else "the file has no overviews, so GDAL subsampled the full-resolution pixels"
            )
            how = (
                f"Approximate: a 1/{factor} nearest-neighbour decimated read of {shape[1]}x{shape[0]} pixels "
                f"per band instead of {ds.width}x{ds.height} ({source}); all figures describe that sample."
            )
            return [(None, shape)], how, True
    every = list(windows(ds, CHUNK_PIXELS))
    how = f"Exact: every pixel read in {len(every)} window(s) of at most ~{CHUNK_PIXELS} pixels."
    if approx:
        how += " (approx=True had nothing to save: the raster is already this small.)"
    return [(w, None) for w in every], how, False


def windows(ds: DatasetReader, pixels: int) -> Iterator[Window]:
    """Windows of about ``pixels``, aligned to the blocks of ``ds``'s first band (:func:`block_windows`)."""
    return block_windows(ds.width, ds.height, ds.block_shapes[0], pixels)


def block_windows(width: int, height: int, block: tuple[int, int], pixels: int) -> Iterator[Window]:
    """Windows of about ``pixels``, aligned to blocks of ``block`` (rows, columns) where blocks are smaller.

    Alignment lets each block be decoded once per pass; a block larger than the budget is read in
    several windows (GDAL's block cache decodes it once) rather than blowing the budget.
    """
    block_h, block_w = block
    if block_w >= width:
        cols = min(width, pixels)
    else:
        cols = min(width, pixels, max(1, math.isqrt(pixels) // block_w) * block_w)
    rows_fit = max(1, pixels // cols)
    rows = min(height, (rows_fit // block_h) * block_h or rows_fit)
    for row in range(0, height, rows):
        for col in range(0, width, cols):
            yield Window(col, row, min(cols, width - col), min(rows, height - row))


# ------------------------------------------------------------------------------------ pieces


@dataclass(frozen=True)
class Tally:
    """What a piece counts of one band's valid values in one pass, as the band's accumulator asks.

    ``counts``: exact value counts over [offset, offset + size); ``moments``: count, mean, squared
    deviations, min and max; ``fine`` and ``histogram``: bin counts over the first pass's [min, max].
    """

    counts: tuple[int, int] | None = None
    moments: bool = False
    fine: tuple[float, float] | None = None
    histogram: tuple[float, float, int] | None = None

    @classmethod
    def first(cls, acc: BandAccumulator) -> Tally:
        if acc.counts is not None:
            return cls(counts=(acc.counts.offset, acc.counts.counts.size))
        return cls(moments=True)

    @classmethod
    def second(cls, acc: BandAccumulator) -> Tally:
        """After ``acc.begin_second()``: what its ``second`` would add, as :meth:`Counted.fold_second`
        adds it."""
        if acc.counts is not None:
            return cls(counts=(acc.counts.offset, acc.counts.counts.size))
        lo, hi = acc.moments.lo, acc.moments.hi
        return cls(
            fine=(lo, hi) if acc.fine is not None and hi > lo else None,
            histogram=(lo, hi, acc.histogram.size) if acc.histogram is not None else None,
        )

    def count(self, raw: np.ndarray, valid: np.ndarray) -> Counted:
        """The accumulator's own arithmetic on a window's ``valid`` values, kept as a result instead of
        added to the accumulator (squared deviations summed without BLAS, the same on every engine).
        A window whose values are all valid is counted in place, not copied."""
        kept = int(np.count_nonzero(valid))
        excluded = valid.size - kept
        values = raw.reshape(-1) if excluded == 0 else raw[valid]
        if not values.size:
            return Counted(excluded)
        present = tallied = moments = fine = histogram = None
        if self.counts is not None:
            offset, size = self.counts
            index = values if offset == 0 else values.astype(np.int64) - offset
            every = np.bincount(index, minlength=size)
            present = np.flatnonzero(every)
            tallied = every[present]
        if self.moments:
            v = values.astype(np.float64, copy=False)
            mean = float(v.mean())
            # numpy's pairwise sum, not a BLAS dot product: BLAS splits a long dot product among its
            # threads, and a Dask worker runs BLAS on one, so the last bits would differ by engine.
            deviations = v - mean
            m2 = float(np.square(deviations, out=deviations).sum())
            moments = (int(v.size), mean, m2, float(values.min()), float(values.max()))
        if self.fine is not None:
            fine = np.histogram(values, bins=FINE_BINS, range=self.fine)[0]
        if self.histogram is not None:
            lo, hi, bins = self.histogram
            histogram = np.histogram(values, bins=bins, range=(lo, hi))[0]
        return Counted(excluded, present, tallied, moments, fine, histogram)


@dataclass(frozen=True)
class Counted:
    """What one piece counted, folded into its band's accumulator in the pieces' order on every engine,
    so floating sums are added in one order and agree to the bit."""

    excluded: int
    present: np.ndarray | None = None
    """Indices (value - offset) of the values counted, and their ``counts``."""
    counts: np.ndarray | None = None
    moments: tuple[int, float, float, float, float] | None = None
    """n, mean, sum of squared deviations, min, max of the piece's values."""
    fine: np.ndarray | None = None
    histogram: np.ndarray | None = None

    def fold_first(self, acc: BandAccumulator) -> None:
        acc.excluded += self.excluded
        self._fold_counts(acc)
        if self.moments is not None:
            _merge_moments(acc, *self.moments)

    def fold_second(self, acc: BandAccumulator) -> None:
        self._fold_counts(acc)
        if self.fine is not None and acc.fine is not None:
            acc.fine += self.fine
        if self.histogram is not None and acc.histogram is not None:
            acc.histogram += self.histogram

    def _fold_counts(self, acc: BandAccumulator) -> None:
        if self.present is not None and acc.counts is not None:
            acc.counts.counts[self.present] += self.counts


def _merge_moments(acc: BandAccumulator, n_b: int, mean_b: float, m2_b: float, lo: float, hi: float) -> None:
    """The merge of the accumulator's moments with a piece's, operation for operation as its own
    ``add`` does it after computing them from values (Chan et al.)."""
    m = acc.moments
    n = m.n + n_b
    delta = mean_b - m.mean
    m.mean += delta * n_b / n
    m.m2 += m2_b + delta * delta * m.n * n_b / n
    m.n = n
    m.lo = min(m.lo, lo)
    m.hi = max(m.hi, hi)


@dataclass(frozen=True)
class StatsPiece:
    """One pass's work on one (read, band), wherever the engine runs it: the raster by its checked path
    and what to count of each band. It returns what it counted, never the pixels, so a piece run on a
    Dask worker sends back counts and moments, and the caller folds them in order."""

    source: SourceRaster
    ctx: PieceContext
    tallies: dict[int, Tally]

    def __call__(self, piece: tuple[Read, int]) -> Counted:
        (window, shape), band = piece
        raw, valid = read_valid(self.ctx, self.source.dataset(), band, window, shape)
        return self.tallies[band].count(raw, valid)
