"""The ``crs`` namespace: what a coordinate reference system is (:mod:`.info`), before an agent commits
to it, and points carried from one CRS to another (:mod:`.transform`)."""

from llmc_mcp.operations.crs.info import info
from llmc_mcp.operations.crs.transform import transform

__all__ = ["info", "transform"]
