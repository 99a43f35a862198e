"""A band's declared scale and offset, which turn stored values into physical ones.

GDAL reports ``None`` for a band that declares neither; physical = raw * scale + offset then holds
with 1 and 0. Every operation that reports or computes physical values (raster.info, stats, sample,
preview, calc, reclassify, zonal statistics, terrain, hydrology) needs the same defaults, in several
namespaces, so they are read here.
"""

from __future__ import annotations

from collections.abc import Iterable

from rasterio.io import DatasetReader


def scale_offset(ds: DatasetReader, band: int) -> tuple[float, float]:
    """(scale, offset) of ``band`` (1-based), 1 and 0 where the band declares none."""
    scale, offset = ds.scales[band - 1], ds.offsets[band - 1]
    return (1.0 if scale is None else float(scale), 0.0 if offset is None else float(offset))


def scales_offsets(ds: DatasetReader, bands: Iterable[int]) -> tuple[list[float], list[float]]:
    """The scales and the offsets of ``bands``, each list in the order of the bands."""
    pairs = [scale_offset(ds, band) for band in bands]
    return [scale for scale, _ in pairs], [offset for _, offset in pairs]
