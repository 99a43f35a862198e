"""What ``raster.zonal_stats`` keeps per zone, and what each piece of the raster hands back to it.

A piece (a band of rows of a zone raster, a chunk of the raster under polygons) reduces its cells to
per-zone partials where it runs, on any engine; the operation folds the partials in the pieces' order,
so floating sums are added in one order and the local and Dask engines agree to the bit. Moments
(count, sum, mean, min, max, standard deviation) fold from partials exactly in that sense; the
statistics that need each zone's distribution (median, majority, minority, variety) fold from the
(zone, value, weight) pairs, reduced per piece and bounded by :data:`MAX_VALUE_PAIRS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmc_mcp.errors import InvalidArgument

MAX_VALUE_PAIRS = 5_000_000
"""Distinct (zone, value) pairs the zones may produce when median, majority, minority or variety are
asked for: those need each zone's value distribution, which grows with distinct float values."""


@dataclass(frozen=True)
class ValuePairs:
    """Distinct (zone, value) pairs, sorted by zone then value, with the weight of each: cells of a zone
    raster (1 each) or coverage fractions of polygon zones."""

    zones: np.ndarray
    values: np.ndarray
    weights: np.ndarray

    @classmethod
    def of(cls, zones: np.ndarray, values: np.ndarray, weights: np.ndarray) -> ValuePairs:
        """Pairs reduced: equal (zone, value) merged, their weights summed in the order given."""
        order = np.lexsort((values, zones))  # stable: equal pairs keep their order, so sums have one order
        zones, values, weights = zones[order], values[order], weights[order]
        if zones.size == 0:
            return cls(zones, values, weights)
        new = np.ones(zones.size, bool)
        new[1:] = (zones[1:] != zones[:-1]) | (values[1:] != values[:-1])
        starts = np.flatnonzero(new)
        return cls(zones[starts], values[starts], np.add.reduceat(weights, starts))


class Distribution:
    """Each zone's distinct values and their weights, for median, majority, minority and variety.

    A tie for the minority goes to the smallest value. A tie for the majority goes to the smallest value
    on a zone raster and, with ``majority_to_largest``, to the largest as exactextract breaks it for
    polygons: each kind of zone keeps the rule its answers have always followed.
    """

    def __init__(self, *, majority_to_largest: bool = False) -> None:
        self.pairs = ValuePairs(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))
        self.majority_to_largest = majority_to_largest

    def add(self, pairs: ValuePairs) -> None:
        self.pairs = ValuePairs.of(
            np.concatenate([self.pairs.zones, pairs.zones]),
            np.concatenate([self.pairs.values, pairs.values]),
            np.concatenate([self.pairs.weights, pairs.weights]),
        )
        if self.pairs.zones.size > MAX_VALUE_PAIRS:
            raise InvalidArgument(
                f"the zones hold more than {MAX_VALUE_PAIRS:,} distinct (zone, value) pairs; median, "
                "majority, minority and variety need them all in memory.",
                fix="Ask only for count, sum, mean, min, max and stdev, or reclassify the values first.",
            )

    def figures(self, zone: int) -> dict[str, float | None]:
        lo, hi = np.searchsorted(self.pairs.zones, [zone, zone + 1])
        values, weights = self.pairs.values[lo:hi], self.pairs.weights[lo:hi]
        if values.size == 0:
            return {"variety": 0.0}
        # Values are sorted and argmax/argmin return the first: the smallest of tied values.
        majority = (
            values.size - 1 - np.argmax(weights[::-1]) if self.majority_to_largest else np.argmax(weights)
        )
        return {
            "median": _weighted_median(values, weights),
            "majority": float(values[majority]),
            "minority": float(values[np.argmin(weights)]),
            "variety": float(values.size),
        }


# ------------------------------------------------------------------------------------ zone raster


@dataclass(frozen=True)
class ZonePartial:
    """One band of rows of a zone raster, reduced: the zones met, and per zone with valid cells its
    count, sum, mean, squared deviations, min and max (values sorted per zone, as always summed)."""

    seen: np.ndarray
    zones: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    means: np.ndarray
    m2s: np.ndarray
    lows: np.ndarray
    highs: np.ndarray
    pairs: ValuePairs | None

    @classmethod
    def of(cls, all_ids: np.ndarray, ids: np.ndarray, values: np.ndarray, distribution: bool) -> ZonePartial:
        """``all_ids``: the zone of every zoned cell; ``ids``, ``values``: those of the valid ones."""
        order = np.lexsort((values, ids))
        ids, values = ids[order], values[order]
        zones, starts, counts = np.unique(ids, return_index=True, return_counts=True)
        inverse = np.repeat(np.arange(zones.size), counts)
        sums = np.bincount(inverse, values, minlength=zones.size)
        means = sums / np.maximum(counts, 1)
        m2s = np.bincount(inverse, (values - means[inverse]) ** 2, minlength=zones.size)
        lows, highs = values[starts], values[starts + counts - 1]
        pairs = ValuePairs.of(ids, values, np.ones(ids.size)) if distribution else None
        return cls(np.unique(all_ids), zones, counts, sums, means, m2s, lows, highs, pairs)


