"""langchain-mcp-adapters: ``MultiServerMCPClient`` tools driven through ``ainvoke`` (no LLM).

Two ways of connecting, both documented by the library:

- ``per-call`` (the default ``client.get_tools()``): every tool call opens a new MCP session, so
  over stdio every call starts a new server process, and over HTTP every call is a new
  ``mcp-session-id``;
- ``session``: ``async with client.session(name)`` and ``load_mcp_tools(session)``, one session.

A tool call is invoked as a ``ToolCall`` so the ``ToolMessage`` keeps the artifact (the
structuredContent); an isError result comes back as a ``ToolMessage`` with ``status="error"``
whose content is the text only (the library drops structuredContent on errors).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from datetime import timedelta
from importlib.metadata import version

from common import Result, classic_flow, code_flow, main, server_args
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

IDS = itertools.count(1)


def to_result(message) -> Result:
    content = message.content
    if isinstance(content, list):
        text = "".join(block.get("text", "") if isinstance(block, dict) else str(block) for block in content)
    else:
        text = str(content)
    artifact = getattr(message, "artifact", None)
    structured = getattr(artifact, "structured_content", None)
    if structured is None and isinstance(artifact, dict):
        structured = artifact.get("structured_content")
    return Result(getattr(message, "status", "success") == "error", structured, text)


async def run(opts, out) -> None:
    if opts.transport == "stdio":
        connection = {
            "transport": "stdio",
            "command": opts.command,
            "args": server_args(opts),
            "env": dict(os.environ),
        }
    else:
        connection = {
            "transport": "streamable_http",
            "url": opts.url,
            "timeout": timedelta(seconds=opts.timeout),
        }
    client = MultiServerMCPClient({"llmc": connection})
    variant = opts.variant or "per-call"
    out["variant"] = variant
    start = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        if variant == "session":
            session = await stack.enter_async_context(client.session("llmc"))
            tools = await load_mcp_tools(session)
        else:
            tools = await client.get_tools()
        by_name = {tool.name: tool for tool in tools}
        out["tools"] = sorted(by_name)
        out["timings"] = {"connect": round(time.monotonic() - start, 3)}

        async def call(name, args):
            call_id = f"call-{next(IDS)}"
            message = await by_name[name].ainvoke(
                {"type": "tool_call", "id": call_id, "name": name, "args": args}
            )
            return to_result(message)

        await (code_flow if opts.mode == "code" else classic_flow)(call, opts, out)


if __name__ == "__main__":
    main("langchain-mcp-adapters", version("langchain-mcp-adapters"), run)
