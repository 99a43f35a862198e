"""fastmcp 4 with a host that will not sample: its sampling handler declines (answers an error) or raises.

Run by ``tests/clients/test_declined_sampling.py`` with the fastmcp venv's Python, over stdio, against
the real ``llmc-mcp`` console script in classic mode. The agent's steps: the gated reprojection (the
host refuses the server's question), an ungated ``crs_info``, then the reprojection again. Prints ONE
JSON line: what each step returned (or raised) and how long it took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import mcp_types
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}


async def declines(messages: Any, params: Any, context: Any) -> Any:
    return mcp_types.ErrorData(code=-1, message="User rejected sampling")


async def raises(messages: Any, params: Any, context: Any) -> Any:
    raise RuntimeError("the host's model is unavailable")


async def step(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    try:
        result = await client.call_tool(name, args, raise_on_error=False)
    except Exception as exc:
        took = round(time.monotonic() - start, 3)
        return {"raised": type(exc).__name__, "message": str(exc)[:300], "s": took}
    text = "".join(getattr(block, "text", "") for block in result.content)
    # An error's JSON is its text: it carries no structuredContent (DD-MCP-078).
    data = result.structured_content
    if result.is_error and data is None:
        data = json.loads(text)
    return {"is_error": result.is_error, "data": data, "text": text[:300],
            "s": round(time.monotonic() - start, 3)}  # fmt: skip


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "LLMC_MCP_SAMPLING_TIMEOUT": str(opts.sampling_timeout)}
    args = ["serve", "--workspace", opts.workspace, "--mode", "classic"]
    transport = StdioTransport(command=opts.command, args=args, env=env)
    handler = declines if opts.sampler == "declines" else raises
    async with Client(transport, timeout=opts.timeout, sampling_handler=handler) as client:
        out: dict[str, Any] = {"protocol_version": client.protocol_version}
        out["first"] = await step(client, "raster_reproject", REPROJECT)
        out["crs_info"] = await step(client, "crs_info", {"crs": "EPSG:4326"})
        out["again"] = await step(client, "raster_reproject", REPROJECT)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--command", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--sampler", choices=["declines", "raises"], required=True)
    parser.add_argument("--sampling-timeout", type=float, default=600.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    opts = parser.parse_args()
    try:
        out = asyncio.run(run(opts))
    except BaseException as exc:  # one JSON line whatever happens
        out = {"exception": f"{type(exc).__name__}: {str(exc)[:500]}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
