"""A real Dask cluster for the engine tests: a ``LocalCluster`` of two worker processes on loopback.

The cluster is started once per test process and stopped at its end; every test in this folder runs
in one xdist group, so the suite starts one cluster, not one per test process. Its workers carry the
same GDAL hardening plugin the server registers (:class:`~llmc_mcp.gdal.dask_workers.HardenedGdal`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmc_mcp.compute.dask_engine import DaskEngine
from llmc_mcp.operations import OperationContext
from llmc_mcp.workspace import Workspace


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/engines/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.xdist_group("dask"))


@pytest.fixture(scope="session")
def dask_address() -> Iterator[str]:
    """The scheduler of a two-worker LocalCluster with the hardening plugin registered, configured as
    the server's embedded cluster is: a piece is never retried after its worker died, and no worker
    profiles its tasks."""
    import dask
    from distributed import Client, LocalCluster

    from llmc_mcp.gdal.dask_workers import HardenedGdal
    from llmc_mcp.server.embedded_cluster import PROFILING_OFF

    with dask.config.set({"distributed.scheduler.allowed-failures": 0, **PROFILING_OFF}), LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
        memory_limit="2GiB",
    ) as cluster, Client(cluster, set_as_default=False) as client:  # fmt: skip
        client.register_plugin(HardenedGdal(2048))
        yield cluster.scheduler_address


@pytest.fixture(scope="session")
def dask_engine(dask_address: str) -> Iterator[DaskEngine]:
    engine = DaskEngine(dask_address, direct=True)
    yield engine
    engine.close()


@pytest.fixture
def dask_ctx(workspace: Workspace, dask_engine: DaskEngine) -> OperationContext:
    """The test workspace's context with pixel work on the cluster."""
    return OperationContext(workspace, num_threads=2, engine=dask_engine)
