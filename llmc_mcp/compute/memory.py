"""How much memory the work at hand may take: the process's own limit, or a job's.

Operations that must hold a whole grid (flow routing) size what they accept from the address space
the worker that will run them has, not from a constant: a worker started with ``--memory-mb 8192``
routes what one with 2048 cannot. A call runs where it is checked, so its limit is this process's
``RLIMIT_AS``. A job is checked in the agent's call (:func:`~llmc_mcp.operations.invoke.preflight`)
but runs in a job worker with ``--job-memory-mb``: while :data:`checking_for_job` is set, the limit
is the job's, which the worker was told at start (:func:`set_job_memory`). Without a limit (a
process outside the sandbox: tests, the CLI) it is the machine's physical memory.
"""

from __future__ import annotations

import os
import resource
from contextvars import ContextVar

MiB = 1024 * 1024

checking_for_job: ContextVar[bool] = ContextVar("llmc_checking_for_job", default=False)
"""Set while an operation is checked for a job: sizes are then judged by the job worker's limit."""

_job_memory_bytes: int | None = None


def set_job_memory(megabytes: int | None) -> None:
    """This worker's jobs run with ``megabytes`` of address space (``--job-memory-mb``)."""
    global _job_memory_bytes
    _job_memory_bytes = None if megabytes is None else megabytes * MiB


def memory_limit() -> int:
    """Bytes of address space the work being checked will have."""
    if checking_for_job.get() and _job_memory_bytes is not None:
        return _job_memory_bytes
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        return soft
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def limit_flags() -> str:
    """The flags that set :func:`memory_limit`, for a refusal to name."""
    if checking_for_job.get() and _job_memory_bytes is not None:
        return "--job-memory-mb"
    return "--memory-mb (calls) or --job-memory-mb (jobs)"
