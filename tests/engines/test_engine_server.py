"""``--engine dask`` end to end: the server's calls run their pixel work on a real Dask cluster.

The session's worker (agent code, no network) checks and gates the call; the work runs in the
session's engine worker, which holds the cluster's client; the answer and the output equal the
local engine's, and the output's provenance record names the engine.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client

from llmc_mcp.compute.dask_engine import DaskEngine
from llmc_mcp.provenance.conformance import PRODUCER_PREFIX
from llmc_mcp.provenance.record import RECORD_SUFFIX
from llmc_mcp.server.app import build_server
from tests.engines.same import assert_same_raster
from tests.mcp_helpers import code_settings as settings
from tests.mcp_helpers import execute as run

pytestmark = pytest.mark.anyio


def compute_engine(workspace: Path, output: str) -> str:
    record = json.loads((workspace / f"{output}{RECORD_SUFFIX}").read_text())
    return record["engine"][f"{PRODUCER_PREFIX}compute_engine"]


async def test_a_code_mode_call_runs_on_the_cluster_and_equals_the_local_engine(
    workspace_with_dem: Path, dask_address: str
) -> None:
    """Guards against a call that silently runs locally on --engine dask, or whose output differs."""
    async with Client(build_server(settings(workspace_with_dem))) as client:
        local = await run(client, 'terrain.slope("big.tif", "local.tif")')
    on_dask = settings(workspace_with_dem, engine="dask", dask_scheduler=dask_address)
    async with Client(build_server(on_dask)) as client:
        remote = await run(client, 'terrain.slope("big.tif", "dask.tif")')
    assert local["ok"] and remote["ok"], (local, remote)
    assert_same_raster(workspace_with_dem / "local.tif", workspace_with_dem / "dask.tif")
    assert remote["result"]["valid_cells"] == local["result"]["valid_cells"]
    assert compute_engine(workspace_with_dem, "local.tif") == "local"
    assert compute_engine(workspace_with_dem, "dask.tif") == "dask"


async def test_a_classic_tool_runs_on_the_cluster(workspace_with_dem: Path, dask_address: str) -> None:
    """Guards against the classic face bypassing the engine worker (one execution path for both)."""
    on_dask = settings(workspace_with_dem, mode="classic", engine="dask", dask_scheduler=dask_address)
    async with Client(build_server(on_dask)) as client:
        result = await client.call_tool("terrain_slope", {"dem": "big.tif", "dst": "classic.tif"})
    assert not result.is_error, result
    assert compute_engine(workspace_with_dem, "classic.tif") == "dask"


async def test_a_cancelled_dask_job_stops_its_pieces_and_leaves_nothing(
    workspace_with_dem: Path, dask_address: str
) -> None:
    """Guards against cancelling a job whose pieces keep running on the cluster, or that leaves an
    output; and a completed job on Dask reports its progress to the last piece."""
    from distributed import Client as DaskClient

    on_dask = settings(workspace_with_dem, engine="dask", dask_scheduler=dask_address)
    async with Client(build_server(on_dask)) as client:
        done = await run(
            client, 'j = jobs.start(terrain.slope, "big.tif", "done.tif")\njobs.wait(j, timeout=25)'
        )
        assert done["result"]["status"] == "completed", done
        assert done["result"]["progress"] == 1.0
        started = await run(client, 'job = jobs.start(terrain.slope, "big.tif", "cancelled.tif")')
        assert started["ok"], started
        cancelled = await run(client, "jobs.cancel(job)")
    assert cancelled["result"]["status"] == "cancelled", cancelled
    with DaskClient(dask_address, set_as_default=False, timeout=10) as observer:
        deadline = anyio.current_time() + 30
        while any(observer.processing().values()) and anyio.current_time() < deadline:
            await anyio.sleep(0.1)
        assert not any(observer.processing().values()), "pieces of the cancelled job still run"
    assert not any(p.name.startswith("cancelled.tif") for p in workspace_with_dem.rglob("*")), "output left"


async def test_a_call_on_the_cluster_reports_its_progress_to_the_client(
    workspace_with_dem: Path, dask_address: str
) -> None:
    """Guards against a call whose work runs in an engine worker going silent: its pieces are reported
    to the calling client, increasing, up to the whole."""
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    on_dask = settings(workspace_with_dem, mode="classic", engine="dask", dask_scheduler=dask_address)
    async with Client(build_server(on_dask)) as client:
        result = await client.call_tool(
            "terrain_slope", {"dem": "big.tif", "dst": "p.tif"}, progress_callback=progress
        )
    assert not result.is_error, result
    assert seen and seen == sorted(set(seen)), seen
    assert seen[-1] == 1.0


async def test_a_call_stopped_by_its_wall_clock_stops_its_pieces_and_leaves_nothing(
    workspace_with_dem: Path, dask_address: str, dask_engine: DaskEngine
) -> None:
    """Guards against engine work that outlives the call that asked for it: past --exec-timeout the
    call fails as any call does, its engine worker is stopped, its pieces leave the cluster, and no
    output is left. The Dask workers are paused (SIGSTOP) once the engine worker is connected, so the
    call certainly runs out of time with its pieces queued on them. The limit leaves the first call
    (which starts the session's workers and connects to the cluster) room on a loaded slow host."""
    observer = dask_engine.client()
    pids = list(observer.run(os.getpid).values())
    on_dask = settings(workspace_with_dem, engine="dask", dask_scheduler=dask_address, exec_timeout=20)
    async with Client(build_server(on_dask)) as client:
        warm = await run(client, 'terrain.slope("RGB.byte.tif", "warm.tif")["valid_cells"]')
        assert warm["ok"], warm
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            answer = await run(client, 'terrain.slope("big.tif", "late.tif")')
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    assert not answer["ok"] and answer["error"]["type"] == "Timeout", answer
    deadline = anyio.current_time() + 30
    while any(observer.processing().values()) and anyio.current_time() < deadline:
        await anyio.sleep(0.1)
    assert not any(observer.processing().values()), "pieces of the stopped call still run"
    assert not any(p.name.startswith("late.tif") for p in workspace_with_dem.rglob("*")), "output left"
