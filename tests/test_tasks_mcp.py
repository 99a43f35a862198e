"""MCP tasks in both protocol eras: a call longer than ``--exec-timeout`` handed back as a task and
followed to its result; progress, reconnection, cancel, expiry, principals, a server restart.

The 2026-07-28 era runs through the SDK's ``Client`` with the tasks extension as a client extension
(:mod:`tests.tasks_client`); the 2025-11-25 era as raw JSON-RPC over the ``llmc-mcp`` command's stdio,
since the SDK's client validates that era's ``tools/call`` answer as a plain result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import serve_http, structured
from tests.reliability._rawstdio import RawServer
from tests.tasks_client import (
    ANY,
    TasksClient,
    UpdateParams,
    UpdateTask,
    cancel_task,
    follow,
    get_task,
    start_task,
)
from tests.test_reflection_sampling import REPROJECT, Model

pytestmark = pytest.mark.anyio

SLOPE = {"dem": "big.tif", "dst": "slope.tif"}
SHORT = 0.3
"""An ``--exec-timeout`` the 4096² slope cannot meet, so a direct call times out."""


def classic(workspace: Path, **overrides: Any) -> Settings:
    """Classic mode where the long call times out, and a task-capable client's call is always a task
    (``--task-after 0``): whether a call beats a longer ``--task-after`` depends on the machine."""
    values: dict[str, Any] = {
        "mode": "classic",
        "workspace": workspace,
        "exec_timeout": SHORT,
        "task_after": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


def outputs(root: Path) -> list[str]:
    """Files of the workspace outside the server's folder: outputs, and anything half-written."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".llmc" not in p.parts)


# ------------------------------------------------------------------------------ 2026-07-28 era


async def test_a_call_longer_than_exec_timeout_completes_as_a_task(workspace_with_dem: Path) -> None:
    """Guards against long work that no client can get: without tasks the call times out; with the
    extension declared, the same call comes back as a task whose result is the tool's result."""
    server = build_server(classic(workspace_with_dem))
    async with Client(server) as plain:
        timed_out = structured(await plain.call_tool("terrain_slope", SLOPE))
    tasks = TasksClient()
    async with Client(server, extensions=[tasks]) as client:
        result = await client.call_tool("terrain_slope", SLOPE)
    assert timed_out["type"] == "Timeout"
    assert not result.is_error, result.content
    assert structured(result)["output"]["path"] == "slope.tif"
    assert [c.status for c in tasks.created] == ["working"]
    assert tasks.created[0].task_id.startswith("job-")
    assert tasks.seen[-1]["status"] == "completed"


async def test_a_running_task_reports_its_progress_in_its_status(workspace_with_dem: Path) -> None:
    """Guards against a task that says only "working" until it ends: its status message carries the
    same fractions the call's progress notifications carry."""
    tasks = TasksClient(poll=0.01)
    async with Client(build_server(classic(workspace_with_dem)), extensions=[tasks]) as client:
        await client.call_tool("terrain_slope", SLOPE)
    working = [s["statusMessage"] for s in tasks.seen if s["status"] == "working"]
    assert any("%: terrain.slope" in message for message in working), working
    assert all(s["pollIntervalMs"] > 0 and s["ttlMs"] > 0 for s in tasks.seen)


async def test_a_short_call_from_a_task_client_is_answered_inline(workspace_dir: Path) -> None:
    """Guards against every call of a task-capable client costing a task and its polling: the server
    decides, and a call done within --task-after is answered as today. --task-after is an hour, so the
    call is within it however slow the machine (at 2 s, a loaded machine's first call, a worker start
    included, became a task)."""
    tasks = TasksClient()
    settings = classic(workspace_dir, exec_timeout=30, task_after=3600.0)
    async with Client(build_server(settings), extensions=[tasks]) as client:
        result = await client.call_tool("raster_info", {"path": "shade.tif"})
    assert not result.is_error
    assert tasks.created == []


async def test_the_result_stays_retrievable_after_the_client_reconnects(workspace_with_dem: Path) -> None:
    """Guards against a task that dies with the connection that started it, or a result only the
    starting connection may read."""
    server = build_server(classic(workspace_with_dem))
    async with Client(server, extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "terrain_slope", SLOPE)).task_id
    async with Client(server, extensions=[TasksClient()]) as again:
        state = await follow(again, task_id)
    assert state["status"] == "completed"
    assert json.loads(state["result"]["content"][0]["text"])["output"]["path"] == "slope.tif"
    assert (workspace_with_dem / "slope.tif").is_file()


