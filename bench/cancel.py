"""How fast a cancel stops a running job, and what it leaves (goal: the work stops within a second).

A code-mode server (in-process ``mcp.Client``) starts ``terrain.slope`` of a 6000 x 6000 float32 DEM
as a job, waits until the job reports progress (its worker is computing), then calls
``jobs.cancel(job)`` from the agent's code and measures, from the moment that call is sent: when it
answers, and when the job's worker process is gone from ``/proc`` (or a zombie). After each run it
lists what the workspace holds besides the DEM: a killed worker's half-written GeoTIFF, temporary
file or provenance record would show there. Five runs, each with a fresh output name.

No baseline: nothing a user would pick instead cancels llmc-mcp's jobs; the goal is the issue's.

Run: .venv/bin/python bench/cancel.py      (~1 min)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
from _common import banner, finish, print_table, quiet_logs, summary
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from llmc_mcp.server.results import result_data
from tests.rasters import write

SIDE = 6000
RUNS = 5


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


async def cancel_once(client: Client, server: object, ws: Path, run: int) -> list[object]:
    runner = server.pool._handler.jobs  # type: ignore[attr-defined]
    await client.call_tool(
        "execute_code", {"code": f'job = jobs.start(terrain.slope, "dem.tif", "s{run}.tif")'}
    )
    with anyio.fail_after(60):
        while not (runner.pool.worker_pids() and any(live.record.progress for live in runner._live.values())):
            await anyio.sleep(0.005)
    (pid,) = runner.pool.worker_pids().values()
    sent = time.perf_counter()
    answer = result_data(await client.call_tool("execute_code", {"code": "jobs.cancel(job)['status']"}))
    answered = time.perf_counter() - sent
    while not gone(pid):
        await anyio.sleep(0.001)
    stopped = time.perf_counter() - sent
    left = sorted(p.name for p in ws.iterdir() if p.name != "dem.tif" and not p.name.startswith("."))
    return [
        run + 1,
        answer["result"],
        f"{answered * 1000:.0f}",
        f"{stopped * 1000:.0f}",
        ", ".join(left) or "-",
    ]


async def main() -> None:
    start = banner("cancel.py", "jobs.cancel: time until the worker is gone, and what is left")
    quiet_logs()
    state = Path(tempfile.mkdtemp(prefix="llmc-bench-cancel-state-"))
    ws = Path(tempfile.mkdtemp(prefix="llmc-bench-cancel-"))
    os.environ["LLMC_MCP_STATE_DIR"] = str(state)
    try:
        rows, cols = np.mgrid[0:SIDE, 0:SIDE].astype("float32")
        write(ws / "dem.tif", rows * 0.5 + np.sin(cols / 50) * 20, block=512)
        server = build_server(Settings(mode="code", workspace=ws))
        async with Client(server) as client:
            table = [await cancel_once(client, server, ws, run) for run in range(RUNS)]
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    print_table(
        ["run", "status", "cancel answered ms", "worker gone ms", "left in the workspace"],
        table,
        f"Cancelling a running terrain.slope of a {SIDE}^2 DEM, timed from the jobs.cancel call",
    )
    stops = summary([float(row[3]) for row in table])
    clean = all(row[4] == "-" for row in table)
    finish(
        start,
        f"worker gone p50 {stops['p50']:.0f} ms, max {stops['max']:.0f} ms after jobs.cancel (goal 1 s); "
        f"{'nothing' if clean else 'something'} left in the workspace",
    )


if __name__ == "__main__":
    anyio.run(main)
