"""llmc-mcp: an MCP server for geospatial raster work by agents that write code."""

__version__ = "0.1.0"
