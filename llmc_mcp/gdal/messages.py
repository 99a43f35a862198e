"""GDAL's failures as agents see them: the exception classes GDAL raises through rasterio, and its
messages with absolute paths rewritten to workspace-relative names."""

from __future__ import annotations

import os
import re
from pathlib import Path

from rasterio._err import CPLE_BaseError
from rasterio.errors import RasterioError

from llmc_mcp.gdal.environment import GdalContext
from llmc_mcp.remote.allowlist import redact
from llmc_mcp.remote.reader import take_failure

GDAL_ERRORS: tuple[type[Exception], ...] = (RasterioError, CPLE_BaseError)
"""How GDAL failures surface: rasterio wraps most, but some calls (CreateCopy) raise GDAL's own classes."""


_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s'\",:/]+/)+[^\s'\",:]*")
_UNHELPFUL = ("See previous exception for details.",)
_OPENER_NAME = re.compile(r"/vsiriopener_[0-9a-f]+/([^\s'\",]+)")
MAX_MESSAGE_CHARS = 500


def translate_gdal_error(exc: BaseException, ctx: GdalContext, path: Path, shown: str | None = None) -> str:
    """GDAL's message for ``exc``, with absolute paths replaced by what agents see.

    ``path`` is shown as ``shown`` (default: its workspace-relative name; pass the destination name
    for a temporary file); other workspace paths become relative and any other absolute path
    becomes ``<path>``. rasterio often wraps the real GDAL error ("Read failed. See previous
    exception"), so the chained causes are included. When GDAL failed because a remote read did (the
    opener cannot raise through GDAL), that failure is raised instead: it names the bound and the fix.
    """
    failure = take_failure()
    if failure is not None:
        # GDAL failed because a remote read did (a bound, a timeout): that is the error to give.
        raise failure
    messages: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        for filler in _UNHELPFUL:
            text = text.replace(filler, "").strip()
        if text and text not in messages:
            messages.append(text)
        current = current.__cause__ or current.__context__
    # GDAL repeats its root cause inside the wrapping messages; keep each fact once.
    distinct = [m for m in messages if not any(m != other and m in other for other in messages)]
    text = "; ".join(reversed(distinct)) or type(exc).__name__
    # A remote dataset's name is rasterio's opener prefix and the URL: shown as the URL, redacted, and
    # kept apart while absolute paths are hidden (a URL's path looks like one).
    urls: list[str] = []

    def set_aside(found: re.Match[str]) -> str:
        urls.append(redact(found.group(1)))
        return f"\x00{len(urls) - 1}\x00"

    text = _OPENER_NAME.sub(set_aside, text)
    label = shown if shown is not None else relative_or_name(ctx, path)
    text = text.replace(str(path), label)
    root = str(ctx.workspace.root)
    text = text.replace(root + os.sep, "").replace(root, ".")
    text = _ABSOLUTE_PATH.sub("<path>", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: urls[int(m.group(1))], text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."


def relative_or_name(ctx: GdalContext, path: Path) -> str:
    """``path`` as agents see it: workspace-relative, or its bare name when it lies outside."""
    try:
        return ctx.workspace.relative(path)
    except ValueError:
        return path.name
