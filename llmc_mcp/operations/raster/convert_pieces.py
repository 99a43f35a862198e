"""``raster.convert`` on an engine that runs pieces elsewhere: the cluster reads and decodes, the
writer encodes.

Locally a conversion is one GDAL ``CreateCopy`` (:mod:`.gdal_copy`): GDAL reads, decodes and encodes
in this process with its own threads. On a Dask engine the source's windows are read and decoded by
the workers, each piece a window of whole output blocks (every band, and the per-dataset mask when the
source has one), and this process writes them into a GeoTIFF made with the same creation options,
georeferencing, nodata and metadata ``CreateCopy`` gives; the file is checked, and committed, as
every output is. The pixels are the source's stored values either way, so the two engines' outputs
read back equal, value for value and mask for mask (compressed bytes may differ).

Only what rasterio can carry is converted this way: a workspace file without sidecar files (an
``.aux.xml`` can hold a raster attribute table or category names), ground control points, RPCs or
XML metadata. Anything else, and every COG (GDAL's COG driver writes only by copying
a whole dataset), is GDAL's ``CreateCopy`` in this process, as on the local engine, so the answer is
the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import MaskFlags
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.pixels import unreadable
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.gdal.datasets import GeoreferencingPolicy
from llmc_mcp.gdal.messages import GDAL_ERRORS
from llmc_mcp.gdal.remote_datasets import remote_name
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.raster.reproject import carry_metadata
from llmc_mcp.operations.raster.stats import block_windows

PIECE_BYTES = 8 << 20
"""About this many bytes of pixels a piece: whole output blocks, a few MiB whatever the size."""

_SPECIAL_DOMAINS = frozenset({"RPC", "GEOLOCATION", "SUBDATASETS", "IMAGERY"})
"""Metadata domains GDAL's GeoTIFF copy may write as tags of their own, not as plain metadata."""


def copies_in_pieces(ctx: OperationContext, source: DatasetReader, driver: str) -> bool:
    """Whether this conversion runs as pieces on ``ctx.engine`` with the output ``CreateCopy`` gives."""
    if ctx.engine.name == "local" or driver != "GTiff" or remote_name(source) is not None:
        return False
    if len(source.files) > 1 or source.gcps[0] or source.rpcs:
        return False
    domains = set(source.tag_namespaces()).union(*(source.tag_namespaces(i) for i in source.indexes))
    return not any(d in _SPECIAL_DOMAINS or d.startswith("xml:") for d in domains)


@dataclass(frozen=True)
class CopyPiece:
    """What one window carries, wherever the engine runs it: every band's stored values, and the
    per-dataset mask when the source has one."""

    source: SourceRaster
    masked: bool

    def __call__(self, window: Window) -> tuple[np.ndarray, np.ndarray | None]:
        ds = self.source.dataset()
        ctx = self.source.context
        try:
            values = ds.read(window=window)
        except GDAL_ERRORS as exc:
            raise unreadable(ctx, ds, f"bands {list(ds.indexes)}", exc) from None
        if not self.masked:
            return values, None
        try:
            return values, ds.read_masks(1, window=window)
        except GDAL_ERRORS as exc:
            raise unreadable(ctx, ds, "the mask", exc) from None


@dataclass(frozen=True)
class PieceCopy:
    """The write: the output made as ``CreateCopy`` would make it, then filled piece by piece."""

    piece: CopyPiece
    engine: Engine
    options: dict[str, str]

    @classmethod
    def plan(
        cls, ctx: OperationContext, source: DatasetReader, georeferencing: GeoreferencingPolicy,
        options: dict[str, str],
    ) -> PieceCopy:  # fmt: skip
        """``georeferencing``: the policy ``source`` was opened with, which the pieces reopen it with."""
        raster = SourceRaster.of(ctx, source, "src", georeferencing)
        flags = source.mask_flag_enums[0]
        masked = MaskFlags.per_dataset in flags and MaskFlags.alpha not in flags
        return cls(CopyPiece(raster, masked), ctx.engine, options)

    def write(self, source: DatasetReader, tmp: Path) -> None:
        profile: dict[str, Any] = {
            "driver": "GTiff", "width": source.width, "height": source.height, "count": source.count,
            "dtype": source.dtypes[0], "crs": source.crs, "transform": source.transform,
            "nodata": source.nodata, **self.options,
        }  # fmt: skip
        with rasterio.open(tmp, "w", **profile) as out:
            # CreateCopy carries the default metadata domain, statistics included, and no other.
            carry_metadata(source, out, statistics=True)
            for window, (values, mask) in self.engine.map(self.windows(out), self.piece, writes=True):
                out.write(values, window=window)
                if mask is not None:
                    out.write_mask(mask, window=window)

    @staticmethod
    def windows(out: Any) -> list[Window]:
        """Windows of whole output blocks, about :data:`PIECE_BYTES` of pixels each (as stats cuts a
        raster: every block written once, in one piece)."""
        cells = max(1, PIECE_BYTES // (out.count * np.dtype(out.dtypes[0]).itemsize))
        return list(block_windows(out.width, out.height, out.block_shapes[0], cells))
