"""What pixel work needs from the operation that runs it.

An operation's :class:`~llmc_mcp.operations.catalog.OperationContext` is one; the compute layer sits
below the catalog and names only what it uses: the workspace (paths and their policy), the thread
budget, the output guard every write goes through, and the engine pixel work runs on.
"""

from __future__ import annotations

from typing import Protocol

from llmc_mcp.compute.engine import Engine
from llmc_mcp.gdal.environment import GdalContext
from llmc_mcp.outputs import OutputGuard


class ComputeContext(GdalContext, Protocol):
    """What GDAL work needs (the workspace, the thread budget), plus the output guard (set on every
    operation context) and the engine."""

    @property
    def outputs(self) -> OutputGuard | None: ...

    @property
    def engine(self) -> Engine: ...
