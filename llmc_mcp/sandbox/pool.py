"""Worker processes per session, and the limits the server enforces on them.

The server owns the wall clock: each call runs under ``anyio.fail_after``;
on expiry the worker's whole process group is killed and the session starts
afresh on its next call. A worker that dies (segfault, OOM kill, CPU rlimit)
costs its session its variables and nothing else. While agent code runs, the
worker's requests (gate decisions, persisting) are served here, in the
trusted process, by :class:`HostHandler`.

Lifecycle, all on the parent side:

- **Session end.** :meth:`WorkerPool.close_session` stops a session's worker. The
  in-process and stdio lifespans call it; for stateful HTTP, where one lifespan
  serves every session, :meth:`WorkerPool.close_with_connection` hooks it to the
  MCP connection's teardown (client DELETE, the SDK's session idle timeout, a
  crashed session), so a worker never outlives its HTTP session by more than
  that.
- **Idle TTL.** A worker unused for ``settings.idle_ttl`` seconds is reaped by a
  background task started lazily with the first worker (and ending with the
  last), so reaping happens even when no calls come. Its session starts fresh
  if it comes back (``session.fresh`` says so).
- **Warm spare.** One started worker waits for the next new session (:meth:`WorkerPool.start_spare`),
  so a session's first call does not pay the interpreter's start; it starts at normal priority.
- **Priority.** Interactive calls first: a call running for over :data:`DEMOTE_AFTER` seconds
  continues at nice :data:`DEMOTED_NICE` (its scheduler autogroup, and its process group too)
  while another session has a call in flight that is still interactive (younger than
  :data:`DEMOTE_AFTER`), and at normal priority again once none is (checked every
  :data:`PRIORITY_CHECK` seconds; the next call restores it too). (Restoring a process's nice needs
  CAP_SYS_NICE; the autogroup's, which is what orders workers against the server and each other,
  does not.) So runaway loops and crash-respawn cycles of one session cost the others little, and
  a lone session, or long calls among themselves, are never put below the machine's other work:
  ``--exec-timeout`` counts wall-clock time, and at nice 19 beside two CPU-bound processes a
  6 s call took longer than any sensible limit.
- **Bounds.** At most ``max_workers`` workers live at once (a call that would
  need one more first reaps idle workers, then gets a clear ``TooManySessions``
  error, never a hang); code longer than the worker accepts, or that is not
  valid Unicode text, is refused before it reaches the worker, so the session
  keeps its variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process

from llmc_mcp.config import Settings
from llmc_mcp.gdal.environment import worker_gdal_environment
from llmc_mcp.sandbox.channel import AsyncChannel, ChannelClosed, ProtocolError
from llmc_mcp.sandbox.executor import check_code
from llmc_mcp.sandbox.prestart import prestart
from llmc_mcp.sandbox.worker import WorkerConfig
from llmc_mcp.sessions import current_session

log = logging.getLogger(__name__)

HostHandler = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
"""Serves one worker request; returns its result or raises an LlmcError."""
ProgressHandler = Callable[[float, float | None, str], Awaitable[None]]
"""Relays one progress value of the call being served to its client: ``(progress, total, message)``."""

STARTUP_TIMEOUT = 60.0
DEMOTE_AFTER = 1.0
"""Seconds into a call after which its worker runs at :data:`DEMOTED_NICE`: short interactive calls of
other sessions then get the CPU first, and a runaway loop costs the others little until its timeout."""
DEMOTED_NICE = 19
PRIORITY_CHECK = 0.25
"""Seconds between two looks at whether a long call should give way to another session's."""
EXIT_GRACE = 1.0
"""Seconds a worker whose channel closed gets to exit by itself, so its real status is reported."""
REAP_INTERVAL_MAX = 60.0
PROGRESS_PER_SECOND = 20
"""Progress notifications relayed per call and second at most, whatever the worker sends."""
PROGRESS_MESSAGE_CHARS = 200
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
    return WorkerConfig(
        workspace=workspace,
        memory_mb=settings.memory_mb,
        output_limit=settings.output_limit,
        num_threads=settings.num_threads,
        cpu_seconds=max(5, math.ceil(settings.exec_timeout * 2) + 5),
    )


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


