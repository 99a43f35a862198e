"""The hostile-file suite again, with ``--engine dask``: the same refusals, and the Dask workers' own.

Every hostile raster of :mod:`tests.security.test_hostile_files` (metadata and sidecars naming files
outside, the store's key, ``/etc/passwd``, URLs, inline WMS and VRT documents) goes through code mode
on a server whose pixel work runs on a real cluster, and must end as it does locally: refused, naming
what was refused, no secret in any answer and no request at the recording HTTP sink. Then the Dask
workers are tested without the server in front: a piece handed a hostile raster directly (as if the
server's own check had been skipped) is refused on the worker, before any pixel is read.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from llmc_mcp.compute.dask_engine import DaskEngine
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.config import Settings
from llmc_mcp.errors import LlmcError
from llmc_mcp.gdal.dask_workers import probe_worker
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured, text
from tests.security.sink import Sink
from tests.security.test_hostile_files import CASE_IDS, World, judge, lay_out, the_case

pytestmark = pytest.mark.anyio

OPERATIONS = ("info", "stats", "convert", "slope")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("hostile-dask")
    sink = Sink()
    workspace = root / "ws"
    workspace.mkdir()
    yield lay_out(workspace, root / "outside", sink)
    sink.server.shutdown()


@pytest.fixture(scope="module")
async def dask_client(world: World, dask_address: str) -> AsyncIterator[Client]:
    settings = Settings(
        mode="code", workspace=world.workspace, exec_timeout=30, engine="dask", dask_scheduler=dask_address
    )
    async with Client(build_server(settings)) as client:
        yield client


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("case_id", CASE_IDS)
async def test_code_mode_on_dask_refuses_the_hostile_raster(
    dask_client: Client, world: World, case_id: str, operation: str
) -> None:
    """Guards against a hostile raster that the local engine refuses reaching a Dask worker's GDAL."""
    case = the_case(world, case_id)
    src = f"{case.id}/raster.tif"
    code = {
        "info": f"raster.info({src!r})",
        "stats": f"raster.stats({src!r})",
        "convert": f"raster.convert({src!r}, 'out/{case.id}.tif')",
        "slope": f"terrain.slope({src!r}, 'out/slope-{case.id}.tif')",
    }[operation]
    sent = len(world.sink.requests)
    result = await dask_client.call_tool("execute_code", {"code": code, "reset": True})
    data = structured(result)
    judge(world, case, bool(data.get("ok")), data.get("error"), text(result) + json.dumps(data), data, sent)


def _first_pixel(source: SourceRaster) -> float:
    return float(source.dataset().read(1, window=((0, 1), (0, 1)))[0, 0])


@pytest.mark.parametrize("case_id", [c for c in CASE_IDS if not c.startswith("link-dangling")])
def test_a_dask_worker_refuses_a_hostile_raster_handed_to_it_directly(
    world: World, dask_engine: DaskEngine, case_id: str
) -> None:
    """Guards against Dask workers that trust the server's check alone: a piece naming a hostile raster
    is refused where it runs, before a pixel is read, and GDAL there makes no request."""
    case = the_case(world, case_id)
    path = (world.workspace / case.id / "raster.tif").resolve()
    stat = path.stat()
    source = SourceRaster(str(world.workspace.resolve()), str(path), "path", "unchecked", stat.st_size,
                          stat.st_mtime_ns)  # fmt: skip
    sent = len(world.sink.requests)
    try:
        list(dask_engine.map([source], _first_pixel))
    except LlmcError as exc:
        refused: LlmcError | None = exc
    else:
        refused = None
    assert world.sink.requests[sent:] == []
    if case.names is not None:
        assert refused is not None and refused.kind == "path_refused", f"{case.id}: {refused!r}"
        assert case.names in refused.message


def test_every_dask_worker_is_hardened(dask_engine: DaskEngine, tmp_path: Path) -> None:
    """Guards against a worker (a restarted one too) without the GDAL hardening plugin."""
    probe = tmp_path / "probe"
    probe.write_text("token")
    reports = dask_engine.client().run(probe_worker, str(probe), "token")
    assert len(reports) == 2
    for report in reports.values():
        assert report == {"sees_workspace": True, "read": "", "unexpected_drivers": [], "proj_network": "OFF"}
