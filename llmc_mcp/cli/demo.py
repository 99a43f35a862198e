"""``llmc-mcp demo``: a scripted host drives the real server over stdio and prints the transcript.

No model is involved: the "agent" turns are fixed, written as a careful agent
would write them, so a newcomer sees exactly what crosses the wire in each
mode (tool calls, results, the reflection miss and its hints) and what each
step costs in tokens.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from llmc_mcp.reflection.examples import EXAMPLE_JUSTIFICATIONS
from llmc_mcp.server.instructions import bootstrap_tokens
from llmc_mcp.server.results import result_data
from llmc_mcp.state import STATE_DIR_ENV
from llmc_mcp.tokens import count_tokens

SAMPLE = "RGB.byte.tif"
OUTPUT = "rgb_4326.tif"
INDEX = "grvi.tif"
INDEX_EXPRESSION = "(green - red) / (green + red)"
"""The green-red vegetation index: the sample is a visible-light RGB scene, so no near infrared for NDVI."""
INDEX_INPUTS = {"red": {"path": SAMPLE, "band": 1}, "green": {"path": SAMPLE, "band": 2}}
STUB_READS = (
    "raster.info",
    "raster.stats",
    "raster.reproject",
    "raster.calc",
    "reflection.persist",
    "reflection.report",
)
"""The stubs the code-mode story reads before it writes code: each function it calls, one at a time
(a function's stub is a few hundred tokens; its whole module, thousands)."""


@dataclass
class Step:
    title: str
    request: str
    response: str
    tokens: int
    is_error: bool = False


@dataclass
class Transcript:
    mode: str
    steps: list[Step] = field(default_factory=list)
    fixed_tokens: int = 0

    def add(self, title: str, request: Any, result: CallToolResult) -> CallToolResult:
        request_text = request if isinstance(request, str) else json.dumps(request, ensure_ascii=False)
        response = "".join(getattr(block, "text", "") for block in result.content)
        tokens = count_tokens(request_text) + count_tokens(response)
        self.steps.append(Step(title, request_text, response, tokens, bool(result.is_error)))
        return result


@dataclass(frozen=True)
class RemoteStep:
    """The optional remote step: a prefix the demo's server allows, and a COG under it to read."""

    prefix: str
    raster: str


def run_demo(mode: str, keep: Path | None, remote: RemoteStep | None = None) -> Transcript:
    with _workspace(keep) as workspace:
        transcript = anyio.run(_drive, mode, workspace, remote)
        if keep is None:
            transcript.steps.append(Step("workspace", "", "(temporary; use --keep DIR to keep it)", 0))
        else:
            transcript.steps.append(Step("workspace kept", "", str(workspace), 0))
        return transcript


@contextmanager
def _workspace(keep: Path | None) -> Iterator[Path]:
    sample = resources.files("llmc_mcp.cli") / "sample" / SAMPLE
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        with resources.as_file(sample) as path:
            shutil.copy(path, keep / SAMPLE)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="llmc-demo-") as tmp, resources.as_file(sample) as path:
        shutil.copy(path, Path(tmp) / SAMPLE)
        yield Path(tmp)


def server_parameters(mode: str, workspace: Path, allow_remote: str | None = None) -> StdioServerParameters:
    """How the demo starts the server: the installed package, never the code in some directory.

    ``-I`` (isolated mode) keeps the working directory, ``PYTHONPATH`` and the user site off
    ``sys.path``, and the working directory is neutral (the system's temporary directory, never a
    checkout) rather than the demo's own: run from a source clone, ``python -m llmc_mcp`` would
    otherwise import the clone's files instead of the installed package.
    """
    args = ["-I", "-m", "llmc_mcp", "serve", "--mode", mode, "--workspace", str(workspace)]
    if allow_remote is not None:
        args += ["--allow-remote", allow_remote]
    # The client passes its server only HOME, PATH and a few more: where the user keeps the server's
    # state is passed on. The demo routes no flow: its server need not warm the routing kernels'
    # cache (DD-MCP-100).
    env = {name: os.environ[name] for name in (STATE_DIR_ENV, "XDG_STATE_HOME") if name in os.environ}
    env["LLMC_MCP_KERNEL_CACHE"] = "off"
    return StdioServerParameters(command=sys.executable, args=args, cwd=tempfile.gettempdir(), env=env)


