"""Round-trip latency through REAL stdio servers (``llmc-mcp serve`` subprocesses).

Clients use the legacy (initialize handshake) era, as shipping hosts do.

Warm: one code-mode and one classic-mode server run side by side; calls alternate between them so
machine noise hits both alike. Measured per call (client-side, send to result):

- ``ping``: the MCP stdio floor (JSON-RPC over pipes, no tool);
- code ``execute_code("1 + 1")``: MCP + the per-session worker channel + RestrictedPython;
- classic ``crs_info(EPSG:4326)`` (the baseline) and classic ``raster_info(RGB.byte.tif)``;
- code ``execute_code('raster.info("RGB.byte.tif")["width"]')``: the same GDAL work as raster_info.

Cold: over a handful of fresh stdio sessions per mode, the time to connect (spawn the server +
initialize), the first tool call (code mode: it takes the pool's warm spare, or waits for it when
called right after the server started) and warm calls after.

HTTP (one running ``llmc-mcp serve --transport http``): the first ``execute_code`` of a new session
(a handshake-era client arriving every 2 s, as sessions do, so the spare is back in between), idle
and then with the machine loaded by two CPU-bound processes; and warm calls of a stateless-era
client passing its session handle back, interleaved with a handshake-era client's.

Run: .venv/bin/python bench/execute.py
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from _common import (
    LLMC_BIN,
    banner,
    finish,
    ms,
    print_table,
    quiet_logs,
    ratio,
    stdio_env,
    summary,
    workspace,
)
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import CallToolResult

ERA = "legacy"  # the initialize handshake, as shipping hosts (TS SDK, Inspector) use
WARM_CALLS = 200
WARMUP = 10
SESSIONS = 5
WARM_AFTER_COLD = 10
ONE_PLUS_ONE = {"code": "1 + 1"}
CODE_INFO = {"code": 'raster.info("RGB.byte.tif")["width"]'}


def params(ws: Path, mode: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(LLMC_BIN), args=["serve", "--workspace", str(ws), "--mode", mode], env=stdio_env()
    )


def checked(result: CallToolResult, what: str) -> CallToolResult:
    if result.is_error:
        text = "".join(getattr(b, "text", "") for b in result.content)
        raise SystemExit(f"{what} failed: {text[:500]}")
    return result


Probe = Callable[[], Awaitable[Any]]


async def timed(probe: Probe) -> float:
    start = time.perf_counter()
    await probe()
    return time.perf_counter() - start


async def warm(ws: Path) -> dict[str, list[float]]:
    async with (
        Client(params(ws, "code"), mode=ERA) as code,
        Client(params(ws, "classic"), mode=ERA) as classic,
    ):

        async def execute(args: dict[str, str], expect: int) -> None:
            result = checked(await code.call_tool("execute_code", args), "execute_code")
            assert (result.structured_content or {}).get("result") == expect, result.content

        probes: dict[str, Probe] = {
            "ping (code server)": code.send_ping,
            "ping (classic server)": classic.send_ping,
            'code: execute_code("1 + 1")': lambda: execute(ONE_PLUS_ONE, 2),
            "classic: crs_info(EPSG:4326)": lambda: _call(classic, "crs_info", {"crs": "EPSG:4326"}),
            "classic: raster_info(RGB.byte.tif)": lambda: _call(
                classic, "raster_info", {"path": "RGB.byte.tif"}
            ),
            'code: execute_code(raster.info(...)["width"])': lambda: execute(CODE_INFO, 791),
        }
        for probe in probes.values():  # warm-up: worker spawn, imports, GDAL/PROJ caches
            for _ in range(WARMUP):
                await probe()
        times: dict[str, list[float]] = {name: [] for name in probes}
        for _ in range(WARM_CALLS):
            for name, probe in probes.items():
                times[name].append(await timed(probe))
    return times


async def _call(client: Client, tool: str, args: dict[str, Any]) -> None:
    checked(await client.call_tool(tool, args), tool)


async def cold(ws: Path, mode: str) -> list[dict[str, Any]]:
    sessions = []
    for _ in range(SESSIONS):
        start = time.perf_counter()
        async with Client(params(ws, mode), mode=ERA) as client:
            connected = time.perf_counter()
            if mode == "code":
                first = await client.call_tool("execute_code", ONE_PLUS_ONE)
                fresh = (
                    (checked(first, "execute_code").structured_content or {}).get("session", {}).get("fresh")
                )
                probe: Probe = lambda: _call(client, "execute_code", ONE_PLUS_ONE)  # noqa: E731
            else:
                checked(await client.call_tool("crs_info", {"crs": "EPSG:4326"}), "crs_info")
                fresh = None
                probe = lambda: _call(client, "crs_info", {"crs": "EPSG:4326"})  # noqa: E731
            first_done = time.perf_counter()
            after = [await timed(probe) for _ in range(WARM_AFTER_COLD)]
        closed = time.perf_counter()
        sessions.append({
            "connect": connected - start,
            "first": first_done - connected,
            "fresh": fresh,
            "warm": summary(after)["p50"],
            "close": closed - first_done - sum(after),
        })  # fmt: skip
    return sessions


HTTP_SESSIONS = 7
ARRIVAL_GAP = 2.0
"""Seconds between new sessions: time for the pool to start its next spare, as real arrivals leave."""
HANDLE_CALLS = 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(ws: Path) -> Iterator[str]:
    port = free_port()
    command = [str(LLMC_BIN), "serve", "--transport", "http", "--port", str(port), "--workspace", str(ws)]
    process = subprocess.Popen(command, env=stdio_env(), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def cpu_load(processes: int = 2) -> Iterator[None]:
    """Other work on the machine: CPU-bound processes at normal priority."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(1)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


