"""How results and errors become MCP tool results, the same way for every tool.

Tools return a bare ``CallToolResult`` (no outputSchema): TS SDK and Inspector
reject an ``isError`` result whose ``structuredContent`` does not match a
declared schema, and our errors carry structured hints. Both the text and
``structuredContent`` hold the same JSON, so hosts that show only text lose
nothing.

Images are the exception (DD-MCP-059): a result model declares a field as an image with JSON
Schema's ``contentMediaType``/``contentEncoding`` (:data:`~llmc_mcp.operations.models.PNG_BASE64`), and
that field leaves the JSON for an MCP image content block. A model with vision sees the picture; no
model pays for reading base64 as text (a 512-pixel preview is some 200 kB of it).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel

from llmc_mcp.errors import LlmcError

log = logging.getLogger(__name__)


def ok_result(data: dict[str, Any], images: Mapping[str, str] | None = None) -> CallToolResult:
    """The result as JSON text and structured content; the ``images`` fields (name: MIME type) of
    ``data`` as image content after the text, each replaced in the JSON by a note saying so."""
    data = dict(data)
    attached: list[ImageContent] = []
    for name, mime_type in (images or {}).items():
        value = data.get(name)
        if isinstance(value, str):
            attached.append(ImageContent(type="image", data=value, mime_type=mime_type))
            size = len(value) * 3 // 4
            data[name] = f"[{mime_type}, {size} bytes: image content {len(attached)} of this result]"
    return CallToolResult(
        content=[TextContent(type="text", text=_dumps(data)), *attached], structured_content=data
    )


def image_fields(model: type[BaseModel]) -> dict[str, str]:
    """The fields ``model`` declares as base64 images, by name with their MIME types.

    What :func:`ok_result` attaches; only top-level fields, where the operations put them.
    """
    found = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if not isinstance(extra, dict) or extra.get("contentEncoding") != "base64":
            continue
        mime_type = str(extra.get("contentMediaType", ""))
        if mime_type.startswith("image/"):
            found[name] = mime_type
    return found


_INLINE_PNG = re.compile(r"iVBORw0KGgo[A-Za-z0-9+/]*={0,2}")
"""A PNG in base64: its 8-byte signature encodes to these 11 characters, whatever follows."""


def without_inline_images(value: Any) -> Any:
    """``value`` (text or JSON data) with every base64 PNG in its strings replaced by a short note.

    Agent code may print or return a preview result with its ``png_base64``; in the text a model
    reads that is thousands of tokens of noise, so it is cut wherever it appears. show() is the way
    to look at it.
    """
    if isinstance(value, str):
        return _INLINE_PNG.sub(_png_note, value) if "iVBORw0KGgo" in value else value
    if isinstance(value, dict):
        return {key: without_inline_images(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_inline_images(item) for item in value]
    return value


def _png_note(match: re.Match[str]) -> str:
    size = len(match.group()) * 3 // 4
    return f"[a PNG of about {size} bytes, left out of the text: pass it to show() to see it]"


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
