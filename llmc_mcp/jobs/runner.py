"""Running jobs: each in a confined worker, under its own limits, outliving the call that started it.

A job is started by a call (``jobs.start`` in agent code, or a tool call a client let become a task),
after that call has checked and gated it; from then on it belongs to no request. It runs in an
asyncio task of its own with a fresh context, so nothing it does can reach the client that started
it (no sampling, no elicitation, no progress notification on a request that may be gone): a job
never waits on a question. Its progress, status and answer are kept here, and its record on disk
(:class:`~llmc_mcp.jobs.store.JobStore`) from the moment it is handed out.

Limits, each named in its refusal: ``--max-jobs`` running on the server, ``--max-session-jobs`` per
session, :data:`MAX_KEPT` kept per principal; ``--job-timeout`` and ``--job-memory-mb`` per job, whose
worker is otherwise a call's (rlimits, Landlock, GDAL hardening, no network), and the session's disk
quotas, since the worker writes for the session's principal. Cancelling kills the worker's process
group at once; what it was writing is removed by the pool's discard, as for a call that timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from llmc_mcp.config import Settings
from llmc_mcp.errors import LlmcError, NotFound
from llmc_mcp.jobs.models import TERMINAL, JobKind, JobRecord, JobStatus, new_job_id
from llmc_mcp.jobs.store import LOST, JobStore, bounded_answer, lost_answer
from llmc_mcp.remote.transport import call_scope
from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.sandbox.relay import ProgressHandler
from llmc_mcp.sessions import job_session, principal

log = logging.getLogger(__name__)

MAX_KEPT = 200
"""Jobs one principal may hold (running, or ended and not yet expired): each keeps a record and a result."""
CANCEL_GRACE = 5.0
"""Seconds a cancelled job's task gets to kill its worker and record the cancellation."""
SWEEP_EVERY = 60.0
POLL_OTHERS = 1.0
"""Seconds between two reads of the record of a job another server process runs."""

current_job: contextvars.ContextVar[str | None] = contextvars.ContextVar("llmc_current_job", default=None)
"""The job whose work is running (set in the job's own task): where its progress goes."""


class JobLimit(LlmcError):
    """A job could not be started: a limit on running or kept jobs was reached. Nothing ran."""

    kind = "limit"


class JobNotFound(NotFound):
    """No job of this principal has this id (unknown, expired, or someone else's: they look the same)."""


@dataclass
class _Live:
    record: JobRecord
    done: anyio.Event = field(default_factory=anyio.Event)
    task: asyncio.Task[None] | None = None
    cancelling: bool = False
    slot: int | None = None


