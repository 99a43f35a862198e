"""The cluster behind ``--engine dask``: started or reached at server start, checked, and what happens
when it cannot serve or a worker dies.

Real processes throughout: the ``llmc-mcp`` command, its embedded ``LocalCluster``, ``dask scheduler``
and ``dask worker`` started here on loopback, and the test cluster's workers, one of them killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from llmc_mcp.compute.dask_engine import DaskEngine
from llmc_mcp.config import Settings
from llmc_mcp.provenance.conformance import PRODUCER_PREFIX
from llmc_mcp.provenance.record import RECORD_SUFFIX
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import free_port, stdio_params, structured

BIN = Path(sys.executable).parent
WAIT = 60.0


def serve(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``llmc-mcp serve`` with its stdin closed: it exits at once unless the engine stops it first."""
    return subprocess.run(
        [str(BIN / "llmc-mcp"), "serve", "--workspace", str(workspace), "--engine", "dask", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_an_unreachable_scheduler_stops_the_server_with_status_2(workspace_dir: Path) -> None:
    """Guards against a server that starts anyway and fails every operation later."""
    address = f"tcp://127.0.0.1:{free_port()}"
    done = serve(workspace_dir, "--dask-scheduler", address)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"the Dask scheduler at {address} cannot be reached" in done.stderr
    assert "dask scheduler" in done.stderr  # the fix: how to start one


def test_workers_outside_the_given_ports_stop_the_server_with_status_2(
    dask_address: str, workspace_dir: Path
) -> None:
    """Guards against engine workers that may connect to the given ports alone waiting out Dask's
    connect timeout on every result a worker elsewhere holds: the start check names them and the fix."""
    done = serve(workspace_dir, "--dask-scheduler", dask_address, "--dask-worker-ports", "1:8")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"2 of 2 Dask workers at {dask_address} listen outside the ports 1:8" in done.stderr
    assert "--worker-port 1:8" in done.stderr  # the fix


@pytest.mark.parametrize(
    ("ports", "problem"),
    [("8:1", "not a port range"), ("0:10", "not a port range"), ("1:70000", "not a port range"),
     ("1000:3000", "spans 2001 ports"), ("1000-1010", "String should match")],
)  # fmt: skip
def test_a_worker_port_range_that_cannot_be_confined_is_refused(ports: str, problem: str) -> None:
    """Guards against a range the engine workers' confinement cannot hold (one rule a port) or that
    names no port, taken as given and failing at the first result."""
    with pytest.raises(ValueError, match=problem):
        Settings(engine="dask", dask_scheduler="tcp://127.0.0.1:8786", dask_worker_ports=ports)


def test_worker_ports_without_a_scheduler_are_refused() -> None:
    """Guards against a flag silently ignored: the server's own cluster chooses its workers' ports."""
    with pytest.raises(ValueError, match="give the scheduler too"):
        Settings(engine="dask", dask_worker_ports="9000:9010")


def _user_namespaces() -> bool:
    probe = (
        subprocess.run(["unshare", "-rm", "true"], capture_output=True) if shutil.which("unshare") else None
    )
    return probe is not None and probe.returncode == 0


@contextlib.contextmanager
def blind_cluster(hidden: Path) -> Iterator[str]:
    """A ``dask scheduler`` and one ``dask worker`` for which ``hidden`` (an empty tmpfs is mounted over
    it in the worker's own mount namespace) does not exist."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        **common,
    )
    worker_command = (
        f"mount -t tmpfs none {hidden} && exec {BIN / 'dask'} worker {address} --nthreads 1 --no-dashboard"
    )
    worker = subprocess.Popen(["unshare", "-rm", "sh", "-c", worker_command], **common)
    try:
        yield address
    finally:
        for process in (worker, scheduler):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.mark.skipif(not _user_namespaces(), reason="needs unprivileged user and mount namespaces")
def test_workers_that_cannot_see_the_workspace_stop_the_server_with_status_2(tmp_path: Path) -> None:
    """Guards against serving with workers whose pieces would all fail with 'file not found' (the
    workspace is not shared storage, or is mounted elsewhere on the workers)."""
    hidden = tmp_path / "mnt"
    workspace = hidden / "ws"
    workspace.mkdir(parents=True)
    with blind_cluster(hidden) as address:
        done = serve(workspace, "--dask-scheduler", address)
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        f"1 of 1 Dask workers at {address} cannot read the workspace at {workspace.resolve()}" in done.stderr
    )
    assert "shared storage" in done.stderr
    assert not list((workspace / ".llmc").glob("engine-probe-*")), "the probe file was left behind"


def _embedded_clusters() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if b"llmc_mcp.server.embedded_cluster" in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


@pytest.mark.anyio
async def test_the_command_starts_a_cluster_of_its_own_runs_on_it_and_stops_it(
    workspace_with_dem: Path,
) -> None:
    """Guards against --engine dask without a scheduler doing nothing, or leaving its cluster running
    after the server ended."""
    before = _embedded_clusters()
    async with Client(stdio_params(workspace_with_dem, "--engine", "dask")) as client:
        during = _embedded_clusters() - before
        answer = structured(
            await client.call_tool(
                "execute_code", {"code": 'terrain.slope("big.tif", "slope.tif")["valid_cells"]'}
            )
        )
    assert answer["ok"], answer
    assert answer["result"] == (4096 - 2) ** 2
    assert len(during) == 1
    record = (workspace_with_dem / f"slope.tif{RECORD_SUFFIX}").read_text()
    assert f'"{PRODUCER_PREFIX}compute_engine": "dask"' in record
    deadline = time.monotonic() + WAIT
    while _embedded_clusters() & during and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _embedded_clusters() & during, "the embedded cluster outlived its server"


@pytest.mark.anyio
async def test_a_worker_killed_mid_job_fails_the_job_and_leaves_no_output(
    workspace_with_dem: Path, dask_address: str, dask_engine: DaskEngine
) -> None:
    """Guards against a job that hangs, retries the piece that may have killed its worker, or leaves a
    partial output when a Dask worker dies under it. The worker is killed as soon as the scheduler
    shows it computing a piece of the job (32 pieces over two workers: it has one most of the time)."""
    client = dask_engine.client()
    victim_address, victim = sorted(client.run(os.getpid).items())[0]
    settings = Settings(mode="code", workspace=workspace_with_dem, engine="dask", dask_scheduler=dask_address)
    try:
        async with Client(build_server(settings)) as mcp:
            start = 'job = jobs.start(terrain.slope, "big.tif", "out.tif")'
            started = structured(await mcp.call_tool("execute_code", {"code": start}))
            assert started["ok"], started
            deadline = time.monotonic() + WAIT
            # The server runs in this event loop: wait without blocking it, or the job cannot start.
            while time.monotonic() < deadline:
                if (await anyio.to_thread.run_sync(client.processing)).get(victim_address):
                    break
                await anyio.sleep(0.002)
            os.kill(victim, signal.SIGKILL)
            ended = structured(await mcp.call_tool("execute_code", {"code": "jobs.wait(job, timeout=25)"}))
    finally:
        client.wait_for_workers(2, timeout=WAIT)  # the nanny starts a new worker for the next tests
    job = ended["result"]
    assert job["status"] == "failed", job
    assert job["error"]["type"] == "engine_failed", job
    assert "nothing was written" in job["error"]["message"]
    left = {p.name for p in workspace_with_dem.rglob("*") if p.is_file() and "out" in p.name}
    assert left == {f"out.tif{RECORD_SUFFIX}"}, f"partial output left: {left}"
    record = json.loads((workspace_with_dem / f"out.tif{RECORD_SUFFIX}").read_text())
    assert record[f"{PRODUCER_PREFIX}outcome"] == "failed"  # the audit trail of the failure, not an output


@pytest.mark.anyio
async def test_the_engine_workers_take_results_from_the_embedded_clusters_workers_directly(
    workspace_with_dem: Path,
) -> None:
    """Guards against every result crossing the scheduler's process as well (a copy more of each
    piece on the cores the workers share), or a confined engine worker refused the workers' ports
    and falling back to the scheduler after Dask's connect timeout: with the scheduler unable to
    relay results at all, an operation of the server's engine worker still completes."""
    from distributed import Client as DaskClient

    from llmc_mcp.compute.dask_engine import load_security
    from llmc_mcp.config import worker_ports
    from llmc_mcp.server.cluster import start_engine

    def stop_relaying(dask_scheduler: Any) -> None:
        """Runs on the scheduler (defined here, so it travels by value): its handler that gathers
        results for a client answers with an error."""

        async def refuse(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("this scheduler relays no results")

        dask_scheduler.handlers["gather"] = refuse

    settings = Settings(mode="code", workspace=workspace_with_dem, engine="dask", memory_mb=1024)
    cluster = start_engine(settings)
    assert cluster.credentials is not None and cluster.worker_ports is not None
    try:
        with DaskClient(
            cluster.address, timeout=10, set_as_default=False, security=load_security(cluster.credentials)
        ) as observer:
            listening = [int(w.rsplit(":", 1)[1]) for w in observer.scheduler_info(n_workers=-1)["workers"]]
            assert set(listening) <= set(worker_ports(cluster.worker_ports))
            observer.run_on_scheduler(stop_relaying)
        served = cluster.serving(settings)  # as the command serves with its cluster
        async with Client(build_server(served, engine_credentials=cluster.credentials)) as mcp:
            code = 'terrain.slope("big.tif", "direct.tif")["valid_cells"]'
            answer = structured(await mcp.call_tool("execute_code", {"code": code}))
    finally:
        cluster.close()
    assert answer["ok"], answer
    assert answer["result"] == (4096 - 2) ** 2


def test_the_embedded_cluster_refuses_a_neighbour_without_its_certificate(workspace_dir: Path) -> None:
    """Guards against a cluster on loopback that any local process can join and run code on as the
    server's user: only a client holding the server's private certificate is let in."""
    from distributed import Client
    from distributed.security import Security

    from llmc_mcp.compute.dask_engine import load_security
    from llmc_mcp.server.cluster import start_engine

    cluster = start_engine(Settings(workspace=workspace_dir, engine="dask", memory_mb=1024))
    try:
        assert cluster.address.startswith("tls://127.0.0.1:")
        assert cluster.credentials is not None and cluster.credentials.stat().st_mode & 0o077 == 0
        plain = cluster.address.replace("tls://", "tcp://")
        with pytest.raises((OSError, TimeoutError)):
            Client(plain, timeout=3, set_as_default=False)
        with pytest.raises((OSError, TimeoutError)):  # TLS, with a certificate of its own
            Client(cluster.address, timeout=3, set_as_default=False, security=Security.temporary())
        with Client(
            cluster.address, timeout=10, set_as_default=False, security=load_security(cluster.credentials)
        ) as ok:
            assert len(ok.nthreads()) == cluster.workers
    finally:
        cluster.close()
    assert not cluster.credentials.exists(), "the credentials outlived the cluster"


def test_the_embedded_clusters_workers_do_not_profile_their_tasks(workspace_dir: Path) -> None:
    """Guards against Dask's statistical profiler running on the server's own cluster: it samples every
    worker's task stack every 10 ms, for a dashboard nobody is served, on the cores the work needs."""
    from distributed import Client

    from llmc_mcp.compute.dask_engine import load_security
    from llmc_mcp.server.cluster import start_engine

    def callbacks(dask_worker: Any) -> list[str]:
        return sorted(dask_worker.periodic_callbacks)

    cluster = start_engine(Settings(workspace=workspace_dir, engine="dask", memory_mb=1024))
    try:
        assert cluster.credentials is not None
        with Client(
            cluster.address, timeout=10, set_as_default=False, security=load_security(cluster.credentials)
        ) as observer:
            running = observer.run(callbacks)
    finally:
        cluster.close()
    assert len(running) == cluster.workers
    for names in running.values():
        assert "heartbeat" in names  # the worker's own periodic work is there to be seen
        assert not [name for name in names if name.startswith("profile")], names


@contextlib.contextmanager
def _ports_taken(count: int) -> Iterator[str]:
    """``count`` consecutive loopback ports held by listening sockets of this process, as ``FIRST:LAST``."""
    import random
    import socket

    for _ in range(50):
        first = random.randint(20000, 32000 - count)
        held: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
                sock.listen()
        except OSError:
            for sock in held:
                sock.close()
            continue
        try:
            yield f"{first}:{first + count - 1}"
        finally:
            for sock in held:
                sock.close()
        return
    raise AssertionError("no free range of loopback ports")


def test_a_cluster_whose_worker_ports_are_taken_says_so_and_tries_other_ports(
    workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a start that failed at once (another program listening on the workers' range)
    reported as "did not start within 120 s", with no cause: the error names the ports and Dask's
    reason, and a second range is tried before the server gives up."""
    from llmc_mcp.server import cluster as clusters

    workers = os.cpu_count() or 1
    chosen: list[str] = []
    with _ports_taken(2 * workers + 8) as taken:

        def taken_range(count: int) -> str:
            chosen.append(taken)
            return taken

        monkeypatch.setattr(clusters, "embedded_worker_ports", taken_range)
        with pytest.raises(clusters.ClusterUnavailable) as refused:
            clusters.start_engine(Settings(workspace=workspace_dir, engine="dask", memory_mb=1024))
    message = str(refused.value)
    assert f"could not start (workers on ports {taken})" in message, message
    assert "Could not start Worker" in message, message  # Dask's own reason, from the cluster's process
    assert "within" not in message, message
    assert len(chosen) == clusters.START_ATTEMPTS


def test_a_stopped_worker_stops_the_start_check_within_its_bound(
    workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a server that never starts (and never says why) because one Dask worker is
    stopped: Dask waits for every worker's answer without a deadline; the start check has one."""
    from distributed import Client, LocalCluster

    from llmc_mcp.server import cluster as checks

    monkeypatch.setattr(checks, "ANSWER_SECONDS", 3.0)
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
    ) as stuck, Client(stuck, set_as_default=False) as observer:  # fmt: skip
        [pid] = observer.run(os.getpid).values()
        os.kill(pid, signal.SIGSTOP)
        settings = Settings(workspace=workspace_dir)
        try:
            with pytest.raises(checks.ClusterUnavailable, match=r"did not .* within 3 s"):
                checks.check_cluster(stuck.scheduler_address, workspace_dir, settings)
        finally:
            os.kill(pid, signal.SIGCONT)


def test_a_stopped_worker_of_the_embedded_cluster_fails_the_operation_and_is_replaced(
    workspace_with_dem: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against an operation held until its wall clock (a job's may be hours) by a worker that
    stopped answering (paused, hung on storage): the server's own cluster restarts a worker silent for
    its heartbeat TTL, the operation waiting on it fails with engine_failed and writes nothing, and the
    next operation runs on the restarted worker."""
    from llmc_mcp.compute.dask_engine import EngineFailed, load_security
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.server import cluster as checks
    from llmc_mcp.workspace import Workspace

    monkeypatch.setattr(checks, "WORKER_TTL_SECONDS", 5)
    cluster = checks.start_engine(Settings(workspace=workspace_with_dem, engine="dask", memory_mb=1024))
    assert cluster.credentials is not None
    engine = DaskEngine(cluster.address, security=load_security(cluster.credentials))
    slope = get_operation("terrain.slope")
    ctx = OperationContext(Workspace(workspace_with_dem), num_threads=2, engine=engine)
    try:
        observer = engine.client()
        stopped = sorted(observer.run(os.getpid).values())[0]
        os.kill(stopped, signal.SIGSTOP)
        try:
            with pytest.raises(EngineFailed, match="stopped answering"):
                slope.run(ctx, slope.validate({"dem": "big.tif", "dst": "held.tif"}))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        observer.wait_for_workers(cluster.workers, timeout=WAIT)
        again = slope.run(ctx, slope.validate({"dem": "big.tif", "dst": "after.tif"}))
    finally:
        engine.close()
        cluster.close()
    left = [p.name for p in workspace_with_dem.rglob("*") if p.name.startswith("held.tif")]
    assert not left, f"the failed operation left {left}"
    assert again.output.width == 4096 and (workspace_with_dem / "after.tif").is_file()
