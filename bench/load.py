"""Load: many concurrent code-mode sessions over stateful streamable HTTP, two of them misbehaving.

Starts ``llmc-mcp serve --transport http --port <free> --workspace WS --exec-timeout 5`` as a
subprocess (loopback only) and opens ``--sessions`` normal sessions (default 20) plus two
misbehaving ones, each a real ``mcp.Client`` over streamable HTTP using the initialize handshake
(stateful: one ``mcp-session-id``, one worker per session). Two phases of ``--phase-seconds`` each:

1. baseline: the normal sessions run their mix; the misbehaving two only hold their workers;
2. misbehaving: the same, while one session loops ``while True: pass`` (stopped by the 5 s
   timeout each time) and another's worker is SIGKILLed over and over (as the OOM killer would:
   the session holds a 200 MB string, so its worker is the one process that large).

A normal session's mix: ``1 + 1`` (the latency measured), reading back its own secret variable
(cross-session leakage: it must never see another value or lose it), ``raster.info`` and
``raster.stats`` on real files, reflection misses (a new custom CRS each time), and once per phase a
reprojection persisted and retried (its own CRS and output file). Every answer is checked against
what that call must return; anything else is an unexpected error.

Measured: calls, unexpected errors, leaks, the trivial call's p50/p99 per phase, server RSS and
worker processes during the run, after the sessions end (client close sends DELETE) and after the
server stops; then, in-process (``Settings(idle_ttl=3)``, served by uvicorn in this process), that
idle workers are reaped by the TTL with no call coming. Bounded: about 90 s, hard limit 170 s.

Run: .venv/bin/python bench/load.py [--sessions 20] [--phase-seconds 25]

``--lone`` measures something else: one session alone on a machine busy with ``--competitors``
CPU-bound processes of nobody's (``python -c 'while True: pass'``), running ``terrain.slope`` of a
``--dem-side``² float32 DEM (classic mode, in-process server, ``--lone-timeout`` as --exec-timeout):
quiet, then under the load with the pool's priority policy, then under the load with the old policy
(every call demoted to nice 19 after a second, whoever else runs). Wall time, the worker's CPU time
and the outcome of each, ``--lone-runs`` runs each.

Run: .venv/bin/python bench/load.py --lone [--dem-side 8192] [--competitors 2] [--lone-timeout 30]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
LLMC = Path(sys.executable).parent / "llmc-mcp"
FILES = ("RGB.byte.tif", "shade.tif", "world.byte.tif", "RGBA.uint16.tif", "goes.tif")
BALLAST_MB = 200
HARD_LIMIT = 170.0
CALL_LIMIT = 60.0

PERSIST_AND_RETRY = """
for hint in hints:
    reflection.persist(hint["hash"], hint["domain"], {
        "intent": "A UTM grid for a field survey overlay.",
        "alternatives": [{"method": "keep the source grid", "why_not": "The survey uses the target zone."}],
        "choice": {"method": list(hint["prompt_args"].values())[0],
                   "rationale": "It matches the survey.", "tradeoffs": "Every pixel is resampled."},
        "confidence": "medium"})