async def first_calls(url: str) -> list[float]:
    firsts = []
    for _ in range(HTTP_SESSIONS):
        await anyio.sleep(ARRIVAL_GAP)
        async with Client(url, mode=ERA) as client:
            firsts.append(await timed(lambda c=client: _call(c, "execute_code", ONE_PLUS_ONE)))
    return firsts


async def handle_vs_handshake(url: str) -> dict[str, list[float]]:
    async with Client(url) as stateless, Client(url, mode=ERA) as handshake:
        first = checked(await stateless.call_tool("execute_code", ONE_PLUS_ONE), "execute_code")
        handle = (first.structured_content or {})["session"]["handle"]
        with_handle = {**ONE_PLUS_ONE, "session": handle}
        probes: dict[str, Probe] = {
            "stateless era, session handle passed back": lambda: _call(
                stateless, "execute_code", with_handle
            ),
            "handshake era, mcp-session-id": lambda: _call(handshake, "execute_code", ONE_PLUS_ONE),
            "stateless era, no handle (new session each call)": lambda: _call(
                stateless, "execute_code", ONE_PLUS_ONE
            ),
        }
        for probe in probes.values():
            for _ in range(WARMUP):
                await probe()
        times: dict[str, list[float]] = {name: [] for name in probes}
        for i in range(HANDLE_CALLS):
            for name, probe in probes.items():
                if "no handle" in name and i % 10:
                    continue  # each costs a worker for 60 s: sample every tenth round
                times[name].append(await timed(probe))
    return times


async def http_figures(ws: Path) -> tuple[list[float], list[float], dict[str, list[float]]]:
    with http_server(ws) as url:
        idle = await first_calls(url)
        with cpu_load():
            loaded = await first_calls(url)
        eras = await handle_vs_handshake(url)
    return idle, loaded, eras


