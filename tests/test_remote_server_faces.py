"""Remote rasters through a real server: agent code in a confined worker (no network) reads an allowed
URL through the server, which alone holds the network and checks every request again.

The SDK's in-process client drives ``build_server``; the COGs are served on loopback by the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from llmc_mcp.errors import InvalidArgument, PathRefused
from llmc_mcp.remote.access import configure
from llmc_mcp.server.app import build_server
from llmc_mcp.server.host import HostRequests
from llmc_mcp.server.runtime import Runtime
from tests.mcp_helpers import code_settings, execute
from tests.remote_server import RangeServer, make_cog

pytestmark = pytest.mark.anyio

SCENE = dict(width=512, height=512, dtype="uint16", blocksize=256)


@pytest.fixture(scope="module")
def served() -> Iterator[RangeServer]:
    with RangeServer() as server:
        server.files["cogs/a.tif"] = make_cog(None, origin=(500_000, 5_000_000), **SCENE)
        server.files["cogs/b.tif"] = make_cog(None, origin=(502_000, 5_000_000), **SCENE)
        server.files["private/c.tif"] = make_cog(None, **SCENE)
        yield server
    configure(None)


def settings(workspace: Path, served: RangeServer, **overrides: object):
    return code_settings(workspace, allow_remote=(served.base + "cogs/",), **overrides)


async def test_agent_code_reads_an_allowed_url_through_the_server(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against remote reading that only works in the server's own process: the session worker
    has no network, so the statistics come through its requests to the server."""
    served.reset_counters()
    async with Client(build_server(settings(tmp_path, served))) as client:
        answer = await execute(
            client, f's = raster.stats("{served.url("cogs/a.tif")}")\ns["bands"][0]["valid_count"]'
        )
    assert answer["ok"], answer
    assert answer["result"] == 512 * 512
    assert "cogs/a.tif" in {path for _m, path, _r in served.requests}


