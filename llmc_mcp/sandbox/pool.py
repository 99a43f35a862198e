"""Worker processes per session, and the limits the server enforces on them.

One piece: every method here reads or changes the same map of live workers, their per-session
locks, the count of those starting and the spare, and the bounds below hold only if they all do. What a
worker is (:mod:`.workers`), starting one and the requests exchanged with it (:mod:`.exchange`), what a
failed call returns (:mod:`.failures`), the wall clock (:mod:`.wall_clock`) and progress relaying
(:mod:`.relay`) live beside it.

The server owns the wall clock: each call runs under ``anyio.fail_after``;
on expiry the worker's whole process group is killed and the session starts
afresh on its next call. A worker that dies (segfault, OOM kill, CPU rlimit)
costs its session its variables and nothing else. While agent code runs, the
worker's requests (gate decisions, persisting) are served in the trusted
process by the pool's :data:`~.exchange.HostHandler`.

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
  continues at nice :data:`~.workers.DEMOTED_NICE` (its scheduler autogroup, and its process group
  too) while another session has a call in flight that is still interactive (younger than
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
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from llmc_mcp.config import Settings
from llmc_mcp.sandbox.channel import ChannelClosed, ProtocolError
from llmc_mcp.sandbox.exchange import HostHandler, request, start_worker
from llmc_mcp.sandbox.failures import CRASH_FIX, crash_message, limit_failure, refused_code, timeout_fix
from llmc_mcp.sandbox.relay import ProgressHandler
from llmc_mcp.sandbox.wall_clock import wall_clock
from llmc_mcp.sandbox.workers import (
    Worker,
    WorkerStartError,
    kernel_cache,
    stop_worker,
    worker_config,
)

log = logging.getLogger(__name__)

DEMOTE_AFTER = 1.0
"""Seconds into a call after which its worker runs at :data:`~.workers.DEMOTED_NICE`: short
interactive calls of other sessions then get the CPU first, and a runaway loop costs the others
little until its timeout."""
PRIORITY_CHECK = 0.25
"""Seconds between two looks at whether a long call should give way to another session's."""
EXIT_GRACE = 1.0
"""Seconds a worker whose channel closed gets to exit by itself, so its real status is reported."""
REAP_INTERVAL_MAX = 60.0


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
        timeout_flag: str = "--exec-timeout",
        evict_idle_when_full: bool = False,
        engine_address: str | None = None,
        engine_credentials: Path | None = None,
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
        if engine_address is not None:
            # Engine workers: operations only, never agent code, each with a client of this cluster.
            credentials = None if engine_credentials is None else str(engine_credentials)
            update = {
                "dask_scheduler": engine_address,
                "dask_worker_ports": settings.dask_worker_ports,
                "dask_credentials": credentials,
            }
            self._config = self._config.model_copy(update=update)
        self._prestarted = prestarted
        """A worker started before the event loop (:func:`start_worker_early`): the first spare."""
        self.max_workers = max_workers or settings.max_workers
        self.timeout_flag = timeout_flag
        """The flag a timeout's message names (a pool of job workers names ``--job-timeout``)."""
        self.evict_idle_when_full = evict_idle_when_full
        """Whether a full pool stops its idle workers at once for a new key (a job pool: they hold no
        session's variables, only warm imports), rather than refusing it until they reach the TTL."""
        self._workers: dict[str, Worker] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._starting = 0
        self._bound: set[str] = set()
        self._held: dict[str, bool] = {}
        """Sessions whose worker runs a task, and whether their session ended meanwhile (:meth:`hold`)."""
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

    async def execute(
        self, key: str, code: str, reset: bool, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Run agent code in the session's worker (code mode)."""
        refused = refused_code(code)
        if refused is not None:
            return refused
        params: dict[str, Any] = {"code": code, "reset": reset}
        if timeout is not None:
            params["seconds"] = timeout  # what the code's own jobs.wait may spend
        return await self.run(key, "execute", params, reset=reset, timeout=timeout)

    async def operate(self, key: str, operation: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Run one catalog operation in the session's worker (classic mode): the same confined path."""
        return await self.run(key, "operation", {"operation": operation, "args": dict(args)})

    async def preflight(self, key: str, operation: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check and gate one operation in the session's worker without doing its work (a task's start)."""
        return await self.run(key, "preflight", {"operation": operation, "args": dict(args)})

    async def run(
        self,
        key: str,
        method: str,
        params: dict[str, Any],
        *,
        reset: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request to the session's worker under the wall clock; limits become failures.

        The answer is the worker's (``ok``, ``result``, ``error``...) or, when a limit ended the call,
        a failure of the same shape saying which limit and what happened to the session. ``timeout``
        replaces ``--exec-timeout`` for this call (a task's, bounded by ``--job-timeout``).
        """
        limit = self.settings.exec_timeout if timeout is None else timeout
        if self._before_call is not None:
            await self._before_call(key)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            reaper_running = self._reaper is not None and not self._reaper.done()
            full = len(self._workers) + self._starting >= self.max_workers
            if not reaper_running or full:
                # Normally the background reaper's job; inline when full, where a pool whose idle
                # workers are only kept warm (a job pool's) lets every idle one go.
                await self.reap_idle(idle_after=0.0 if full and self.evict_idle_when_full else None)
            worker = self._workers.get(key)
            fresh = worker is None
            if worker is None:
                if len(self._workers) + self._starting >= self.max_workers:
                    return limit_failure(
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
                    return limit_failure(
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
                with wall_clock(limit):
                    result = await request(worker, method, params, self._handler, self._on_progress)
            except TimeoutError:
                await self._discard(key)
                return limit_failure(
                    "Timeout",
                    f"The call ran longer than the {limit:g} s limit ({self.timeout_flag}) "
                    "and was stopped; nothing was written. The session was reset: variables from earlier "
                    "calls are gone.",
                    timeout_fix(params.get("operation") if method == "operation" else None),
                )
            except (ChannelClosed, ProtocolError) as exc:
                returncode = await self._discard(key, grace=EXIT_GRACE)
                return limit_failure("WorkerCrashed", crash_message(returncode, exc), CRASH_FIX)
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

    def set_progress(self, on_progress: ProgressHandler) -> None:
        """Where the workers' progress goes from now on (a job pool's is its runner, made after it)."""
        self._on_progress = on_progress

    def hold(self, key: str) -> None:
        """Keep the session's worker while a task runs in it, even if its connection ends meanwhile:
        :meth:`close_session` is then put off until :meth:`release`, not waited for."""
        self._held.setdefault(key, False)

    async def release(self, key: str) -> None:
        """The task holding the session's worker ended: close the session now if it ended meanwhile."""
        if self._held.pop(key, False):
            await self.close_session(key)

    async def close_session(self, key: str) -> None:
        """Stop the session's worker (if any) and forget the session."""
        self._bound.discard(key)
        if key in self._held and not self._closed:
            self._held[key] = True
            return
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

    async def reap_idle(self, now: float | None = None, idle_after: float | None = None) -> int:
        """Stop workers idle longer than the TTL (or ``idle_after`` seconds); their sessions start fresh
        if they come back."""
        now = time.monotonic() if now is None else now
        reaped = 0
        for key, worker in list(self._workers.items()):
            lock = self._locks.get(key)
            busy = lock is not None and lock.locked()
            ttl = idle_after if idle_after is not None else worker.idle_ttl or self.settings.idle_ttl
            idle = now - worker.last_used >= ttl
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
            await stop_worker(spare)

    async def _make_spare(self) -> None:
        prestarted, self._prestarted = self._prestarted, None
        try:
            worker = await self._spawn("spare", counted=False, process=prestarted)
        except WorkerStartError as exc:
            log.warning("spare worker could not be started (%s); sessions start their own", exc)
            return
        if self._closed or self._spare is not None:
            await stop_worker(worker)
            return
        self._spare = worker

    async def _take_spare(self, key: str) -> Worker | None:
        """The spare for session ``key`` (waiting for it if it is starting), or None."""
        task = self._spare_task
        if self._spare is None and task is not None and not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                # The spare's start was stopped (its last connection ended): no spare, not our cancel.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception:
                pass
        worker, self._spare = self._spare, None
        if worker is None:
            return None
        if worker.process.returncode is not None:
            await stop_worker(worker)
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
        # The warm-up may have finished the kernel cache since the pool began.
        config = self._config.model_copy(update={"kernel_cache": kernel_cache(self.settings)})
        try:
            return await start_worker(key, config, process)
        finally:
            self._starting -= counted

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


def _call_later(delay: float, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle | None:
    """Run ``callback(*args)`` on this event loop after ``delay`` seconds, unless cancelled (asyncio only)."""
    try:
        return asyncio.get_running_loop().call_later(delay, callback, *args)
    except RuntimeError:
        return None
