"""MCP tasks in both protocol eras, over the server's jobs (DD-MCP-083).

A task is a job (:mod:`llmc_mcp.jobs`) seen through the protocol: its id is the job's id, its
status the job's, its result what the tool call would have returned. Two wire forms:

- **2025-11-25** (the handshake era): the client puts ``task`` on ``tools/call``; the answer is
  ``{"task": {...}}``; it follows with ``tasks/get``, ``tasks/result`` (waits for the end),
  ``tasks/list`` and ``tasks/cancel``. The server declares ``capabilities.tasks`` and marks each tool
  that can run as a task with ``execution.taskSupport: "optional"``.
- **2026-07-28**, the extension ``io.modelcontextprotocol/tasks``: a client that declares it on a
  request may get ``resultType: "task"`` instead of the result; the server decides. Here a call still
  running after ``--task-after`` seconds is handed back as a task, and a shorter one answers inline
  with nothing of its job kept (it costs a few milliseconds more: ``bench/jobs.py``). The client
  follows a task with ``tasks/get`` (the result inline once done), ``tasks/update`` and
  ``tasks/cancel``.

A client that asks for neither gets today's calls, unchanged. The tool handlers decide nothing about
eras: :func:`task_middleware` reads what the request asked for into :data:`task_request`, a tool
that starts a job returns a result marked with :data:`TASK_MARK`, and the middleware turns that into
the era's task answer. The SDK validates a handshake-era ``tools/call`` result as a
``CallToolResult``, which a task answer is not, and a middleware's answer is what is sent.

Tasks are bound to the principal of the session that started them (:func:`~llmc_mcp.sessions.principal`);
another principal asking about one is told there is no such task, as for an unknown id.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import (
    RequestParams,
    ServerTasksCapability,
    ServerTasksRequestsCapability,
    TasksCallCapability,
    TasksCancelCapability,
    TasksListCapability,
    TasksToolsCapability,
)
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from llmc_mcp.errors import LlmcError
from llmc_mcp.jobs.models import TERMINAL, JobRecord
from llmc_mcp.jobs.runner import JobRunner
from llmc_mcp.server.results import error_result
from llmc_mcp.server.sessions import session_key_of
from llmc_mcp.sessions import STATELESS_PREFIX, principal

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TASK_MARK = "llmc-mcp/task"
"""``_meta`` key of the result a tool returns when it handed its work over as a task."""
POLL_INTERVAL_MS = 1000
RESULT_GRACE = 60.0
"""Seconds past ``--job-timeout`` that ``tasks/result`` waits for a job to be recorded as ended."""
LIST_PAGE = 50
LEGACY = frozenset({"2025-11-25"})
MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)

TaskRequest = Literal["always", "race"]
task_request: ContextVar[TaskRequest | None] = ContextVar("llmc_task_request", default=None)
"""What the ``tools/call`` being served asked for: ``always`` a task (2025-11-25 ``task`` field),
``race`` a task if it runs long (2026-07-28 extension declared), None none."""

Render = Callable[[JobRecord], CallToolResult]
"""A job's answer as the tool call would have returned it."""


class TaskParams(RequestParams):
    task_id: str


class ListParams(RequestParams):
    cursor: str | None = None


class UpdateParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


