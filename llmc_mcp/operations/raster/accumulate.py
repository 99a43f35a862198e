"""Streaming per-band statistics: feed windows of valid values, get exact or bounded-error answers.

``raster.stats`` reads a band window by window and hands each window's valid values to a
:class:`BandAccumulator`, so memory stays flat on any raster size. Small integer types are counted
value by value (exact everything). Other types keep merged moments (Chan et al., float64) in a
first pass; when percentiles or a histogram are asked for, a second pass over the same reads
either counts values exactly (integer bands with a narrow range) or fills a 65536-bin histogram
over [min, max]. Percentiles follow numpy's default linear interpolation bit for bit where exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmc_mcp.operations.raster.models import BandStats, Histogram

FINE_BINS = 1 << 16
EXACT_RANGE = 1 << 20
"""Integer rasters whose value range is at most this wide get exact percentiles by counting."""

_COUNTABLE = frozenset({"uint8", "int8", "uint16", "int16"})


class _Counts:
    """Exact value counts of an integer band over [offset, offset + size)."""

    def __init__(self, offset: int, size: int):
        self.offset = offset
        self.counts = np.zeros(size, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        if values.size:
            index = values if self.offset == 0 else values.astype(np.int64) - self.offset
            self.counts += np.bincount(index, minlength=self.counts.size)

    def values_and_counts(self) -> tuple[np.ndarray, np.ndarray]:
        present = np.flatnonzero(self.counts)
        return present.astype(np.int64) + self.offset, self.counts[present]


@dataclass
class _Moments:
    """Streaming count/mean/M2/min/max, merged per window (Chan et al.) in float64."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf

    def add(self, values: np.ndarray) -> None:
        if not values.size:
            return
        v = values.astype(np.float64, copy=False)
        n_b = int(v.size)
        mean_b = float(v.mean())
        centred = v - mean_b
        m2_b = float(centred @ centred)
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        self.lo = min(self.lo, float(values.min()))
        self.hi = max(self.hi, float(values.max()))


