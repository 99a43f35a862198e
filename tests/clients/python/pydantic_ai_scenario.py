"""pydantic-ai 2.x: ``MCPToolset`` (a fastmcp ``Client`` inside) driven through ``direct_call_tool`` (no LLM).

``direct_call_tool`` returns the structured content of a result and raises ``ModelRetry`` (the
default ``tool_error_behavior='retry'``) on an isError result, with the text the model would see:
the scenario reads the hints from that text, as an agent would.
"""

from __future__ import annotations

import json
import os
import time
from importlib.metadata import version

from common import Result, classic_flow, code_flow, main, server_args
from fastmcp.client.transports import StdioTransport
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.mcp import MCPToolset


async def run(opts, out) -> None:
    if opts.transport == "stdio":
        source = StdioTransport(command=opts.command, args=server_args(opts), env=dict(os.environ))
    else:
        source = opts.url
    toolset = MCPToolset(source, init_timeout=opts.timeout, read_timeout=opts.timeout)
    start = time.monotonic()
    async with toolset:
        out["protocol_version"] = getattr(toolset.client, "protocol_version", None)
        out["tools"] = sorted(tool.name for tool in await toolset.list_tools())
        out["timings"] = {"connect": round(time.monotonic() - start, 3)}

        async def call(name, args):
            try:
                value = await toolset.direct_call_tool(name, args)
            except ModelRetry as exc:
                return Result(True, None, exc.message)
            if isinstance(value, dict):
                return Result(False, value, json.dumps(value))
            return Result(False, {"result": value}, str(value))

        await (code_flow if opts.mode == "code" else classic_flow)(call, opts, out)


if __name__ == "__main__":
    main("pydantic-ai-slim", version("pydantic-ai-slim"), run)
