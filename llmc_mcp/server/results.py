"""How results and errors become MCP tool results, the same way for every tool.

Tools return a bare ``CallToolResult`` (no outputSchema): TS SDK and Inspector
reject an ``isError`` result whose ``structuredContent`` does not match a
declared schema, and our errors carry structured hints. Both the text and
``structuredContent`` hold the same JSON, so hosts that show only text lose
nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.types import CallToolResult, TextContent

from llmc_mcp.errors import LlmcError

log = logging.getLogger(__name__)


def ok_result(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=_dumps(data))], structured_content=data)


def error_result(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=_dumps(data))], structured_content=data, is_error=True
    )


def exception_result(exc: BaseException, where: str) -> CallToolResult:
    """Known errors go back as they are; anything else is logged and reported without internals."""
    if isinstance(exc, LlmcError):
        return error_result(exc.to_dict())
    log.exception("unexpected error in %s", where)
    return error_result(
        {
            "type": "internal_error",
            "message": f"{where} failed unexpectedly ({type(exc).__name__}); the server is still running.",
            "fix": "Check the arguments; if the error persists, report it with the server log.",
        }
    )


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)
