"""A small load: ~8 concurrent code-mode sessions for a few seconds, then the workers must be gone.

The real code-mode server is served over streamable HTTP in this process (uvicorn on a loopback
port), so the tests can look at its worker pool; clients are real ``mcp.Client`` sessions using
the initialize handshake (stateful: one ``mcp-session-id`` and one worker per session). Each session
keeps a secret variable and must only ever read its own. The full benchmark is ``bench/load.py``.

Reaping: in-process/stdio sessions end through the lifespan; HTTP sessions end through the MCP
connection's teardown (``pool.close_with_connection``), and in any case through the idle TTL, which
a background task enforces even when no calls come.

Nothing here asserts a speed. How many calls a session makes in its few seconds, and how many workers
are alive at the instant a sampler looks, depend on the machine's load (a loaded 2-core run makes far
fewer calls and overlaps fewer sessions), so counts are asserted as bounds that hold on any machine;
calls meant to be long last a wall-clock time, not a fixed amount of work. Timings live in
``bench/load.py``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from llmc_mcp.config import Settings
from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.sandbox.workers import DEMOTED_NICE
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import serve_http
from tests.reliability._rawstdio import alive

pytestmark = pytest.mark.anyio

SESSIONS = 8
SECONDS = 3.0
CALL_LIMIT = 60.0
MIN_CALLS = 3
"""Calls every session makes however slow the machine: its secret, then at least one step of the mix."""


def busy_for(seconds: float, then: str) -> str:
    """Sandbox code that keeps its worker busy for ``seconds`` of wall time (on any machine), then ``then``.

    A fixed amount of work (``sum(range(N))``) is too quick on a fast machine and needlessly slow on a
    loaded one; the clock is what the pool's idle and demotion timers look at.
    """
    return (
        "import datetime\n"
        f"until = datetime.datetime.now() + datetime.timedelta(seconds={seconds})\n"
        "while datetime.datetime.now() < until:\n"
        "    pass\n"
        f"{then}"
    )


async def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await anyio.sleep(0.1)
    return predicate()


async def execute(client: Client, code: str) -> dict[str, Any]:
    with anyio.fail_after(CALL_LIMIT):
        result = await client.call_tool("execute_code", {"code": code})
    assert result.structured_content is not None, result.content
    return result.structured_content


async def session_mix(
    client: Client, index: int, seconds: float, problems: list[str], light: bool = False
) -> int:
    """A bounded-time mix of calls; every unexpected answer goes to ``problems``; returns the call count.

    A worker reaped for idling past its TTL (a short one, under load) loses the session's variables,
    and the next call says so (``session.fresh``): the secret is then set again. What must never
    happen is another session's secret, or a lost one the server did not announce."""
    secret = f"secret-{index}-{uuid.uuid4().hex}"
    calls = 0

    async def check(code: str, expect: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        data = await execute(client, code)
        if not expect(data):
            problems.append(f"session {index} {what}: {str(data)[:300]}")
        return data

    def fresh(data: dict[str, Any]) -> bool:
        return bool((data.get("session") or {}).get("fresh"))

    def kept_or_announced(data: dict[str, Any]) -> bool:
        if data["ok"]:
            return data["result"] == secret
        return fresh(data) and (data.get("error") or {}).get("type") == "NameError"

    async def remember() -> None:
        await check(f"secret = {secret!r}", lambda d: d["ok"], "set secret")

    await remember()
    deadline = time.monotonic() + seconds
    step = 0
    while step == 0 or time.monotonic() < deadline:  # one step at least, however slow the machine
        step += 1
        if fresh(await check("1 + 1", lambda d: d["ok"] and d["result"] == 2, "trivial")):
            await remember()
        if fresh(await check("secret", kept_or_announced, "LEAK or lost state")):
            await remember()
        if step % 3 == 0:
            await check('raster.info("RGB.byte.tif")["width"]', lambda d: d.get("result") == 791, "info")
        if light:
            continue
        if step % 4 == 0:
            lon = index * 10 + step % 10 + 0.123
            miss = (
                f'raster.reproject("RGB.byte.tif", "m{index}.tif", dst_crs="+proj=tmerc +lon_0={lon} '
                f'+datum=WGS84", width=64)'
            )
            await check(miss, lambda d: d["error"] and d["error"]["type"] == "reflection_required", "miss")
        if step % 5 == 0:
            code = 'raster.stats("shade.tif", approx=True)["bands"][0]["valid_count"] > 0'
            await check(code, lambda d: d.get("result") is True, "stats")
    return calls


async def run_sessions(
    connect: Callable[[], Any],
    count: int,
    seconds: float,
    sample: Callable[[], None] | None = None,
    light: bool = False,
) -> tuple[int, list[str]]:
    """``count`` sessions running the mix concurrently; ``sample`` is called every 0.1 s meanwhile."""
    problems: list[str] = []
    totals: list[int] = []

    async def one(index: int) -> None:
        async with connect() as client:
            totals.append(await session_mix(client, index, seconds, problems, light))

    async with anyio.create_task_group() as tg:
        for index in range(count):
            tg.start_soon(one, index)
        while sample is not None and len(totals) < count:
            sample()
            await anyio.sleep(0.1)
    return sum(totals), problems


def code_settings(workspace: Path, **overrides: Any) -> Settings:
    return Settings(mode="code", workspace=workspace, exec_timeout=30, **overrides)


# ------------------------------------------------------------------------------------------ HTTP


async def test_http_sessions_run_concurrently_without_leaks_and_idle_workers_are_reaped(
    workspace_dir: Path,
) -> None:
    """Guards against sessions sharing a worker (or its variables) and against idle workers outliving
    their TTL. The number of workers alive at once is a bound, not a value: how far the sessions
    overlap, and whether a 2 s TTL reaps a worker between two calls, depends on the machine's load."""
    server = build_server(code_settings(workspace_dir, idle_ttl=2.0))
    pool: WorkerPool = server.pool  # type: ignore[attr-defined]
    peak = 0
    shared: list[dict[str, int]] = []

    def observe() -> None:
        nonlocal peak
        workers = pool.worker_pids()
        peak = max(peak, pool.sessions, len(workers))
        if len(set(workers.values())) != len(workers):
            shared.append(workers)

    async with serve_http(server) as web:
        connect = lambda: Client(web.url, mode="legacy")  # noqa: E731
        calls, problems = await run_sessions(connect, SESSIONS, SECONDS, observe)
        assert problems == []
        assert calls >= SESSIONS * MIN_CALLS
        assert shared == [], "two sessions were served by one worker process"
        assert 1 <= peak <= SESSIONS, f"{peak} workers alive at once for {SESSIONS} sessions"
        pids = list(pool.worker_pids().values())
        # No more calls come: the background reaper alone must stop every worker after the TTL.
        assert await wait_until(lambda: pool.sessions == 0, 2.0 + 10), pool.worker_pids()
        assert await wait_until(lambda: not any(alive(p) for p in pids), 5)
        assert pool.reaped >= len(pids)


async def test_http_session_end_stops_its_worker_at_once(workspace_dir: Path) -> None:
    server = build_server(code_settings(workspace_dir))
    pool: WorkerPool = server.pool  # type: ignore[attr-defined]
    async with serve_http(server) as web:
        calls, problems = await run_sessions(lambda: Client(web.url, mode="legacy"), 3, 1.0)
        assert problems == [] and calls >= 3 * MIN_CALLS
        assert await wait_until(lambda: pool.sessions == 0, 5), pool.worker_pids()


async def test_the_pool_stops_a_worker_when_its_http_connection_ends(tmp_path: Path) -> None:
    """The mechanism the code face needs: close_with_connection + client DELETE / server shutdown."""

    async def no_host_requests(method: str, params: Any) -> Any:
        raise RuntimeError(method)

    pool = WorkerPool(code_settings(tmp_path), str(tmp_path), no_host_requests)
    server = MCPServer("pool-probe")

    @server.tool(structured_output=False)
    async def run(code: str, ctx: Context) -> str:
        key = "http-" + (ctx.headers or {}).get("mcp-session-id", "none")
        assert pool.close_with_connection(key, ctx)
        return repr((await pool.execute(key, code, False))["result"])

    async with serve_http(server) as web:
        async with Client(web.url, mode="legacy") as client:
            assert (await client.call_tool("run", {"code": "x = 5\nx"})).content[0].text == "5"
            assert (await client.call_tool("run", {"code": "x"})).content[0].text == "5"
            pids = list(pool.worker_pids().values())
            assert len(pids) == 1
        # The client's exit sent DELETE: the connection's teardown closed the session.
        assert await wait_until(lambda: pool.sessions == 0, 5)
        assert await wait_until(lambda: not alive(pids[0]), 5)

        # A session still open when the server shuts down is closed by the shutdown.
        ready = anyio.Event()

        async def hold_open() -> None:
            async with Client(web.url, mode="legacy") as held:
                await held.call_tool("run", {"code": "1"})
                ready.set()
                await anyio.sleep_forever()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_open)
            await ready.wait()
            survivor = list(pool.worker_pids().values())
            assert len(survivor) == 1
            web.should_exit = True
            assert await wait_until(lambda: pool.sessions == 0, 15), "server shutdown left a worker"
            tg.cancel_scope.cancel()
    assert await wait_until(lambda: not any(alive(p) for p in survivor), 5)


