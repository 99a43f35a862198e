"""The parent's side of the exchange with one worker: its start, and each request it serves.

A worker is started confined (:mod:`.workers` says how) and is ready once it says so, within
:data:`STARTUP_TIMEOUT`. A request is then sent and, until its answer comes, the worker's progress
notifications are relayed, checked (:mod:`.relay`), and its own requests (gate decisions, persisting)
are served here, in the trusted process, by the :data:`HostHandler`, under the worker's session.
Which worker a call goes to, and under which limits, is :mod:`.pool`'s.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import Process

from llmc_mcp.remote.transport import call_scope
from llmc_mcp.sandbox.channel import AsyncChannel, ChannelClosed, ProtocolError
from llmc_mcp.sandbox.relay import ProgressHandler, ProgressRelay
from llmc_mcp.sandbox.worker import WorkerConfig
from llmc_mcp.sandbox.workers import (
    NEUTRAL_CWD,
    Worker,
    WorkerStartError,
    stop_worker,
    worker_command,
    worker_environment,
)
from llmc_mcp.sessions import current_session

log = logging.getLogger(__name__)

HostHandler = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
"""Serves one worker request; returns its result or raises an LlmcError."""

STARTUP_TIMEOUT = 60.0


async def start_worker(key: str, config: WorkerConfig, process: Process | None = None) -> Worker:
    """Start a worker for session ``key`` (or adopt ``process``, already started) and wait until it is
    ready; :class:`WorkerStartError` if it cannot start or does not say it is ready in time."""
    try:
        process = process or await anyio.open_process(
            worker_command(config),
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
        await stop_worker(worker)
        raise WorkerStartError(type(exc).__name__) from None
    except BaseException:
        await stop_worker(worker)
        raise
    started = ready.get("result", {})
    log.info("worker %s ready (landlock ABI %s)", started.get("pid"), started.get("landlock"))
    return worker


async def request(
    worker: Worker,
    method: str,
    params: dict[str, Any],
    handler: HostHandler,
    on_progress: ProgressHandler | None,
) -> Any:
    """Send one request to ``worker`` and return its result, serving what it asks meanwhile.

    Raises :class:`ProtocolError` for an answer out of order or an error answer, and whatever the
    channel raises (:class:`ChannelClosed` when the worker dies): the caller decides the session's fate.
    """
    # The call's budget of remote reads, shared with whatever it asks of other workers meanwhile.
    with call_scope():
        request_id = worker.next_id()
        await worker.channel.send({"id": request_id, "method": method, "params": params})
        progress = ProgressRelay(on_progress)
        while True:
            message = await worker.channel.receive()
            if "method" in message and "id" not in message:
                if message["method"] == "progress":
                    await progress.relay(message.get("params"))
                continue
            if "method" in message:
                await worker.channel.send(await _serve(worker, message, handler))
                continue
            if message.get("id") != request_id:
                raise ProtocolError("worker answered out of order")
            if "error" in message:
                raise ProtocolError(str(message["error"]))
            return message.get("result")


async def _serve(worker: Worker, message: Mapping[str, Any], handler: HostHandler) -> dict[str, Any]:
    from llmc_mcp.errors import LlmcError

    reply: dict[str, Any] = {"id": message.get("id")}
    token = current_session.set(worker.key)
    try:
        reply["result"] = await handler(str(message.get("method")), message.get("params") or {})
    except LlmcError as exc:
        reply["error"] = exc.to_dict()
    except Exception as exc:
        # The handler budgets its own logging per session; reaching here is a bug, said once per call.
        log.error("host request %.40r failed: %s", message.get("method"), type(exc).__name__)
        reply["error"] = {"type": "internal_error", "message": "The server could not serve this request."}
    finally:
        current_session.reset(token)
    return reply
