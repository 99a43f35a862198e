"""fastmcp 4 (and pydantic-ai's fastmcp-based ``MCPToolset``) and MCP tasks, as pinned: no task path.

fastmcp 4 core ships the wiring for client extensions but no tasks extension of its own: the
optional ``fastmcp-tasks`` package registers one (``fastmcp.client.extension_hooks``) and provides
``call_tool_task``. ``Client.call_tool`` has no ``task`` parameter. pydantic-ai's
``MCPToolset.direct_call_tool(use_task=True)`` goes through ``fastmcp_tasks.call_tool_task`` and
raises an ImportError without it. Runs in the fastmcp or the pydantic-ai virtualenv, over HTTP.

Prints ONE JSON line on stdout (with ``exception`` if the script failed).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import sys
import traceback
from typing import Any

from fastmcp import Client
from fastmcp.client import extension_hooks


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--tool", default="terrain_slope")
    parser.add_argument("--args", required=True, help="JSON arguments")
    return parser.parse_args()


async def run(opts: argparse.Namespace, out: dict[str, Any]) -> None:
    out["fastmcp_tasks_installed"] = importlib.util.find_spec("fastmcp_tasks") is not None
    out["internal_extensions"] = [repr(e) for e in extension_hooks.build_internal_client_extensions(None)]
    out["call_tool_parameters"] = sorted(inspect.signature(Client.call_tool).parameters)
    arguments = json.loads(opts.args)
    async with Client(opts.url, timeout=60) as client:
        out["protocol_version"] = client.protocol_version
        res = await client.call_tool(opts.tool, arguments, raise_on_error=False)
        text = "".join(getattr(block, "text", "") for block in res.content)
        out["direct"] = {"is_error": bool(res.is_error), "text": text[:600]}
    if importlib.util.find_spec("pydantic_ai") is None:
        return
    from pydantic_ai.mcp import MCPToolset

    async with MCPToolset(opts.url) as toolset:
        try:
            await toolset.direct_call_tool(opts.tool, arguments, use_task=True)
            out["use_task"] = {"exception": None}
        except Exception as exc:
            out["use_task"] = {"exception": type(exc).__name__, "message": str(exc)[:400]}


def main() -> None:
    opts = parse_args()
    out: dict[str, Any] = {}
    try:
        asyncio.run(run(opts, out))
    except BaseException as exc:
        out["exception"] = "".join(traceback.format_exception(exc))[-4000:]
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
