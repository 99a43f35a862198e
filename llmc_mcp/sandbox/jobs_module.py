"""The ``jobs`` module agent code sees: long operations started without holding the call open.

``jobs.start(raster.reproject, "big.tif", "out.tif", dst_crs=..., resampling=...)`` takes the very
function agent code would call and its arguments, so no operation is defined twice: the job runs
the catalog operation that function is bound to. Before anything is queued, the call is checked and
gated here, in the agent's call (:func:`~llmc_mcp.operations.invoke.preflight`): a missing
justification is a ``ReflectionRequired`` now, asked of the host's model or user where they can be
asked, never a question a job would wait on. The job itself runs in a worker of its own, started and
bounded by the server (``--job-timeout``, ``--job-memory-mb``, ``--max-jobs``, ``--max-session-jobs``);
this module only asks the server about it.

``jobs.wait`` spends this call's own wall clock (``--exec-timeout``), so it never waits past what is
left of it: a call that waited too long would be killed and its session reset.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

from llmc_mcp.operations import CATALOG, Operation, OperationContext
from llmc_mcp.operations.invoke import preflight
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.sandbox.bindings import (
    ApiError,
    HostLink,
    RemoteGate,
    bind_arguments,
    build_modules,
    trusted,
)
from llmc_mcp.sandbox.policy import ModuleProxy

WAIT_MARGIN = 1.0
"""Seconds of the call's wall clock ``jobs.wait`` leaves unspent, for the rest of the agent's code."""
MAX_WAIT_SLICE = 10.0
"""The longest one wait request to the server; ``jobs.wait`` repeats them up to its timeout."""
TERMINAL = ("completed", "failed", "cancelled")


class CallClock:
    """When the worker's current call must end: set by the worker as each call starts."""

    def __init__(self, call_seconds: float):
        self.call_seconds = call_seconds
        self.deadline = time.monotonic() + call_seconds

    def start_call(self, seconds: object = None) -> None:
        """A call starts, with the server's wall clock, or ``seconds`` (a task's, from the server)."""
        budget = float(seconds) if isinstance(seconds, int | float) and seconds > 0 else self.call_seconds
        self.deadline = time.monotonic() + budget

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic() - WAIT_MARGIN)


def jobs_module(
    ctx: OperationContext,
    host: HostLink,
    operations: Mapping[str, Callable[..., Any]],
    catalog: Mapping[str, Operation],
    clock: CallClock,
) -> ModuleProxy:
    """``jobs``: start, status, wait, result, cancel and list, over the server's job requests."""
    gate = RemoteGate(host, ctx)
    by_function = {id(function): catalog[qualname] for qualname, function in operations.items()}

    def start(operation: Callable[..., Any], /, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Check and gate ``operation(*args, **kwargs)`` now, then run it as a job; its status."""
        op = by_function.get(id(operation))
        if op is None:
            raise ApiError(
                {
                    "type": "invalid_argument",
                    "message": "jobs.start takes an operation of the stub modules, such as raster.reproject.",
                    "fix": "Pass the function itself, not a call of it: jobs.start(raster.reproject, ...).",
                }
            )
        arguments = bind_arguments(op, args, kwargs)
        preflight(op, ctx, gate, arguments)
        return host.request("jobs.start", {"operation": op.qualname, "args": arguments})

    def status(job: Any) -> dict[str, Any]:
        """The job's status now: working, completed, failed or cancelled, with progress and message."""
        return host.request("jobs.status", {"job": _job_id(job)})

    def wait(job: Any, timeout: float | None = None) -> dict[str, Any]:
        """Wait until the job ends or ``timeout`` seconds pass (at most what is left of this call)."""
        job_id = _job_id(job)
        limit = clock.left() if timeout is None else min(max(0.0, float(timeout)), clock.left())
        end = time.monotonic() + limit
        while True:
            slice_ = min(MAX_WAIT_SLICE, max(0.0, end - time.monotonic()))
            state = host.request("jobs.wait", {"job": job_id, "timeout": slice_})
            if state.get("status") in TERMINAL or time.monotonic() >= end:
                return state

    def result(job: Any) -> Any:
        """The result of a completed job, as the operation returns it; an ApiError if it did not complete."""
        return host.request("jobs.result", {"job": _job_id(job)})

    def cancel(job: Any) -> dict[str, Any]:
        """Stop the job: its worker is killed, and nothing it was writing is kept."""
        return host.request("jobs.cancel", {"job": _job_id(job)})

    def list_jobs() -> list[dict[str, Any]]:
        """This principal's jobs that have not expired, newest first."""
        return host.request("jobs.list", {})

    members: dict[str, Any] = {
        "start": start,
        "status": status,
        "wait": wait,
        "result": result,
        "cancel": cancel,
        "list": list_jobs,
    }
    wrapped = {name: _wrap(name, function) for name, function in members.items()}
    return ModuleProxy("jobs", {**wrapped, "ApiError": ApiError})


def _wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return trusted(function, *args, **kwargs)

    call.__name__ = name
    call.__qualname__ = f"jobs.{name}"
    call.__doc__ = function.__doc__
    call.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]
    return call


def _job_id(job: Any) -> str:
    """A job's id, from its status (what ``start`` returned) or the id itself."""
    if isinstance(job, Mapping):
        job = job.get("id")
    if not isinstance(job, str):
        raise ApiError(
            {
                "type": "invalid_argument",
                "message": "job: pass what jobs.start returned, or its 'id'.",
                "fix": "job = jobs.start(raster.reproject, ...); jobs.status(job)",
            }
        )
    return job[:100]


def sandbox_modules(
    ctx: OperationContext,
    host: HostLink,
    prompts: PromptLibrary,
    clock: CallClock,
    *,
    remote_engine: bool = False,
) -> dict[str, ModuleProxy]:
    """Every module agent code sees: the catalog's namespaces, ``reflection`` and ``jobs``."""
    modules = build_modules(ctx, host, prompts, remote_engine=remote_engine)
    operations = {op.qualname: getattr(modules[op.namespace], op.name) for op in CATALOG}
    modules["jobs"] = jobs_module(ctx, host, operations, {op.qualname: op for op in CATALOG}, clock)
    return modules
