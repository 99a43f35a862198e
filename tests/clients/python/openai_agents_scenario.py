"""openai-agents: ``MCPServerStdio`` / ``MCPServerStreamableHttp`` driven through ``call_tool`` (no LLM)."""

from __future__ import annotations

import os
import time
from importlib.metadata import version

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from common import Result, classic_flow, code_flow, main, server_args


def to_result(res) -> Result:
    text = "".join(getattr(block, "text", "") for block in res.content)
    return Result(bool(res.is_error), res.structured_content, text)


async def run(opts, out) -> None:
    if opts.transport == "stdio":
        server = MCPServerStdio(
            params={"command": opts.command, "args": server_args(opts), "env": dict(os.environ)},
            client_session_timeout_seconds=opts.timeout,
        )
    else:
        server = MCPServerStreamableHttp(
            params={"url": opts.url, "timeout": opts.timeout}, client_session_timeout_seconds=opts.timeout
        )
    start = time.monotonic()
    async with server:
        out["protocol_version"] = getattr(server.session, "protocol_version", None)
        out["tools"] = sorted(tool.name for tool in await server.list_tools())
        out["timings"] = {"connect": round(time.monotonic() - start, 3)}

        async def call(name, args):
            return to_result(await server.call_tool(name, args))

        await (code_flow if opts.mode == "code" else classic_flow)(call, opts, out)


if __name__ == "__main__":
    main("openai-agents", version("openai-agents"), run)
