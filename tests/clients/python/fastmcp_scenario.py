"""fastmcp 4: ``fastmcp.Client`` in its default mode (``mode="auto"``), ``call_tool(raise_on_error=False)``.

The client is the ``fastmcp-slim[client]`` package: ``fastmcp==4.1.6`` itself is a meta package for
``fastmcp-slim[client,server]==4.1.6``, and its server extra needs a certifi newer than some mirrors.
"""

from __future__ import annotations

import os
import time
from importlib.metadata import version

from common import Result, classic_flow, code_flow, main, server_args
from fastmcp import Client
from fastmcp.client.transports import StdioTransport


async def run(opts, out) -> None:
    if opts.transport == "stdio":
        source = StdioTransport(command=opts.command, args=server_args(opts), env=dict(os.environ))
    else:
        source = opts.url
    start = time.monotonic()
    async with Client(source, timeout=opts.timeout, init_timeout=opts.timeout) as client:
        out["protocol_version"] = client.protocol_version
        out["tools"] = sorted(tool.name for tool in await client.list_tools())
        out["timings"] = {"connect": round(time.monotonic() - start, 3)}

        async def call(name, args):
            res = await client.call_tool(name, args, raise_on_error=False)
            text = "".join(getattr(block, "text", "") for block in res.content)
            return Result(bool(res.is_error), res.structured_content, text)

        await (code_flow if opts.mode == "code" else classic_flow)(call, opts, out)


if __name__ == "__main__":
    main("fastmcp-slim", version("fastmcp-slim"), run)