class Moments:
    """count, sum, mean, min, max and population stdev per zone id, merged band by band.

    Means and squared deviations are merged with Chan et al.'s pairwise formulas (as raster.stats does),
    so the standard deviation stays exact in float64 whatever the number of bands.
    """

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.acc: dict[int, list[float]] = {}  # zone -> [n, sum, mean, m2, min, max]

    def add(self, part: ZonePartial) -> None:
        self.seen.update(part.seen.tolist())
        for i, zone in enumerate(part.zones.tolist()):
            n, total, mean, m2 = (
                float(part.counts[i]),
                float(part.sums[i]),
                float(part.means[i]),
                float(part.m2s[i]),
            )
            low, high = float(part.lows[i]), float(part.highs[i])
            current = self.acc.get(zone)
            if current is None:
                self.acc[zone] = [n, total, mean, m2, low, high]
                continue
            n0, total0, mean0, m20, low0, high0 = current
            delta = mean - mean0
            merged = n0 + n
            current[:] = [
                merged,
                total0 + total,
                mean0 + delta * n / merged,
                m20 + m2 + delta * delta * n0 * n / merged,
                min(low0, low),
                max(high0, high),
            ]

    def zones(self) -> list[int]:
        return sorted(self.seen)

    def figures(self, zone: int) -> dict[str, float | None]:
        current = self.acc.get(zone)
        if current is None:
            return {"count": 0.0, "sum": 0.0, "variety": 0.0}
        n, total, _, m2, low, high = current
        return {
            "count": n,
            "sum": total,
            "mean": total / n,
            "min": low,
            "max": high,
            "stdev": math.sqrt(max(m2, 0.0) / n),
        }


# ---------------------------------------------------------------------------------------- polygons


@dataclass(frozen=True)
class CoveragePartial:
    """One chunk of the raster under polygons, as exactextract summarised it: per zone (by its index)
    with covered valid cells, the coverage-weighted count, sum, variance, min and max (NaN where not
    asked), and the zones' (value, coverage) pairs when the distribution is asked for."""

    zones: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    variances: np.ndarray
    lows: np.ndarray
    highs: np.ndarray
    pairs: ValuePairs | None


class CoverageMoments:
    """Coverage-weighted count, sum, mean, min, max and population stdev of each polygon zone, merged
    chunk by chunk.

    A zone inside one chunk keeps exactextract's own figures bit for bit (mean = sum / count, stdev =
    sqrt(variance), both as exactextract computes them); a zone across chunks merges the chunks'
    variances with Chan et al.'s formulas in the chunks' order.
    """

    def __init__(self, zones: int) -> None:
        self.counts = np.zeros(zones)
        self.sums = np.zeros(zones)
        self.variances = np.zeros(zones)
        self.lows = np.full(zones, np.nan)
        self.highs = np.full(zones, np.nan)

    def add(self, part: CoveragePartial) -> None:
        z = part.zones
        w0, w = self.counts[z], part.counts
        first = w0 == 0
        total = w0 + w
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = part.sums / w - self.sums[z] / w0
            merged = (w0 * self.variances[z] + w * part.variances + delta * delta * w0 * w / total) / total
        self.variances[z] = np.where(first, part.variances, merged)
        self.counts[z] = np.where(first, w, total)
        self.sums[z] = np.where(first, part.sums, self.sums[z] + part.sums)
        self.lows[z] = np.where(first, part.lows, np.fmin(self.lows[z], part.lows))
        self.highs[z] = np.where(first, part.highs, np.fmax(self.highs[z], part.highs))

    def figures(self, zone: int) -> dict[str, float | None]:
        count = float(self.counts[zone])
        if count == 0:
            return {"count": 0.0, "sum": 0.0, "variety": 0.0}
        return {
            "count": count,
            "sum": float(self.sums[zone]),
            "mean": float(self.sums[zone]) / count,
            "min": _finite(self.lows[zone]),
            "max": _finite(self.highs[zone]),
            "stdev": math.sqrt(max(float(self.variances[zone]), 0.0)),
        }


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """exactextract's weighted quantile at 0.5, over sorted distinct values and their weights.

    With n distinct values, s_k = k * w_k + (n - 1) * (w_0 + ... + w_{k-1}) (k from 0) is the position of
    value k on a scale of (n - 1) * sum(w); the median is interpolated at half that scale. Equal
    weights give numpy's median of the distinct values.
    """
    n = values.size
    if n == 1:
        return float(values[0])
    before = np.concatenate([[0.0], np.cumsum(weights)[:-1]])
    positions = np.arange(n) * weights + (n - 1) * before
    target = 0.5 * (n - 1) * float(weights.sum())
    return float(np.interp(target, positions, values))
