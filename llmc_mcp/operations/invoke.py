"""The one pipeline every face runs an operation through: validate, check paths, gate, run.

Order matters. Arguments, paths and cross-argument conflicts are checked
first, so an agent is never asked to justify a reprojection that could not
run, and the gate runs last, right before the write, so no code path reaches
it without the gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from llmc_mcp.operations.catalog import Operation, OperationContext
from llmc_mcp.operations.gdal_env import gdal_env


class GateLike(Protocol):
    """The local :class:`~llmc_mcp.reflection.gate.Gate`, or the worker's proxy to the server's."""

    def require(self, op: Operation, args: Mapping[str, Any], facts: Mapping[str, str]) -> None: ...


def invoke(op: Operation, ctx: OperationContext, gate: GateLike, raw_args: Mapping[str, Any]) -> BaseModel:
    args = op.validate(raw_args)
    with gdal_env(ctx):
        facts = op.check(ctx, args)
        if op.reflection:
            gate.require(op, args, facts)
        return op.run(ctx, args)
