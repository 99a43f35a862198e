"""exactextract's views of a band and of polygon zones, for ``raster.zonal_stats``.

exactextract is handed objects, never file names: the band as a RasterSource reading through
:func:`read_valid` from the dataset :func:`open_for_read` checked, and the polygons as WKB already
read and transformed, each tagged with its index so results map back to their zone. The classes are
defined on first use, so importing the operations does not import exactextract. :mod:`.zonal` runs
the statistics.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.operations.catalog import OperationContext

INDEX = "llmc_zone_index"
"""The property that carries each polygon's index through exactextract, so its results map back."""


def band_source(
    ctx: OperationContext, ds: DatasetReader, band: int, linear: tuple[float, float] | None
) -> Any:
    """exactextract's view of one band of a dataset already opened and checked by :func:`open_for_read`."""
    return _band_class()(ctx, ds, band, linear)


@functools.cache
def _band_class() -> type:
    """Defined on first use, so that importing this module does not import exactextract.

    Rows are handed over north-up (a south-up grid is read flipped); invalid cells come masked, as
    ``raster.stats`` defines them (:func:`read_valid`), with scale/offset applied when asked.
    """
    from exactextract.raster import RasterSource

    class Band(RasterSource):  # type: ignore[misc]
        def __init__(
            self, ctx: OperationContext, ds: DatasetReader, band: int, linear: tuple[float, float] | None
        ) -> None:
            super().__init__()
            self.ctx, self.ds, self.band, self.linear = ctx, ds, band, linear
            self.south_up = ds.transform.e > 0

        def res(self) -> tuple[float, float]:
            return abs(self.ds.transform.a), abs(self.ds.transform.e)

        def extent(self) -> tuple[float, float, float, float]:
            left, bottom, right, top = self.ds.bounds
            return left, min(bottom, top), right, max(bottom, top)

        def srs_wkt(self) -> str:
            return str(self.ds.crs.to_wkt())

        def nodata_value(self) -> None:
            return None  # invalid cells come masked: nodata, masks, alpha and NaN alike

        def read_window(self, x0: int, y0: int, nx: int, ny: int) -> np.ndarray:
            row = self.ds.height - y0 - ny if self.south_up else y0
            raw, valid = read_valid(self.ctx, self.ds, self.band, Window(x0, row, nx, ny))
            if self.linear is not None:
                raw = raw.astype(np.float64) * self.linear[0] + self.linear[1]
            if self.south_up:
                raw, valid = raw[::-1], valid[::-1]
            if valid.all():
                return raw
            return np.ma.masked_array(raw, ~valid)

    return Band


def zone_features(geometries: list[Any], wkt: str) -> Any:
    """exactextract's view of the polygons: WKB, each tagged with its index so results map back."""
    import shapely

    return _features_class()(shapely.to_wkb(np.asarray(geometries, dtype=object)), wkt)


@functools.cache
def _features_class() -> type:
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
        def __init__(self, wkbs: np.ndarray, wkt: str) -> None:
            super().__init__()
            self.wkbs, self.wkt = wkbs, wkt

        def count(self) -> int:
            return len(self.wkbs)

        def __iter__(self) -> Iterator[Any]:
            for index, wkb in enumerate(self.wkbs):
                yield Zone(index, bytes(wkb))

        def srs_wkt(self) -> str:
            return self.wkt

    return Zones
