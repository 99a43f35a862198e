"""The ``raster`` namespace: describe, summarise, reproject, convert, compute and sample workspace rasters.

One module per operation (:mod:`.info`, :mod:`.stats`, :mod:`.reproject`, :mod:`.convert`,
:mod:`.calc`, :mod:`.calc_stats`, :mod:`.sample`, :mod:`.align`, :mod:`.merge`, ...), each
holding the catalog entry and the code only it uses; :mod:`.accumulate` (streaming statistics),
:mod:`.grid` (a reprojection's output grid) and :mod:`.output` (the atomic GeoTIFF write shared by
reproject and convert) are their helpers. Every operation streams: statistics read windows of at
most ~1 M pixels, and reprojection and conversion write block by block, so memory does not grow
with the raster.
"""

from llmc_mcp.operations.raster.align import align
from llmc_mcp.operations.raster.area import area
from llmc_mcp.operations.raster.calc import calc
from llmc_mcp.operations.raster.calc_stats import calc_stats
from llmc_mcp.operations.raster.clip import clip
from llmc_mcp.operations.raster.convert import convert
from llmc_mcp.operations.raster.info import info
from llmc_mcp.operations.raster.merge import merge
from llmc_mcp.operations.raster.preview import preview
from llmc_mcp.operations.raster.reclassify import reclassify
from llmc_mcp.operations.raster.reproject import reproject
from llmc_mcp.operations.raster.sample import sample
from llmc_mcp.operations.raster.stats import stats
from llmc_mcp.operations.raster.zonal import zonal_stats

__all__ = [
    "align",
    "area",
    "calc",
    "calc_stats",
    "clip",
    "convert",
    "info",
    "merge",
    "preview",
    "reclassify",
    "reproject",
    "sample",
    "stats",
    "zonal_stats",
]
