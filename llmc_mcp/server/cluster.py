"""The Dask cluster behind ``--engine dask``: started or reached at server start, and checked.

With ``--dask-scheduler`` the operator's cluster is used; without it the server starts one of its
own (:mod:`~llmc_mcp.server.embedded_cluster`). Either way, before the server serves anything it:

1. reaches the scheduler and waits for a worker (bounded);
2. registers :class:`~llmc_mcp.gdal.dask_workers.HardenedGdal` on the cluster, so every worker,
   present and future, has our GDAL hardening;
3. writes a probe file in the workspace and has every worker read it back at the server's path,
   and report that no driver beyond the allowlist is registered and PROJ's network is off.

Any of these failing is :class:`ClusterUnavailable`, whose message says what is missing and how to
fix it; the command line exits with status 2 on it rather than serve operations that would fail on
every piece.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import secrets
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc_mcp.compute.dask_engine import load_security, write_credentials
from llmc_mcp.config import MAX_WORKER_PORTS, Settings, worker_ports
from llmc_mcp.gdal.dask_workers import HardenedGdal, probe_worker
from llmc_mcp.state import state_dir

log = logging.getLogger(__name__)

START_SECONDS = 120.0
"""How long the embedded cluster may take to start its workers."""
START_ATTEMPTS = 2
CONNECT_SECONDS = 10.0
WORKERS_SECONDS = 30.0
"""How long the server waits for an operator's scheduler to have a worker."""
SHOWN_WORKERS = 3
WORKER_TTL_SECONDS = 60
"""How long the embedded cluster's scheduler waits for a worker's heartbeat (every half second)
before it restarts the worker: a stopped or hung worker then fails the operation waiting on it
instead of holding it until its call's or job's wall clock. A piece takes seconds and leaves the
worker's event loop free (GDAL, numpy and numexpr release the GIL), so a busy worker is not taken
for a silent one."""
PORT_FLOOR, PORT_CEILING = 20000, 32767
"""Where the embedded cluster's workers' ports are chosen: below Linux's default range for the
ports the kernel hands out to outgoing connections (32768-60999), so rarely taken."""
ANSWER_SECONDS = 60.0
"""How long the workers have to take the hardening and to answer the probe: a stopped worker
answers nothing, and Dask's calls wait for every worker without a deadline of their own."""


class ClusterUnavailable(Exception):
    """The cluster cannot serve this workspace; the message says what is missing and the fix."""


class StartFailed(ClusterUnavailable):
    """The embedded cluster's process said why it could not start (another range of ports may do)."""


@dataclass
class EngineCluster:
    """The cluster in use: its scheduler's address, the ports its workers listen on where known
    (``FIRST:LAST``: results are then taken from them directly), and the process running it if it is
    ours, with the TLS credentials of its connections."""

    address: str
    workers: int
    worker_ports: str | None = None
    process: subprocess.Popen[bytes] | None = None
    credentials: Path | None = None

    def serving(self, settings: Settings) -> Settings:
        """``settings`` as the server runs with this cluster: its scheduler and its workers' ports."""
        return settings.model_copy(
            update={"dask_scheduler": self.address, "dask_worker_ports": self.worker_ports}
        )

    def close(self) -> None:
        if self.credentials is not None:
            self.credentials.unlink(missing_ok=True)
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_engine(settings: Settings) -> EngineCluster:
    """The checked cluster for ``settings`` (``--engine dask``); raises :class:`ClusterUnavailable`."""
    root = Path(settings.workspace).expanduser().resolve()
    if settings.dask_scheduler is not None:
        address, ports = settings.dask_scheduler, settings.dask_worker_ports
        return EngineCluster(address, check_cluster(address, root, settings, ports), ports)
    credentials = write_credentials(state_dir() / "dask" / f"{os.getpid()}-{secrets.token_hex(8)}.pem")
    workers = os.cpu_count() or 1
    try:
        process, address, ports = _start_embedded(settings, credentials, workers)
    except BaseException:
        credentials.unlink(missing_ok=True)
        raise
    cluster = EngineCluster(address, 0, ports, process, credentials)
    try:
        cluster.workers = check_cluster(address, root, settings, ports, load_security(credentials))
    except BaseException:
        cluster.close()
        raise
    return cluster