async def test_the_call_budget_is_the_servers_and_starts_again_with_each_call(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against a bound the worker could step around (it is the server that counts) or one that
    never resets (a second call gets its own budget)."""
    code = f'raster.stats("{served.url("cogs/a.tif")}")["bands"][0]["valid_count"]'
    async with Client(build_server(settings(tmp_path, served, remote_limits="call_requests=4"))) as client:
        twice = await execute(client, f"{code}\n{code.replace('a.tif', 'b.tif')}")
        again = await execute(client, code)
    assert not twice["ok"] and "limit of 4 remote requests" in twice["error"]["message"], twice
    assert "call_requests" in twice["error"]["fix"]
    assert again["ok"], again


async def test_merging_remote_scenes_asks_the_aggregation_question_as_local_ones_do(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against remote inputs skipping the gate: two overlapping scenes mosaicked with `mean`
    need an `aggregation` justification, wherever the scenes live."""
    sources = json.dumps([served.url("cogs/a.tif"), served.url("cogs/b.tif")])
    code = f"""
try:
    raster.merge({sources}, "mosaic.tif", method="mean")
    asked = []
except reflection.ReflectionRequired as e:
    asked = [h["domain"] for h in e.hints]
asked
"""
    async with Client(build_server(settings(tmp_path, served))) as client:
        answer = await execute(client, code)
    assert answer["result"] == ["aggregation"], answer
    assert not (tmp_path / "mosaic.tif").exists()


async def test_warping_a_remote_scene_asks_the_resampling_question(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against a warp of a remote input skipping the `resampling` (and datum) questions."""
    code = f"""
try:
    raster.reproject("{served.url("cogs/a.tif")}", "a_4326.tif", dst_crs="EPSG:4326", resampling="bilinear")
    asked = []
except reflection.ReflectionRequired as e:
    asked = sorted(h["domain"] for h in e.hints)
asked
"""
    async with Client(build_server(settings(tmp_path, served))) as client:
        answer = await execute(client, code)
    assert "resampling" in answer["result"], answer


def test_the_server_checks_a_workers_request_against_the_allowlist_itself(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against trusting a worker (it parses hostile files and runs agent code) to have checked
    the URL: a request for a URL off the list is refused by the server, and nothing is requested."""
    runtime = Runtime.create(settings(tmp_path, served), next_action="")
    host = HostRequests(runtime)
    served.reset_counters()

    async def ask() -> None:
        with pytest.raises(PathRefused, match="not under an allowed prefix"):
            await host("remote.stat", {"url": served.url("private/c.tif")})
        file = {"url": served.url("private/c.tif"), "size": 10_000, "etag": None, "last_modified": None}
        with pytest.raises(PathRefused, match="not under an allowed prefix"):
            await host("remote.read", {"file": file, "ranges": [[0, 100]]})

    anyio.run(ask)
    assert served.requests == []


def test_a_worker_asking_for_thousands_of_ranges_at_once_is_refused(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against one request that makes the server fetch without bound."""
    runtime = Runtime.create(settings(tmp_path, served), next_action="")
    host = HostRequests(runtime)
    file = {"url": served.url("cogs/a.tif"), "size": 10_000, "etag": None, "last_modified": None}

    async def ask() -> None:
        with pytest.raises(InvalidArgument, match="at most 512 pairs"):
            await host("remote.read", {"file": file, "ranges": [[i, 1] for i in range(5000)]})

    anyio.run(ask)


def test_the_demo_reads_a_window_of_a_remote_cog_when_given_a_prefix(served: RangeServer) -> None:
    """Guards against a remote step that only works in-process: the demo's own server (a subprocess
    over stdio, its worker confined) allows the prefix and clips the centre of the remote COG."""
    from llmc_mcp.cli.demo import RemoteStep, run_demo

    transcript = run_demo("code", None, RemoteStep(served.base + "cogs/", served.url("cogs/a.tif")))
    (step,) = [s for s in transcript.steps if "remote" in s.title]
    assert not step.is_error, step.response
    assert json.loads(step.response) == [512, 512, 256, 256]


async def test_the_guide_names_the_prefixes_an_agent_may_read(tmp_path: Path, served: RangeServer) -> None:
    """Guards against an agent that cannot know a URL would be read (or tries URLs on a server that
    reads none): the instructions name the allowed prefixes, and only when there are some."""
    prefix = served.base + "cogs/"
    async with Client(build_server(settings(tmp_path, served))) as client:
        allowed = client.instructions or ""
    async with Client(build_server(code_settings(tmp_path))) as client:
        default = client.instructions or ""
    assert f"URL under {prefix}" in allowed
    assert "URL under" not in default and "URLs and /vsi paths are refused" in default


async def test_a_job_reads_an_allowed_url_through_the_server(tmp_path: Path, served: RangeServer) -> None:
    """Guards against remote reading that works in a call but not in a job: a job's worker is
    another process, and it too reaches the URL only through the server."""
    code = (
        f'job = jobs.start(raster.stats, "{served.url("cogs/b.tif")}")\njobs.wait(job, timeout=15)["status"]'
    )
    async with Client(build_server(settings(tmp_path, served))) as client:
        started = await execute(client, code)
        result = await execute(client, 'jobs.result(job)["bands"][0]["valid_count"]')
    assert started["result"] == "completed", started
    assert result["result"] == 512 * 512, result


async def test_a_classic_tool_reads_an_allowed_url(tmp_path: Path, served: RangeServer) -> None:
    """Guards against remote reading that only the code face has: a classic tool's operation runs in
    the session's worker too, and reads through the server the same way."""
    classic = settings(tmp_path, served, mode="classic")
    async with Client(build_server(classic)) as client:
        result = await client.call_tool("raster_info", {"path": served.url("cogs/a.tif")})
    assert not result.is_error, result
    assert result.structured_content["width"] == 512
    assert result.structured_content["path"] == served.url("cogs/a.tif")