async def test_a_cancelled_task_stops_and_leaves_no_output(workspace_with_dem: Path) -> None:
    """Guards against a cancel acknowledged while the worker writes on, or a half-written output."""
    before = outputs(workspace_with_dem)
    async with Client(build_server(classic(workspace_with_dem)), extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "terrain_slope", SLOPE)).task_id
        acknowledged = await cancel_task(client, task_id)
        state = await follow(client, task_id)
    assert {k: v for k, v in acknowledged.items() if k not in ("_meta", "resultType")} == {}
    assert state["status"] == "cancelled"
    assert "result" not in state
    assert outputs(workspace_with_dem) == before


async def test_a_task_past_its_ttl_is_gone(workspace_dir: Path) -> None:
    """Guards against results kept forever (a disk that only fills): past --task-ttl after it ended, a
    task and its result are deleted, and asking for it says so."""
    settings = classic(workspace_dir, exec_timeout=30, task_after=0.0, task_ttl=0.5)
    async with Client(build_server(settings), extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "raster_info", {"path": "shade.tif"})).task_id
        assert (await follow(client, task_id))["status"] == "completed"
        await anyio.sleep(1.0)
        with pytest.raises(MCPError) as gone:
            await get_task(client, task_id)
    assert gone.value.error.code == -32602
    assert "expired" in gone.value.error.message


async def test_task_methods_need_the_extension_declared(workspace_dir: Path) -> None:
    """Guards against serving tasks/get to a client that did not declare the extension (the spec's
    -32021), and against creating tasks for one: it gets today's answers."""
    async with Client(build_server(classic(workspace_dir))) as client:
        with pytest.raises(MCPError) as refused:
            await get_task(client, "job-" + "x" * 32)
    assert refused.value.error.code == -32021


async def test_an_unknown_task_id_is_invalid_params(workspace_dir: Path) -> None:
    """Guards against a crash, or an answer that tells an unknown id from another principal's."""
    async with Client(build_server(classic(workspace_dir)), extensions=[TasksClient()]) as client:
        for bad in ("job-" + "x" * 32, "../../etc/passwd", "x" * 5000):
            with pytest.raises(MCPError) as refused:
                await get_task(client, bad)
            assert refused.value.error.code == -32602


async def test_execute_code_longer_than_the_budget_runs_as_a_task_in_its_session(
    workspace_with_dem: Path,
) -> None:
    """Guards against a code task that loses the session's variables (it runs in the session's own
    worker), or a second call that waits, unbounded, on the worker the task holds."""
    settings = Settings(mode="code", workspace=workspace_with_dem, exec_timeout=SHORT, task_after=0.0)
    code = 'a = terrain.slope("big.tif", "s1.tif")\nprint("done", a["output"]["path"])'
    async with Client(build_server(settings), extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "execute_code", {"code": code})).task_id
        busy = structured(await client.call_tool("execute_code", {"code": "1 + 1"}))
        state = await follow(client, task_id)
        after = structured(await client.call_tool("execute_code", {"code": "a['output']['path']"}))
    assert busy["type"] == "session_busy"
    assert task_id in busy["message"]
    assert state["status"] == "completed"
    assert state["result"]["structuredContent"]["stdout"] == "done s1.tif\n"
    assert after["result"] == "s1.tif"


async def test_another_principal_cannot_see_a_task(workspace_dir: Path) -> None:
    """Guards against task ids that open another client's results: over HTTP each session is its own
    principal, and its tasks are unknown to every other."""
    server = build_server(Settings(mode="code", workspace=workspace_dir))
    async with (
        serve_http(server) as web,
        Client(web.url, mode="legacy") as owner,
        Client(web.url, mode="legacy") as stranger,
    ):
        started = structured(
            await owner.call_tool("execute_code", {"code": 'jobs.start(terrain.slope, "shade.tif", "s.tif")'})
        )
        task_id = started["result"]["id"]
        mine = await follow(owner, task_id)
        with pytest.raises(MCPError) as refused:
            await get_task(stranger, task_id)
    assert mine["status"] == "completed"
    assert refused.value.error.code == -32602
    assert "No job" in refused.value.error.message


# ------------------------------------------------------------------------------ 2025-11-25 era


@pytest.fixture
def raw_classic(workspace_with_dem: Path) -> Any:
    servers: list[RawServer] = []

    def start(initialize: bool = True) -> RawServer:
        server = RawServer(
            workspace_with_dem,
            "--mode",
            "classic",
            "--exec-timeout",
            str(SHORT),
            env={"LLMC_MCP_STATE_DIR": os.environ["LLMC_MCP_STATE_DIR"]},
            protocol="2025-11-25",
            stderr=workspace_with_dem.parent / f"server{len(servers)}.stderr",
        )
        servers.append(server)
        if initialize:
            server.initialize()
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.kill()