async def main() -> None:
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # ping: fine in the legacy era
    start = banner("execute.py", "tool-call round trips through real stdio servers, code vs classic mode")
    quiet_logs()
    with workspace("llmc-bench-exec-", ["RGB.byte.tif"]) as ws:
        times = await warm(ws)
        cold_code = await cold(ws, "code")
        cold_classic = await cold(ws, "classic")
        with cpu_load():
            cold_loaded = await cold(ws, "code")
        idle_firsts, loaded_firsts, eras = await http_figures(ws)

    stats = {name: summary(values) for name, values in times.items()}
    baseline = stats["classic: crs_info(EPSG:4326)"]
    rows = [
        [name, s["n"], ms(s["p50"]), ms(s["p90"]), ms(s["p99"]), ms(s["max"]),
         ratio(s["p50"], baseline["p50"]), ratio(s["p99"], baseline["p99"])]
        for name, s in stats.items()
    ]  # fmt: skip
    print_table(
        ["warm call (stdio, interleaved)", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", "p50 / crs_info",
         "p99 / crs_info"],
        rows,
        f"Warm round trips ({WARM_CALLS} calls each after {WARMUP} warm-up calls)",
    )  # fmt: skip

    rows = []
    for mode, sessions in (("code", cold_code), ("classic", cold_classic)):
        for i, s in enumerate(sessions, 1):
            fresh = "" if s["fresh"] is None else f" (fresh={s['fresh']})"
            rows.append([mode, i, ms(s["connect"]), ms(s["first"]) + fresh, ms(s["warm"]),
                         ratio(s["first"], s["warm"]), ms(s["close"])])  # fmt: skip
    print_table(
        ["mode", "session", "connect ms (spawn+init)", "first call ms",
         f"warm p50 ms (next {WARM_AFTER_COLD})", "first / warm", "close ms"],
        rows,
        "Cold sessions: code = execute_code('1 + 1'), classic = crs_info(EPSG:4326)",
    )  # fmt: skip

    def med(sessions: list[dict[str, Any]], key: str) -> float:
        return summary([s[key] for s in sessions])["p50"]

    rows = [
        [mode, ms(med(s, "connect")), ms(med(s, "first")), ms(med(s, "warm")),
         ratio(med(s, "first"), med(s, "warm"))]
        for mode, s in (("code", cold_code), ("classic", cold_classic),
                        ("code, 2 CPU-bound processes running", cold_loaded))
    ]  # fmt: skip
    print_table(
        ["mode", "connect p50 ms", "first call p50 ms", "warm p50 ms", "cold / warm"],
        rows,
        f"Cold vs warm, median over {SESSIONS} sessions",
    )
    idle, loaded = summary(idle_firsts), summary(loaded_firsts)
    print_table(
        ["machine", "sessions", "first call p50 ms", "p90 ms", "max ms"],
        [
            ["idle", idle["n"], ms(idle["p50"]), ms(idle["p90"]), ms(idle["max"])],
            ["loaded (2 CPU-bound processes)", loaded["n"], ms(loaded["p50"]), ms(loaded["p90"]),
             ms(loaded["max"])],
        ],
        f"First execute_code of a new HTTP session (running server, a session every {ARRIVAL_GAP:g} s)",
    )  # fmt: skip
    era_stats = {name: summary(values) for name, values in eras.items()}
    handshake = era_stats["handshake era, mcp-session-id"]
    print_table(
        ["warm execute_code('1 + 1') over HTTP", "n", "p50 ms", "p90 ms", "p99 ms", "p50 / handshake"],
        [[name, s["n"], ms(s["p50"]), ms(s["p90"]), ms(s["p99"]), ratio(s["p50"], handshake["p50"])]
         for name, s in era_stats.items()],
        "Stateless era with a session handle vs the handshake era, interleaved",
    )  # fmt: skip
    code_warm = stats['code: execute_code("1 + 1")']
    handled = era_stats["stateless era, session handle passed back"]
    finish(
        start,
        f'execute_code("1 + 1") p50 {ms(code_warm["p50"])} ms / p99 {ms(code_warm["p99"])} ms vs classic '
        f"crs_info p50 {ms(baseline['p50'])} ms / p99 {ms(baseline['p99'])} ms "
        f"({ratio(code_warm['p50'], baseline['p50'])} at p50); code cold first call p50 "
        f"{ms(med(cold_code, 'first'))} ms = {ratio(med(cold_code, 'first'), med(cold_code, 'warm'))} warm "
        f"({ms(med(cold_loaded, 'first'))} ms loaded); "
        f"HTTP first call of a new session p50 {ms(idle['p50'])} ms idle, {ms(loaded['p50'])} ms loaded; "
        f"stateless with handle p50 {ms(handled['p50'])} ms = {ratio(handled['p50'], handshake['p50'])} "
        "handshake",
    )


if __name__ == "__main__":
    anyio.run(main)
