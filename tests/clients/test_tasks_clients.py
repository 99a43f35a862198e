"""MCP tasks through third-party clients: a long operation that a direct call cannot finish.

The server runs in classic mode with ``--exec-timeout 0.3``, so a plain ``tools/call`` of
``terrain_slope`` on a 4096 x 4096 DEM times out, and ``--task-after 0``, so every call of a client
that declares the 2026-07-28 tasks extension is handed back as a task. Each client below that can
ask for a task does so with its own API and must get the tool's real result:

- the TypeScript SDK (2025-11-25 era): ``client.experimental.tasks.callToolStream`` puts ``task``
  on ``tools/call``, polls ``tasks/get``, fetches ``tasks/result`` (``clients/ts_tasks_client.mjs``);
- langchain-mcp-adapters 0.3.2 (2025-11-25 era): the adapters never ask for a task themselves, but
  ``MultiServerMCPClient.session()`` yields mcp 1.x's ``ClientSession``, whose experimental API
  (``session.experimental.call_tool_as_task``, ``poll_task``, ``get_task_result``) does
  (``tests/clients/python/langchain_tasks.py``);
- the Inspector CLI (2026-07-28 era): with ``--protocol-era modern`` its ``tools/call`` declares the
  ``io.modelcontextprotocol/tasks`` extension and settles a ``resultType: "task"`` answer by polling
  ``tasks/get``; in its default legacy era it makes a plain call (it asks for a 2025-11-25 task only
  for a tool whose ``taskSupport`` is ``required``, and its one-shot CLI has no ``tasks/*`` methods).

fastmcp 4.1.6 and pydantic-ai 2.68.0 (a fastmcp client) get tasks only from the optional
``fastmcp-tasks`` package, which the pinned clients do not include; openai-agents 0.24.0 has no
task path. The last test pins that: their calls are plain and time out.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import rasterio

from tests.clients.conftest import (
    CLIENTS,
    INSTALL_HINT,
    PYTHON_CLIENTS,
    PYTHON_INSTALL_HINT,
    ROOT,
    SERVER,
    HttpServer,
    free_port,
    need,
    new_workspace,
    run_node,
)
from tests.rasters import link_or_copy

pytestmark = pytest.mark.clients

TOOL = "terrain_slope"
SERVE_FLAGS = ["--exec-timeout", "0.3", "--task-after", "0"]
SERVE_ENV = {"LLMC_MCP_EXEC_TIMEOUT": "0.3", "LLMC_MCP_TASK_AFTER": "0"}  # the same, for HttpServer
TS_SCRIPT = CLIENTS / "ts_tasks_client.mjs"
PY_SCRIPTS = ROOT / "tests" / "clients" / "python"
RELATED_TASK = "io.modelcontextprotocol/related-task"
SIDE = 4096  # tests/conftest.py's big_dem
EDGE_CELLS = 4 * SIDE - 4  # Horn's window leaves the outer ring NaN


def _link_dem(workspace: Path, big_dem: Path) -> Path:
    link_or_copy(big_dem, workspace / "big.tif")
    return workspace


@pytest.fixture(scope="module")
def task_server(big_dem: Path, tmp_path_factory: pytest.TempPathFactory):
    """One classic-mode HTTP server (``--exec-timeout 0.3 --task-after 0``) whose workspace has big.tif."""
    need(SERVER.exists(), f"the llmc-mcp console script is missing: {SERVER}")
    root = tmp_path_factory.mktemp("tasks-http")
    workspace = _link_dem(new_workspace(root / "ws"), big_dem)
    server = HttpServer("classic", workspace, free_port(), root / "server.log")
    with mock.patch.dict(os.environ, SERVE_ENV):  # HttpServer passes its environment on
        server.start()
    yield server
    server.stop()


@pytest.fixture
def dem_workspace(tmp_path: Path, big_dem: Path) -> Path:
    return _link_dem(new_workspace(tmp_path / "ws"), big_dem)


def stdio_argv(workspace: Path) -> list[str]:
    return [str(SERVER), "serve", "--workspace", str(workspace), "--mode", "classic", *SERVE_FLAGS]


def slope_args(dst: str) -> dict[str, str]:
    return {"dem": "big.tif", "dst": dst}


def check_timeout(text: str) -> None:
    """What a direct call of the long tool answers: the exec-timeout, pointing at tasks."""
    error = json.loads(text)
    assert error["type"] == "Timeout", text
    assert "0.3 s limit (--exec-timeout)" in error["message"]
    assert "supports MCP tasks" in error["fix"]


def check_slope(structured: dict[str, Any], workspace: Path, dst: str) -> None:
    """The tool's real result: its structuredContent, and the slope raster it wrote."""
    output = structured["output"]
    assert output["path"] == dst and (output["width"], output["height"]) == (SIDE, SIDE)
    assert structured["measure"] == "slope in degrees"
    assert structured["nodata_cells"] == EDGE_CELLS
    assert structured["valid_cells"] == SIDE * SIDE - EDGE_CELLS
    with rasterio.open(workspace / dst) as out:
        assert (out.width, out.height, out.dtypes[0]) == (SIDE, SIDE, "float32")
        cells = out.read(1, window=((100, 103), (200, 203)))
    # big_dem is rows * 0.5 + sin(cols / 50) * 20 on 10 m cells: slope = atan(|grad z|).
    dz_dy, dz_dx = 0.5 / 10, math.cos(201 / 50) * 20 / 50 / 10
    expected = math.degrees(math.atan(math.hypot(dz_dx, dz_dy)))
    assert np.allclose(cells[1, 1], expected, atol=0.01), (cells, expected)


