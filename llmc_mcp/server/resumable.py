"""Calls that wait for the client across retries: sampling on the 2026-07-28 protocol era.

On that era a server cannot send the client a request in the middle of a call. It answers the call
with an ``InputRequiredResult`` (the questions, and an opaque ``request_state``), and the client
asks its model and *retries the call* with the answers. Agent code that hit a gate miss is paused in
its worker, halfway through; running it again from the top would repeat what it did before the
miss. So the call's work runs in a task of its own (:class:`ResumableCalls`): when it asks the
client something (:func:`ask_on_retry`), the tool call returns the question with a token as
``request_state``; the retry carrying that token hands the answers to the waiting work and waits
for its next question or its result. To the agent it is one call.

A token is bound to the session that started the call and to the call's arguments; a paused call
the client never resumes ends when its question times out (the gate then falls back to hints) and
is forgotten after :data:`KEEP_SECONDS`.

A host that declines or fails a sampling request does not retry: its SDK ends the agent's call with
the error, and the server hears nothing. The sign that the client gave the question up is the
session's next call that is not the retry (a client asks one thing at a time; a retry carries the
token), whichever tool it calls (:func:`abandon_questions`, which the worker pool calls first). The
paused call is stopped then, so the session's worker is free for that next call at once, and its
principal is remembered as one that did not answer (:class:`Unanswered`): its next call that would
ask the model does not ask, and the agent gets the hints, with the reason, instead of the same
question its host will refuse again. A stateless caller has no session; its paused call is given up
when an identical call (same arguments) arrives from the stateless principal.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
)
from mcp_types import SamplingMessage as WireSamplingMessage
from mcp_types import TextContent as WireTextContent
from pydantic import BaseModel

from llmc_mcp.reflection.sampling import NotAsked
from llmc_mcp.server.requests import SAMPLING_MAX_TOKENS, can_elicit, can_sample, has_back_channel, text_of
from llmc_mcp.sessions import principal

KEEP_SECONDS = 600.0
"""How long a finished or abandoned call's outcome waits for a retry that asks for it, and how long a
principal whose client left a sampling question unanswered is not asked again."""
MAX_UNANSWERED = 4096
"""Principals remembered as not answering, at most (the oldest are forgotten first)."""


@dataclass
class _Question:
    request: InputRequest
    answered: asyncio.Future[Any]


@dataclass
class _Call:
    token: str
    session: str | None
    arguments: str
    outcomes: asyncio.Queue[str | CallToolResult] = field(default_factory=asyncio.Queue)
    questions: dict[str, _Question] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    result: CallToolResult | None = None
    touched: float = field(default_factory=time.monotonic)
    request: Context | None = None
    """The client request now waiting on this call (the latest retry): where its progress goes."""
    not_asked: str | None = None
    """Why this call does not ask the client's model: its principal left the last question unanswered."""

    def questions_pending(self) -> bool:
        return any(not question.answered.done() for question in self.questions.values())

    def ask(self, request: InputRequest) -> asyncio.Future[Any]:
        key = f"llmc-{len(self.questions) + 1}"
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.questions[key] = _Question(request, answered)
        self.outcomes.put_nowait(key)
        return answered


_current_call: ContextVar[_Call | None] = ContextVar("llmc_resumable_call", default=None)


def needs_resuming(ctx: Context, reflection: str, min_confidence: str) -> bool:
    """Run this call as a resumable one: it is a retry of a paused call, or it may need to pause
    because this client can be asked (its model: ``--reflection``; its user: ``--min-confidence``)
    only through retries."""
    if ctx.request_state is not None:
        return True
    if has_back_channel(ctx):
        return False
    return (reflection != "hints" and can_sample(ctx)) or (min_confidence != "low" and can_elicit(ctx))


def waiting_request() -> Context | None:
    """The request now waiting on the resumable call running here (None outside one)."""
    call = _current_call.get()
    return None if call is None else call.request


def can_ask_on_retry() -> bool:
    """Whether the work running here belongs to a resumable call (so :func:`ask_on_retry` works)."""
    return _current_call.get() is not None


async def ask_on_retry(system: str, text: str) -> tuple[str, str]:
    """Ask the client's model through the call's next ``InputRequiredResult``; wait for the retry."""
    call = _current_call.get()
    assert call is not None, "ask_on_retry outside a resumable call"
    if call.not_asked is not None:
        raise NotAsked(call.not_asked)
    message = WireSamplingMessage(role="user", content=WireTextContent(type="text", text=text))
    params = CreateMessageRequestParams(
        messages=[message], max_tokens=SAMPLING_MAX_TOKENS, system_prompt=system
    )
    result = await call.ask(CreateMessageRequest(params=params))
    return text_of(result.content), result.model


async def elicit_on_retry(message: str, schema: type[BaseModel]) -> tuple[str, dict[str, Any] | None]:
    """Ask the user through the call's next ``InputRequiredResult``; ``(action, content)``."""
    call = _current_call.get()
    assert call is not None, "elicit_on_retry outside a resumable call"
    params = ElicitRequestFormParams(message=message, requested_schema=render_elicitation_schema(schema))
    result = await call.ask(ElicitRequest(params=params))
    return result.action, result.content