def test_the_handshake_era_declares_tasks_and_the_tools_that_take_them(raw_classic: Any) -> None:
    """Guards against a 2025-11-25 client that cannot know tasks are served, or which tools take them."""
    server = raw_classic(initialize=False)
    capabilities = server.initialize()["result"]["capabilities"]
    tools = server.request("tools/list", {})["result"]["tools"]
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    taking = {t["name"] for t in tools if t.get("execution", {}).get("taskSupport") == "optional"}
    assert taking == {t["name"] for t in tools} - {"persist_justification"}


def test_a_handshake_era_task_runs_past_the_budget_and_its_result_comes_from_tasks_result(
    raw_classic: Any, workspace_with_dem: Path
) -> None:
    """Guards against the 2025-11-25 form: the ``task`` field ignored (the call times out), or a task
    whose result, list entry or status does not follow the spec's shapes."""
    server = raw_classic()
    direct = server.call_tool("terrain_slope", SLOPE)
    created = server.request(
        "tools/call", {"name": "terrain_slope", "arguments": SLOPE, "task": {"ttl": 60000}}
    )
    task = created["result"]["task"]
    listed = server.request("tasks/list", {})["result"]["tasks"]
    result = server.request("tasks/result", {"taskId": task["taskId"]}, timeout=120)["result"]
    done = server.request("tasks/get", {"taskId": task["taskId"]})["result"]
    assert '"Timeout"' in direct["result"]["content"][0]["text"]
    assert task["status"] == "working" and task["ttl"] > 0 and task["pollInterval"] > 0
    assert task["taskId"] in {t["taskId"] for t in listed}
    assert json.loads(result["content"][0]["text"])["output"]["path"] == "slope.tif"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert done["status"] == "completed"


def test_a_handshake_era_cancel_answers_with_the_cancelled_task(
    raw_classic: Any, workspace_with_dem: Path
) -> None:
    """Guards against a cancel that reports success while the work goes on, in the older form too."""
    server = raw_classic()
    created = server.request("tools/call", {"name": "terrain_slope", "arguments": SLOPE, "task": {}})
    cancelled = server.request("tasks/cancel", {"taskId": created["result"]["task"]["taskId"]})["result"]
    assert cancelled["status"] == "cancelled"
    assert "slope.tif" not in outputs(workspace_with_dem)


def test_a_server_restart_mid_task_reports_it_failed_and_keeps_finished_results(
    raw_classic: Any, workspace_with_dem: Path
) -> None:
    """Guards against a job silently lost with its server (a client polling forever for it), and
    against finished results that do not survive a restart."""
    first = raw_classic()
    info = {"name": "raster_info", "arguments": {"path": "big.tif"}, "task": {}}
    created = first.request("tools/call", info)
    assert "task" in created.get("result", {}), created
    finished = created["result"]["task"]["taskId"]
    assert first.request("tasks/result", {"taskId": finished}, timeout=120)["result"]["content"]
    running = first.request("tools/call", {"name": "terrain_slope", "arguments": SLOPE, "task": {}})
    assert "task" in running.get("result", {}), running
    running_id = running["result"]["task"]["taskId"]
    first.kill()
    second = raw_classic()
    lost = second.request("tasks/get", {"taskId": running_id})["result"]
    no_result = second.request("tasks/result", {"taskId": running_id})
    kept = second.request("tasks/result", {"taskId": finished})["result"]
    assert lost["status"] == "failed"
    assert "server stopped" in lost["statusMessage"]
    assert no_result["error"]["code"] == -32603
    assert json.loads(kept["content"][0]["text"])["path"] == "big.tif"
    assert "slope.tif" not in outputs(workspace_with_dem)


async def test_tasks_update_is_acknowledged_and_changes_nothing(workspace_dir: Path) -> None:
    """Guards against tasks/update treated as unknown (a client following the spec would fail) or as
    an answer to a question: these tasks never ask one, every question is asked before they start."""
    settings = classic(workspace_dir, exec_timeout=30, task_after=0.0)
    async with Client(build_server(settings), extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "raster_info", {"path": "shade.tif"})).task_id
        update = UpdateTask(params=UpdateParams(task_id=task_id, input_responses={"x": {"action": "accept"}}))
        acknowledged = await client.session.send_request(update, ANY)
        state = await follow(client, task_id)
    assert {k: v for k, v in acknowledged.items() if k not in ("_meta", "resultType")} == {}
    assert state["status"] == "completed"


def test_a_hostile_list_cursor_is_bounded(raw_classic: Any) -> None:
    """Guards against a cursor parsed without a bound (int() of 5,000 digits raises in the server)."""
    server = raw_classic()
    for cursor in ("9" * 5000, "-1", "abc", "1e9"):
        answer = server.request("tasks/list", {"cursor": cursor})
        assert "result" in answer, answer


