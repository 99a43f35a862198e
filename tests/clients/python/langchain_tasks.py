"""langchain-mcp-adapters + mcp 1.x: a long tool as an MCP task (2025-11-25), and the same call the
langchain way.

langchain-mcp-adapters itself never asks for a task: its tools call ``session.call_tool``. The
``ClientSession`` that ``MultiServerMCPClient.session()`` yields is mcp's own, and mcp 1.x has the
experimental client API of the 2025-11-25 tasks (``session.experimental``: ``call_tool_as_task``,
``poll_task``, ``get_task_result``, ``list_tasks``), which this script drives. It first calls the
tool through the langchain tool (``ainvoke``), which is a plain ``tools/call``.

Prints ONE JSON line on stdout (with ``exception`` if the script failed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
import warnings
from datetime import timedelta
from importlib.metadata import version
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.types import CallToolResult


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http"], required=True)
    parser.add_argument("--command", help="the llmc-mcp console script (stdio)")
    parser.add_argument("--workspace", help="workspace folder (stdio)")
    parser.add_argument("--server-arg", action="append", default=[], help="extra serve argument (stdio)")
    parser.add_argument("--url", help="http://127.0.0.1:PORT/mcp (http)")
    parser.add_argument("--tool", default="terrain_slope")
    parser.add_argument("--args", required=True, help="JSON arguments of the task call")
    parser.add_argument("--direct-args", help="JSON arguments of the langchain (non-task) call")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args()


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else getattr(b, "text", "") for b in content)
    return str(content)


async def run(opts: argparse.Namespace, out: dict[str, Any]) -> None:
    if opts.transport == "stdio":
        args = ["serve", "--workspace", opts.workspace, "--mode", "classic", *opts.server_arg]
        connection = {"transport": "stdio", "command": opts.command, "args": args, "env": dict(os.environ)}
    else:
        connection = {"transport": "streamable_http", "url": opts.url, "timeout": timedelta(seconds=60)}
    client = MultiServerMCPClient({"llmc": connection})
    async with client.session("llmc") as session:
        out["session_type"] = f"{type(session).__module__}.{type(session).__qualname__}"
        listed = await session.list_tools()
        tool = next(t for t in listed.tools if t.name == opts.tool)
        out["execution"] = tool.execution.model_dump(mode="json") if tool.execution else None

        if opts.direct_args:
            tools = {t.name: t for t in await load_mcp_tools(session)}
            message = await tools[opts.tool].ainvoke(
                {"type": "tool_call", "id": "call-1", "name": opts.tool, "args": json.loads(opts.direct_args)}
            )
            out["direct"] = {"status": message.status, "text": text_of(message.content)[:600]}

        start = time.monotonic()
        created = await session.experimental.call_tool_as_task(opts.tool, json.loads(opts.args), ttl=600_000)
        task_id = created.task.taskId
        out["created"] = created.task.model_dump(mode="json")
        statuses = [s.status async for s in session.experimental.poll_task(task_id)]
        out["statuses"] = statuses
        result = await session.experimental.get_task_result(task_id, CallToolResult)
        out["task_s"] = round(time.monotonic() - start, 3)
        out["result"] = {
            "is_error": result.isError,
            "structured": result.structuredContent,
            "meta": result.meta,
            "text": text_of([c.model_dump() for c in result.content])[:600],
        }
        tasks = await session.experimental.list_tasks()
        out["listed"] = [{"taskId": t.taskId, "status": t.status} for t in tasks.tasks]


def main() -> None:
    opts = parse_args()
    out: dict[str, Any] = {
        "client": "langchain-mcp-adapters",
        "version": version("langchain-mcp-adapters"),
        "mcp": version("mcp"),
        "transport": opts.transport,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        try:
            asyncio.run(asyncio.wait_for(run(opts, out), opts.timeout))
        except BaseException as exc:
            out["exception"] = "".join(traceback.format_exception(exc))[-4000:]
    out["deprecations"] = sorted(
        {str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)}
    )
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