def embedded_worker_ports(workers: int) -> str:
    """A random range of ports for the embedded cluster's workers, ``FIRST:LAST``, with room for each
    worker twice over and a few more: a worker takes the first free port of the range, and so does the
    one the nanny starts in its place, so the range the engine workers may connect to holds them all."""
    span = min(MAX_WORKER_PORTS, 2 * workers + 8)
    first = random.randint(PORT_FLOOR, PORT_CEILING - span + 1)
    return f"{first}:{first + span - 1}"


def _start_embedded(
    settings: Settings, credentials: Path, workers: int
) -> tuple[subprocess.Popen[bytes], str, str]:
    """The embedded cluster's process, its scheduler's address and its workers' ports. A cluster that
    could not start on its range of ports (another program listens there) gets :data:`START_ATTEMPTS`
    ranges in all; what made the last attempt fail is in the error."""
    for _ in range(START_ATTEMPTS - 1):
        ports = embedded_worker_ports(workers)
        try:
            return (*_start_once(settings, credentials, workers, ports), ports)
        except StartFailed as exc:
            log.warning("%s; starting it again on other ports", exc)
    ports = embedded_worker_ports(workers)
    return (*_start_once(settings, credentials, workers, ports), ports)


def _start_once(
    settings: Settings, credentials: Path, workers: int, ports: str
) -> tuple[subprocess.Popen[bytes], str]:
    config = {
        "workers": workers,
        "worker_ports": ports,
        "memory_mb": settings.memory_mb,
        "worker_ttl": WORKER_TTL_SECONDS,
        "credentials": str(credentials),
    }
    process = subprocess.Popen(
        [sys.executable, "-I", "-m", "llmc_mcp.server.embedded_cluster", json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd="/",
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_SECONDS)
    line = process.stdout.readline(400).decode(errors="replace").strip() if ready else ""
    if not line.startswith("tls://"):
        process.kill()
        process.wait()
        fix = (
            "Check that the machine can start one process per core, or run a cluster yourself and pass "
            "--dask-scheduler."
        )
        if line.startswith("error "):
            raise StartFailed(
                f"the embedded Dask cluster could not start (workers on ports {ports}): {line[6:]}. {fix}"
            )
        if ready:
            raise ClusterUnavailable(
                f"the embedded Dask cluster exited with status {process.returncode} before it started "
                f"(its log is above). {fix}"
            )
        raise ClusterUnavailable(
            f"the embedded Dask cluster did not start within {START_SECONDS:g} s (its log is above). {fix}"
        )
    process.stdout.close()
    return process, line


def check_cluster(
    address: str, root: Path, settings: Settings, ports: str | None = None, security: Any = None
) -> int:
    """Harden and probe every worker of the cluster at ``address``, and check that each listens on
    ``ports`` where given; the number of workers."""
    from distributed import Client

    try:
        client = Client(
            address, timeout=CONNECT_SECONDS, set_as_default=False, name="llmc-mcp-probe", security=security
        )
    except (OSError, TimeoutError) as exc:
        raise ClusterUnavailable(
            f"the Dask scheduler at {address} cannot be reached ({type(exc).__name__}). Start it "
            "(`dask scheduler`, then `dask worker ADDRESS` on each machine), or leave --dask-scheduler out "
            "to let the server start a cluster of its own."
        ) from None
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKERS_SECONDS)
        except TimeoutError:
            raise ClusterUnavailable(
                f"the Dask scheduler at {address} has no workers after {WORKERS_SECONDS:g} s. Start them "
                f"with `dask worker {address}` where the workspace is mounted at {root}."
            ) from None
        try:
            _within(
                address,
                "take llmc-mcp's GDAL hardening",
                client.register_plugin,
                HardenedGdal(settings.memory_mb),
            )
        except ClusterUnavailable:
            raise
        except Exception as exc:
            raise ClusterUnavailable(
                f"the Dask workers at {address} could not take llmc-mcp's GDAL hardening "
                f"({type(exc).__name__}: {str(exc)[:200]}). Install the same llmc-mcp on every worker."
            ) from None
        workers = _probe(client, address, root)
        if ports is not None:
            _listening_within(client, address, ports)
        return workers


