"""Jobs from code mode: ``jobs.start`` takes an operation of the stubs, gates it in the agent's call,
and runs it in a confined worker of its own that outlives the call; status, wait, result, cancel.

Every test drives a real server through the SDK's in-process client, with real workers and GDAL.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from llmc_mcp.server.app import build_server
from tests.mcp_helpers import PERSIST_HINTS
from tests.mcp_helpers import code_settings as settings
from tests.mcp_helpers import execute as run

pytestmark = pytest.mark.anyio




def workspace_files(root: Path) -> set[str]:
    """Every file of the workspace but the server's own stubs: what a job may have left behind."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[:2] != (".llmc", "stubs")
    }


async def test_a_started_job_completes_after_the_call_returned_and_its_result_is_the_operations(
    workspace_with_dem: Path,
) -> None:
    """Guards against a job that runs inside the starting call (so still bound by its budget), or a
    result that differs from what calling the operation returns."""
    async with Client(build_server(settings(workspace_with_dem))) as client:
        started = await run(client, 'job = jobs.start(terrain.slope, "big.tif", "slope.tif")\njob')
        assert started["ok"], started
        assert started["result"]["status"] == "working"
        assert started["result"]["operation"] == "terrain.slope"
        waited = await run(client, "jobs.wait(job, timeout=25)")
        assert waited["result"]["status"] == "completed", waited
        assert waited["result"]["progress"] == 1.0
        result = await run(client, "jobs.result(job)")
        direct = await run(client, 'terrain.slope("big.tif", "slope_direct.tif")')
    assert result["result"]["output"]["path"] == "slope.tif"
    for key in ("width", "height", "crs", "transform", "dtypes", "nodata"):
        assert result["result"]["output"][key] == direct["result"]["output"][key]
    assert (workspace_with_dem / "slope.tif").is_file()


async def test_the_gate_is_asked_in_the_starting_call_and_no_job_exists_until_it_is_answered(
    workspace_dir: Path,
) -> None:
    """Guards against a job queued with an unanswered question, which would then wait on (or fail
    for) a justification nobody can give it: the miss must be the agent's ReflectionRequired."""
    start = (
        'jobs.start(raster.reproject, "RGB.byte.tif", "rgb_4326.tif", dst_crs="EPSG:4326", '
        'resampling="nearest")'
    )
    async with Client(build_server(settings(workspace_dir))) as client:
        missed = await run(
            client, f"try:\n    {start}\nexcept reflection.ReflectionRequired as e:\n    hints = e.hints\n"
        )
        assert missed["ok"], missed
        listed = await run(client, "[len(hints), sorted(h['domain'] for h in hints), jobs.list()]")
        assert listed["result"] == [2, ["crs_datum", "resampling"], []]
        answered = await run(client, PERSIST_HINTS + f"job = {start}\njobs.wait(job, timeout=25)")
        assert answered["result"]["status"] == "completed", answered
        lineage = await run(client, 'provenance.lineage("rgb_4326.tif")')
    assert lineage["result"]["steps"][0]["operation"] == "raster.reproject"
    record = json.loads((workspace_dir / lineage["result"]["steps"][0]["record"]).read_text())
    assert len(record["x-llmc:justifications"]) == 2


async def test_a_cancelled_job_leaves_no_output_temporary_file_or_record(workspace_with_dem: Path) -> None:
    """Guards against a cancel that only stops waiting (the worker writes on), or a killed worker's
    half-written GeoTIFF, temporary file or provenance record left in the workspace."""
    before = workspace_files(workspace_with_dem)
    async with Client(build_server(settings(workspace_with_dem))) as client:
        cancelled = await run(
            client, 'job = jobs.start(terrain.slope, "big.tif", "slope.tif")\njobs.cancel(job)'
        )
        assert cancelled["result"]["status"] == "cancelled", cancelled
        result = await run(client, "jobs.result(job)")
    assert result["error"]["type"] == "cancelled"
    new = workspace_files(workspace_with_dem) - before
    assert [p for p in new if not p.startswith(".llmc/") or "journal" in p] == []
    assert not any("slope" in p for p in new)


