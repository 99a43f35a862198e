"""The worker process: one per MCP session, holding that session's variables.

Started by :mod:`llmc_mcp.sandbox.pool` as ``python -m llmc_mcp.sandbox.worker CONFIG``.
Its stdin/stdout pipes carry the channel and are moved off fds 0 and 1 at
once, so nothing a library prints can corrupt the channel (and the worker's
stdio is never the MCP channel). Resource limits are applied here, by trusted
code, before any agent code runs; the wall-clock limit is the server's.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import resource
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

_MiB = 1024 * 1024


class WorkerConfig(BaseModel):
    workspace: str
    memory_mb: int
    output_limit: int
    num_threads: int
    cpu_seconds: int
    file_size_mb: int = 16 * 1024
    open_files: int = 256


def _take_channel_fds() -> tuple[Any, Any]:
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    sys.stdout = sys.stderr
    return reader, writer


def apply_limits(config: WorkerConfig) -> None:
    """Address space, file size, open files and core dumps; CPU is set per call."""
    limits = {
        resource.RLIMIT_AS: config.memory_mb * _MiB,
        resource.RLIMIT_FSIZE: config.file_size_mb * _MiB,
        resource.RLIMIT_NOFILE: config.open_files,
        resource.RLIMIT_CORE: 0,
    }
    for which, value in limits.items():
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))


def set_cpu_budget(seconds: int) -> None:
    """Allow ``seconds`` more CPU from now: RLIMIT_CPU counts the process's whole life."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


class ChannelHost:
    """Requests to the server over the channel; the executing code blocks until the answer."""

    def __init__(self, channel: Any):
        self._channel = channel
        self._ids = itertools.count(1)

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        from llmc_mcp.errors import LlmcError

        request_id = next(self._ids)
        self._channel.send({"id": request_id, "method": method, "params": dict(params)})
        reply = self._channel.receive()
        if reply.get("id") != request_id:
            raise RuntimeError("channel out of step with the server")
        if "error" in reply:
            data = reply["error"]
            error = LlmcError(str(data.get("message", "error")), fix=data.get("fix"), details=data.get("details"))
            error.kind = str(data.get("type", "error"))
            raise error
        return reply.get("result")


def serve(config: WorkerConfig, channel: Any) -> None:
    from llmc_mcp.operations import OperationContext
    from llmc_mcp.operations.gdal_env import disable_network
    from llmc_mcp.reflection.prompts import PromptLibrary
    from llmc_mcp.sandbox.bindings import build_modules
    from llmc_mcp.sandbox.executor import Session
    from llmc_mcp.workspace import Workspace

    disable_network()
    context = OperationContext(Workspace(config.workspace), config.num_threads)
    host = ChannelHost(channel)
    session = Session(build_modules(context, host, PromptLibrary.default()), config.output_limit)
    apply_limits(config)
    channel.send({"id": 0, "result": {"ready": True, "pid": os.getpid()}})
    while True:
        message = channel.receive()
        method, params = message.get("method"), message.get("params") or {}
        if method == "shutdown":
            return
        if method == "execute":
            if params.get("reset"):
                session.reset()
            set_cpu_budget(config.cpu_seconds)
            result = session.execute(params.get("code", ""))
            channel.send({"id": message.get("id"), "result": result})
        elif method == "reset":
            session.reset()
            channel.send({"id": message.get("id"), "result": {"reset": True}})
        else:
            channel.send({"id": message.get("id"), "error": {"type": "protocol", "message": f"unknown {method}"}})


def main() -> None:
    reader, writer = _take_channel_fds()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="worker %(levelname)s %(message)s")
    from llmc_mcp.sandbox.channel import ChannelClosed, SyncChannel

    config = WorkerConfig.model_validate(json.loads(sys.argv[1]))
    try:
        serve(config, SyncChannel(reader, writer))
    except ChannelClosed:
        pass


if __name__ == "__main__":
    main()