async def test_the_hosts_model_is_asked_before_a_task_is_queued(workspace_dir: Path) -> None:
    """Guards against a task queued with its decisions unjustified: the host's model is sampled in the
    call (its retry, on this era), the task then starts with the records, and its job never asks."""
    model = Model()
    asked_before: list[int] = []
    tasks = TasksClient(on_created=lambda _task: asked_before.append(len(model.questions)))
    settings = classic(workspace_dir, exec_timeout=30, task_after=0.0, reflection="sampling")
    async with Client(build_server(settings), sampling_callback=model, extensions=[tasks]) as client:
        result = await client.call_tool("raster_reproject", REPROJECT)
    assert asked_before == [2]  # both decisions asked before the task existed
    assert len(model.questions) == 2  # and none by the job
    assert tasks.seen[-1]["status"] == "completed"
    assert structured(result)["crs"]["epsg"] == 4326


async def test_jobs_start_asks_the_hosts_model_in_the_agents_call(workspace_dir: Path) -> None:
    """Guards against jobs.start queueing work whose decisions were never put to the host's model."""
    model = Model()
    settings = Settings(mode="code", workspace=workspace_dir, reflection="sampling")
    code = (
        "job = jobs.start(raster.reproject, 'RGB.byte.tif', 'rgb_4326.tif', 'EPSG:4326', "
        "resampling='bilinear')\njobs.wait(job, timeout=20)['status']"
    )
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": code}))
    assert result["result"] == "completed", result
    assert len(model.questions) == 2


async def test_a_code_task_outlives_the_connection_that_started_it(workspace_with_dem: Path) -> None:
    """Guards against a code task killed with its session when the client disconnects (its worker is
    the session's), or a disconnect that waits for the task to end."""
    settings = Settings(mode="code", workspace=workspace_with_dem, exec_timeout=SHORT, task_after=0.0)
    server = build_server(settings)
    code = 'terrain.slope("big.tif", "s1.tif")["output"]["path"]'
    async with Client(server, extensions=[TasksClient()]) as client:
        task_id = (await start_task(client, "execute_code", {"code": code})).task_id
    async with Client(server, extensions=[TasksClient()]) as again:
        state = await follow(again, task_id)
    assert state["status"] == "completed"
    assert state["result"]["structuredContent"]["result"] == "s1.tif"
    assert (workspace_with_dem / "s1.tif").is_file()
    assert server.pool.sessions == 0  # type: ignore[attr-defined]


async def test_a_task_over_streamable_http_in_the_2026_era(workspace_with_dem: Path) -> None:
    """Guards against tasks that work in process only: over HTTP each request stands alone (no
    session), and the task is found again by its id from the next request."""
    server = build_server(classic(workspace_with_dem, task_after=0.0))
    tasks = TasksClient()
    async with serve_http(server) as web, Client(web.url, extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("terrain_slope", SLOPE)
    assert not result.is_error, result.content
    assert structured(result)["output"]["path"] == "slope.tif"
    assert [c.status for c in tasks.created] == ["working"]


def test_a_handshake_era_cancel_of_an_ended_task_is_refused(raw_classic: Any) -> None:
    """Guards against the 2025-11-25 rule: a task already in a terminal status is not cancelled (-32602)."""
    server = raw_classic()
    created = server.request(
        "tools/call", {"name": "raster_info", "arguments": {"path": "big.tif"}, "task": {}}
    )
    task_id = created["result"]["task"]["taskId"]
    server.request("tasks/result", {"taskId": task_id}, timeout=60)
    refused = server.request("tasks/cancel", {"taskId": task_id})
    assert refused["error"]["code"] == -32602
    assert "already completed" in refused["error"]["message"]


def test_a_handshake_era_task_for_a_tool_without_task_support_is_refused(raw_classic: Any) -> None:
    """Guards against ignoring the 2025-11-25 rule for tools that do not list taskSupport (-32601)."""
    server = raw_classic()
    arguments = {"hash": "sha256:" + "0" * 64, "domain": "resampling", "justification": {}}
    refused = server.request(
        "tools/call", {"name": "persist_justification", "arguments": arguments, "task": {}}
    )
    assert refused["error"]["code"] == -32601


async def test_short_calls_answered_inline_keep_no_task(workspace_dir: Path) -> None:
    """Guards against every inline answer of a task-capable client leaving a kept job behind: after
    200 of them (the most kept per principal) its every call would be refused. --task-after is an hour,
    so every call is answered inline however slow the machine (at 2 s, a loaded machine's first call,
    a worker start included, became a task)."""
    server = build_server(classic(workspace_dir, exec_timeout=30, task_after=3600.0))
    jobs = server.pool._handler.jobs  # type: ignore[attr-defined]
    tasks = TasksClient()
    async with Client(server, extensions=[tasks]) as client:
        for _ in range(3):
            assert not (await client.call_tool("raster_info", {"path": "shade.tif"})).is_error
    assert tasks.created == []
    assert jobs.jobs_of("local") == []