async def _drive(mode: str, workspace: Path, remote: RemoteStep | None) -> Transcript:
    params = server_parameters(mode, workspace, remote.prefix if remote else None)
    transcript = Transcript(mode)
    async with Client(params) as client:
        tools = (await client.list_tools()).model_dump(by_alias=True, mode="json", exclude_none=True)
        transcript.fixed_tokens = bootstrap_tokens(tools["tools"], client.instructions or "")
        if mode == "code":
            await _code_story(client, transcript)
        else:
            await _classic_story(client, transcript)
        if remote is not None:
            await _remote_story(client, transcript, mode, remote.raster)
    if mode == "classic":
        transcript.steps.append(_store_report(workspace))
    return transcript


def _store_report(workspace: Path) -> Step:
    """Classic mode has no report tool: show what `llmc-mcp justifications` prints for the workspace."""
    from llmc_mcp.reflection.store import JustificationStore
    from llmc_mcp.workspace import Workspace

    records = JustificationStore(Workspace(workspace).preflight_dir).records()
    lines = [f"{r.domain}: {r.justification.choice.method} ({r.justification.confidence})" for r in records]
    return Step("reflection report (llmc-mcp justifications)", "", "\n".join(lines), 0)


async def _code_story(client: Client, t: Transcript) -> None:
    t.add("00_INIT: the guide", "00_INIT()", await client.call_tool("00_INIT", {}))
    t.add("read_stubs: the index", "read_stubs()", await client.call_tool("read_stubs", {}))
    for function in STUB_READS:
        t.add(
            f"read_stubs: {function}",
            f"read_stubs({function!r})",
            await client.call_tool("read_stubs", {"module": function}),
        )
    inspect_code = (
        f'info = raster.info("{SAMPLE}")\n'
        'print(info["width"], "x", info["height"], info["count"], "bands", info["dtypes"][0],\n'
        '      info["crs"]["name"])\n'
        f'stats = raster.stats("{SAMPLE}", percentiles=[50])\n'
        '[(b["band"], round(b["mean"], 1), b["percentiles"]["p50"]) for b in stats["bands"]]'
    )
    await _execute(client, t, "execute_code: inspect", inspect_code)
    reproject = f'out = raster.reproject("{SAMPLE}", "{OUTPUT}", dst_crs="EPSG:4326", resampling="bilinear")'
    miss = await _execute(client, t, "execute_code: reproject (gate miss)", reproject)
    hints = (miss.structured_content or {}).get("reflection_required", [])
    persist = "".join(
        f'reflection.persist("{h["hash"]}", "{h["domain"]}", {EXAMPLE_JUSTIFICATIONS[h["domain"]]!r})\n'
        for h in hints
    )
    retry = persist + reproject + '\n{k: out[k] for k in ("width", "height", "crs", "res")}'
    await _execute(client, t, "execute_code: persist + retry", retry)
    await _execute(client, t, "execute_code: same call again (cached)", reproject + '\nout["crs"]["epsg"]')
    index_code = (
        f"idx = raster.calc({INDEX_EXPRESSION!r}, {INDEX_INPUTS!r}, {INDEX!r})\n"
        f's = raster.stats({INDEX!r}, percentiles=[50])["bands"][0]\n'
        '[idx["valid_count"], idx["nodata_count"], round(s["mean"], 3), round(s["percentiles"]["p50"], 3)]'
    )
    await _execute(client, t, "execute_code: analysis (an index and its statistics)", index_code)
    await _execute(
        client,
        t,
        "execute_code: reflection report",
        '[(r["domain"], r["choice"], r["confidence"]) for r in reflection.report()]',
    )


async def _execute(client: Client, t: Transcript, title: str, code: str) -> CallToolResult:
    return t.add(title, code, await client.call_tool("execute_code", {"code": code}))