# ------------------------------------------------------------------------------------ in-process


async def test_in_process_sessions_run_concurrently_and_are_reaped_when_they_end(workspace_dir: Path) -> None:
    """Guards against sessions sharing a worker and against a worker outliving its session.

    Each session keeps its secret across its calls (``problems`` is empty), so each had a worker of
    its own; the sampler only bounds how many it saw, since a loaded machine may overlap fewer."""
    server = build_server(code_settings(workspace_dir))
    pool: WorkerPool = server.pool  # type: ignore[attr-defined]
    seen: set[int] = set()
    shared: list[dict[str, int]] = []

    def observe() -> None:
        workers = pool.worker_pids()
        seen.update(workers.values())
        if len(set(workers.values())) != len(workers):
            shared.append(workers)

    calls, problems = await run_sessions(lambda: Client(server, mode="legacy"), SESSIONS, SECONDS, observe)
    assert problems == [] and calls >= SESSIONS * MIN_CALLS
    assert shared == [], "two sessions were served by one worker process"
    assert 1 <= len(seen) <= SESSIONS, f"{len(seen)} workers for {SESSIONS} sessions (no idle TTL, no crash)"
    assert pool.sessions == 0, "a session's end did not stop its worker"
    assert await wait_until(lambda: not any(alive(p) for p in seen), 5)