def _probe(client: Any, address: str, root: Path) -> int:
    token = secrets.token_hex(16)
    probe = root / ".llmc" / f"engine-probe-{token}"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(token, encoding="utf-8")
    try:
        reports: dict[str, Any] = _within(
            address, "answer the probe", client.run, probe_worker, str(probe), token, on_error="return"
        )
    finally:
        probe.unlink(missing_ok=True)
    failed = {worker: report for worker, report in reports.items() if not isinstance(report, dict)}
    if failed:
        shown = "; ".join(
            f"{w}: {type(e).__name__}: {str(e)[:120]}" for w, e in list(failed.items())[:SHOWN_WORKERS]
        )
        raise ClusterUnavailable(
            f"{len(failed)} of {len(reports)} Dask workers at {address} could not run llmc-mcp's probe "
            f"({shown}). "
            "Install the same llmc-mcp on every worker."
        )
    blind = {w: r for w, r in reports.items() if not r["sees_workspace"]}
    if blind:
        shown = "; ".join(
            f"{w}: {r['read'] or 'other content'}" for w, r in list(blind.items())[:SHOWN_WORKERS]
        )
        raise ClusterUnavailable(
            f"{len(blind)} of {len(reports)} Dask workers at {address} cannot read the workspace at {root} "
            f"({shown}). Every worker must see the workspace at the same path: put it on shared storage "
            f"mounted at {root} on each worker's machine."
        )
    open_doors = {
        w: r for w, r in reports.items() if r["unexpected_drivers"] or r["proj_network"].upper() != "OFF"
    }
    if open_doors:
        worker, report = next(iter(open_doors.items()))
        raise ClusterUnavailable(
            f"{len(open_doors)} Dask workers at {address} are not hardened (e.g. {worker}: drivers "
            f"beyond the allowlist {report['unexpected_drivers'][:5]}, PROJ network "
            f"{report['proj_network'] or 'unset'}). "
            "Install the same llmc-mcp on every worker."
        )
    return len(reports)


def _listening_within(client: Any, address: str, ports: str) -> None:
    """Refuse a cluster whose workers listen outside ``ports``: an engine worker may connect to those
    ports alone, and would wait out Dask's connect timeout on each result held elsewhere."""
    allowed = worker_ports(ports)
    listening = [str(worker) for worker in client.scheduler_info(n_workers=-1)["workers"]]
    outside = [worker for worker in listening if int(worker.rsplit(":", 1)[1]) not in allowed]
    if outside:
        raise ClusterUnavailable(
            f"{len(outside)} of {len(listening)} Dask workers at {address} listen outside the ports "
            f"{ports} ({', '.join(outside[:SHOWN_WORKERS])}). Start them with `dask worker {address} "
            f"--worker-port {ports}`, or leave --dask-worker-ports out: results then pass through the "
            "scheduler."
        )


def _within(address: str, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or :class:`ClusterUnavailable` after :data:`ANSWER_SECONDS`.

    The call runs in a daemon thread: a worker that never answers leaves it waiting, not the
    server, which exits.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args, **kwargs)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="llmc-cluster-check", daemon=True)
    thread.start()
    thread.join(ANSWER_SECONDS)
    if thread.is_alive():
        raise ClusterUnavailable(
            f"the Dask workers at {address} did not {what} within {ANSWER_SECONDS:g} s (a worker is stopped "
            "or overloaded). Restart the stuck workers, or the cluster."
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