class WorkerPool:
    """Maps session keys to warm workers; serializes calls within a session."""

    def __init__(
        self,
        settings: Settings,
        workspace: str,
        handler: HostHandler,
        *,
        max_workers: int | None = None,
        on_discard: Callable[[str], Awaitable[None]] | None = None,
        warm_spare: bool = True,
        prestarted: Process | None = None,
        on_progress: ProgressHandler | None = None,
        before_call: Callable[[str], Awaitable[None]] | None = None,
    ):
        self.settings = settings
        self._handler = handler
        self._before_call = before_call
        """Awaited with the session key as each call arrives, before it waits for the session's worker:
        a call of the session paused for its client's answer is stopped there if the client gave it up."""
        self._on_progress = on_progress
        self._on_discard = on_discard
        """Called with the session key once a worker is gone (killed, crashed, reaped or closed)."""
        self._config = worker_config(settings, workspace)
        self._prestarted = prestarted
        """A worker started before the event loop (:func:`start_worker_early`): the first spare."""
        self.max_workers = max_workers or settings.max_workers
        self._workers: dict[str, Worker] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._starting = 0
        self._bound: set[str] = set()
        self._reaper: Any = None  # the asyncio task of the idle reaper, while one runs
        self.reaped = 0
        self.warm_spare = warm_spare
        self._spare: Worker | None = None
        self._spare_task: Any = None  # the asyncio task starting the spare, while one runs
        self._closed = False

    # ------------------------------------------------------------------------------------ observing

    @property
    def sessions(self) -> int:
        return len(self._workers)

    def worker_pids(self) -> dict[str, int]:
        """Live workers by session key (for tests, benchmarks and logs)."""
        return {key: worker.pid for key, worker in self._workers.items()}

    # -------------------------------------------------------------------------------------- calling

    async def execute(self, key: str, code: str, reset: bool) -> dict[str, Any]:
        """Run agent code in the session's worker (code mode)."""
        refused = _check_code(code)
        if refused is not None:
            return refused
        return await self.run(key, "execute", {"code": code, "reset": reset}, reset=reset)

    async def operate(self, key: str, operation: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run one catalog operation in the session's worker (classic mode): the same confined path."""
        return await self.run(key, "operation", {"operation": operation, "args": dict(args)})

    async def run(
        self, key: str, method: str, params: dict[str, Any], *, reset: bool = False
    ) -> dict[str, Any]:
        """Send one request to the session's worker under the wall clock; limits become failures.

        The answer is the worker's (``ok``, ``result``, ``error``...) or, when a limit ended the call,
        a failure of the same shape saying which limit and what happened to the session.
        """
        if self._before_call is not None:
            await self._before_call(key)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            reaper_running = self._reaper is not None and not self._reaper.done()
            if not reaper_running or len(self._workers) + self._starting >= self.max_workers:
                await self.reap_idle()  # normally the background reaper's job; inline when full
            worker = self._workers.get(key)
            fresh = worker is None
            if worker is None:
                if len(self._workers) + self._starting >= self.max_workers:
                    return _limit_failure(
                        "TooManySessions",
                        f"All {self.max_workers} code workers are in use by other sessions, so this session "
                        "could not get one. Nothing ran.",
                        f"Retry in a while: idle sessions are stopped after {self.settings.idle_ttl:g} s "
                        "without calls, and ended sessions at once.",
                        reset=False,
                    )
                try:
                    worker = await self._take_spare(key) or await self._spawn(key)
                except WorkerStartError as exc:
                    return _limit_failure(
                        "WorkerStartFailed",
                        f"The code worker could not be started ({exc}). Nothing ran.",
                        "Retry the call; if it keeps failing the server is short of memory or processes.",
                        reset=False,
                    )
                self._workers[key] = worker
                self._ensure_reaper()
                self.start_spare()
            worker.last_used = time.monotonic()
            worker.calls += 1
            worker.promote()
            worker.call_started = time.monotonic()
            demotion = _call_later(DEMOTE_AFTER, self._give_way, worker, worker.calls)
            try:
                with anyio.fail_after(self.settings.exec_timeout) as clock:
                    token = _wall_clock.set(clock)
                    try:
                        result = await self._call(worker, method, params)
                    finally:
                        _wall_clock.reset(token)
            except TimeoutError:
                await self._discard(key)
                return _limit_failure(
                    "Timeout",
                    f"The call ran longer than the {self.settings.exec_timeout:g} s limit (--exec-timeout) "
                    "and was stopped; nothing was written. The session was reset: variables from earlier "
                    "calls are gone.",
                    timeout_fix(params.get("operation") if method == "operation" else None),
                )
            except (ChannelClosed, ProtocolError) as exc:
                returncode = await self._discard(key, grace=EXIT_GRACE)
                return _limit_failure("WorkerCrashed", _crash_message(returncode, exc), _CRASH_FIX)
            except BaseException:
                # Cancelled mid-call (client cancel, shutdown): the worker is in an unknown state.
                with anyio.CancelScope(shield=True):
                    await self._discard(key)
                raise
            finally:
                if demotion is not None:
                    demotion.cancel()
                worker.call_started = None
                worker.last_used = time.monotonic()
            result["session"] = {"fresh": fresh or reset, "calls": worker.calls}
            return result

    def _give_way(self, worker: Worker, call: int) -> None:
        """The priority of the worker's long call number ``call``, from now until it ends: lowered while
        another session's call is interactive, normal otherwise; looked at every :data:`PRIORITY_CHECK` s."""
        if worker.call_started is None or worker.calls != call or self._workers.get(worker.key) is not worker:
            return
        now = time.monotonic()
        interactive = any(
            other is not worker and other.call_started is not None and now - other.call_started < DEMOTE_AFTER
            for other in self._workers.values()
        )
        if interactive:
            worker.demote()
        else:
            worker.promote()
        _call_later(PRIORITY_CHECK, self._give_way, worker, call)

    # ------------------------------------------------------------------------------------ lifecycle

    async def close_session(self, key: str) -> None:
        """Stop the session's worker (if any) and forget the session."""
        self._bound.discard(key)
        lock = self._locks.get(key)
        if lock is None:
            await self._discard(key)
            return
        async with lock:
            await self._discard(key)
        # Forget the lock only if nobody is queued on it: a waiter must keep serializing with
        # whoever comes after it, so it must not be handed a lock a newcomer will not see.
        if not lock.locked() and lock.statistics().tasks_waiting == 0 and key not in self._workers:
            self._locks.pop(key, None)

    def close_with(self, key: str, exit_stack: AsyncExitStack) -> None:
        """Close ``key``'s session when ``exit_stack`` unwinds (once per key, however often called)."""
        if key in self._bound:
            return
        self._bound.add(key)
        exit_stack.push_async_callback(self.close_session, key)

    def close_with_connection(self, key: str, ctx: Any) -> bool:
        """Tie ``key``'s worker to the MCP connection of ``ctx`` (an ``mcpserver.Context``).

        The SDK unwinds ``Connection.exit_stack`` when the connection ends: for stateful
        streamable HTTP that is the client's DELETE, the session idle timeout or a crashed
        session. mcp 2.3 gives tools no public handle on the Connection, so this reaches it
        through the request's session, defensively: False (idle TTL reaping only) if absent.
        """
        try:
            session = ctx.request_context.session
        except (AttributeError, ValueError):
            return False
        connection = getattr(session, "connection", None) or getattr(session, "_connection", None)
        stack = getattr(connection, "exit_stack", None)
        if not isinstance(stack, AsyncExitStack):
            return False
        self.close_with(key, stack)
        return True

    async def close(self) -> None:
        """Stop every worker, the spare and the reaper (server shutdown)."""
        self._closed = True
        reaper, self._reaper = self._reaper, None
        if reaper is not None and not reaper.done():
            reaper.cancel()
        await self.stop_spare()
        prestarted, self._prestarted = self._prestarted, None
        if prestarted is not None:
            with contextlib.suppress(ProcessLookupError):
                prestarted.kill()
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await prestarted.aclose()
        for key in list(self._workers):
            await self._discard(key)
        self._locks.clear()
        self._bound.clear()

    def set_idle_ttl(self, key: str, seconds: float | None) -> None:
        """Give the session's worker its own idle TTL (None: back to the pool's)."""
        worker = self._workers.get(key)
        if worker is not None:
            worker.idle_ttl = seconds
            if seconds is not None:
                self._ensure_reaper()

    async def reap_idle(self, now: float | None = None) -> int:
        """Stop workers idle longer than the TTL; their sessions start fresh if they come back."""
        now = time.monotonic() if now is None else now
        reaped = 0
        for key, worker in list(self._workers.items()):
            lock = self._locks.get(key)
            busy = lock is not None and lock.locked()
            idle = now - worker.last_used > (worker.idle_ttl or self.settings.idle_ttl)
            if busy or not idle or self._workers.get(key) is not worker:
                continue
            log.info("reaping idle worker %s of session %s", worker.pid, key[:12])
            self.reaped += 1
            reaped += 1
            await self._discard(key)
            if lock is not None and not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)
        return reaped

    def _ensure_reaper(self) -> None:
        """Start the idle reaper on this event loop unless one runs.

        A plain asyncio task, not a task-group child: it must outlive the request that started
        it (an HTTP request handler), and the server runs on asyncio (uvicorn, ``mcp.run``). On
        another event loop (trio) there is no background reaper; workers are then reaped on calls.
        """
        if self._reaper is not None and not self._reaper.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._reaper = loop.create_task(self._reap_forever(), name="llmc-worker-reaper")

    def _stop_reaper_if_idle(self) -> None:
        reaper = self._reaper
        if self._workers or reaper is None or reaper.done():
            return
        with contextlib.suppress(RuntimeError):
            if asyncio.current_task() is reaper:
                return
        reaper.cancel()
        self._reaper = None

    async def _reap_forever(self) -> None:
        try:
            while self._workers:
                ttls = [self.settings.idle_ttl, *(w.idle_ttl for w in self._workers.values() if w.idle_ttl)]
                await anyio.sleep(min(max(min(ttls) / 4, 0.05), REAP_INTERVAL_MAX))
                try:
                    await self.reap_idle()
                except Exception:
                    log.exception("idle reaper failed; retrying")
        finally:
            with contextlib.suppress(RuntimeError):
                if self._reaper is asyncio.current_task():
                    self._reaper = None

    # ------------------------------------------------------------------------------------ spare

    def start_spare(self) -> None:
        """Start a worker no session owns yet, in the background, so a new session's first call is fast.

        A worker takes about 0.5 s of CPU to start (an interpreter importing GDAL, PROJ, numpy), and
        many times that on a loaded machine: past some clients' default timeouts for a first call. One
        spare is kept while the pool has room for it; the session that takes it starts the next.
        """
        if not self.warm_spare or self._closed or self._spare is not None:
            return
        if self._spare_task is not None and not self._spare_task.done():
            return
        if len(self._workers) + self._starting + 1 > self.max_workers:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._spare_task = loop.create_task(self._make_spare(), name="llmc-spare-worker")

    async def stop_spare(self) -> None:
        """Stop the spare (and its start): the last connection ended, nobody will take it soon."""
        starting, self._spare_task = self._spare_task, None
        if starting is not None and not starting.done():
            starting.cancel()
            # Wait for its cleanup (the half-started process is killed and reaped) on this loop.
            with anyio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await starting
        spare, self._spare = self._spare, None
        if spare is not None:
            await _stop(spare)

    async def _make_spare(self) -> None:
        prestarted, self._prestarted = self._prestarted, None
        try:
            worker = await self._spawn("spare", counted=False, process=prestarted)
        except WorkerStartError as exc:
            log.warning("spare worker could not be started (%s); sessions start their own", exc)
            return
        if self._closed or self._spare is not None:
            await _stop(worker)
            return
        self._spare = worker

    async def _take_spare(self, key: str) -> Worker | None:
        """The spare for session ``key`` (waiting for it if it is starting), or None."""
        task = self._spare_task
        if self._spare is None and task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        worker, self._spare = self._spare, None
        if worker is None:
            return None
        if worker.process.returncode is not None:
            await _stop(worker)
            return None
        worker.key = key
        worker.started = worker.last_used = time.monotonic()
        return worker

    # ------------------------------------------------------------------------------------ internals

    async def _spawn(self, key: str, *, counted: bool = True, process: Process | None = None) -> Worker:
        """Start a worker (or adopt ``process``, already started) and wait until it is ready.

        ``counted`` workers hold a session's place against ``max_workers`` meanwhile.
        """
        self._starting += counted
        try:
            try:
                process = process or await anyio.open_process(
                    worker_command(self._config),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=None,
                    env=worker_environment(),
                    start_new_session=True,
                    cwd=NEUTRAL_CWD,
                )
            except OSError as exc:
                raise WorkerStartError(exc.strerror or type(exc).__name__) from None
            assert process.stdout is not None and process.stdin is not None
            # Start-up runs at normal priority: a session waits for it (or will soon, for the spare).
            worker = Worker(key, process, AsyncChannel(process.stdout, process.stdin))
            try:
                with anyio.fail_after(STARTUP_TIMEOUT):
                    ready = await worker.channel.receive()
            except (TimeoutError, ChannelClosed, ProtocolError) as exc:
                await _stop(worker)
                raise WorkerStartError(type(exc).__name__) from None
            except BaseException:
                await _stop(worker)
                raise
        finally:
            self._starting -= counted
        started = ready.get("result", {})
        log.info("worker %s ready (landlock ABI %s)", started.get("pid"), started.get("landlock"))
        return worker

    async def _call(self, worker: Worker, method: str, params: dict[str, Any]) -> Any:
        request_id = worker.next_id()
        await worker.channel.send({"id": request_id, "method": method, "params": params})
        progress = ProgressRelay(self._on_progress)
        while True:
            message = await worker.channel.receive()
            if "method" in message and "id" not in message:
                if message["method"] == "progress":
                    await progress.relay(message.get("params"))
                continue
            if "method" in message:
                await worker.channel.send(await self._serve(worker, message))
                continue
            if message.get("id") != request_id:
                raise ProtocolError("worker answered out of order")
            if "error" in message:
                raise ProtocolError(str(message["error"]))
            return message.get("result")

    async def _serve(self, worker: Worker, message: Mapping[str, Any]) -> dict[str, Any]:
        from llmc_mcp.errors import LlmcError

        reply: dict[str, Any] = {"id": message.get("id")}
        token = current_session.set(worker.key)
        try:
            reply["result"] = await self._handler(str(message.get("method")), message.get("params") or {})
        except LlmcError as exc:
            reply["error"] = exc.to_dict()
        except Exception as exc:
            # The handler budgets its own logging per session; reaching here is a bug, said once per call.
            log.error("host request %.40r failed: %s", message.get("method"), type(exc).__name__)
            reply["error"] = {"type": "internal_error", "message": "The server could not serve this request."}
        finally:
            current_session.reset(token)
        return reply

    async def _discard(self, key: str, grace: float = 0.0) -> int | None:
        """Forget the session's worker at once, then make sure its process group is gone and reaped."""
        worker = self._workers.pop(key, None)
        if worker is None:
            return None
        self._stop_reaper_if_idle()
        with anyio.CancelScope(shield=True):
            if grace > 0:
                # The channel closed: the worker is probably exiting; let it, to learn why it died.
                with anyio.move_on_after(grace), contextlib.suppress(Exception):
                    await worker.process.wait()
            worker.kill()
            with anyio.move_on_after(5), contextlib.suppress(Exception):
                await worker.process.wait()
            with contextlib.suppress(Exception):
                await worker.process.aclose()
            if self._on_discard is not None:
                try:
                    await self._on_discard(key)
                except Exception as exc:
                    log.error("cleanup after the worker of session %s failed: %s", key[:12], exc)
        return worker.process.returncode


