"""The one pipeline every face runs an operation through: validate, check paths, gate, run.

Order matters. Arguments and paths are checked first, so an agent is never
asked to justify a reprojection of a file that does not exist, and the gate
runs last, right before GDAL, so no code path reaches GDAL without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from llmc_mcp.operations.catalog import Operation, OperationContext
from llmc_mcp.operations.gdal_env import gdal_env


class GateLike(Protocol):
    """The local :class:`~llmc_mcp.reflection.gate.Gate`, or the worker's proxy to the server's."""

    def require(self, op: Operation, args: Mapping[str, Any]) -> None: ...


def invoke(op: Operation, ctx: OperationContext, gate: GateLike, raw_args: Mapping[str, Any]) -> BaseModel:
    args = op.validate(raw_args)
    op.check_paths(ctx, args)
    if op.reflection:
        gate.require(op, args)
    with gdal_env(ctx):
        return op.run(ctx, args)