async def test_a_job_past_its_timeout_fails_naming_job_timeout_and_writes_nothing(
    workspace_with_dem: Path,
) -> None:
    """Guards against a job held to the call's budget, or a timed-out job that leaves a partial output
    or says to raise --exec-timeout, which does not govern jobs."""
    async with Client(build_server(settings(workspace_with_dem, job_timeout=0.2))) as client:
        done = await run(
            client, 'job = jobs.start(terrain.slope, "big.tif", "slope.tif")\njobs.wait(job, timeout=25)'
        )
        result = await run(client, "jobs.result(job)")
    assert done["result"]["status"] == "failed"
    assert done["result"]["error"]["type"] == "Timeout"
    assert "--job-timeout" in done["result"]["error"]["message"]
    assert "--exec-timeout" not in done["result"]["error"]["message"]
    assert result["error"]["type"] == "Timeout"
    assert not (workspace_with_dem / "slope.tif").exists()


async def test_a_job_with_a_bad_argument_is_refused_at_start_not_queued(workspace_dir: Path) -> None:
    """Guards against argument errors surfacing only when a job runs, after the call that could have
    corrected them has returned."""
    async with Client(build_server(settings(workspace_dir))) as client:
        refused = await run(client, 'jobs.start(terrain.slope, "missing.tif", "s.tif")')
        typo = await run(client, 'jobs.start(terrain.slope, "shade.tif", "s.tif", no_such=1)')
        not_an_op = await run(client, "jobs.start(print, 1)")
        listed = await run(client, "jobs.list()")
    assert refused["error"]["type"] == "not_found"
    assert typo["error"]["type"] == "invalid_argument"
    assert not_an_op["error"]["type"] == "invalid_argument"
    assert "raster.reproject" in not_an_op["error"]["message"]
    assert listed["result"] == []


@pytest.mark.parametrize("limit", ["max_session_jobs", "max_jobs"])
async def test_more_jobs_than_may_run_at_once_is_refused_naming_the_flag(
    workspace_with_dem: Path, limit: str
) -> None:
    """Guards against one session, or all sessions together, starting jobs without bound (each is a
    process and its memory)."""
    async with Client(build_server(settings(workspace_with_dem, **{limit: 1}))) as client:
        second = await run(
            client,
            'a = jobs.start(terrain.slope, "big.tif", "a.tif")\n'
            'try:\n    jobs.start(terrain.slope, "big.tif", "b.tif")\n'
            "except ApiError as e:\n    refusal = [e.type, e.message]\n"
            "jobs.cancel(a)\nrefusal",
        )
    kind, message = second["result"]
    assert kind == "limit"
    assert f"--{limit.replace('_', '-')} 1" in message


async def test_wait_never_spends_more_than_what_is_left_of_the_call(workspace_with_dem: Path) -> None:
    """Guards against jobs.wait(timeout=600) holding the call past --exec-timeout, which kills the
    worker and resets the session (its variables, the job handle among them, would be gone)."""
    async with Client(build_server(settings(workspace_with_dem, exec_timeout=3, job_timeout=60))) as client:
        waited = await run(
            client,
            'job = jobs.start(terrain.slope, "big.tif", "slope.tif")\n'
            "state = jobs.wait(job, timeout=600)\njobs.cancel(job)\nstate['status']",
        )
        kept = await run(client, "job['id'][:4]")
    assert waited["ok"], waited
    assert kept["result"] == "job-"


async def test_a_job_id_of_another_principal_reads_as_unknown(workspace_dir: Path) -> None:
    """Guards against job ids working as a way into another principal's results: a job is bound to the
    principal of the session that started it, and a stranger's id looks like an unknown one."""
    server = build_server(settings(workspace_dir))
    async with Client(server) as client:
        started = await run(client, 'jobs.start(terrain.slope, "shade.tif", "s.tif")')
    job_id = started["result"]["id"]
    runner = server.pool._handler.jobs  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="No job"):
        runner.get("http-someone-else", job_id)
    assert runner.get("local", job_id).id == job_id


