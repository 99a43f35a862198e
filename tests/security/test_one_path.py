"""Every operation runs in a confined worker, which starts from nowhere the agent's data can reach.

Classic mode used to run GDAL inside the server process, outside the worker's limits and Landlock,
and the worker used to start with the workspace as its working directory (so a ``numpy.py`` in the
user's data ran, unsandboxed, when the worker imported numpy). These are the specifications of the
fix, through the real SDK client and the real ``llmc-mcp`` command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import stdio_params, structured

pytestmark = pytest.mark.anyio

PLANTED = ("numpy", "rasterio", "pyproj", "json", "pydantic", "llmc_mcp", "encodings")


def plant_modules(folder: Path, marker: Path) -> None:
    """Modules (and a package) that, if ever imported, write ``marker`` and break the import."""
    body = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nraise SystemExit('planted module ran')\n"
    for name in PLANTED:
        (folder / f"{name}.py").write_text(body)
    package = folder / "mcp"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(body)


@pytest.mark.parametrize("mode", ["code", "classic"])
async def test_a_module_planted_in_the_workspace_never_runs(
    workspace_dir: Path, tmp_path: Path, mode: str
) -> None:
    """Guards against a worker importing from its working directory or the workspace."""
    marker = tmp_path / "planted-ran.txt"
    plant_modules(workspace_dir, marker)
    server = build_server(Settings(mode=mode, workspace=workspace_dir, exec_timeout=30))
    async with Client(server) as client:
        if mode == "code":
            result = structured(
                await client.call_tool("execute_code", {"code": 'raster.info("RGB.byte.tif")["width"]'})
            )
            assert result["ok"] and result["result"] == 791, result
        else:
            result = await client.call_tool("raster_info", {"path": "RGB.byte.tif"})
            assert not result.is_error and structured(result)["width"] == 791
    assert not marker.exists(), f"a planted module ran: {marker.read_text()}"


async def test_the_llmc_mcp_command_started_in_a_folder_of_planted_modules_runs_none(
    workspace_dir: Path, tmp_path: Path
) -> None:
    """Guards against the server itself importing from its working directory (started in a data folder)."""
    marker = tmp_path / "planted-ran.txt"
    plant_modules(workspace_dir, marker)
    params = stdio_params(workspace_dir)
    params.cwd = str(workspace_dir)
    async with Client(params) as client:
        result = structured(await client.call_tool("execute_code", {"code": "crs.info('EPSG:4326')['name']"}))
    assert result["ok"] and result["result"] == "WGS 84", result
    assert not marker.exists(), f"a planted module ran: {marker.read_text()}"


async def test_classic_operations_run_in_the_sessions_worker_not_the_server(workspace_dir: Path) -> None:
    """Guards against classic mode running GDAL in the server process, outside limits and Landlock."""
    server = build_server(Settings(mode="classic", workspace=workspace_dir, exec_timeout=30))
    pool: Any = server.pool  # type: ignore[attr-defined]
    async with Client(server) as client:
        assert pool.sessions == 0
        result = await client.call_tool("raster_stats", {"path": "RGB.byte.tif", "approx": True})
        assert not result.is_error, result.content
        (pid,) = pool.worker_pids().values()
        assert pid != os.getpid()
        assert not (await client.call_tool("crs_info", {"crs": "EPSG:4326"})).is_error
        assert list(pool.worker_pids().values()) == [pid], (
            "each classic call should reuse the session's warm worker"
        )
    assert pool.sessions == 0, "the session's worker outlived its session"


async def test_a_classic_call_past_the_wall_clock_is_stopped_and_the_server_keeps_serving(
    workspace_dir: Path,
) -> None:
    """Guards against a classic operation that could run forever in the server (no limit applied to it).

    The same server, and the same session, answer afterwards: the limit cost one call and its worker.
    """
    server = build_server(Settings(mode="classic", workspace=workspace_dir, exec_timeout=0.001))
    pool: Any = server.pool  # type: ignore[attr-defined]
    async with Client(server) as client:
        stopped = await client.call_tool("raster_stats", {"path": "RGB.byte.tif", "histogram_bins": 256})
        assert stopped.is_error and structured(stopped)["type"] == "Timeout", stopped.content
        assert "--exec-timeout" in structured(stopped)["message"] + structured(stopped).get("fix", "")
        assert pool.sessions == 0, "the stopped worker was kept"
        pool.settings.exec_timeout = 30  # the pool reads its limit per call
        assert not (await client.call_tool("crs_info", {"crs": "EPSG:4326"})).is_error
        assert pool.sessions == 1


async def test_a_crashed_classic_worker_costs_one_call_not_the_server(workspace_dir: Path) -> None:
    """Guards against a GDAL crash (segfault on a crafted file) taking the whole server down."""
    import signal

    server = build_server(Settings(mode="classic", workspace=workspace_dir, exec_timeout=30))
    pool: Any = server.pool  # type: ignore[attr-defined]
    async with Client(server) as client:
        assert not (await client.call_tool("crs_info", {"crs": "EPSG:4326"})).is_error
        (pid,) = pool.worker_pids().values()
        os.kill(pid, signal.SIGSEGV)
        after = await client.call_tool("raster_info", {"path": "RGB.byte.tif"})
        if after.is_error:  # the crash was noticed on this call: reported, and the next call works
            assert structured(after)["type"] == "WorkerCrashed", after.content
            after = await client.call_tool("raster_info", {"path": "RGB.byte.tif"})
        assert not after.is_error and structured(after)["width"] == 791
        assert list(pool.worker_pids().values()) != [pid]


async def test_a_worker_started_before_the_server_serves_its_first_session(workspace_dir: Path) -> None:
    """Guards against a first call that waits for a worker to start (past some clients' 5 s timeouts).

    The command starts one worker before building the server; the pool adopts it as its first
    spare, so the first session's code runs in that very process, confined like any other.
    """
    from llmc_mcp.sandbox.workers import start_worker_early

    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=30)
    prestarted = start_worker_early(settings, str(workspace_dir.resolve()))
    assert prestarted is not None
    server = build_server(settings, prestarted=prestarted)
    pool: Any = server.pool  # type: ignore[attr-defined]
    async with Client(server) as client:
        result = structured(await client.call_tool("execute_code", {"code": "1 + 1"}))
        assert result["ok"] and result["result"] == 2
        assert list(pool.worker_pids().values()) == [prestarted.pid]
    assert prestarted.returncode is not None, "the adopted worker outlived its session"
