"""A tasks client for the SDK's ``Client``: mcp 2.3 has none, so the tests bring the extension's own.

``TasksClient`` declares ``io.modelcontextprotocol/tasks`` (2026-07-28) and claims the ``task``
result of ``tools/call``, as the SDK's client-extension API is meant to be used: the claim records
each task it is handed and, unless told not to, polls ``tasks/get`` until the task ends and returns
its result, the way a host would. The request types are the extension's methods; the handshake era's
are sent raw (:mod:`tests.reliability._rawstdio`), since the SDK's client validates a ``tools/call``
answer of that era as a ``CallToolResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.types import CallToolResult, Request, TextContent
from mcp_types import RequestParams, Result
from pydantic import ConfigDict, TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams


class UpdateParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


class CreateTask(Result):
    """The ``resultType: "task"`` answer to ``tools/call``."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


ANY = TypeAdapter(dict[str, Any])


class TasksClient(ClientExtension):
    """Declares the tasks extension, and follows each task ``call_tool`` is handed to its result (to
    take the task itself instead, :func:`start_task`)."""

    identifier = TASKS

    def __init__(self, *, poll: float = 0.02, on_created: Callable[[CreateTask], None] | None = None):
        self.poll = poll
        self.on_created = on_created
        self.created: list[CreateTask] = []
        self.seen: list[dict[str, Any]] = []
        """Every ``tasks/get`` answer while following, in order."""

    def claims(self) -> list[ResultClaim[CreateTask]]:
        return [ResultClaim(result_type="task", model=CreateTask, resolve=self._resolve)]

    async def _resolve(self, created: CreateTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        if self.on_created is not None:
            self.on_created(created)
        while True:
            state = await ctx.session.send_request(GetTask(params=TaskParams(task_id=created.task_id)), ANY)
            self.seen.append(state)
            if state["status"] in TERMINAL:
                if "result" not in state:
                    return CallToolResult(content=[TextContent(type="text", text=str(state))], is_error=True)
                return CallToolResult.model_validate(state["result"])
            await anyio.sleep(self.poll)


async def start_task(client: Client, name: str, arguments: dict[str, Any]) -> CreateTask:
    """Call a tool and take the task it is handed back as (the client must declare :class:`TasksClient`)."""
    created = await client.session.call_tool(name, arguments, allow_claimed=True)
    assert isinstance(created, CreateTask), created
    return created


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(GetTask(params=TaskParams(task_id=task_id)), ANY)


async def cancel_task(client: Client, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(CancelTask(params=TaskParams(task_id=task_id)), ANY)


async def follow(client: Client, task_id: str, poll: float = 0.05, timeout: float = 120.0) -> dict[str, Any]:
    """``tasks/get`` until the task ends; its last answer."""
    with anyio.fail_after(timeout):
        while (state := await get_task(client, task_id))["status"] not in TERMINAL:
            await anyio.sleep(poll)
    return state
