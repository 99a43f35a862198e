"""The scenario every Python client script runs; stdlib only, imported from each client's own venv.

A client script supplies ``call(name, arguments) -> Result`` for its client library and hands it to
``code_flow`` or ``classic_flow``. The flows do what an agent would: in code mode, set a variable
in one ``execute_code`` call and read it back in the next (passing back a session handle whenever
the server issues one, as its note asks), then the gated reprojection (miss; one call that persists
every hint and retries); in classic mode, the same reprojection through ``raster_reproject`` and
``persist_justification``. ``main`` prints ONE JSON line on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

SRC = "RGB.byte.tif"
DST_CRS = "EPSG:4326"
HANDLE_IN_TEXT = re.compile(r"session='(s-[A-Za-z0-9_-]+)'")
CONFORMING_CALLS = [
    ("raster_stats", {"path": SRC, "bands": [1]}),
    ("raster_preview", {"path": SRC, "max_size": 32}),
    ("crs_transform", {"points": [[0, 0]], "src_crs": DST_CRS, "dst_crs": "EPSG:3857"}),
]
"""Classic calls whose successes the client must accept against their tools' outputSchema."""


@dataclass
class Result:
    """What the client library handed back: the error flag, structuredContent if it kept it, the text."""

    is_error: bool
    structured: dict[str, Any] | None
    text: str


