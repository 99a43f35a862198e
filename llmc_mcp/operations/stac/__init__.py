"""The ``stac`` namespace: finding rasters where they live, in a STAC API the operator allows
(:mod:`.search`), typed so that an asset's href goes straight to any raster operation."""

from llmc_mcp.operations.stac.search import item, search

__all__ = ["item", "search"]
