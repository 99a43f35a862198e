"""The ``terrain`` namespace: slope, aspect, hillshade and roughness of a DEM, in true ground units.

One module per operation (:mod:`.slope`, :mod:`.aspect`, :mod:`.hillshade`, :mod:`.roughness`), each
holding its catalog entry and its 3x3 kernel; :mod:`.dem` is what they share: the DEM's units in
metres (projected, geographic per row on the ellipsoid, feet), the orientation of its grid, and the
windowed write with a one-cell halo (memory flat in the raster's size). The formulas are gdaldem's
(Horn 1981 gradients; Wilson et al. 2007 TRI; TPI; roughness), with each row's own ground spacing.
"""

from llmc_mcp.operations.terrain.aspect import aspect
from llmc_mcp.operations.terrain.hillshade import hillshade
from llmc_mcp.operations.terrain.roughness import roughness
from llmc_mcp.operations.terrain.slope import slope

__all__ = ["aspect", "hillshade", "roughness", "slope"]