async def test_a_jobs_output_counts_against_the_sessions_quota(workspace_with_dem: Path) -> None:
    """Guards against jobs as a way around the session's quotas: the job's worker writes for the
    session's principal, so its output is refused past the quota and nothing is left."""
    async with Client(build_server(settings(workspace_with_dem, quota_session_files=1))) as client:
        first = await run(client, 'terrain.slope("big.tif", "s1.tif")["output"]["path"]')
        done = await run(
            client, 'job = jobs.start(terrain.slope, "big.tif", "s2.tif")\njobs.wait(job, timeout=25)'
        )
    assert first["result"] == "s1.tif"
    assert done["result"]["status"] == "failed"
    assert done["result"]["error"]["type"] == "quota_exceeded"
    assert not (workspace_with_dem / "s2.tif").exists()


def limits_of(pid: int) -> dict[str, list[str]]:
    text = Path(f"/proc/{pid}/limits").read_text()
    return {line[:26].strip(): line[26:].split() for line in text.splitlines()[1:]}


async def test_a_job_worker_is_confined_as_a_calls_with_the_jobs_own_memory_limit(
    workspace_with_dem: Path,
) -> None:
    """Guards against job workers started some other way than call workers (no Landlock, no rlimits),
    and against --job-memory-mb accepted and ignored."""
    server = build_server(settings(workspace_with_dem, memory_mb=2048, job_memory_mb=768))
    jobs = server.pool._handler.jobs  # type: ignore[attr-defined]
    async with Client(server) as client:
        await run(client, 'job = jobs.start(terrain.slope, "big.tif", "slope.tif")')
        with anyio.fail_after(30):
            while not jobs.pool.worker_pids():
                await anyio.sleep(0.01)
        (pid,) = jobs.pool.worker_pids().values()
        job_limits = limits_of(pid)
        status = Path(f"/proc/{pid}/status").read_text()
        (call_pid,) = server.pool.worker_pids().values()  # type: ignore[attr-defined]
        call_limits = limits_of(call_pid)
        job_command, call_command = (
            Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0") for p in (pid, call_pid)
        )
        await run(client, "jobs.cancel(job)")
    assert job_limits["Max address space"][:2] == [str(768 * 1024 * 1024)] * 2
    assert call_limits["Max address space"][:2] == [str(2048 * 1024 * 1024)] * 2
    for limit in ("Max core file size", "Max open files", "Max file size"):
        assert job_limits[limit] == call_limits[limit]
    assert job_limits["Max processes"][0] != "unlimited"
    assert "NoNewPrivs:\t1" in status
    assert job_command[:-2] == call_command[:-2]
    job_config, call_config = json.loads(job_command[-2]), json.loads(call_command[-2])
    differ = {k for k in job_config if job_config[k] != call_config[k]}
    assert differ == {"memory_mb", "cpu_seconds", "call_seconds"}


async def test_a_sessions_jobs_reuse_its_warm_job_worker_and_never_anothers(workspace_dir: Path) -> None:
    """Guards against a worker start per job (half a second each), and against a job worker shared
    between sessions, where a worker subverted by one session's hostile file would run another's."""
    server = build_server(settings(workspace_dir))
    jobs = server.pool._handler.jobs  # type: ignore[attr-defined]
    start = 'jobs.wait(jobs.start(terrain.slope, "RGB.byte.tif", "{dst}"), timeout=25)["status"]'
    seen: list[dict[str, int]] = []
    async with Client(server) as first, Client(server) as second:
        for client, dst in ((first, "a.tif"), (first, "b.tif"), (second, "c.tif")):
            assert (await run(client, start.format(dst=dst)))["result"] == "completed"
            seen.append(dict(jobs.pool.worker_pids()))
    assert seen[0] == seen[1]  # the first session's second job ran in the same worker
    (first_key,) = seen[0]
    (second_key,) = set(seen[2]) - {first_key}
    assert seen[2][second_key] != seen[0][first_key]
    assert first_key.split("/job-")[0] != second_key.split("/job-")[0]