out = raster.reproject("RGB.byte.tif", OUT, dst_crs=CRS, resampling="nearest", width=200)
out["crs"]["epsg"]
"""


# ------------------------------------------------------------------------------------ bookkeeping


@dataclass
class Stats:
    calls: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    unexpected: list[str] = field(default_factory=list)
    expected_errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    leak_checks: int = 0
    leaks: list[str] = field(default_factory=list)
    trivial: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    samples: list[dict[str, Any]] = field(default_factory=list)


class Phase:
    """Which phase is running; sessions tag each call with the phase current at its start."""

    def __init__(self) -> None:
        self.name = "warmup"
        self.started = time.monotonic()
        self.changed = anyio.Event()

    def set(self, name: str) -> None:
        self.name = name
        self.started = time.monotonic()
        self.changed.set()
        self.changed = anyio.Event()


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def mib(kb: float) -> str:
    return f"{kb / 1024:.0f} MiB"


# ----------------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own CPU, its children's: waited-for ones plus the live ones) in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    reaped = (int(fields[13]) + int(fields[14])) / CLOCK_TICKS
    live = sum(cpu_seconds(child)[0] for child in children(pid))
    return own, reaped + live


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def make_workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="llmc-load-"))
    ws = root / "ws"
    ws.mkdir()
    for name in FILES:
        shutil.copy(DATA / name, ws / name)
    return ws


def start_server(ws: Path, port: int, exec_timeout: float) -> subprocess.Popen[bytes]:
    log = open(ws.parent / "server.log", "wb")  # noqa: SIM115  (the child keeps it)
    command = [
        str(LLMC), "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port),
        "--workspace", str(ws), "--exec-timeout", str(exec_timeout), "--log-level", "WARNING",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


async def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            await anyio.sleep(0.1)
    raise SystemExit("the server did not open its port")


# -------------------------------------------------------------------------------------- sessions


async def execute(client: Client, code: str) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    with anyio.fail_after(CALL_LIMIT):
        result = await client.call_tool("execute_code", {"code": code})
    elapsed = time.perf_counter() - started
    data = result.structured_content
    if data is None:
        raise RuntimeError(f"no structured content: {result.content}")
    return data, elapsed


def error_type(data: dict[str, Any]) -> str | None:
    return (data.get("error") or {}).get("type") if not data.get("ok") else None


async def normal_session(
    index: int,
    url: str,
    phase: Phase,
    stop: anyio.Event,
    stats: Stats,
    think: float,
    phase_seconds: float,
    herd: bool,
) -> None:
    secret = f"s{index}-{uuid.uuid4().hex}"
    rng = random.Random(index)

    async def call(kind: str, code: str, ok: Callable[[dict[str, Any]], bool], expected: str | None = None):
        tag = phase.name
        try:
            data, elapsed = await execute(client, code)
        except Exception as exc:
            stats.unexpected.append(f"session {index} {kind}: {type(exc).__name__}: {exc}"[:300])
            return None
        stats.calls += 1
        stats.by_kind[kind] += 1
        if think:
            await anyio.sleep(rng.uniform(0.5, 1.5) * think)  # an agent thinks between calls
        if kind == "trivial":
            stats.trivial[tag].append(elapsed)
        if expected is not None and error_type(data) == expected:
            stats.expected_errors[expected] += 1
        elif not ok(data):
            stats.unexpected.append(f"session {index} {kind} ({tag}): {str(data)[:300]}")
        return data

    async with Client(url, mode="legacy") as client:
        await call("setup", f"secret = {secret!r}", lambda d: d["ok"])
        step, persisted_in = 0, set()
        # When in each phase this session persists and retries: spread out, as agents arrive.
        offset = rng.uniform(0.0, 0.6)
        while not stop.is_set():
            step += 1
            await call("trivial", "1 + 1", lambda d: d["ok"] and d["result"] == 2)
            seen = await call("secret", "secret", lambda d: d["ok"] and d["result"] == secret)
            stats.leak_checks += 1
            if seen is not None and seen.get("result") not in (None, secret):
                stats.leaks.append(f"session {index} read {seen['result']!r}")
            if step % 3 == 0:
                await call("info", 'raster.info("RGB.byte.tif")["width"]', lambda d: d.get("result") == 791)
            if step % 3 == 1:
                code = 'raster.stats("shade.tif", approx=True)["bands"][0]["valid_count"] > 0'
                await call("stats", code, lambda d: d.get("result") is True)
            if step % 4 == 0:
                # Never justified (bilinear is never persisted here): always a miss, with its hints.
                zone = 1 + (index + step) % 60
                code = (f'raster.reproject("RGB.byte.tif", "miss_{index}.tif", dst_crs="EPSG:327{zone:02d}", '
                        'resampling="bilinear", width=64)')  # fmt: skip
                await call("miss", code, lambda d: False, expected="reflection_required")
            due = phase.started + offset * phase_seconds
            if (
                phase.name in ("baseline", "misbehaving")
                and phase.name not in persisted_in
                and (herd or time.monotonic() >= due)
            ):
                persisted_in.add(phase.name)
                await persist_and_retry(index, phase.name, call)


async def persist_and_retry(index: int, tag: str, call: Callable[..., Any]) -> None:
    zone = 1 + (index * 2 + (tag == "misbehaving")) % 60
    crs, out = f"EPSG:326{zone:02d}", f"out_s{index}_{tag}.tif"
    first = f'raster.reproject("RGB.byte.tif", {out!r}, dst_crs={crs!r}, resampling="nearest", width=200)'
    data = await call("reproject", first, lambda d: d["ok"], expected="reflection_required")
    if data is None or data.get("ok"):
        return
    hints = data["reflection_required"]
    code = f"hints = {json.dumps(hints)}\nOUT = {out!r}\nCRS = {crs!r}\n{PERSIST_AND_RETRY}"
    await call("persist+retry", code, lambda d: d["ok"] and d["result"] == int(crs[5:]))


async def timeout_session(url: str, phase: Phase, stop: anyio.Event, stats: Stats) -> None:
    async with Client(url, mode="legacy") as client:
        data, _ = await execute(client, "held = 1")
        while phase.name != "misbehaving" and not stop.is_set():
            await phase.changed.wait()
        while not stop.is_set():
            data, _ = await execute(client, "while True:\n    pass")
            stats.calls += 1
            stats.by_kind["spin"] += 1
            if error_type(data) == "Timeout":
                stats.expected_errors["Timeout"] += 1
            else:
                stats.unexpected.append(f"timeout session: {str(data)[:300]}")
            data, _ = await execute(client, "1 + 1")
            stats.calls += 1
            if data.get("result") != 2:
                stats.unexpected.append(f"timeout session after the timeout: {str(data)[:300]}")


async def crash_session(url: str, server_pid: int, phase: Phase, stop: anyio.Event, stats: Stats) -> None:
    ballast = f"ballast = 'c' * ({BALLAST_MB} * 1024 * 1024)\nlen(ballast)"
    async with Client(url, mode="legacy") as client:
        await execute(client, "held = 1")
        while phase.name != "misbehaving" and not stop.is_set():
            await phase.changed.wait()
        while not stop.is_set():
            data, _ = await execute(client, ballast)
            stats.calls += 1
            big = [p for p in children(server_pid) if rss_kb(p) > (BALLAST_MB - 20) * 1024]
            if len(big) != 1:
                stats.unexpected.append(
                    f"crash session: expected one {BALLAST_MB} MB worker, found {len(big)}"
                )
                await anyio.sleep(1)
                continue
            os.kill(big[0], signal.SIGKILL)
            data, _ = await execute(client, "len(ballast)")
            stats.calls += 1
            stats.by_kind["crash"] += 1
            if error_type(data) == "WorkerCrashed":
                stats.expected_errors["WorkerCrashed"] += 1
            else:
                stats.unexpected.append(f"crash session: {str(data)[:300]}")
            await anyio.sleep(0.5)


async def sample(server_pid: int, phase: Phase, stats: Stats, stop: anyio.Event) -> None:
    while not stop.is_set():
        workers = children(server_pid)
        stats.samples.append(
            {
                "phase": phase.name,
                "server_kb": rss_kb(server_pid),
                "workers": len(workers),
                "workers_kb": sum(rss_kb(p) for p in workers),
            }
        )
        await anyio.sleep(0.5)


# ------------------------------------------------------------------------------------- idle TTL


async def ttl_check(ws: Path, sessions: int, ttl: float) -> dict[str, Any]:
    """In-process HTTP server with Settings(idle_ttl=ttl): workers must go with no call coming."""
    import uvicorn

    from llmc_mcp.config import Settings
    from llmc_mcp.server.app import build_server

    server = build_server(Settings(mode="code", workspace=ws, exec_timeout=30, idle_ttl=ttl))
    pool = server.pool  # type: ignore[attr-defined]
    port = free_port()
    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error",
                            timeout_graceful_shutdown=5)  # fmt: skip
    web = uvicorn.Server(config)
    url = f"http://127.0.0.1:{port}/mcp"
    out: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        while not web.started:
            await anyio.sleep(0.05)

        async def one(i: int) -> None:
            async with Client(url, mode="legacy") as client:
                await execute(client, f"x = {i}")

        async with anyio.create_task_group() as clients:
            for i in range(sessions):
                clients.start_soon(one, i)
        out["after_close"] = pool.sessions
        pids = list(pool.worker_pids().values())
        started = time.monotonic()
        while pool.sessions and time.monotonic() - started < ttl + 10:
            await anyio.sleep(0.1)
        out["reaped_after"] = time.monotonic() - started
        out["left"] = pool.sessions
        await anyio.sleep(0.5)
        out["processes_left"] = sum(alive(p) for p in pids)
        web.should_exit = True
    return out


# ------------------------------------------------------------------------------------------ main


async def run(args: argparse.Namespace) -> int:
    ws = make_workspace()
    port = free_port()
    proc = start_server(ws, port, args.exec_timeout)
    url = f"http://127.0.0.1:{port}/mcp"
    stats, phase = Stats(), Phase()
    t0 = time.monotonic()
    report: dict[str, Any] = {}
    try:
        with anyio.fail_after(HARD_LIMIT):
            await wait_for_port(port, proc)
            stop, sampler_stop = anyio.Event(), anyio.Event()
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample, proc.pid, phase, stats, sampler_stop)
                async with anyio.create_task_group() as tg:
                    for i in range(args.sessions):
                        options = (args.think, args.phase_seconds, args.herd)
                        tg.start_soon(normal_session, i, url, phase, stop, stats, *options)
                    tg.start_soon(timeout_session, url, phase, stop, stats)
                    tg.start_soon(crash_session, url, proc.pid, phase, stop, stats)
                    # Warm-up: every session has its worker.
                    while len(children(proc.pid)) < args.sessions + 2 and time.monotonic() - t0 < 60:
                        await anyio.sleep(0.2)
                    report["warmup_s"] = time.monotonic() - t0
                    marks = [(cpu_seconds(proc.pid), time.process_time(), machine_busy())]
                    phase.set("baseline")
                    await anyio.sleep(args.phase_seconds)
                    marks.append((cpu_seconds(proc.pid), time.process_time(), machine_busy()))
                    phase.set("misbehaving")
                    await anyio.sleep(args.phase_seconds)
                    marks.append((cpu_seconds(proc.pid), time.process_time(), machine_busy()))
                    cpus = os.cpu_count() or 1
                    report["cpu"] = [
                        (
                            (b[0][0] - a[0][0]) / args.phase_seconds,
                            (b[0][1] - a[0][1]) / args.phase_seconds,
                            (b[1] - a[1]) / args.phase_seconds,
                            (b[2][0] - a[2][0]) / max(1, b[2][1] - a[2][1]) * cpus,
                        )
                        for a, b in itertools.pairwise(marks)
                    ]
                    phase.set("closing")
                    stop.set()
                    report["workers_open"] = len(children(proc.pid))
                # Every session context has exited (each client sent DELETE).
                sampler_stop.set()
            report["workers_at_close"] = len(children(proc.pid))
            await anyio.sleep(3)
            report["workers_3s_after_close"] = len(children(proc.pid))
            report["server_kb_end"] = rss_kb(proc.pid)
            leftover = children(proc.pid)
            proc.send_signal(signal.SIGTERM)
            try:
                report["server_exit"] = await anyio.to_thread.run_sync(lambda: proc.wait(15))
            except subprocess.TimeoutExpired:
                proc.kill()
                report["server_exit"] = "killed after 15 s"
            # Idle workers see their channel close and exit (interpreter teardown takes a moment).
            gone_by = time.monotonic() + 10
            while any(alive(p) for p in leftover) and time.monotonic() < gone_by:
                await anyio.sleep(0.2)
            report["workers_after_stop"] = sum(alive(p) for p in leftover)
            report["ttl"] = await ttl_check(ws, 5, args.idle_ttl)
    finally:
        if proc.poll() is None:
            proc.kill()
    report["elapsed_s"] = time.monotonic() - t0
    print_report(args, stats, report)
    shutil.rmtree(ws.parent, ignore_errors=True)
    return 0 if not stats.unexpected and not stats.leaks else 1


# ------------------------------------------------------------------------- a lone session under load


def make_dem(folder: Path, side: int) -> None:
    """A smooth ``side``² float32 DEM in UTM (10 m cells), written in strips."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    profile = {"driver": "GTiff", "width": side, "height": side, "count": 1, "dtype": "float32",
               "crs": "EPSG:32633", "transform": from_origin(500_000, 6_000_000, 10, 10), "tiled": True,
               "blockxsize": 256, "blockysize": 256}  # fmt: skip
    cols = np.arange(side, dtype="float32")
    with rasterio.open(folder / "dem.tif", "w", **profile) as dst:
        for top in range(0, side, 256):
            rows = np.arange(top, min(top + 256, side), dtype="float32")[:, None]
            window = ((top, top + len(rows)), (0, side))
            dst.write((100 * np.sin(rows / 300) * np.cos(cols / 200))[None], window=window)