class ProgressRelay:
    """One call's progress notifications, checked before they reach its client.

    The worker is untrusted: a value that is not a finite number above the last one relayed, or that
    passes its total, is dropped, messages are cut to :data:`PROGRESS_MESSAGE_CHARS`, and at most
    :data:`PROGRESS_PER_SECOND` a second are relayed (a real worker sends five, see
    :mod:`llmc_mcp.compute.progress`), so a subverted worker cannot flood the client.
    """

    def __init__(self, handler: ProgressHandler | None, clock: Callable[[], float] = time.monotonic):
        self._handler = handler
        self._clock = clock
        self._last = 0.0
        self._window = (-math.inf, 0)

    async def relay(self, params: object) -> None:
        if self._handler is None or not isinstance(params, Mapping):
            return
        progress, total = params.get("progress"), params.get("total")
        if not _finite(progress) or progress <= self._last:
            return
        if total is not None and (not _finite(total) or progress > total):
            return
        start, count = self._window
        now = self._clock()
        if now - start >= 1.0:
            start, count = now, 0
        if count >= PROGRESS_PER_SECOND:
            return
        self._window = (start, count + 1)
        self._last = float(progress)
        message = str(params.get("message") or "")[:PROGRESS_MESSAGE_CHARS]
        await self._handler(float(progress), None if total is None else float(total), message)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_wall_clock: ContextVar[anyio.CancelScope | None] = ContextVar("llmc_wall_clock", default=None)