class JobRunner:
    """Starts, follows and stops the jobs of one server, and answers for them after they end."""

    def __init__(self, settings: Settings, store: JobStore, pool: WorkerPool, server: str):
        self.settings = settings
        self.store = store
        self.pool = pool
        """Where operation jobs run: a pool of job workers (``--job-timeout``, ``--job-memory-mb``)."""
        self.server = server
        self._live: dict[str, _Live] = {}
        """Jobs this process runs, until their end is recorded on disk."""
        self._index: dict[str, JobRecord] = {}
        """Every job known to be kept, without its result: what limits and lists are computed from,
        so that neither reads every record file (each may hold a result of up to a MiB)."""
        self._last_sweep = 0.0

    def recover(self) -> int:
        """At start: jobs a stopped server left working are failed with that reason; expired ones go.

        The only time every record file is read; afterwards the index is kept as jobs start and end.
        """
        kept, lost = self.store.reconcile(self.server, self.settings.task_ttl)
        self._index = {record.id: _summary(record) for record in kept}
        self._last_sweep = time.monotonic()
        if lost:
            log.warning("%d job(s) were running when the last server stopped; marked failed", lost)
        return lost

    # ------------------------------------------------------------------------------------ starting

    async def start_operation(self, session: str, operation: str, args: dict[str, Any]) -> JobRecord:
        """Run a catalog operation (already checked and gated by the caller) in a job worker.

        Each session has ``--max-session-jobs`` worker slots; a slot's worker stays warm between the
        session's jobs (an operation leaves nothing behind in it) and is never another session's, so
        a worker a hostile file subverted can reach no one else's job. A job that is cancelled, times
        out or crashes has its worker killed; the slot's next job starts a fresh one.
        """
        slot = self._free_slot(session)

        async def work(_job_id: str) -> dict[str, Any]:
            return await self.pool.operate(job_session(session, f"w{slot}"), operation, args)

        return await self._start(session, "operation", operation, work, slot=slot)

    def _free_slot(self, session: str) -> int:
        taken = {
            live.slot
            for live in self._live.values()
            if live.record.session == session and live.record.status == "working"
        }
        return min(set(range(self.settings.max_session_jobs + 1)) - taken)

    async def start_code(self, session_pool: WorkerPool, key: str, code: str, reset: bool) -> JobRecord:
        """Run agent code in its session's own worker (its variables persist), under ``--job-timeout``."""
        session_pool.hold(key)

        async def work(_job_id: str) -> dict[str, Any]:
            try:
                return await session_pool.execute(key, code, reset, timeout=self.settings.job_timeout)
            finally:
                with anyio.CancelScope(shield=True):
                    await session_pool.release(key)

        try:
            return await self._start(key, "code", "execute_code", work)
        except BaseException:
            await session_pool.release(key)
            raise

    def running_code(self, key: str) -> JobRecord | None:
        """The ``execute_code`` task running in session ``key``'s worker, if one is."""
        for live in self._live.values():
            record = live.record
            if record.kind == "code" and record.session == key and record.status == "working":
                return record
        return None

    async def _start(
        self,
        session: str,
        kind: JobKind,
        name: str,
        work: Callable[[str], Awaitable[dict[str, Any]]],
        slot: int | None = None,
    ) -> JobRecord:
        self._check_limits(session)
        now = time.time()
        record = JobRecord(
            id=new_job_id(),
            principal=principal(session) or session,
            session=session,
            kind=kind,
            name=name,
            message="queued",
            created=now,
            updated=now,
            server=self.server,
        )
        # Durable before it is handed out: a client may poll for it at once, or after a restart.
        await anyio.to_thread.run_sync(self.store.save, record)
        live = _Live(record, slot=slot)
        self._live[record.id] = live
        self._index[record.id] = record
        # A fresh context: nothing of the starting request (its client, its session) reaches the job.
        live.task = asyncio.get_running_loop().create_task(
            self._run(live, work), name=f"llmc-job-{record.id[:12]}", context=contextvars.Context()
        )
        return record

    def _check_limits(self, session: str) -> None:
        running = [live.record for live in self._live.values() if live.record.status == "working"]
        if len(running) >= self.settings.max_jobs:
            raise JobLimit(
                f"The server already runs {len(running)} jobs, its limit (--max-jobs "
                f"{self.settings.max_jobs}). Nothing was started.",
                fix="Wait for a job to end (jobs.wait) or cancel one; the operator can raise --max-jobs.",
            )
        mine = [r for r in running if r.session == session]
        if len(mine) >= self.settings.max_session_jobs:
            raise JobLimit(
                f"This session already runs {len(mine)} jobs, its limit (--max-session-jobs "
                f"{self.settings.max_session_jobs}). Nothing was started.",
                fix="Wait for one to end (jobs.wait) or cancel one; the operator can raise "
                "--max-session-jobs.",
            )
        who = principal(session) or session
        self._sweep_now_and_then()
        kept = sum(1 for r in self._index.values() if r.principal == who)
        if kept >= MAX_KEPT:
            raise JobLimit(
                f"{kept} jobs of yours are kept (running, or ended and not expired), the most there may be "
                f"({MAX_KEPT}). Nothing was started.",
                fix=f"Ended jobs expire {self.settings.task_ttl:g} s after they end (--task-ttl).",
            )

    # ------------------------------------------------------------------------------------ running

    async def _run(self, live: _Live, work: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
        record = live.record
        current_job.set(record.id)
        self._update(live, message="running")
        try:
            with call_scope(fresh=True):  # a job's remote reads count apart from its starting call's
                answer = await work(record.id)
        except asyncio.CancelledError:
            if live.cancelling:
                await self._finish(live, "cancelled", None, "Cancelled; nothing it was writing was kept.")
            else:
                await self._finish(live, "failed", lost_answer(), LOST)
            return
        except Exception as exc:
            log.error("job %s failed unexpectedly: %s", record.id[:12], type(exc).__name__)
            message = f"The job failed unexpectedly ({type(exc).__name__})."
            error = {"type": "internal_error", "message": message, "fix": "Report it with the server log."}
            answer = {"ok": False, "result": None, "error": error}
        answer = self._job_limits(bounded_answer(answer))
        ok = bool(answer.get("ok"))
        error = answer.get("error") or {}
        message = "completed" if ok else str(error.get("message", "failed"))[:500]
        await self._finish(live, "completed" if ok else "failed", answer, message)

    def _job_limits(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A limit met by a job, in the job's terms: its timeout is ``--job-timeout``, and no
        session was reset by it (an operation job's worker is its own)."""
        error = answer.get("error") or {}
        if error.get("type") != "Timeout":
            return answer
        error = {
            **error,
            "message": f"The job ran longer than the {self.settings.job_timeout:g} s limit (--job-timeout) "
            "and was stopped; nothing it was writing was kept.",
            "fix": "Split the work (a smaller extent, a coarser resolution), or ask the operator to raise "
            "--job-timeout.",
        }
        return {**answer, "error": error}

    async def progress_relay(self, progress: float, total: float | None, message: str) -> None:
        """The running job's progress (checked by the pool's relay): a fraction when the total is known;
        progress of a call that is no job's is not its business."""
        job_id = current_job.get()
        live = self._live.get(job_id) if job_id else None
        if live is None or live.record.status != "working":
            return
        fraction = None if not total else min(1.0, max(0.0, progress / total))
        self._update(live, progress=fraction, message=message[:200] or live.record.message)

    def _update(self, live: _Live, **changes: Any) -> None:
        live.record = live.record.model_copy(update={**changes, "updated": time.time()})

    async def _finish(
        self, live: _Live, status: JobStatus, answer: dict[str, Any] | None, message: str
    ) -> None:
        now = time.time()
        live.record = live.record.model_copy(
            update={
                "status": status,
                "answer": answer,
                "message": message,
                "updated": now,
                "finished": now,
                "expires": now + self.settings.task_ttl,
                "progress": 1.0 if status == "completed" else live.record.progress,
            }
        )
        saved = False
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self.store.save, live.record)
                saved = True
            except Exception as exc:  # the answer stays readable from memory while this server runs
                log.error("job %s: its record could not be saved: %s", live.record.id[:12], exc)
        self._index[live.record.id] = _summary(live.record)
        if saved:  # read from disk from now on: results do not pile up in the server's memory
            self._live.pop(live.record.id, None)
        live.done.set()

    # ------------------------------------------------------------------------------------ following

    def get(self, who: str | None, job_id: object) -> JobRecord:
        """The job ``job_id`` of principal ``who``; :class:`JobNotFound` otherwise, whatever the reason."""
        job_id = str(job_id)[:100]
        live = self._live.get(job_id)
        record = live.record if live is not None else self.store.load(job_id)
        if record is None or record.principal != who:
            raise JobNotFound(
                f"No job {job_id[:40]!r} of yours: unknown, or expired and deleted.",
                fix=f"Ended jobs are kept {self.settings.task_ttl:g} s (--task-ttl); start it again if "
                "needed.",
            )
        if record.expires is not None and record.expires <= time.time():
            self.forget(record.id)
            raise JobNotFound(
                f"Job {job_id[:40]!r} has expired: it ended more than {self.settings.task_ttl:g} s ago "
                "(--task-ttl), and it and its result were deleted.",
                fix="Start it again.",
            )
        return record

    async def wait(self, who: str | None, job_id: object, timeout: float) -> JobRecord:
        """The job once it ends, or as it is after ``timeout`` seconds.

        A job another server process runs on this workspace is not in this one's memory: its record
        is read again every :data:`POLL_OTHERS` seconds, so a waiter never spins on it.
        """
        record = self.get(who, job_id)
        live = self._live.get(record.id)
        if record.status in TERMINAL:
            return record
        with anyio.move_on_after(max(0.0, timeout)):
            if live is not None:
                await live.done.wait()
                return live.record
            while record.status not in TERMINAL:
                await anyio.sleep(POLL_OTHERS)
                record = self.get(who, record.id)
        return live.record if live is not None else record

    async def cancel(self, who: str | None, job_id: object) -> JobRecord:
        """Stop a running job: its worker is killed and its writes in flight removed; an ended job is
        left as it is (cancelling it is not an error: it may have ended meanwhile)."""
        record = self.get(who, job_id)
        live = self._live.get(record.id)
        if live is None or record.status in TERMINAL or live.task is None:
            return record
        live.cancelling = True
        live.task.cancel()
        with anyio.move_on_after(CANCEL_GRACE):
            await live.done.wait()
        return live.record

    def jobs_of(self, who: str | None) -> list[JobRecord]:
        """Every unexpired job of principal ``who`` this server knows, newest first, without results."""
        self._sweep_now_and_then()
        now = time.time()
        known = {**self._index, **{job_id: live.record for job_id, live in self._live.items()}}
        mine = [
            _summary(r)
            for r in known.values()
            if r.principal == who and (r.expires is None or r.expires > now)
        ]
        return sorted(mine, key=lambda r: r.created, reverse=True)

    def forget(self, job_id: str) -> None:
        """Delete a job that ended and its record (an answer its client got inline never needs them)."""
        self._live.pop(job_id, None)
        self._index.pop(job_id, None)
        with contextlib.suppress(OSError):
            self.store.delete(job_id)

    def _sweep_now_and_then(self) -> None:
        """Delete the jobs this server knows that expired (others' are swept when a server starts)."""
        if time.monotonic() - self._last_sweep < SWEEP_EVERY:
            return
        self._last_sweep = time.monotonic()
        now = time.time()
        for job_id in [j for j, r in self._index.items() if r.expires is not None and r.expires <= now]:
            self.forget(job_id)


def _summary(record: JobRecord) -> JobRecord:
    """The record without its result (its error, if any, is kept: it is short and lists show it)."""
    if record.answer is None:
        return record
    kept = {k: v for k, v in record.answer.items() if k in ("ok", "error", "lost")}
    return record.model_copy(update={"answer": kept})


JOB_WORKER_IDLE = 120.0
"""Seconds a job worker stays warm for its session's next job (less when the pool is full)."""


def job_pool_settings(settings: Settings) -> Settings:
    """A call's settings, with a job's limits: the job pool's workers are otherwise the same."""
    return settings.model_copy(
        update={
            "exec_timeout": settings.job_timeout,
            "memory_mb": settings.job_memory,
            "max_workers": settings.max_jobs,
            "idle_ttl": min(settings.idle_ttl, JOB_WORKER_IDLE),
        }
    )


def bind_progress(*handlers: ProgressHandler) -> ProgressHandler:
    """One progress handler that calls each of ``handlers`` in turn (a task's progress goes to its
    job; a call's to its client: each handler ignores what is not its own)."""

    async def relay(progress: float, total: float | None, message: str) -> None:
        for handler in handlers:
            await handler(progress, total, message)

    return relay
