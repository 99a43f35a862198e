"""What a worker may ask the server while an operation or agent code runs.

Workers are untrusted (they run agent code and parse hostile files), so every request is
answered here, in the server, under the rules of the session that asked: the gate's decisions
and the store never leave this process. A request that fails unexpectedly costs its session one
log line, not a traceback per call (:class:`LogBudget`), so one session cannot flood the host's
log; the agent gets an error it can act on.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from llmc_mcp.errors import InvalidArgument, LlmcError, PathRefused
from llmc_mcp.jobs.runner import JobRunner, bind_progress, job_pool_settings
from llmc_mcp.jobs.store import JobStore
from llmc_mcp.operations import Operation, get_operation
from llmc_mcp.operations.hydrology.compiled import start_warming
from llmc_mcp.operations.workflows.engine import Engine, ReviewNeeded
from llmc_mcp.operations.workflows.service import CALLS as WORKFLOW_CALLS
from llmc_mcp.operations.workflows.service import serve as serve_workflow
from llmc_mcp.outputs.disk import process_identity
from llmc_mcp.provenance.report import decisions, every_record
from llmc_mcp.reflection.gate import Hint
from llmc_mcp.reflection.sampling import justify
from llmc_mcp.reflection.schema import Justification
from llmc_mcp.reflection.specs import check_facts
from llmc_mcp.remote.allowlist import MAX_URL_CHARS
from llmc_mcp.remote.fetcher import Fetcher
from llmc_mcp.remote.reader import MAX_RANGES_PER_READ, MAX_READ_BYTES
from llmc_mcp.remote.transport import RemoteFile
from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.sandbox.wall_clock import paused_wall_clock
from llmc_mcp.server.progress import relay_progress
from llmc_mcp.server.requests import current_request
from llmc_mcp.server.resumable import abandon_questions
from llmc_mcp.server.review import ask_person, persist_reviewed, review_message
from llmc_mcp.server.runtime import Runtime
from llmc_mcp.server.samplers import sampler_for
from llmc_mcp.sessions import current_session, job_session, principal

log = logging.getLogger(__name__)

MAX_DOCUMENT_BODY = 65536
"""Characters of a worker's request body for a remote document (a STAC search: a few filters)."""

MAX_ABOUT_CHARS = 2000
"""What a worker may say about the data a decision concerns (it goes into a sampling question)."""


class ServerFault(LlmcError):
    """The server failed to serve a worker's request; the details are in the server log."""

    kind = "internal_error"


class JobEnded(LlmcError):
    """A job ended without a result to give: its error, under the job's own error type."""

    def __init__(self, kind: str, message: str, fix: str | None):
        super().__init__(message, fix=fix)
        self.kind = kind[:60]


class LogBudget:
    """How much one session may make the server log: a traceback once, then a line per failure.

    ``lines`` lines per ``window`` seconds per session; past that, failures are counted and the count
    is logged when the window turns over. Agent code can make a request fail on purpose in a loop;
    without a budget each failure would write a traceback to the host's log.
    """

    def __init__(self, lines: int = 20, window: float = 60.0):
        self.lines = lines
        self.window = window
        self._state: dict[str, tuple[float, int, int, set[str]]] = {}
        self._lock = threading.Lock()

    def failure(self, session: str | None, method: str, exc: BaseException) -> None:
        key = session or "-"
        now = time.monotonic()
        with self._lock:
            start, used, dropped, traced = self._state.get(key, (now, 0, 0, set()))
            if now - start > self.window:
                if dropped:
                    log.warning("session %s: %d more failed requests were not logged", key[:12], dropped)
                start, used, dropped = now, 0, 0
            kind = type(exc).__name__
            if used >= self.lines:
                self._state[key] = (start, used, dropped + 1, traced)
                return
            first = kind not in traced
            traced.add(kind)
            self._state[key] = (start, used + 1, dropped, traced)
        log.error(
            "session %s: worker request %.40r failed: %s",
            key[:12],
            method,
            kind,
            exc_info=exc if first else None,
        )

    def forget(self, session: str) -> None:
        with self._lock:
            self._state.pop(session, None)