# ------------------------------------------------------------------------ TypeScript SDK, 2025-11-25


@pytest.fixture(scope="module")
def ts_tasks(node: Path, node_env: dict[str, str]):
    sdk = CLIENTS / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    need(sdk.exists(), f"@modelcontextprotocol/sdk is not installed in clients/node_modules ({INSTALL_HINT})")

    def run(*args: str) -> dict[str, Any]:
        res = run_node(node, node_env, TS_SCRIPT, list(args), timeout=120)
        assert res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-4000:]}"
        summary = res.json
        assert "exception" not in summary, f"{summary['exception']}\n{res.stderr[-3000:]}"
        return summary

    return run


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ts_sdk_call_tool_stream_runs_a_long_tool_as_a_task(
    ts_tasks, task_server, dem_workspace: Path, transport: str
) -> None:
    """Guards against a server the TS SDK cannot drive as tasks: capabilities or taskSupport it does
    not read, a task answer, status or ``tasks/result`` shape it rejects, or a result unlike the tool's."""
    dst, direct_dst = f"slope_ts_{transport}.tif", f"slope_ts_direct_{transport}.tif"
    calls = ["--args", json.dumps(slope_args(dst)), "--direct-args", json.dumps(slope_args(direct_dst))]
    if transport == "http":
        workspace = task_server.workspace
        summary = ts_tasks("--transport", "http", "--url", task_server.url, *calls)
    else:
        workspace = dem_workspace
        server = ["--command", str(SERVER), "--workspace", str(workspace)]
        server += [f"--server-arg={flag}" for flag in SERVE_FLAGS]
        summary = ts_tasks("--transport", "stdio", *server, *calls)

    if transport == "http":  # the SDK's HTTP transport keeps the negotiated version; stdio does not
        assert summary["protocolVersion"] == "2025-11-25"
    assert summary["serverTasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert summary["execution"] == {"taskSupport": "optional"} and summary["isToolTask"] is True
    assert summary["direct"]["isError"] is True
    check_timeout(summary["direct"]["text"])
    assert not (workspace / direct_dst).exists()

    events = summary["events"]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result" and "error" not in kinds, kinds
    created = events[0]["task"]
    task_id = created["taskId"]
    assert created["status"] == "working" and created["pollInterval"] == 1000 and created["ttl"] > 0
    statuses = [e["task"]["status"] for e in events if e["type"] == "taskStatus"]
    assert statuses[-1] == "completed" and set(statuses[:-1]) <= {"working"}, statuses

    result = summary["result"]
    assert result["isError"] is False, result["text"]
    assert result["meta"] == {RELATED_TASK: {"taskId": task_id}}
    check_slope(result["structured"], workspace, dst)
    assert summary["getTask"]["status"] == "completed" and summary["getTask"]["taskId"] == task_id
    assert {"taskId": task_id, "status": "completed"} in summary["listed"]


# ----------------------------------------------------------- langchain-mcp-adapters (mcp 1.x), 2025-11-25


def run_python_client(client: str, script: str, args: list[str], cwd: Path) -> dict[str, Any]:
    python = PYTHON_CLIENTS / client / "bin" / "python"
    need(python.exists(), f"{client} is not installed in .clients/{client} ({PYTHON_INSTALL_HINT})")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [str(python), str(PY_SCRIPTS / script), *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output (exit {proc.returncode})\nstderr: {proc.stderr[-4000:]}"
    summary = json.loads(lines[-1])
    assert "exception" not in summary, f"{summary['exception']}\nstderr: {proc.stderr[-3000:]}"
    return summary


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_langchain_session_experimental_runs_a_long_tool_as_a_task(
    task_server, dem_workspace: Path, tmp_path: Path, transport: str
) -> None:
    """Guards against the 2025-11-25 form working only for our own raw client: mcp 1.x's experimental
    task API, which a langchain session exposes, must create, poll and fetch the task as well."""
    dst, direct_dst = f"slope_lc_{transport}.tif", f"slope_lc_direct_{transport}.tif"
    args = ["--transport", transport, "--args", json.dumps(slope_args(dst))]
    args += ["--direct-args", json.dumps(slope_args(direct_dst))]
    if transport == "http":
        workspace = task_server.workspace
        args += ["--url", task_server.url]
    else:
        workspace = dem_workspace
        args += ["--command", str(SERVER), "--workspace", str(workspace)]
        args += [f"--server-arg={flag}" for flag in SERVE_FLAGS]
    s = run_python_client("langchain-mcp-adapters", "langchain_tasks.py", args, tmp_path)

    assert s["mcp"].startswith("1.") and s["session_type"] == "mcp.client.session.ClientSession"
    assert s["execution"] == {"taskSupport": "optional"}
    assert s["direct"]["status"] == "error"  # the langchain tool: a plain tools/call
    check_timeout(s["direct"]["text"])
    assert not (workspace / direct_dst).exists()

    created = s["created"]
    assert created["status"] == "working" and created["pollInterval"] == 1000
    assert s["statuses"][-1] == "completed" and set(s["statuses"][:-1]) <= {"working"}, s["statuses"]
    result = s["result"]
    assert result["is_error"] is False, result["text"]
    assert result["meta"] == {RELATED_TASK: {"taskId": created["taskId"]}}
    check_slope(result["structured"], workspace, dst)
    assert {"taskId": created["taskId"], "status": "completed"} in s["listed"]
    # mcp 1.30 warns that this API goes away in mcp 2 (tasks return as an extension there).
    assert any("experimental tasks API is deprecated" in w for w in s["deprecations"]), s["deprecations"]


# ------------------------------------------------------------------------ Inspector CLI, 2026-07-28


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_modern_era_settles_a_long_tool_as_a_task(
    inspector, task_server, dem_workspace: Path, transport: str
) -> None:
    """Guards against the 2026-07-28 extension working only with our own client: the Inspector
    declares it, gets ``resultType: "task"`` and settles it through ``tasks/get``."""
    if transport == "http":
        workspace, target = task_server.workspace, [task_server.url]
    else:
        workspace, target = dem_workspace, stdio_argv(dem_workspace)
    dst, direct_dst = f"slope_insp_{transport}.tif", f"slope_insp_direct_{transport}.tif"

    def call(dst: str, *era: str):
        args = json.dumps(slope_args(dst))
        return inspector(
            target, "--method", "tools/call", "--tool-name", TOOL, "--tool-args-json", args, *era
        )

    legacy = call(direct_dst)  # the default era: a plain tools/call
    assert legacy.returncode == 5, legacy.stderr[-2000:]
    assert legacy.json["result"]["isError"] is True
    check_timeout(legacy.json["result"]["content"][0]["text"])
    assert not (workspace / direct_dst).exists()

    modern = call(dst, "--protocol-era", "modern")
    assert modern.returncode == 0, f"{modern.stdout[-2000:]}\n{modern.stderr[-2000:]}"
    result = modern.json["result"]
    assert result["isError"] is False, result
    check_slope(result["structuredContent"], workspace, dst)


# ------------------------------------------------------------ clients with no task path (pinned as such)


@pytest.mark.parametrize("client", ["fastmcp", "pydantic-ai"])
def test_fastmcp_based_clients_need_fastmcp_tasks(task_server, tmp_path: Path, client: str) -> None:
    """Without ``fastmcp-tasks`` a fastmcp Client declares no tasks extension, so its call is plain
    and times out; pydantic-ai's ``direct_call_tool(use_task=True)`` refuses with an ImportError."""
    dst = f"slope_{client}.tif"
    args = ["--url", task_server.url, "--args", json.dumps(slope_args(dst))]
    s = run_python_client(client, "fastmcp_no_tasks.py", args, tmp_path)
    assert s["protocol_version"] == "2026-07-28"
    assert s["fastmcp_tasks_installed"] is False and s["internal_extensions"] == []
    assert "task" not in s["call_tool_parameters"]
    assert s["direct"]["is_error"] is True
    check_timeout(s["direct"]["text"])
    assert not (task_server.workspace / dst).exists()
    if client == "pydantic-ai":
        assert s["use_task"]["exception"] == "ImportError"
        assert "requires the `fastmcp-tasks` package" in s["use_task"]["message"]