async def test_a_timeout_and_a_dead_worker_do_not_disturb_other_sessions(workspace_dir: Path) -> None:
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=3))
    pool: WorkerPool = server.pool  # type: ignore[attr-defined]
    async with Client(server, mode="legacy") as spinner, Client(server, mode="legacy") as victim:
        await execute(spinner, "x = 1")
        before = set(pool.worker_pids().values())
        await execute(victim, "ballast = 1")
        (victim_pid,) = set(pool.worker_pids().values()) - before
        outcomes: dict[str, Any] = {}

        async def spin() -> None:
            outcomes["spin"] = await execute(spinner, "while True:\n    pass")

        async def crash() -> None:
            os.kill(victim_pid, 9)  # what the OOM killer would do
            outcomes["crash"] = await execute(victim, "ballast")

        async with anyio.create_task_group() as tg:
            tg.start_soon(spin)
            tg.start_soon(crash)
            connect = lambda: Client(server, mode="legacy")  # noqa: E731
            calls, problems = await run_sessions(connect, 4, 3.0, light=True)
        assert problems == [] and calls >= 4 * MIN_CALLS
        assert outcomes["spin"]["error"]["type"] == "Timeout"
        crashed = outcomes["crash"]["error"]
        assert crashed["type"] == "WorkerCrashed" and "killed" in crashed["message"], crashed
        assert (await execute(spinner, "1 + 1"))["result"] == 2
        assert (await execute(victim, "2 + 2"))["result"] == 4


# ------------------------------------------------------------------------------------------ pool


async def _no_requests(method: str, params: Any) -> Any:
    raise RuntimeError(method)


