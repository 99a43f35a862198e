"""The one pipeline every face runs an operation through: validate, check paths, gate, run.

Order matters. Arguments, paths and cross-argument conflicts are checked
first, so an agent is never asked to justify a reprojection that could not
run, and the gate runs last, right before the write, so no code path reaches
it without the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from llmc_mcp.capture import capture
from llmc_mcp.compute.memory import checking_for_job
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import Operation, OperationContext
from llmc_mcp.remote.reader import take_failure
from llmc_mcp.remote.transport import call_scope


class GateLike(Protocol):
    """The local :class:`~llmc_mcp.reflection.gate.Gate`, or the worker's proxy to the server's."""

    def require(self, op: Operation, args: Mapping[str, Any], facts: Mapping[str, str]) -> Sequence[Any]:
        """The records justifying ``op``'s decisions (model or plain dict), or ReflectionRequired."""
        ...


def preflight(op: Operation, ctx: OperationContext, gate: GateLike, raw_args: Mapping[str, Any]) -> None:
    """Everything :func:`invoke` does before the work: validate, check, gate; raises what it would.

    A job or task runs its operation later, in a worker of its own with no client request to ask on,
    so its decisions are asked here first, in the agent's call, where a model can be sampled and a
    user asked; the job then finds them justified (the gate reuses identical decisions).
    """
    args = op.validate(raw_args)
    token = checking_for_job.set(True)  # sizes are judged by the job worker's memory, not this one's
    try:
        with gdal_env(ctx):
            facts = op.check(ctx, args)
            if op.reflection:
                gate.require(op, args, facts)
    finally:
        checking_for_job.reset(token)


def invoke(op: Operation, ctx: OperationContext, gate: GateLike, raw_args: Mapping[str, Any]) -> BaseModel:
    """Validate, check, gate and run; an operation that writes is captured for its outputs' records."""
    args = op.validate(raw_args)
    take_failure()  # a remote read's failure belongs to the call it happened in, never to this one
    with (
        gdal_env(ctx),
        call_scope(),
        capture(op.qualname, args, compute_engine=ctx.engine.name) as invocation,
    ):
        facts = op.check(ctx, args)
        if op.reflection:
            records = gate.require(op, args, facts)
            invocation.justifications = [_plain(record) for record in records]
        return op.run(ctx, args)


def _plain(record: Any) -> dict[str, Any]:
    if isinstance(record, BaseModel):
        return record.model_dump(mode="json", exclude={"digest"})
    return dict(record)
