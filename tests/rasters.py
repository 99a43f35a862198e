"""Rasters the operation tests build: small GeoTIFFs whose every value the test chose."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import rasterio
from affine import Affine

NORTH_UP = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0)
"""10 m cells from (500000, 4500000) in UTM 18N, rows stored from the north."""


def write(
    path: Path,
    data: np.ndarray,
    *,
    transform: Affine = NORTH_UP,
    nodata: float | None = None,
    scales: tuple[float, ...] | None = None,
    offsets: tuple[float, ...] | None = None,
    crs: str = "EPSG:32618",
    tags: dict[str, str] | None = None,
    block: int = 16,
) -> Path:
    """A tiled GeoTIFF from a (bands, rows, cols) array, with optional nodata, scale and offset."""
    data = data if data.ndim == 3 else data[None]
    count, height, width = data.shape
    profile = {
        "driver": "GTiff", "width": width, "height": height, "count": count, "dtype": data.dtype.name,
        "crs": crs, "transform": transform, "nodata": nodata, "tiled": True,
        "blockxsize": block, "blockysize": block,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        if tags:
            ds.update_tags(**tags)
        ds.write(data)
        if scales is not None:
            ds.scales = scales
        if offsets is not None:
            ds.offsets = offsets
    return path


def link_or_copy(src: Path, dst: Path) -> Path:
    """``dst`` as a hard link to ``src`` (a large test raster costs no copy), or a copy across devices."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy(src, dst)
    return dst
