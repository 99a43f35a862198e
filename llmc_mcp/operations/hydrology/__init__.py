"""The ``hydrology`` namespace: condition a DEM, route flow over it, accumulate, draw streams, delineate.

One module per operation (:mod:`.condition`, :mod:`.flow_direction`, :mod:`.flow_accumulation`,
:mod:`.streams`, :mod:`.watershed`); :mod:`._grid` holds what they share: the routing library
(pyflwdir, imported lazily; its compiled code and our kernels' from the server's kernel cache:
:mod:`.compiled`), whole-grid reads under a cell limit, the D8 encoding and the atomic write. Unlike
the raster namespace these do not stream: flow routing needs the whole grid, so each refuses grids
larger than the memory of the worker that routes holds (:func:`._grid.routing_capacity`).
"""

from llmc_mcp.operations.hydrology.condition import condition
from llmc_mcp.operations.hydrology.flow_accumulation import flow_accumulation
from llmc_mcp.operations.hydrology.flow_direction import flow_direction
from llmc_mcp.operations.hydrology.streams import streams
from llmc_mcp.operations.hydrology.watershed import watershed

__all__ = ["condition", "flow_accumulation", "flow_direction", "streams", "watershed"]