class Tasks:
    """The tasks of one server: handing work over, and answering for it afterwards."""

    def __init__(self, runner: JobRunner, task_after: float):
        self.runner = runner
        self.task_after = task_after
        self._renderers: dict[str, Render] = {}

    def renders(self, kind: str, render: Render) -> None:
        """How a job of ``kind`` (``operation``, ``code``) is shown as a tool result."""
        self._renderers[kind] = render

    @staticmethod
    def wanted() -> TaskRequest | None:
        return task_request.get()

    async def hand_over(self, start: Callable[[], Awaitable[JobRecord]]) -> CallToolResult:
        """Start the job; its result if it ends within ``--task-after`` (2026-07-28 only), else the task."""
        try:
            record = await start()
        except LlmcError as exc:
            return _error(exc)
        if task_request.get() == "race":
            record = await self.runner.wait(record.principal, record.id, self.task_after)
            if record.status in TERMINAL and not _lost(record):
                # Answered inline: the client never saw the task, so nothing is kept of it (else a
                # client making many short calls would fill its principal's kept jobs).
                self.runner.forget(record.id)
                return self.render(record)
        return CallToolResult(
            content=[
                TextContent(
                    type="text",
                    text=f"Started task {record.id}: the work goes on after this call; follow it with "
                    "tasks/get.",
                )
            ],
            _meta={TASK_MARK: record.id},
        )

    def render(self, record: JobRecord) -> CallToolResult:
        render = self._renderers.get(record.kind)
        if render is None or record.answer is None:
            return CallToolResult(content=[TextContent(type="text", text=record.message)], is_error=True)
        return render(record)

    # ------------------------------------------------------------------------------------ wire forms

    def task_fields(self, record: JobRecord, version: str) -> dict[str, Any]:
        """The task as ``tasks/get`` shows it in ``version``'s form (without result or error)."""
        ttl = self._ttl_ms(record)
        fields: dict[str, Any] = {
            "taskId": record.id,
            "status": _status(record),
            "statusMessage": _message(record),
            "createdAt": _iso(record.created),
            "lastUpdatedAt": _iso(record.updated),
        }
        if version in MODERN:
            fields.update(ttlMs=ttl, pollIntervalMs=POLL_INTERVAL_MS)
        else:
            fields.update(ttl=ttl, pollInterval=POLL_INTERVAL_MS)
        return fields

    def detailed(self, record: JobRecord) -> dict[str, Any]:
        """2026-07-28 ``tasks/get``: the task with its result or error inline once it ended."""
        fields = self.task_fields(record, MODERN_PROTOCOL_VERSIONS[0])
        if _lost(record):
            fields["error"] = {"code": INTERNAL_ERROR, "message": record.message}
        elif record.status in ("completed", "failed"):
            fields["result"] = self.render(record).model_dump(by_alias=True, mode="json", exclude_none=True)
        return fields

    def _ttl_ms(self, record: JobRecord) -> int:
        """Until it expires: ``--task-ttl`` after it ended; while it runs, the latest that could be."""
        settings = self.runner.settings
        latest = record.created + settings.job_timeout + settings.task_ttl
        return max(0, int(((record.expires or latest) - record.created) * 1000))

    # ------------------------------------------------------------------------------------ requests

    def record(self, ctx: Any, task_id: str) -> JobRecord:
        try:
            return self.runner.get(_who(ctx), task_id)
        except LlmcError as exc:
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: {exc.message}") from None

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        if ctx.protocol_version in MODERN:
            require_client_extension(ctx, TASKS_EXTENSION)
            return self.detailed(self.record(ctx, params.task_id))
        return self.task_fields(self.record(ctx, params.task_id), ctx.protocol_version)

    async def result(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        """2025-11-25 ``tasks/result``: waits until the task ends, then what the call would have returned."""
        record = self.record(ctx, params.task_id)
        # Bounded: a job ends by its --job-timeout; one whose server died meanwhile (another process
        # on this workspace) would otherwise read as working until a server starts again.
        deadline = record.created + self.runner.settings.job_timeout + RESULT_GRACE
        while record.status not in TERMINAL:
            if time.time() > deadline:
                raise MCPError(INTERNAL_ERROR, f"Task {record.id} did not end within --job-timeout.")
            record = await self.runner.wait(record.principal, record.id, 30.0)
        if _lost(record):
            raise MCPError(INTERNAL_ERROR, record.message)
        if record.status == "cancelled":
            raise MCPError(INVALID_PARAMS, f"Task {record.id} was cancelled; it has no result.")
        result = self.render(record).model_dump(by_alias=True, mode="json", exclude_none=True)
        result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": record.id}}
        return result

    async def list(self, ctx: Any, params: ListParams) -> dict[str, Any]:
        records = self.runner.jobs_of(_who(ctx))
        cursor = params.cursor or ""
        start = int(cursor) if cursor.isdigit() and len(cursor) < 9 else 0
        page = records[start : start + LIST_PAGE]
        answer: dict[str, Any] = {"tasks": [self.task_fields(r, ctx.protocol_version) for r in page]}
        if start + LIST_PAGE < len(records):
            answer["nextCursor"] = str(start + LIST_PAGE)
        return answer

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        if ctx.protocol_version in MODERN:
            require_client_extension(ctx, TASKS_EXTENSION)
        record = self.record(ctx, params.task_id)
        if record.status in TERMINAL and ctx.protocol_version in LEGACY:
            # 2025-11-25: a cancel of a task already ended is refused (2026-07-28 acknowledges it).
            raise MCPError(
                INVALID_PARAMS, f"Cannot cancel task {record.id}: it is already {_status(record)}."
            )
        try:
            record = await self.runner.cancel(record.principal, record.id)
        except LlmcError as exc:
            raise MCPError(INVALID_PARAMS, f"Failed to cancel task: {exc.message}") from None
        if ctx.protocol_version in MODERN:
            return {}
        return self.task_fields(record, ctx.protocol_version)

    async def update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        """2026-07-28 ``tasks/update``: acknowledged. These tasks never ask for input: every question
        is asked before the work is queued, so there is nothing outstanding to answer."""
        require_client_extension(ctx, TASKS_EXTENSION)
        self.record(ctx, params.task_id)
        return {}


class TasksExtension(Extension):
    """The ``tasks/*`` methods of both eras, and the extension's advertisement for 2026-07-28."""

    identifier = TASKS_EXTENSION

    def __init__(self, tasks: Tasks):
        self.tasks = tasks

    def methods(self) -> list[MethodBinding]:
        both = LEGACY | MODERN
        return [
            MethodBinding("tasks/get", TaskParams, self.tasks.get, protocol_versions=both),
            MethodBinding("tasks/cancel", TaskParams, self.tasks.cancel, protocol_versions=both),
            MethodBinding("tasks/result", TaskParams, self.tasks.result, protocol_versions=LEGACY),
            MethodBinding("tasks/list", ListParams, self.tasks.list, protocol_versions=LEGACY),
            MethodBinding("tasks/update", UpdateParams, self.tasks.update, protocol_versions=MODERN),
        ]


def serve_tasks(server: MCPServer, tasks: Tasks, task_tools: frozenset[str]) -> None:
    """Install the tasks of both eras on ``server`` (built with ``extensions=[TasksExtension(tasks)]``,
    which serves the methods): the middleware and the handshake era's declarations.

    ``task_tools`` are the tools that may run as tasks (marked ``taskSupport: optional`` for the
    handshake era); the others are answered as today even when a task is asked for.
    """
    lowlevel = server._lowlevel_server
    declared = lowlevel.get_capabilities

    def capabilities(*args: Any, **kwargs: Any) -> Any:
        found = declared(*args, **kwargs)
        if kwargs.get("protocol_version") not in MODERN:
            found.tasks = ServerTasksCapability(
                list=TasksListCapability(),
                cancel=TasksCancelCapability(),
                requests=ServerTasksRequestsCapability(
                    tools=TasksToolsCapability(call=TasksCallCapability())
                ),
            )
        return found

    lowlevel.get_capabilities = capabilities  # type: ignore[method-assign]

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.method not in ("tools/call", "tools/list"):
            return await call_next(ctx)
        version = ctx.protocol_version
        if ctx.method == "tools/list":
            listed = await call_next(ctx)
            return _mark_task_tools(listed, task_tools) if version in LEGACY else listed
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        wanted = _requested(params, version)
        if params.get("name") not in task_tools:
            if wanted == "always":  # 2025-11-25: a tool without taskSupport is never run as a task
                raise MCPError(
                    METHOD_NOT_FOUND, f"Tool {str(params.get('name'))[:100]!r} does not run as a task."
                )
            wanted = None
        token = task_request.set(wanted)
        try:
            answer = await call_next(ctx)
        finally:
            task_request.reset(token)
        meta = answer.get("_meta") if isinstance(answer, dict) else None
        if not isinstance(meta, dict) or TASK_MARK not in meta:
            return answer
        record = tasks.record(ctx, str(meta[TASK_MARK]))
        rest = {k: v for k, v in meta.items() if k != TASK_MARK}
        fields = tasks.task_fields(record, version)
        if version in MODERN:
            return {"resultType": "task", **fields, **({"_meta": rest} if rest else {})}
        return {"task": fields, "_meta": {**rest, RELATED_TASK: {"taskId": record.id}}}

    lowlevel.middleware.append(middleware)


def _who(ctx: Any) -> str | None:
    """The principal a request acts for: its session's, or every stateless caller's."""
    return principal(session_key_of(ctx) or STATELESS_PREFIX)


def _requested(params: Mapping[str, Any], version: str) -> TaskRequest | None:
    if version in LEGACY:
        return "always" if isinstance(params.get("task"), dict) else None
    if version in MODERN:
        meta = params.get("_meta")
        declared = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
        extensions = declared.get("extensions") if isinstance(declared, dict) else None
        return "race" if isinstance(extensions, dict) and TASKS_EXTENSION in extensions else None
    return None


def _mark_task_tools(listed: Any, task_tools: frozenset[str]) -> Any:
    if not isinstance(listed, dict) or not isinstance(listed.get("tools"), list):
        return listed
    tools = [
        {**tool, "execution": {"taskSupport": "optional"}}
        if isinstance(tool, dict) and tool.get("name") in task_tools
        else tool
        for tool in listed["tools"]
    ]
    return {**listed, "tools": tools}


def _status(record: JobRecord) -> str:
    """A job's status as a task's: a tool error is a completed task whose result says so."""
    if record.status == "failed":
        return "failed" if _lost(record) else "completed"
    return record.status


def _lost(record: JobRecord) -> bool:
    """Lost with its server: no tool result exists, so the task failed at the protocol level."""
    return record.status == "failed" and bool((record.answer or {}).get("lost"))


def _message(record: JobRecord) -> str:
    if record.status == "working" and record.progress is not None:
        return f"{record.progress:.0%}: {record.message}"
    return record.message


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error(exc: LlmcError) -> CallToolResult:
    return error_result(exc.to_dict())
