"""How results and errors become MCP tool results, the same way for every tool.

A success holds the same JSON in its text and in ``structuredContent``, which conforms to the
tool's ``outputSchema`` in classic mode (its result model, DD-MCP-078). An error (``isError``, gate
misses included) holds its JSON (``type``, ``message``, ``fix``, the hints) in the text only: a
client that validates results (the TypeScript SDK, the Inspector) rejects an ``isError`` result
whose ``structuredContent`` does not match the declared schema, and an error is not the result.
:func:`result_data` reads either.

Images are the exception (DD-MCP-059): a result model declares a field as an image with JSON
Schema's ``contentMediaType``/``contentEncoding`` (:data:`~llmc_mcp.operations.raster.models.PNG_BASE64`), and
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
from llmc_mcp.server.schemas import model_schema

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


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The ``outputSchema`` of a tool whose results :func:`ok_result` makes from ``model``.

    The model's own schema (:func:`~llmc_mcp.server.schemas.model_schema`), except that each image
    field holds the note that replaces it: declaring base64 there would type a note as a PNG.
    """
    schema = model_schema(model)
    for name, mime_type in image_fields(model).items():
        declared = schema["properties"][name]
        note = {
            "type": "string",
            "description": f"A note: the {mime_type} is an image content block of this result, after "
            "the text.",
        }
        nullable = any(option.get("type") == "null" for option in declared.get("anyOf", []))
        schema["properties"][name] = {"anyOf": [note, {"type": "null"}]} if nullable else note
    return schema


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
    """An ``isError`` result whose JSON is its text, with no ``structuredContent`` (see the module doc)."""
    return CallToolResult(content=[TextContent(type="text", text=_dumps(data))], is_error=True)


def answer_result(answer: Mapping[str, Any], images: Mapping[str, str] | None = None) -> CallToolResult:
    """A worker's answer to one operation (``ok``, ``result``, ``error``) as the tool's result; the
    error without the worker's line and traceback."""
    if answer.get("ok"):
        return ok_result(answer["result"], images)
    error = answer.get("error") or {}
    return error_result({k: v for k, v in error.items() if k not in ("line", "traceback")})


def result_data(result: CallToolResult) -> dict[str, Any]:
    """What a result says, as data: its ``structuredContent``, or the JSON of an error's text."""
    if result.structured_content is not None:
        return result.structured_content
    text = "".join(block.text for block in result.content if isinstance(block, TextContent))
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"a tool result's JSON is {type(data).__name__}, not an object")
    return data


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