class HostRequests:
    """The server's side of every worker channel: ``await host(method, params)``.

    The session asking is :data:`~llmc_mcp.sessions.current_session` (set by the worker pool).
    """

    def __init__(self, runtime: Runtime, *, log_budget: LogBudget | None = None):
        self._gate = runtime.gate
        self._outputs = runtime.outputs
        self._workspace = runtime.context.workspace
        self._reflection = runtime.settings.reflection
        self._sampling_timeout = runtime.settings.sampling_timeout
        self._min_confidence = runtime.settings.min_confidence
        self._review_timeout = runtime.settings.review_timeout
        self.log_budget = log_budget or LogBudget()
        self._handlers: dict[str, Callable[[Mapping[str, Any]], Any]] = {
            "gate.check": self._check,
            "gate.persist": self._persist,
            "gate.report": self._report,
            "outputs.begin": self._begin_output,
            "outputs.writable": self._writable_output,
            "outputs.commit": self._commit_output,
            "outputs.abort": self._abort_output,
            "outputs.owned": self._owned_outputs,
            "outputs.remove": self._remove_output,
            "outputs.verify_records": self._verify_records,
            "jobs.start": self._start_job,
            "jobs.status": self._job_status,
            "jobs.wait": self._wait_job,
            "jobs.result": self._job_result,
            "jobs.cancel": self._cancel_job,
            "jobs.list": self._list_jobs,
            "engine.operate": self._engine_operate,
            "remote.stat": self._remote_stat,
            "remote.read": self._remote_read,
            "remote.document": self._remote_document,
        }
        self._fetcher = runtime.fetcher
        self.jobs: JobRunner | None = None
        """The server's jobs, once its pools exist (:func:`worker_pools`)."""
        self._workflows = Engine(
            runtime.context.workspace,
            runtime.gate,
            face=runtime.settings.mode,
            ttl_seconds=runtime.settings.workflow_ttl_hours * 3600,
            min_confidence=runtime.settings.min_confidence,
            outputs=runtime.outputs,
        )
        self._workflows.states.sweep()  # runs that expired while no server was running
        for call in WORKFLOW_CALLS:
            self._handlers[f"workflows.{call}"] = functools.partial(self._workflow, call)

    async def __call__(self, method: str, params: Mapping[str, Any]) -> Any:
        handler = self._handlers.get(method)
        if handler is None:
            raise InvalidArgument(f"unknown worker request {method[:40]!r}")
        try:
            if inspect.iscoroutinefunction(handler):
                return await handler(params)
            return await anyio.to_thread.run_sync(functools.partial(handler, params))
        except LlmcError:
            raise
        except Exception as exc:
            self.log_budget.failure(current_session.get(), method, exc)
            raise ServerFault(
                f"The server could not serve {method} ({type(exc).__name__}).",
                fix="Check the arguments; if it persists, report it with the server log.",
            ) from None

    async def worker_discarded(self, session: str) -> None:
        """A session's worker is gone (killed, crashed, reaped or closed): forget what was its.

        A worker killed mid-write (wall clock, crash) never ran its own cleanup: its temporary
        files, and the folders its writes created, are removed here.
        """
        self.log_budget.forget(session)
        await anyio.to_thread.run_sync(self._outputs.discard_worker, session)

    def _remote(self) -> Fetcher:
        if self._fetcher is None:
            raise PathRefused(
                "this server reads no URLs.",
                fix="Pass a file inside the workspace; the operator can allow URL prefixes with "
                "--allow-remote.",
            )
        return self._fetcher

    def _remote_stat(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A worker reaching a URL: checked against the allowlist here, whatever the worker checked."""
        return self._remote().stat(str(params.get("url"))[:MAX_URL_CHARS + 1]).to_dict()

    def _remote_read(self, params: Mapping[str, Any]) -> list[str]:
        file = RemoteFile.from_dict(params.get("file"))
        ranges = _byte_ranges(params.get("ranges"))
        return [base64.b64encode(data).decode("ascii") for data in self._remote().read(file, ranges)]

    def _remote_document(self, params: Mapping[str, Any]) -> str:
        method = params.get("method", "GET")
        if method not in ("GET", "POST"):
            raise InvalidArgument("remote.document: method must be GET or POST")
        body = params.get("body")
        if body is not None and len(json.dumps(body, default=str)) > MAX_DOCUMENT_BODY:
            raise InvalidArgument(f"remote.document: the request body is over {MAX_DOCUMENT_BODY} characters")
        data = self._remote().document(str(params.get("url"))[:MAX_URL_CHARS + 1], method, body)
        return base64.b64encode(data).decode("ascii")

    def _begin_output(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return self._outputs.begin(_session(), str(params.get("dst"))).to_dict()

    def _writable_output(self, params: Mapping[str, Any]) -> None:
        self._outputs.check_writable(str(params.get("dst")))

    def _commit_output(self, params: Mapping[str, Any]) -> None:
        self._outputs.commit(_session(), str(params.get("token")))

    def _abort_output(self, params: Mapping[str, Any]) -> None:
        self._outputs.abort(_session(), str(params.get("token")))

    def _owned_outputs(self, params: Mapping[str, Any]) -> list[str]:
        return self._outputs.owned()

    def _remove_output(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``files.remove``: decided here, never in the worker, which can write the ledger file."""
        return self._outputs.remove(_session(), params.get("path")).to_dict()

    def _verify_records(self, params: Mapping[str, Any]) -> list[bool]:
        """Which provenance records this server sealed: a yes or no each, the key stays here."""
        claims = params.get("claims")
        if not isinstance(claims, list):
            raise InvalidArgument("claims: a list of [digest, signature] pairs is expected.")
        pairs = [(str(c[0]), str(c[1])) if isinstance(c, list) and len(c) == 2 else ("", "") for c in claims]
        return self._outputs.verify_records(pairs)

    async def _workflow(self, call: str, params: Mapping[str, Any]) -> Any:
        """A workflow call for the principal of the session asking: it reaches that principal's runs only.

        A ``requires`` answer below ``--min-confidence`` is put to the user first (outside the state
        lock), then submitted again with the approval; declined, nothing is saved.
        """
        who = principal(_session())
        try:
            return await anyio.to_thread.run_sync(serve_workflow, self._workflows, call, params, who)
        except ReviewNeeded as needed:
            justification = Justification.model_validate(params.get("answer"))
            message = review_message(
                str(needed.details["operation"]),
                dict(needed.details["decision"]),
                justification,
                self._min_confidence,
            )
            review = await ask_person(current_request.get(), message, self._review_timeout)
            return await anyio.to_thread.run_sync(
                functools.partial(serve_workflow, self._workflows, call, params, who, review)
            )

    async def _check(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The gate's answer for one operation call; a miss is first put to the host's model when it
        can be (:meth:`_in_band`), and only what that leaves unjustified goes back as hints."""
        op = get_operation(str(params.get("operation")))
        args = op.validate(params.get("args") or {})
        facts = check_facts(params.get("facts"))
        session = _session()
        hints = await anyio.to_thread.run_sync(
            functools.partial(self._gate.check, op, args, facts=facts, session=session)
        )
        if hints:
            about = str(params.get("about") or "")[:MAX_ABOUT_CHARS]
            hints = await self._in_band(op, args, facts, hints, session, about)
        # With nothing missing, the records themselves: the reasons the output's provenance gives.
        records = [] if hints else await anyio.to_thread.run_sync(self._gate.justifications, op, args, facts)
        return {
            "hints": [h.model_dump(exclude_none=True) for h in hints],
            "next_action": self._gate.next_action,
            "justifications": [r.model_dump(mode="json", exclude={"digest"}) for r in records],
        }

    async def _in_band(
        self,
        op: Operation,
        args: Mapping[str, Any],
        facts: Mapping[str, str],
        hints: list[Hint],
        session: str,
        about: str,
    ) -> list[Hint]:
        """Ask the host's model for each missing justification (``--reflection``); what is left.

        The worker waits on this request meanwhile; its wall clock is paused (each question has its
        own timeout), so a slow model does not spend the agent's code time.
        """
        if self._reflection == "hints":
            return hints
        ask, refusal = sampler_for(current_request.get())
        if ask is None:
            # With "auto", a client that cannot sample is the ordinary hint flow, not a failure.
            if self._reflection == "auto":
                return hints
            return [h.model_copy(update={"fallback": refusal}) for h in hints]
        subjects = {self._gate.key(d): str(d.args[d.subject]) for d in op.decisions(args, facts)}
        left = []
        with paused_wall_clock():
            for hint in hints:
                why = await justify(
                    hint,
                    functools.partial(self._persist_sampled, hint, session),
                    subject=subjects.get(hint.hash, ""),
                    about=about,
                    ask=ask,
                    timeout=self._sampling_timeout,
                )
                if why is not None:
                    left.append(hint.model_copy(update={"fallback": why}))
        return left

    async def _persist_sampled(self, hint: Hint, session: str, justification: object, model: str) -> None:
        """Store the host model's justification as an agent's is stored: validated, reviewed when
        below ``--min-confidence``, marked as sampled."""
        await persist_reviewed(
            self._gate,
            current_request.get(),
            self._min_confidence,
            hint.hash,
            hint.domain,
            justification,
            session=session,
            answered_by=f"sampling: {model}",
            timeout=self._review_timeout,
        )

    async def _persist(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """An agent's ``reflection.persist``: validated, reviewed by the user when below
        ``--min-confidence``, stored."""
        result = await persist_reviewed(
            self._gate,
            current_request.get(),
            self._min_confidence,
            params.get("hash"),
            params.get("domain"),
            params.get("justification"),
            session=_session(),
            timeout=self._review_timeout,
            supersede=params.get("supersede") is True,
        )
        return result.model_dump()

    def _runner(self) -> JobRunner:
        if self.jobs is None:
            raise ServerFault("This server runs no jobs.", fix="Run the operation directly.")
        return self.jobs

    async def _start_job(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``jobs.start``: the worker has checked and gated the operation (in the agent's call)."""
        op, args = _operation_call("jobs.start", params)
        record = await self._runner().start_operation(_session(), op.qualname, args)
        return record.public()

    async def _engine_operate(self, params: Mapping[str, Any]) -> Any:
        """``engine.operate`` (``--engine dask``): an operation of a session's call, checked and gated
        in the session's worker, whose work runs in the session's engine worker: a worker of the job
        pool that runs operations only and holds the cluster's client. The call's own wall clock
        bounds it: a call stopped there cancels this request, which stops that worker."""
        op, args = _operation_call("engine.operate", params)
        answer = await self._runner().pool.operate(job_session(_session(), "engine"), op.qualname, args)
        if answer.get("ok"):
            return answer.get("result")
        error = answer.get("error") or {}
        kind, message = str(error.get("type", "engine_failed")), str(error.get("message", ""))
        raise JobEnded(kind, message, error.get("fix"))

    def _job_status(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return self._runner().get(principal(_session()), params.get("job")).public()

    async def _wait_job(self, params: Mapping[str, Any]) -> dict[str, Any]:
        timeout = params.get("timeout")
        seconds = float(timeout) if isinstance(timeout, int | float) else 0.0
        record = await self._runner().wait(principal(_session()), params.get("job"), min(seconds, 60.0))
        return record.public()

    def _job_result(self, params: Mapping[str, Any]) -> Any:
        record = self._runner().get(principal(_session()), params.get("job"))
        if record.status == "working":
            raise InvalidArgument(
                f"Job {record.id} is still running ({record.message}).",
                fix="jobs.wait(job) until its status is completed, then jobs.result(job).",
            )
        if record.status == "cancelled":
            raise JobEnded(
                "cancelled", f"Job {record.id} was cancelled; it has no result.", "Start it again."
            )
        answer = record.answer or {}
        if record.status == "failed":
            error = answer.get("error") or {}
            raise JobEnded(
                str(error.get("type", "job_failed")),
                f"Job {record.id} failed: {error.get('message', 'no reason given')}",
                error.get("fix"),
            )
        return answer.get("result")

    async def _cancel_job(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return (await self._runner().cancel(principal(_session()), params.get("job"))).public()

    def _list_jobs(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [record.public() for record in self._runner().jobs_of(principal(_session()))[:50]]

    def _report(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        entries = decisions(every_record(self._gate.store), self._workspace, self._outputs)
        return [entry.model_dump() for entry in entries]


def _operation_call(method: str, params: Mapping[str, Any]) -> tuple[Operation, dict[str, Any]]:
    """The catalog operation a worker's request names, and its arguments (a mapping, or refused)."""
    op = get_operation(str(params.get("operation")))
    args = params.get("args")
    if not isinstance(args, dict):
        raise InvalidArgument(f"{method}: the operation's arguments must be a mapping.")
    return op, args


def _byte_ranges(value: Any) -> list[tuple[int, int]]:
    """A worker's list of (offset, length) pairs, refused unless it is small and well formed."""
    if not isinstance(value, list) or len(value) > MAX_RANGES_PER_READ:
        raise InvalidArgument(f"remote.read: ranges must be a list of at most {MAX_RANGES_PER_READ} pairs")
    ranges = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in item)
        ):
            raise InvalidArgument("remote.read: each range is [offset, length] with non-negative integers")
        ranges.append((item[0], item[1]))
    if sum(length for _, length in ranges) > MAX_READ_BYTES:
        raise InvalidArgument(f"remote.read: at most {MAX_READ_BYTES} bytes per request")
    return ranges


def _session() -> str:
    """The key of the session whose worker asks (the pool sets it for every request).

    Without one the request is refused: charging it to some default session would let it spend that
    session's quota and remove what it wrote.
    """
    session = current_session.get()
    if session is None:
        raise RuntimeError("a worker request arrived outside any session")
    return session


def worker_pools(runtime: Runtime) -> tuple[WorkerPool, JobRunner]:
    """The pool of confined workers every call of either face runs in, and the server's jobs, whose
    workers are a pool of their own under the job limits; both are served by one host."""
    host = HostRequests(runtime)
    workspace = str(runtime.context.workspace.root)
    start_warming(runtime.settings.kernel_cache_root)  # the workers' routing kernels (DD-MCP-100)
    job_workers = WorkerPool(
        job_pool_settings(runtime.settings),
        workspace,
        host,
        on_discard=host.worker_discarded,
        timeout_flag="--job-timeout",
        evict_idle_when_full=True,
        engine_address=runtime.settings.dask_scheduler if runtime.settings.engine == "dask" else None,
        engine_credentials=runtime.engine_credentials,
    )
    store = JobStore(runtime.context.workspace.root)
    runner = JobRunner(runtime.settings, store, job_workers, process_identity(os.getpid()))
    runner.recover()
    # A call handed to an engine worker (--engine dask) reports to its client; a job, to its record
    # (jobs run in a context of their own, where relay_progress finds no request and does nothing).
    job_workers.set_progress(bind_progress(relay_progress, runner.progress_relay))
    host.jobs = runner
    pool = WorkerPool(
        runtime.settings,
        workspace,
        host,
        on_discard=host.worker_discarded,
        prestarted=runtime.prestarted,
        on_progress=bind_progress(relay_progress, runner.progress_relay),
        before_call=abandon_questions,
    )
    return pool, runner