def worker_cpu(pids: Sequence[int]) -> float:
    return sum(sum(cpu_seconds(pid)) for pid in pids if alive(pid))


async def slope_once(ws: Path, timeout: float, old_policy: bool, run: int) -> tuple[float, float, str]:
    """(wall s, worker CPU s, outcome) of one terrain.slope call in a fresh in-process server."""
    from llmc_mcp.config import Settings
    from llmc_mcp.server.app import build_server
    from llmc_mcp.server.results import result_data

    server = build_server(Settings(mode="classic", workspace=ws, exec_timeout=timeout))
    pool: Any = server.pool  # type: ignore[attr-defined]
    if old_policy:  # the parent's: demoted DEMOTE_AFTER into every call, whoever else runs
        pool._give_way = lambda worker, call: worker.demote()
    async with Client(server) as client:
        await client.call_tool("crs_info", {"crs": "EPSG:4326"})  # the session's worker is up and warm
        pids = list(pool.worker_pids().values())
        cpu0, start = worker_cpu(pids), time.monotonic()
        result = await client.call_tool("terrain_slope", {"dem": "dem.tif", "dst": f"slope-{run}.tif"})
        wall, cpu = time.monotonic() - start, worker_cpu(pids) - cpu0
        if not all(alive(pid) for pid in pids):
            cpu = math.nan  # a worker stopped by the limit took its CPU count with it
    data = result_data(result)
    outcome = "ok" if not result.is_error else str(data.get("type"))
    return wall, cpu, outcome