Call = Callable[[str, dict[str, Any]], Awaitable[Result]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http"], required=True)
    parser.add_argument("--mode", choices=["code", "classic"], default="code")
    parser.add_argument("--command", help="the llmc-mcp console script (stdio)")
    parser.add_argument("--workspace", help="workspace folder (stdio)")
    parser.add_argument("--url", help="http://127.0.0.1:PORT/mcp (http)")
    parser.add_argument("--dst", default="rgb_4326.tif")
    parser.add_argument("--timeout", type=float, default=60.0, help="the client's request timeout, seconds")
    parser.add_argument("--template", required=True, help="JSON justification template")
    parser.add_argument("--variant", default="", help="client-specific way of connecting")
    return parser.parse_args(argv)


def server_args(opts: argparse.Namespace) -> list[str]:
    return ["serve", "--workspace", opts.workspace, "--mode", opts.mode]


def justification_for(template: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(template))
    data["choice"]["method"] = next(iter(hint["prompt_args"].values()))
    return data


def payload(result: Result) -> dict[str, Any]:
    """structuredContent, or the JSON document the text carries (clients that drop it on errors)."""
    if result.structured is not None:
        return result.structured
    start = result.text.find("{")
    if start < 0:
        return {}
    try:
        doc, _ = json.JSONDecoder().raw_decode(result.text[start:])
    except json.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def handle_of(result: Result) -> str | None:
    session = payload(result).get("session") or {}
    if isinstance(session, dict) and session.get("handle"):
        return session["handle"]
    found = HANDLE_IN_TEXT.search(result.text)
    return found.group(1) if found else None


def brief(result: Result) -> dict[str, Any]:
    data = payload(result)
    error = data.get("error")
    return {
        "is_error": result.is_error,
        "structured": result.structured is not None,
        "result": data.get("result"),
        # code mode: {"error": {"type": ...}}; classic mode: {"type": ..., "message": ...}
        "error_type": error.get("type") if isinstance(error, dict) else (error or data.get("type")),
        "session": data.get("session"),
        "text": result.text[:400],
    }


def reproject_code(opts: argparse.Namespace) -> str:
    return f"raster.reproject({SRC!r}, {opts.dst!r}, dst_crs={DST_CRS!r})"


async def timed(out: dict[str, Any], key: str, call: Call, name: str, args: dict[str, Any]) -> Result:
    start = time.monotonic()
    result = await call(name, args)
    out.setdefault("timings", {})[key] = round(time.monotonic() - start, 3)
    return result


async def code_flow(call: Call, opts: argparse.Namespace, out: dict[str, Any]) -> None:
    template = json.loads(opts.template)
    first = await timed(out, "first_call", call, "execute_code", {"code": "x = 41\nx"})
    out["first"] = brief(first)
    handle = handle_of(first)
    out["handle_issued"] = handle is not None
    extra = {"session": handle} if handle else {}
    out["handle_passed"] = bool(extra)

    readback = await timed(out, "second_call", call, "execute_code", {"code": "x + 1", **extra})
    out["readback"] = brief(readback)
    if handle is None:  # a later call may still issue one (a client whose every call is a new session)
        handle = handle_of(readback)
        extra = {"session": handle} if handle else {}

    miss = await timed(out, "miss", call, "execute_code", {"code": reproject_code(opts), **extra})
    hints = payload(miss).get("reflection_required") or []
    out["miss"] = {
        **brief(miss),
        "domains": [h["domain"] for h in hints],
        "hashes": [h["hash"] for h in hints],
    }
    if not hints:
        return
    if handle is None:
        handle = handle_of(miss)
        extra = {"session": handle} if handle else {}

    lines = ["import json", f"hints = json.loads({json.dumps(hints)!r})", "saved = []"]
    for i, hint in enumerate(hints):
        justification = json.dumps(justification_for(template, hint))
        persist = (
            f"reflection.persist(hints[{i}]['hash'], hints[{i}]['domain'], json.loads({justification!r}))"
        )
        lines.append(f"saved.append({persist})")
    lines.append(f"out = {reproject_code(opts)}")
    lines.append("{'epsg': out['crs']['epsg'], 'width': out['width'], 'persisted': len(saved)}")
    retry = await timed(out, "retry", call, "execute_code", {"code": "\n".join(lines), **extra})
    out["retry"] = brief(retry)


async def classic_flow(call: Call, opts: argparse.Namespace, out: dict[str, Any]) -> None:
    template = json.loads(opts.template)
    info = await timed(out, "first_call", call, "raster_info", {"path": SRC})
    out["first"] = brief(info)
    out["width"] = payload(info).get("width")
    job = {"src": SRC, "dst": opts.dst, "dst_crs": DST_CRS}
    # Each tool declares an outputSchema, and an MCP client session validates a success against it
    # (raising when it does not conform); an error carries its JSON in the text only (DD-MCP-078).
    out["conforming"], out["not_conforming"] = [], {}
    for name, args in CONFORMING_CALLS:
        res = await call(name, args)
        if res.is_error:
            out["not_conforming"][name] = res.text[:400]
        else:
            out["conforming"].append(name)
    bad = await call("raster_reproject", {**job, "resampling": "magic"})
    out["bad_enum"] = {**brief(bad), "message": payload(bad).get("message")}
    miss = await timed(out, "miss", call, "raster_reproject", job)
    hints = payload(miss).get("reflection_required") or []
    out["miss"] = {
        **brief(miss),
        "domains": [h["domain"] for h in hints],
        "hashes": [h["hash"] for h in hints],
    }
    out["persisted"] = []
    for hint in hints:
        res = await call(
            "persist_justification",
            {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(template, hint),
            },
        )
        out["persisted"].append(brief(res))
    if not hints:
        return
    retry = await timed(out, "retry", call, "raster_reproject", job)
    out["retry"] = brief(retry)
    out["retry"]["epsg"] = (payload(retry).get("crs") or {}).get("epsg")


def main(
    client: str, version: str, run: Callable[[argparse.Namespace, dict[str, Any]], Awaitable[None]]
) -> None:
    """Parse the arguments, run the client's scenario, print one JSON line (with any exception)."""
    opts = parse_args()
    out: dict[str, Any] = {
        "client": client,
        "version": version,
        "transport": opts.transport,
        "mode": opts.mode,
    }
    if opts.variant:
        out["variant"] = opts.variant
    start = time.monotonic()
    try:
        asyncio.run(run(opts, out))
    except BaseException as exc:
        out["exception"] = "".join(traceback.format_exception(exc))[-4000:]
    out["total_s"] = round(time.monotonic() - start, 3)
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
