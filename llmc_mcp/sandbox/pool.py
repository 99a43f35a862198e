"""Worker processes per session, and the limits the server enforces on them.

The server owns the wall clock: each call runs under ``anyio.fail_after``;
on expiry the worker's whole process group is killed and the session starts
afresh on its next call. A worker that dies (segfault, OOM kill, CPU rlimit)
costs its session its variables and nothing else. While agent code runs, the
worker's requests (gate decisions, persisting) are served here, in the
trusted process, by :class:`HostHandler`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process

from llmc_mcp.config import Settings
from llmc_mcp.sandbox.channel import AsyncChannel, ChannelClosed, ProtocolError
from llmc_mcp.sandbox.worker import WorkerConfig

log = logging.getLogger(__name__)

HostHandler = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
"""Serves one worker request; returns its result or raises an LlmcError."""

STARTUP_TIMEOUT = 60.0
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PROJ_DATA", "PROJ_LIB", "GDAL_DATA")
_WORKER_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "MALLOC_ARENA_MAX": "2",
    "PROJ_NETWORK": "OFF",
    "GDAL_VRT_ENABLE_PYTHON": "NO",
    "GDAL_MEM_ENABLE_OPEN": "NO",
    "GDAL_HTTP_TIMEOUT": "1",
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".llmc-none",
    "AWS_NO_SIGN_REQUEST": "YES",
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def worker_environment() -> dict[str, str]:
    """A minimal environment: no cloud credentials, proxies or tokens reach the worker."""
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    env.update(_WORKER_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


@dataclass
class Worker:
    process: Process
    channel: AsyncChannel
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0
    _ids: int = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def kill(self) -> None:
        """Kill the whole process group: the worker and anything it started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()


class WorkerPool:
    """Maps session keys to warm workers; serializes calls within a session."""

    def __init__(self, settings: Settings, workspace: str, handler: HostHandler):
        self.settings = settings
        self._handler = handler
        self._config = WorkerConfig(
            workspace=workspace,
            memory_mb=settings.memory_mb,
            output_limit=settings.output_limit,
            num_threads=settings.num_threads,
            cpu_seconds=max(5, math.ceil(settings.exec_timeout * 2) + 5),
        )
        self._workers: dict[str, Worker] = {}
        self._locks: dict[str, anyio.Lock] = {}

    @property
    def sessions(self) -> int:
        return len(self._workers)

    async def execute(self, key: str, code: str, reset: bool) -> dict[str, Any]:
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            await self.reap_idle()
            worker = self._workers.get(key)
            fresh = worker is None
            if worker is None:
                worker = await self._spawn()
                self._workers[key] = worker
            worker.last_used = time.monotonic()
            worker.calls += 1
            try:
                with anyio.fail_after(self.settings.exec_timeout):
                    result = await self._call(worker, "execute", {"code": code, "reset": reset})
            except TimeoutError:
                await self._discard(key)
                return _limit_failure(
                    "Timeout",
                    f"The code ran longer than the {self.settings.exec_timeout:g} s limit and was stopped. "
                    "The session was reset: variables from earlier calls are gone.",
                    "Make the work smaller (windows, approx=True, fewer files) or split it across calls.",
                )
            except (ChannelClosed, ProtocolError) as exc:
                returncode = await self._discard(key)
                return _limit_failure("WorkerCrashed", _crash_message(returncode, exc), _CRASH_FIX)
            except BaseException:
                # Cancelled mid-call (client cancel, shutdown): the worker is in an unknown state.
                with anyio.CancelScope(shield=True):
                    await self._discard(key)
                raise
            result["session"] = {"fresh": fresh or reset, "calls": worker.calls}
            return result

    async def close_session(self, key: str) -> None:
        lock = self._locks.get(key)
        if lock is None:
            return
        async with lock:
            await self._discard(key)
        self._locks.pop(key, None)

    async def close(self) -> None:
        for key in list(self._workers):
            await self._discard(key)

    async def reap_idle(self) -> None:
        """Stop workers idle longer than the TTL; their sessions start fresh if they come back."""
        now = time.monotonic()
        for key, worker in list(self._workers.items()):
            if now - worker.last_used > self.settings.idle_ttl and not self._locks[key].locked():
                log.info("reaping idle worker of session %s", key[:12])
                await self._discard(key)

    async def _spawn(self) -> Worker:
        process = await anyio.open_process(
            [sys.executable, "-m", "llmc_mcp.sandbox.worker", self._config.model_dump_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=worker_environment(),
            start_new_session=True,
            cwd=self._config.workspace,
        )
        assert process.stdout is not None and process.stdin is not None
        worker = Worker(process, AsyncChannel(process.stdout, process.stdin))
        try:
            with anyio.fail_after(STARTUP_TIMEOUT):
                ready = await worker.channel.receive()
        except (TimeoutError, ChannelClosed, ProtocolError) as exc:
            worker.kill()
            raise RuntimeError(f"the code worker failed to start ({type(exc).__name__})") from None
        log.info("worker %s ready", ready.get("result", {}).get("pid"))
        return worker

    async def _call(self, worker: Worker, method: str, params: dict[str, Any]) -> Any:
        request_id = worker.next_id()
        await worker.channel.send({"id": request_id, "method": method, "params": params})
        while True:
            message = await worker.channel.receive()
            if "method" in message:
                await worker.channel.send(await self._serve(message))
                continue
            if message.get("id") != request_id:
                raise ProtocolError("worker answered out of order")
            if "error" in message:
                raise ProtocolError(str(message["error"]))
            return message.get("result")

    async def _serve(self, message: Mapping[str, Any]) -> dict[str, Any]:
        from llmc_mcp.errors import LlmcError

        reply: dict[str, Any] = {"id": message.get("id")}
        try:
            reply["result"] = await self._handler(str(message["method"]), message.get("params") or {})
        except LlmcError as exc:
            reply["error"] = exc.to_dict()
        except Exception:
            log.exception("host request %s failed", message.get("method"))
            reply["error"] = {"type": "internal_error", "message": "The server could not serve this request."}
        return reply

    async def _discard(self, key: str) -> int | None:
        worker = self._workers.pop(key, None)
        if worker is None:
            return None
        worker.kill()
        with anyio.move_on_after(5), contextlib.suppress(Exception):
            await worker.process.wait()
        with contextlib.suppress(Exception):
            await worker.process.aclose()
        return worker.process.returncode


_CRASH_FIX = "Run the call again: a fresh worker starts. Recreate any variables you need."


def _crash_message(returncode: int | None, exc: Exception) -> str:
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        cause = {
            "SIGXCPU": "it used up its CPU-time limit",
            "SIGKILL": "it was killed (out of memory?)",
            "SIGSEGV": "it crashed (segmentation fault)",
        }.get(name, f"it was stopped by {name}")
    elif returncode is not None:
        cause = f"it exited with status {returncode}"
    else:
        cause = f"its channel failed ({exc})"
    return f"The code worker died: {cause}. The session was reset: variables from earlier calls are gone."


def _limit_failure(kind: str, message: str, fix: str) -> dict[str, Any]:
    return {
        "ok": False,
        "stdout": "",
        "stdout_dropped": 0,
        "result": None,
        "error": {"type": kind, "message": message, "fix": fix, "line": 0, "traceback": ""},
        "session": {"fresh": True, "reset": True},
    }
