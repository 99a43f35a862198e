"""Polygon zones, one chunk of the raster at a time: exactextract's exact coverage on each chunk.

The raster is cut into chunks along cell boundaries (:func:`~.stats.windows`), so every cell belongs
to exactly one chunk and is weighted once, by the fraction of it a polygon covers. A
:class:`PolygonChunk` reads its chunk once (:func:`read_valid`: nodata, masks, NaN and scale/offset as in
``raster.stats``), hands exactextract that chunk as a raster of its own (its grid, its values, NaN in
invalid cells) and the polygons whose bounding boxes meet it, as WKB tagged with their index, and
returns each zone's partial (:class:`~.zonal_accumulators.CoveragePartial`). It is picklable and pure,
so the same chunks run on the local engine and on Dask workers; :mod:`.zonal` folds them in order.
The exactextract classes are defined on first use, so importing the operations does not import it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from rasterio.windows import Window

from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.operations.raster.zonal_accumulators import CoveragePartial, ValuePairs

INDEX = "llmc_zone_index"
"""The property that carries each polygon's index through exactextract, so its results map back."""

Chunk = tuple[Window, np.ndarray]
"""A window of the raster and the indices of the polygons whose bounding boxes meet it."""


@dataclass(frozen=True)
class PolygonChunk:
    """What one chunk computes, wherever the engine runs it: the band, the polygons (WKB in the raster's
    CRS, all of them, so the engine ships them once) and what to ask exactextract for."""

    source: SourceRaster
    ctx: PieceContext
    band: int
    linear: tuple[float, float] | None
    wkbs: tuple[bytes, ...]
    extremes: bool
    """Whether min and max are asked for."""
    spread: bool
    """Whether stdev is asked for."""
    distribution: bool
    """Whether median, majority, minority or variety are asked for: (value, coverage) pairs come back."""
    max_cells: int

    def __call__(self, chunk: Chunk) -> CoveragePartial:
        from exactextract import exact_extract

        window, indices = chunk
        ds = self.source.dataset()
        raw, valid = read_valid(self.ctx, ds, self.band, window)
        if self.linear is not None:
            raw = raw.astype(np.float64) * self.linear[0] + self.linear[1]
        transform = ds.window_transform(window)
        if transform.e > 0:  # exactextract takes rows north first
            raw, valid = raw[::-1], valid[::-1]
        values = _nan_where_invalid(raw, valid)
        left, right = transform.c, transform.c + transform.a * values.shape[1]
        top, bottom = transform.f, transform.f + transform.e * values.shape[0]
        extent = (left, min(top, bottom), right, max(top, bottom))
        grid = _grid_class()(values, extent, (abs(transform.a), abs(transform.e)), ds.crs.to_wkt())
        rows = exact_extract(
            grid,
            _features_class()(indices, [self.wkbs[i] for i in indices], grid.srs_wkt()),
            self._operations(),
            include_cols=[INDEX],
            max_cells_in_memory=self.max_cells,
            output="geojson",
        )
        return self._partial([row["properties"] for row in rows])

    def _operations(self) -> list[str]:
        wanted = ["count", "sum"]
        wanted += ["min", "max"] if self.extremes else []
        wanted += ["stdev"] if self.spread else []
        return wanted + (["values", "coverage"] if self.distribution else [])

    def _partial(self, rows: list[dict[str, Any]]) -> CoveragePartial:
        covered = [row for row in rows if row["count"] > 0]
        zones = np.array([int(row[INDEX]) for row in covered], dtype=np.int64)

        def column(name: str, asked: bool) -> np.ndarray:
            if not asked:
                return np.full(zones.size, np.nan)
            return np.array([np.nan if row[name] is None else float(row[name]) for row in covered])

        pairs = None
        if self.distribution:
            values = [np.asarray(row["values"], np.float64) for row in covered]
            pairs = ValuePairs.of(
                np.repeat(zones, [v.size for v in values]),
                np.concatenate([np.empty(0), *values]),
                np.concatenate([np.empty(0), *(np.asarray(row["coverage"], np.float64) for row in covered)]),
            )
        return CoveragePartial(
            zones,
            column("count", True),
            column("sum", True),
            column("stdev", self.spread) ** 2,
            column("min", self.extremes),
            column("max", self.extremes),
            pairs,
        )


def _nan_where_invalid(raw: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The chunk's values with NaN in its invalid cells, in the narrowest floating type that holds them
    exactly (float32 up to 16-bit integers, float64 beyond: exact to 2**53; float bands keep theirs).

    Not a masked array: exactextract 0.3 drops the mask of a window whose grid is not bit-identical to
    the polygon's coverage grid (isciences/exactextract#193), as for a polygon one cell high, and would
    count masked cells as values. NaN it leaves out on every path.
    """
    if raw.dtype.kind == "f":
        kind = raw.dtype
    else:
        kind = np.dtype(np.float32) if raw.dtype.itemsize <= 2 else np.dtype(np.float64)
    values = raw.astype(kind)  # a C-ordered copy, which NaN may be written into
    values[~valid] = np.nan
    return values


@functools.cache
def _grid_class() -> type:
    """One chunk as exactextract's raster: its extent and cell size, and its values, NaN where invalid."""
    from exactextract.raster import RasterSource

    class ChunkGrid(RasterSource):  # type: ignore[misc]
        def __init__(
            self,
            values: np.ndarray,
            extent: tuple[float, float, float, float],
            cell: tuple[float, float],
            wkt: str,
        ) -> None:
            super().__init__()
            self.values, self.bounds, self.cell, self.wkt = values, extent, cell, wkt

        def res(self) -> tuple[float, float]:
            return self.cell

        def extent(self) -> tuple[float, float, float, float]:
            return self.bounds

        def srs_wkt(self) -> str:
            return self.wkt

        def nodata_value(self) -> None:
            return None  # invalid cells are NaN: nodata, masks, alpha and NaN alike

        def read_window(self, x0: int, y0: int, nx: int, ny: int) -> np.ndarray:
            return self.values[y0 : y0 + ny, x0 : x0 + nx]

    return ChunkGrid


@functools.cache
def _features_class() -> type:
    """Polygons as exactextract's features: WKB, each tagged with its index so results map back."""
    from exactextract.feature import Feature, FeatureSource

    class Zone(Feature):  # type: ignore[misc]
        def __init__(self, index: int, wkb: bytes) -> None:
            Feature.__init__(self)
            self.index, self.wkb = index, wkb
            self.values: dict[str, Any] = {}

        def get(self, name: str) -> Any:
            return self.index if name == INDEX else self.values[name]

        def set(self, name: str, value: Any) -> None:
            self.values[name] = value

        def geometry(self) -> bytes:
            return self.wkb

        def set_geometry_format(self) -> str:
            return "wkb"

        def fields(self) -> list[str]:
            return [INDEX, *self.values]

    class Zones(FeatureSource):  # type: ignore[misc]
        def __init__(self, indices: np.ndarray, wkbs: list[bytes], wkt: str) -> None:
            super().__init__()
            self.indices, self.wkbs, self.wkt = indices, wkbs, wkt

        def count(self) -> int:
            return len(self.wkbs)

        def __iter__(self) -> Iterator[Any]:
            for index, wkb in zip(self.indices.tolist(), self.wkbs, strict=True):
                yield Zone(index, wkb)

        def srs_wkt(self) -> str:
            return self.wkt

    return Zones
