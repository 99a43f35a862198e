"""Rasters where they live: allowlisted, bounded, read-only access to URLs (issue 25, DD-MCP-086).

Only the server reaches the network (:mod:`.fetcher`); workers read through it (:mod:`.access`), and
GDAL sees one remote file at a time through an opener that serves its bytes alone (:mod:`.reader`).
"""