async def test_the_worker_limit_gives_a_clear_error_and_frees_up(tmp_path: Path) -> None:
    pool = WorkerPool(code_settings(tmp_path), str(tmp_path), _no_requests, max_workers=2)
    try:
        assert (await pool.execute("a", "1", False))["ok"]
        assert (await pool.execute("b", "2", False))["ok"]
        refused = await pool.execute("c", "3", False)
        assert refused["error"]["type"] == "TooManySessions"
        message = refused["error"]["message"]
        assert "2 code workers" in message and "Nothing ran" in message
        assert refused["error"]["fix"]
        assert (await pool.execute("a", "10", False))["result"] == 10, "existing sessions keep working"
        await pool.close_session("a")
        assert (await pool.execute("c", "3", False))["result"] == 3
    finally:
        await pool.close()
    assert pool.sessions == 0


async def test_idle_workers_are_reaped_without_any_call(tmp_path: Path) -> None:
    pool = WorkerPool(code_settings(tmp_path, idle_ttl=0.5), str(tmp_path), _no_requests)
    try:
        await pool.execute("idle", "1", False)
        (pid,) = pool.worker_pids().values()
        assert await wait_until(lambda: pool.sessions == 0, 5), "nothing reaped the idle worker"
        assert await wait_until(lambda: not alive(pid), 5)
        # The session comes back: a fresh worker, and it says so.
        again = await pool.execute("idle", "2", False)
        assert again["result"] == 2 and again["session"]["fresh"] is True
    finally:
        await pool.close()


async def test_a_busy_worker_is_never_reaped_as_idle(tmp_path: Path) -> None:
    """Guards against the idle reaper killing a worker in the middle of a long call.

    The call is busy for a wall-clock time several TTLs long (not a fixed amount of work, which a fast
    machine finishes within one TTL and so proves nothing)."""
    pool = WorkerPool(code_settings(tmp_path, idle_ttl=0.3), str(tmp_path), _no_requests)
    try:
        await pool.execute("busy", "kept = 1", False)
        slow = await pool.execute("busy", busy_for(1.5, "kept"), False)
        assert slow["ok"] and slow["result"] == 1, slow
    finally:
        await pool.close()


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _group_nice(pid: int) -> int | None:
    """The scheduler autogroup's nice (what orders a worker against the server), if the kernel has it."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


async def test_a_long_call_gives_way_to_another_sessions_short_calls_and_the_next_call_does_not(
    tmp_path: Path,
) -> None:
    """Guards against a runaway loop of one session slowing the interactive calls of another: while
    those run, the long call is at DEMOTED_NICE (a lone long call is not: test_runtime_bounds)."""
    pool = WorkerPool(code_settings(tmp_path), str(tmp_path), _no_requests)
    try:
        await pool.execute("long", "1", False)
        (pid,) = pool.worker_pids().values()
        await pool.execute("short", "1", False)
        assert _nice(pid) == 0 and _group_nice(pid) in (0, None), "the first call restores priority"
        niceness: list[int] = []
        group: list[int | None] = []

        async def watch() -> None:
            # Demotion is due DEMOTE_AFTER (1 s) into the call, while the other session's call is
            # interactive; on a loaded machine the timer may fire late, so poll for it while the call
            # still runs (it lasts 6 s of wall time) and the other session keeps making short calls.
            async with anyio.create_task_group() as shorts:

                async def short_calls() -> None:
                    while True:
                        await pool.execute("short", busy_for(0.5, "1"), False)

                shorts.start_soon(short_calls)
                await wait_until(lambda: _nice(pid) == DEMOTED_NICE, 4.5)
                niceness.append(_nice(pid))
                group.append(_group_nice(pid))
                shorts.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await pool.execute("long", busy_for(6, "1"), False)
        assert niceness == [DEMOTED_NICE], "a call running for over a second was not demoted"
        assert group[0] in (DEMOTED_NICE, None)
        await pool.execute("long", "1", False)
        assert _group_nice(pid) in (0, None)
        if os.geteuid() == 0:  # raising a process's priority again needs CAP_SYS_NICE
            assert _nice(pid) == 0
    finally:
        await pool.close()
