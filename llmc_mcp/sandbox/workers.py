"""One worker process: how it is started (isolated interpreter, minimal environment, neutral working
directory), its channel and bookkeeping, how its CPU priority is lowered and raised, and how it is
killed with everything it started."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field

import anyio
from anyio.abc import Process

from llmc_mcp.config import Settings
from llmc_mcp.gdal.environment import worker_gdal_environment
from llmc_mcp.operations.hydrology.compiled import ready as ready_kernel_cache
from llmc_mcp.sandbox.channel import AsyncChannel
from llmc_mcp.sandbox.prestart import prestart
from llmc_mcp.sandbox.worker import WorkerConfig

DEMOTED_NICE = 19
"""The nice value of a worker whose call gives way to another session's interactive ones."""


_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PROJ_DATA", "PROJ_LIB", "GDAL_DATA")


_WORKER_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "MALLOC_ARENA_MAX": "2",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    # The same hardening gdal_env applies per operation, already in force when GDAL loads, and GDAL_SKIP.
    **worker_gdal_environment(),
}


NEUTRAL_CWD = "/"
"""The worker's working directory: nowhere the agent's data (or anyone's modules) can be."""


def worker_config(settings: Settings, workspace: str) -> WorkerConfig:
    """The limits a session's worker starts with, from the server's settings."""
    return WorkerConfig(
        workspace=workspace,
        memory_mb=settings.memory_mb,
        output_limit=settings.output_limit,
        num_threads=settings.num_threads,
        cpu_seconds=max(5, math.ceil(settings.exec_timeout * 2) + 5),
        call_seconds=settings.exec_timeout,
        job_memory_mb=settings.job_memory,
        engine=settings.engine,
        allow_remote=settings.allow_remote,
        kernel_cache=kernel_cache(settings),
    )


def kernel_cache(settings: Settings) -> str | None:
    """The kernel cache a worker started now reads: complete and private, else None (it compiles)."""
    path = ready_kernel_cache(settings.kernel_cache_root)
    return None if path is None else str(path)


def start_worker_early(settings: Settings, workspace: str) -> Process | None:
    """Start the pool's first spare now, before the server's own imports (see :mod:`.prestart`)."""
    return prestart(worker_command(worker_config(settings, workspace)), worker_environment(), NEUTRAL_CWD)


def worker_command(config: WorkerConfig) -> list[str]:
    """``python -I -m llmc_mcp.sandbox.worker CONFIG``.

    ``-I`` (isolated mode) keeps the working directory, ``PYTHONPATH``, ``PYTHON*`` variables and
    the user's site directory off the worker's import path: a ``numpy.py`` planted in the workspace,
    or anywhere the server was started from, is never imported. The worker finds ``llmc_mcp`` the
    way the installed server does, through site-packages (an editable install maps it there too).
    """
    return [sys.executable, "-I", "-m", "llmc_mcp.sandbox.worker", config.model_dump_json()]


def worker_environment() -> dict[str, str]:
    """A minimal environment: no cloud credentials, proxies or tokens reach the worker."""
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    env.update(_WORKER_ENV)
    return env


class WorkerStartError(Exception):
    """A worker process could not be started or did not report ready."""


@dataclass
class Worker:
    """A live worker process: the session it serves, its channel, and its call bookkeeping."""

    key: str
    """The session it serves."""
    process: Process
    channel: AsyncChannel
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0
    demoted: bool = False
    call_started: float | None = None
    """When its current call started (None between calls)."""
    idle_ttl: float | None = None
    """This worker's own idle TTL (None: the pool's setting)."""
    _ids: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def demote(self) -> None:
        """Lower the CPU priority of the worker: its process group and its scheduler autogroup."""
        if not self.demoted:
            self.demoted = _set_nice(self.process.pid, DEMOTED_NICE)

    def promote(self) -> None:
        """Back to normal priority, if it was lowered and the OS lets us raise it again."""
        if self.demoted and _set_nice(self.process.pid, 0):
            self.demoted = False

    def kill(self) -> None:
        """Kill the whole process group: the worker and anything it started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()


async def stop_worker(worker: Worker) -> None:
    """Kill a worker no session owns and reap it."""
    with anyio.CancelScope(shield=True):
        worker.kill()
        with anyio.move_on_after(5), contextlib.suppress(Exception):
            await worker.process.wait()
        with contextlib.suppress(Exception):
            await worker.process.aclose()


def _set_autogroup_nice(pid: int, nice: int) -> bool:
    """Only the autogroup's nice: anyone may set it back to 0 later (unlike a process's nice)."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as handle:
            handle.write(str(nice))
    except OSError:
        return False
    return True


def _set_nice(pid: int, nice: int) -> bool:
    """Nice every thread of the worker's process group, and its autogroup.

    Workers run in their own session (``start_new_session``), and with CONFIG_SCHED_AUTOGROUP
    (on by default in most distributions) every session is a scheduling group of its own: nice
    then only orders threads inside the group, and groups share the CPU equally. So a spinning
    worker would take as much CPU as the whole server process. The autogroup's own nice value
    (``/proc/<pid>/autogroup``) is what orders the groups. Raising priority again needs
    CAP_SYS_NICE; unprivileged, the call fails and the worker stays as it is.
    """
    done = False
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PGRP, pid, nice)
        done = True
    return _set_autogroup_nice(pid, nice) or done
