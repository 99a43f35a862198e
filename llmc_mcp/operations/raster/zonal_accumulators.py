"""What ``raster.zonal_stats`` keeps per zone while a zone raster is read, a band of rows at a time:
moments (count, sum, min, max, mean, standard deviation) for every zone, and value counts for the
statistics that need the distribution (median, majority, minority, variety)."""

from __future__ import annotations

import math

import numpy as np

from llmc_mcp.errors import InvalidArgument

MAX_VALUE_PAIRS = 5_000_000
"""Distinct (zone, value) pairs a zone raster may produce when median, majority, minority or variety
are asked for: those need each zone's value distribution, which grows with distinct float values."""


class Moments:
    """count, sum, mean, min, max and population stdev per zone, merged window by window.

    Means and squared deviations are merged with Chan et al.'s pairwise formulas (as raster.stats does),
    so the standard deviation stays exact in float64 whatever the number of windows.
    """

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.acc: dict[int, list[float]] = {}  # zone -> [n, sum, mean, m2, min, max]

    def add(self, all_ids: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
        self.seen.update(np.unique(all_ids).tolist())
        if ids.size == 0:
            return
        order = np.lexsort((values, ids))
        ids, values = ids[order], values[order]
        zones, starts, counts = np.unique(ids, return_index=True, return_counts=True)
        inverse = np.repeat(np.arange(zones.size), counts)
        sums = np.bincount(inverse, values)
        means = sums / counts
        m2s = np.bincount(inverse, (values - means[inverse]) ** 2)
        lows, highs = values[starts], values[starts + counts - 1]
        for i, zone in enumerate(zones.tolist()):
            n, total, mean, m2 = float(counts[i]), float(sums[i]), float(means[i]), float(m2s[i])
            current = self.acc.get(zone)
            if current is None:
                self.acc[zone] = [n, total, mean, m2, float(lows[i]), float(highs[i])]
                continue
            n0, total0, mean0, m20, low0, high0 = current
            delta = mean - mean0
            merged = n0 + n
            current[:] = [
                merged,
                total0 + total,
                mean0 + delta * n / merged,
                m20 + m2 + delta * delta * n0 * n / merged,
                min(low0, float(lows[i])),
                max(high0, float(highs[i])),
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


class Distribution:
    """Each zone's distinct values and their cell counts, for median, majority, minority and variety."""

    def __init__(self) -> None:
        self.ids = np.empty(0, np.int64)
        self.values = np.empty(0, np.float64)
        self.counts = np.empty(0, np.int64)

    def add(self, ids: np.ndarray, values: np.ndarray) -> None:
        self.ids, self.values, self.counts = _reduce(
            np.concatenate([self.ids, ids]),
            np.concatenate([self.values, values]),
            np.concatenate([self.counts, np.ones(ids.size, np.int64)]),
        )
        if self.ids.size > MAX_VALUE_PAIRS:
            raise InvalidArgument(
                f"the zones hold more than {MAX_VALUE_PAIRS:,} distinct (zone, value) pairs; median, "
                "majority, minority and variety need them all in memory.",
                fix="Ask only for count, sum, mean, min, max and stdev, or reclassify the values first.",
            )

    def figures(self, zone: int) -> dict[str, float | None]:
        lo, hi = np.searchsorted(self.ids, [zone, zone + 1])
        values, counts = self.values[lo:hi], self.counts[lo:hi].astype(np.float64)
        if values.size == 0:
            return {"variety": 0.0}
        # Ties go to the smallest value (argmax/argmin return the first, values are sorted).
        return {
            "median": _weighted_median(values, counts),
            "majority": float(values[np.argmax(counts)]),
            "minority": float(values[np.argmin(counts)]),
            "variety": float(values.size),
        }


def _reduce(ids: np.ndarray, values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((values, ids))
    ids, values, counts = ids[order], values[order], counts[order]
    if ids.size == 0:
        return ids, values, counts
    new = np.ones(ids.size, bool)
    new[1:] = (ids[1:] != ids[:-1]) | (values[1:] != values[:-1])
    starts = np.flatnonzero(new)
    return ids[starts], values[starts], np.add.reduceat(counts, starts)


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