class Unanswered:
    """Principals whose client left a sampling question unanswered, and when: at most
    :data:`MAX_UNANSWERED`, each for :data:`KEEP_SECONDS`."""

    def __init__(self) -> None:
        self._since: OrderedDict[str | None, float] = OrderedDict()

    def note(self, who: str | None) -> None:
        self._since.pop(who, None)
        self._since[who] = time.monotonic()
        while len(self._since) > MAX_UNANSWERED:
            self._since.popitem(last=False)

    def take(self, who: str | None) -> str | None:
        """Why the next call of ``who`` does not ask the model (once), or None."""
        since = self._since.pop(who, None)
        if since is None or time.monotonic() - since > KEEP_SECONDS:
            return None
        return (
            "the client did not answer the server's last sampling question (its host declined or failed "
            "it, or the call was given up), so this call did not ask again; justify the decision "
            "yourself, and the next miss will be put to the host's model again"
        )


_servers: weakref.WeakSet[ResumableCalls] = weakref.WeakSet()


async def abandon_questions(session: str) -> None:
    """A call of ``session`` arrives: any question the session's paused call still waits on was given
    up by the client (every server of this process; session keys are unique)."""
    for calls in list(_servers):
        await calls.abandon(session)


class ResumableCalls:
    """The calls of one server that may pause for the client's answers, by token."""

    def __init__(self) -> None:
        self._calls: dict[str, _Call] = {}
        self.unanswered = Unanswered()
        _servers.add(self)

    async def run(
        self,
        ctx: Context,
        session: str | None,
        arguments: Mapping[str, Any],
        work: Callable[[], Awaitable[CallToolResult]],
    ) -> CallToolResult | InputRequiredResult:
        """Run ``work`` for this call, or resume the paused call this retry names."""
        self._forget_stale()
        digest = hashlib.sha256(json.dumps(arguments, sort_keys=True, default=str).encode()).hexdigest()
        token = ctx.request_state
        if token is None:
            await self.abandon(session, digest)
            call = _Call(secrets.token_urlsafe(24), session, digest)
            call.not_asked = self.unanswered.take(principal(session))
            self._calls[call.token] = call
            call.task = asyncio.get_running_loop().create_task(
                self._work(call, work), context=contextvars.copy_context()
            )
        else:
            call = self._calls.get(token)
            if call is None or call.session != session or call.arguments != digest:
                return _refusal(
                    "This retry names a paused call this server does not hold for this session and "
                    "these arguments (it ended, expired, or belongs to another session)."
                )
            _deliver(call, ctx.input_responses or {})
        call.touched = time.monotonic()
        call.request = ctx
        try:
            return await self._next(call)
        except BaseException:
            if call.task is not None and not call.questions_pending():
                call.task.cancel()  # the client gave up on a call that was not waiting for it
            raise

    async def _work(self, call: _Call, work: Callable[[], Awaitable[CallToolResult]]) -> None:
        _current_call.set(call)
        try:
            result = await work()
        except Exception as exc:
            result = _refusal(f"The call failed ({type(exc).__name__}).")
        call.result = result
        call.outcomes.put_nowait(result)

    async def _next(self, call: _Call) -> CallToolResult | InputRequiredResult:
        while True:
            outcome = await call.outcomes.get()
            if isinstance(outcome, CallToolResult):
                self._calls.pop(call.token, None)
                return outcome
            pending = {key: q.request for key, q in call.questions.items() if not q.answered.done()}
            if pending:  # else the question timed out meanwhile: the work went on without it
                return InputRequiredResult(input_requests=pending, request_state=call.token)

    async def abandon(self, session: str | None, arguments: str | None = None) -> None:
        """A new call of a session whose paused call still waits for the client: the client gave
        that one up (it asks one thing at a time; a retry would carry the token), so stop it now
        rather than let it hold the session's worker until its question times out, and remember
        that its principal's client did not answer a sampling question.

        Stateless calls share no session: one caller's new call says nothing of another's paused
        call, except a call with the same ``arguments`` digest, which is that call made again.
        """
        current = asyncio.current_task()
        waiting = [
            c
            for c in self._calls.values()
            if c.session == session
            and (session is not None or (arguments is not None and c.arguments == arguments))
            and c.task is not current
            and c.questions_pending()
        ]
        for call in waiting:
            self._calls.pop(call.token, None)
            if any(
                isinstance(q.request, CreateMessageRequest) and not q.answered.done()
                for q in call.questions.values()
            ):
                self.unanswered.note(principal(session))
            if call.task is not None:
                call.task.cancel()
        for call in waiting:
            if call.task is not None:
                with contextlib.suppress(BaseException):
                    await call.task

    async def end_session(self, session: str | None) -> None:
        """The session's connection ended: stop its paused calls (their workers go with them)."""
        ending = [call for call in self._calls.values() if call.session == session]
        for call in ending:
            self._calls.pop(call.token, None)
            if call.task is not None:
                call.task.cancel()
        for call in ending:
            if call.task is not None:
                with contextlib.suppress(BaseException):
                    await call.task

    def _forget_stale(self) -> None:
        now = time.monotonic()
        for token, call in list(self._calls.items()):
            if now - call.touched > KEEP_SECONDS:
                if call.task is not None:
                    call.task.cancel()
                self._calls.pop(token, None)


def _deliver(call: _Call, responses: Mapping[str, Any]) -> None:
    for key, response in responses.items():
        question = call.questions.get(key)
        if question is None or question.answered.done():
            continue
        if isinstance(response, CreateMessageResult | CreateMessageResultWithTools | ElicitResult):
            question.answered.set_result(response)
        else:
            question.answered.set_exception(RuntimeError(f"the client answered {type(response).__name__}"))


def _refusal(message: str) -> CallToolResult:
    error = {"type": "invalid_argument", "message": message, "fix": "Make the call again."}
    # In the text only, like every error (DD-MCP-078): it does not match the tool's outputSchema.
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(error))], is_error=True)