async def _classic_story(client: Client, t: Transcript) -> None:
    t.add("raster_info", {"path": SAMPLE}, await client.call_tool("raster_info", {"path": SAMPLE}))
    stats_args = {"path": SAMPLE, "percentiles": [50]}
    t.add("raster_stats", stats_args, await client.call_tool("raster_stats", stats_args))
    args = {"src": SAMPLE, "dst": OUTPUT, "dst_crs": "EPSG:4326", "resampling": "bilinear"}
    miss = t.add("raster_reproject (gate miss)", args, await client.call_tool("raster_reproject", args))
    for hint in result_data(miss).get("reflection_required", []):
        persist = {
            "hash": hint["hash"],
            "domain": hint["domain"],
            "justification": EXAMPLE_JUSTIFICATIONS[hint["domain"]],
        }
        t.add(
            f"persist_justification ({hint['domain']})",
            persist,
            await client.call_tool("persist_justification", persist),
        )
    t.add("raster_reproject (retry)", args, await client.call_tool("raster_reproject", args))
    t.add("raster_reproject (cached)", args, await client.call_tool("raster_reproject", args))
    calc_args = {"expression": INDEX_EXPRESSION, "inputs": INDEX_INPUTS, "dst": INDEX}
    t.add("raster_calc (analysis: an index)", calc_args, await client.call_tool("raster_calc", calc_args))
    index_stats = {"path": INDEX, "percentiles": [50]}
    t.add(
        "raster_stats (analysis: its statistics)",
        index_stats,
        await client.call_tool("raster_stats", index_stats),
    )


async def _remote_story(client: Client, t: Transcript, mode: str, url: str) -> None:
    """A window at the centre of a remote COG, read where it lives: only its header and the tiles
    the window covers travel (the server reads them; the worker has no network)."""
    if mode == "classic":
        t.add("raster_info (remote)", {"path": url}, await client.call_tool("raster_info", {"path": url}))
        return
    code = (
        f"url = {url!r}\n"
        "info = raster.info(url)\n"
        'b, r = info["bounds"], info["res"]\n'
        'x, y = (b["left"] + b["right"]) / 2, (b["bottom"] + b["top"]) / 2\n'
        "w = raster.clip(url, 'remote_window.tif', bounds=[x - 128 * r[0], y - 128 * r[1], x + 128 * r[0], "
        "y + 128 * r[1]])\n"
        '[info["width"], info["height"], w["output"]["width"], w["output"]["height"]]'
    )
    await _execute(client, t, "execute_code: a window of a remote COG", code)


def print_transcript(transcript: Transcript, *, color: bool) -> None:
    total = sum(step.tokens for step in transcript.steps)
    if color:
        _print_rich(transcript, total)
        return
    out = sys.stdout
    out.write(f"llmc-mcp demo, {transcript.mode} mode (tokens: o200k, counted offline)\n")
    out.write(f"tool definitions + instructions: {transcript.fixed_tokens} tokens (sent every turn)\n\n")
    for number, step in enumerate(transcript.steps, 1):
        flag = "  [isError]" if step.is_error else ""
        out.write(f"--- {number}. {step.title} ({step.tokens} tokens){flag}\n")
        if step.request:
            out.write(_indent(">>> ", step.request) + "\n")
        out.write(_indent("<<< ", _clip(step.response)) + "\n\n")
    out.write(f"total: {total} tokens in calls, {transcript.fixed_tokens} per turn for definitions\n")


def _print_rich(transcript: Transcript, total: int) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.syntax import Syntax

    console = Console()
    console.rule(f"llmc-mcp demo, {transcript.mode} mode")
    console.print(
        f"tool definitions + instructions: [bold]{transcript.fixed_tokens}[/] tokens (sent every turn)"
    )
    for number, step in enumerate(transcript.steps, 1):
        style = "red" if step.is_error else "green"
        body = (
            Syntax(step.request, "python", word_wrap=True)
            if transcript.mode == "code" and step.request
            else (step.request)
        )
        console.print(
            Panel(
                body or "",
                title=f"{number}. {step.title}",
                subtitle=f"{step.tokens} tokens",
                border_style=style,
            )
        )
        console.print(_clip(step.response), markup=False, highlight=False)
    console.rule(f"total: {total} tokens in calls")


def _clip(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... [{len(text) - limit} more characters]"


def _indent(prefix: str, text: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())