async def lone_under_load(args: argparse.Namespace) -> int:
    ws = make_workspace()
    make_dem(ws, args.dem_side)
    rows: list[tuple[str, float, float, str]] = []
    try:
        for label, competitors, old in (
            ("quiet machine", 0, False),
            (f"{args.competitors} competing processes, priority policy now", args.competitors, False),
            (f"{args.competitors} competing processes, old policy (nice 19 after 1 s)", args.competitors, True),  # noqa: E501
        ):
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                for _ in range(competitors)
            ]
            try:
                for run in range(args.lone_runs):
                    rows.append((label, *await slope_once(ws, args.lone_timeout, old, run)))
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)
    print(f"terrain.slope of a {args.dem_side}² float32 DEM, --exec-timeout {args.lone_timeout:g} s, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    for label, wall, cpu, outcome in rows:
        print(f"  {label:<62} wall {wall:6.2f} s  worker CPU {cpu:6.2f} s  {outcome}")
    return 0


def cpu_line(cpu: Sequence[float]) -> str:
    server, workers, client, machine = cpu
    others = max(0.0, machine - server - workers - client)
    return (
        f"server {server:.2f}, workers {workers:.2f}, load client {client:.2f}, "
        f"rest of the machine {others:.2f} (CPUs of {os.cpu_count()})"
    )


def latency(values: Sequence[float]) -> str:
    return f"p50 {ms(percentile(values, 50))}, p99 {ms(percentile(values, 99))} (n={len(values)})"


def print_report(args: argparse.Namespace, stats: Stats, report: dict[str, Any]) -> None:
    base, bad = stats.trivial["baseline"], stats.trivial["misbehaving"]
    during = [s for s in stats.samples if s["phase"] in ("baseline", "misbehaving")]
    server_peak = max((s["server_kb"] for s in during), default=0)
    workers_peak = max((s["workers"] for s in during), default=0)
    workers_kb_peak = max((s["workers_kb"] for s in during), default=0)
    ttl = report["ttl"]
    rows = [
        ("sessions", f"{args.sessions} normal + 1 timeout loop + 1 killed-worker loop"),
        ("phases", f"warm-up {report['warmup_s']:.1f} s, baseline {args.phase_seconds:g} s, "
                   f"misbehaving {args.phase_seconds:g} s (exec timeout {args.exec_timeout:g} s, "
                   f"think {args.think * 1000:.0f} ms{', herd' if args.herd else ''})"),
        ("calls (total)", stats.calls),
        ("calls by kind", ", ".join(f"{k} {v}" for k, v in sorted(stats.by_kind.items()))),
        ("expected errors", ", ".join(f"{k} {v}" for k, v in sorted(stats.expected_errors.items()))),
        ("UNEXPECTED errors", len(stats.unexpected)),
        ("leak checks / leaks", f"{stats.leak_checks} / {len(stats.leaks)}"),
        ("trivial 1+1, baseline", latency(base)),
        ("trivial 1+1, misbehaving", latency(bad)),
        ("CPU in use, baseline", cpu_line(report["cpu"][0])),
        ("CPU in use, misbehaving", cpu_line(report["cpu"][1])),
        ("server RSS peak / end", f"{mib(server_peak)} / {mib(report['server_kb_end'])}"),
        ("workers peak (RSS sum)", f"{workers_peak} ({mib(workers_kb_peak)})"),
        ("workers with sessions open", report["workers_open"]),
        ("workers at session close", report["workers_at_close"]),
        ("workers 3 s after close", report["workers_3s_after_close"]),
        ("server exit on SIGTERM", report["server_exit"]),
        ("workers alive 10 s after server exit", report["workers_after_stop"]),
        (f"idle TTL {args.idle_ttl:g} s (in-process)",
         f"{ttl['after_close']} workers at close, {ttl['left']} left after {ttl['reaped_after']:.1f} s, "
         f"{ttl['processes_left']} processes alive"),
        ("elapsed", f"{report['elapsed_s']:.0f} s"),
    ]  # fmt: skip
    width = max(len(str(k)) for k, _ in rows)
    print(
        f"\nllmc-mcp load (streamable HTTP, loopback), {os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    )
    print("-" * (width + 70))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("-" * (width + 70))
    for line in (stats.unexpected + stats.leaks)[:10]:
        print("  !", line)
    slowdown = percentile(bad, 50) / percentile(base, 50) if base and bad else math.nan
    verdict = "OK" if not stats.unexpected and not stats.leaks else "FAIL"
    reaped = (
        "reaped"
        if report["workers_3s_after_close"] == 0
        else f"NOT reaped ({report['workers_3s_after_close']} left)"
    )
    print(
        f"LOAD {verdict}: {args.sessions + 2} sessions, {stats.calls} calls, "
        f"{len(stats.unexpected)} unexpected errors, {len(stats.leaks)} leaks; "
        f"trivial p50 {ms(percentile(base, 50))} -> {ms(percentile(bad, 50))} (x{slowdown:.2f}) "
        f"with misbehaving sessions; workers at session end {reaped}, idle TTL left {ttl['left']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--phase-seconds", type=float, default=25.0)
    parser.add_argument("--exec-timeout", type=float, default=5.0)
    parser.add_argument("--idle-ttl", type=float, default=3.0, help="for the in-process TTL check")
    parser.add_argument("--think", type=float, default=0.2, help="mean pause between a session's calls, s")
    parser.add_argument("--herd", action="store_true",
                        help="all sessions persist+retry at the same moment at each phase start")  # fmt: skip
    parser.add_argument("--lone", action="store_true", help="one session under competing load instead")
    parser.add_argument("--dem-side", type=int, default=8192, help="--lone: DEM side, cells")
    parser.add_argument("--competitors", type=int, default=2, help="--lone: CPU-bound processes beside it")
    parser.add_argument("--lone-timeout", type=float, default=30.0, help="--lone: --exec-timeout, s")
    parser.add_argument("--lone-runs", type=int, default=2, help="--lone: runs per condition")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)
    return anyio.run(lone_under_load if args.lone else run, args)


if __name__ == "__main__":
    sys.exit(main())