"""The wall clock (``--exec-timeout``) of the call this task is running in a worker."""


@contextmanager
def paused_wall_clock() -> Iterator[None]:
    """Stop the running call's wall clock inside this block: its deadline moves by the time spent.

    For time the worker waits on the server for something outside the agent's control (the host's
    model answering a sampling request, a person answering a form), which has its own timeout.
    """
    clock = _wall_clock.get()
    if clock is None:
        yield
        return
    deadline, start = clock.deadline, anyio.current_time()
    clock.deadline = math.inf
    try:
        yield
    finally:
        clock.deadline = deadline + (anyio.current_time() - start)


async def _stop(worker: Worker) -> None:
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


def _call_later(delay: float, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle | None:
    """Run ``callback(*args)`` on this event loop after ``delay`` seconds, unless cancelled (asyncio only)."""
    try:
        return asyncio.get_running_loop().call_later(delay, callback, *args)
    except RuntimeError:
        return None


_CRASH_FIX = "Run the call again: a fresh worker starts. Recreate any variables you need."


def _check_code(code: object) -> dict[str, Any] | None:
    """Refuse code the worker cannot receive, without touching the session's worker."""
    refused = check_code(code)
    return None if refused is None else _code_failure(*refused)


def _code_failure(kind: str, message: str, fix: str) -> dict[str, Any]:
    failure = _limit_failure(kind, message + " Nothing ran; the session is unchanged.", fix, reset=False)
    failure["session"] = {"fresh": False, "unchanged": True}
    return failure


def _crash_message(returncode: int | None, exc: Exception) -> str:
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        cause = {
            "SIGXCPU": "it used up its CPU-time limit",
            "SIGKILL": "it was killed (out of memory?)",
            "SIGSEGV": "it crashed (segmentation fault)",
            "SIGXFSZ": "it wrote a file over the file-size limit",
        }.get(name, f"it was stopped by {name}")
    elif returncode is not None:
        cause = f"it exited with status {returncode}"
    else:
        cause = f"its channel failed ({exc})"
    return f"The code worker died: {cause}. The session was reset: variables from earlier calls are gone."


def timeout_fix(operation: object = None) -> str:
    """What an agent can do about a timeout: only steps the operation (or the API) offers.

    ``operation`` is the classic tool's catalog name when one operation ran; None for agent code,
    which may have called anything, so the steps name the functions that shrink the work.
    """
    from llmc_mcp.operations import CATALOG

    op = next((o for o in CATALOG if o.qualname == operation), None)
    operator = "or ask the server's operator to raise --exec-timeout (LLMC_MCP_EXEC_TIMEOUT)."
    if op is None:
        return (
            "Do less per call: raster.clip a part of the input first and work on that, coarsen it with "
            "raster.reproject(..., resolution=...), pass approx=True to raster.stats, or handle fewer files "
            "per execute_code call; " + operator
        )
    fields = op.arguments.model_fields
    steps = []
    if "approx" in fields:
        steps.append("pass approx=true")
    if "bounds" in fields:
        steps.append("pass bounds covering a part")
    if "resolution" in fields:
        steps.append("ask for a coarser resolution")
    if "points" in fields or "pour_points" in fields:
        steps.append("send fewer points per call")
    if op.namespace in ("raster", "terrain", "hydrology") and "bounds" not in fields:
        steps.append(f"run raster_clip on a part of the input first and {op.tool_name} on that part")
    if not steps:
        steps.append("do less per call")
    text = f"{'; '.join(steps)}; {operator}"
    return text[0].upper() + text[1:]


def _limit_failure(kind: str, message: str, fix: str, *, reset: bool = True) -> dict[str, Any]:
    return {
        "ok": False,
        "stdout": "",
        "stdout_dropped": 0,
        "result": None,
        "error": {"type": kind, "message": message, "fix": fix, "line": 0, "traceback": ""},
        "session": {"fresh": True, "reset": True} if reset else {"fresh": False},
    }
