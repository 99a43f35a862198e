"""Multiple-flow routing, flat drainage and breaching written here, from the published algorithms.

No MIT-compatible library implements D-infinity, MFD, an epsilon priority flood or least-cost breaching
(DD-MCP-067: whitebox-workflows links AGPL-3.0 crates; richdem, pysheds and TopoToolbox are GPL), so
these are numba loops over the whole grid (DD-MCP-068). D8 by steepest descent is one too (DD-MCP-069):
pyflwdir's D8 comes out of its priority flood, which sends a cell to its lowest neighbour, not its
steepest. So is D8's routing across flats (DD-MCP-095): the flood was its only other source, and took
most of the time of a D8 on a large grid.

- D8, O'Callaghan & Mark (1984), Comput. Vision Graph. 28(3); Jenson & Domingue (1988), Photogramm.
  Eng. Rem. S. 54(11): each cell drains to the neighbour with the greatest drop per unit of ground
  distance between the cell centres (a diagonal neighbour is farther, so it must be lower by more);
  distances come per row (:func:`._grid.neighbour_distances`), so non-square and geographic cells are
  measured on the ground. Of equal slopes (within :data:`SLOPE_TOLERANCE`) the first in ESRI order
  (E, SE, S, SW, W, NW, N, NE) wins.

- D-infinity, Tarboton (1997), Water Resour. Res. 33(2): per cell, the steepest downslope direction
  over the 8 triangular facets formed with a cardinal and a diagonal neighbour, as an angle; its flow
  is split between the two neighbours bracketing the angle, in proportion to how close the angle is
  to each.
- MFD, Freeman (1991), Comput. Geosci. 17(3): flow split among every lower neighbour in proportion to
  ``slope ** 1.1`` (slope = drop / distance between cell centres).
- Flat routing (D8): each cell of a flat (no lower neighbour, one of equal height) drains to an equal
  neighbour one step (8-connected) nearer the flat's nearest way out, by a breadth-first search from
  the ways out in row order, neighbours in ESRI order, as Jenson & Domingue (1988) route flats to
  their outlets; a flat without a way out drains to its first cell in row order, a sink.
- Priority-Flood+epsilon, Barnes, Lehman & Mulla (2014), Comput. Geosci. 62, algorithm 3: a priority
  flood from the edge of the data in which every cell reached from a cell not lower than it is raised
  to the next float32 above that cell, so every cell ends with a strictly lower neighbour.
- Least-cost breaching after Lindsay (2016), Hydrol. Process. 30(6), simplified: from each pit, lowest
  first, a Dijkstra search over the summed cut depth to a lower cell or the edge of the data; the path
  is lowered to one float32 step a cell below the pit (DD-MCP-068 says what is left out).

Accumulation visits cells in topological order (Kahn 1962: a cell once all its donors are done), so a
cell's total is final before it is passed on; cells never reached drain in a loop and are reported.

Neighbours are numbered in ESRI D8 order: 0 E, 1 SE, 2 S, 3 SW, 4 W, 5 NW, 6 N, 7 NE (code ``1 << k``),
clockwise on a north-up grid, so neighbour ``k`` lies at ``90 + 45 k`` degrees clockwise from north.
The kernels live in :mod:`._kernels`, imported on first use (numba with them); their machine code
comes from the server's kernel cache where it has one, else it is compiled in memory (:mod:`.compiled`).
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from llmc_mcp.operations.hydrology.compiled import compiled_code

FREEMAN_EXPONENT = 1.1
"""Freeman's (1991) exponent on slope: 1 spreads flow like Quinn et al. (1991), large values tend to D8."""
SHARE_TOLERANCE = 1e-5
"""A D-infinity share below this (a 0.00045 degree angle off a neighbour's direction) is none: an
angle stored in float32 on a neighbour's direction must not send a rounding error's share to the
other, possibly higher, neighbour."""
SLOPE_TOLERANCE = 1e-6
"""D8 slopes within this fraction of the steepest are equally steep (the tie rule then chooses). Ground
distances between the centres of a projected grid's square cells differ in the seventh digit (the
projection's scale changes across a cell), which must not decide between two equal drops."""
DR = np.array([0, 1, 1, 1, 0, -1, -1, -1], dtype=np.int64)
DC = np.array([1, 1, 0, -1, -1, -1, 0, 1], dtype=np.int64)


@functools.cache
def kernels() -> ModuleType:
    """The compiled kernels (:mod:`._kernels`): numba imported, and each function's machine code read
    from the server's kernel cache or compiled, once per process (:mod:`.compiled`)."""
    with compiled_code():
        from llmc_mcp.operations.hydrology import _kernels
    return _kernels