class BandAccumulator:
    """Statistics of one band, over one or two passes of the same reads."""

    def __init__(self, dtype: np.dtype, want_percentiles: bool, bins: int | None):
        self.dtype = dtype
        self.want_percentiles = want_percentiles
        self.wants_distribution = want_percentiles or bins is not None
        self.bins = bins
        self.excluded = 0
        self.counts: _Counts | None = None
        self.moments = _Moments()
        self.fine: np.ndarray | None = None
        self.histogram: np.ndarray | None = None
        if dtype.name in _COUNTABLE:
            limits = np.iinfo(dtype)
            self.counts = _Counts(int(limits.min), int(limits.max) - int(limits.min) + 1)
            self.percentile_method = f"exact, from value counts ({dtype.name})"
            self.mean_method = f"from exact value counts ({dtype.name})"
        else:
            self.mean_method = f"per-window moments merged in float64, Chan et al. ({dtype.name})"
            self.percentile_method = (
                f"two passes ({dtype.name}): min/max, then a {FINE_BINS}-bin histogram over [min, max] with "
                f"interpolation inside the bin, off by at most (max - min) / {FINE_BINS}"
            )

    def first(self, values: np.ndarray, excluded: int) -> None:
        self.excluded += excluded
        if self.counts is not None:
            self.counts.add(values)
        else:
            self.moments.add(values)

    def begin_second(self) -> bool:
        """Prepare the second pass; False when none is needed."""
        if self.counts is not None or not self.wants_distribution or self.moments.n == 0:
            return False
        lo, hi = self.moments.lo, self.moments.hi
        if self.dtype.kind in "iu" and hi - lo < EXACT_RANGE:
            self.counts = _Counts(int(lo), int(hi - lo) + 1)
            self.percentile_method = f"exact, from value counts in a second pass ({self.dtype.name})"
            return True
        if self.want_percentiles:
            self.fine = np.zeros(FINE_BINS, dtype=np.int64)
        if self.bins is not None:
            self.histogram = np.zeros(self.bins, dtype=np.int64)
        return True

    def second(self, values: np.ndarray) -> None:
        if self.counts is not None:
            self.counts.add(values)
            return
        lo, hi = self.moments.lo, self.moments.hi
        if self.fine is not None and hi > lo:
            self.fine += np.histogram(values, bins=FINE_BINS, range=(lo, hi))[0]
        if self.histogram is not None:
            self.histogram += np.histogram(values, bins=self.bins, range=(lo, hi))[0]

    def result(self, band: int, percentiles: list[float], bins: int | None) -> BandStats:
        if self.counts is not None and self.moments.n == 0:
            return self._from_counts(band, percentiles, bins)
        m = self.moments
        if m.n == 0:
            return self._empty(band, bins)
        if self.counts is not None:
            # Second-pass counts: exact percentiles and histogram; moments still come from pass one.
            exact = self._from_counts(band, percentiles, bins)
            return exact.model_copy(update={"mean": m.mean, "std": math.sqrt(m.m2 / m.n)})
        pct = {_key(p): _fine_percentile(self.fine, m.lo, m.hi, m.n, p) for p in percentiles}
        return BandStats(
            band=band,
            min=m.lo,
            max=m.hi,
            mean=m.mean,
            std=math.sqrt(m.m2 / m.n),
            valid_count=m.n,
            nodata_count=self.excluded,
            percentiles=pct,
            histogram=_histogram(self.histogram, m.lo, m.hi, bins) if bins is not None else None,
        )

    def _from_counts(self, band: int, percentiles: list[float], bins: int | None) -> BandStats:
        assert self.counts is not None
        values, counts = self.counts.values_and_counts()
        n = int(counts.sum())
        if n == 0:
            return self._empty(band, bins)
        mean = float((values * counts).sum()) / n
        centred = values - mean
        std = math.sqrt(float((counts * centred * centred).sum()) / n)
        cumulative = np.cumsum(counts)
        pct = {_key(p): _exact_percentile(values, cumulative, n, p) for p in percentiles}
        histogram = None
        if bins is not None:
            lo, hi = float(values[0]), float(values[-1])
            weighted = np.histogram(values, bins=bins, range=(lo, hi), weights=counts)[0]
            histogram = _histogram(np.rint(weighted).astype(np.int64), lo, hi, bins)
        return BandStats(
            band=band,
            min=float(values[0]),
            max=float(values[-1]),
            mean=mean,
            std=std,
            valid_count=n,
            nodata_count=self.excluded,
            percentiles=pct,
            histogram=histogram,
        )

    def _empty(self, band: int, bins: int | None) -> BandStats:
        return BandStats(
            band=band,
            min=None,
            max=None,
            mean=None,
            std=None,
            valid_count=0,
            nodata_count=self.excluded,
            percentiles={},
            histogram=Histogram(edges=[], counts=[]) if bins is not None else None,
        )


def _key(p: float) -> str:
    return f"p{p:g}"


def _lerp(a: float, b: float, t: float) -> float:
    # numpy.percentile's formulation, so exact answers match it to the last bit.
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _exact_percentile(values: np.ndarray, cumulative: np.ndarray, n: int, p: float) -> float:
    h = (n - 1) * (p / 100)
    k = math.floor(h)
    low = float(values[np.searchsorted(cumulative, k, side="right")])
    high = float(values[np.searchsorted(cumulative, min(k + 1, n - 1), side="right")])
    return _lerp(low, high, h - k)


def _fine_percentile(fine: np.ndarray | None, lo: float, hi: float, n: int, p: float) -> float:
    if fine is None or hi <= lo:
        return lo
    cumulative = np.cumsum(fine)
    width = (hi - lo) / fine.size

    def order_statistic(k: int) -> float:
        if k <= 0:
            return lo
        if k >= n - 1:
            return hi
        j = int(np.searchsorted(cumulative, k, side="right"))
        before = int(cumulative[j - 1]) if j else 0
        inside = (k - before + 0.5) / int(fine[j])
        return min(hi, max(lo, lo + (j + inside) * width))

    h = (n - 1) * (p / 100)
    k = math.floor(h)
    return _lerp(order_statistic(k), order_statistic(k + 1), h - k)


def _histogram(counts: np.ndarray | None, lo: float, hi: float, bins: int) -> Histogram:
    # numpy widens a zero-width range to [lo - 0.5, hi + 0.5]; reuse its edges so counts and edges agree.
    edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=(lo, hi))
    return Histogram(
        edges=[float(e) for e in edges],
        counts=[int(c) for c in (counts if counts is not None else np.zeros(bins, np.int64))],
    )
