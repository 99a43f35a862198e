"""``python -m llmc_mcp.server.embedded_cluster CONFIG``: the Dask cluster of ``--engine dask`` when no
``--dask-scheduler`` is given.

A ``LocalCluster`` of worker processes, one per core, each with ``--memory-mb`` (Dask's nanny
restarts a worker past it), its scheduler on loopback only, its workers on the range of ports the
server chose (the engine workers fetch results from them directly, and may connect to those alone).
It runs in a process of its own rather than in the server: its workers are started from here and
inherit this process's standard output, which in the server is the MCP channel over stdio. Here fd 1
is moved onto stderr before anything starts; the scheduler's address goes back to the server on the
original stdout, as one line, and nothing else is ever written there (a cluster that cannot start
writes ``error`` and its first cause instead, which the server reports).

Its scheduler and workers listen on loopback, where any local process could connect and run code
as the server's user: every connection is TLS with a certificate only the server and its engine
workers hold (a private file in the state folder, mode 0600), so a neighbour without it is refused.

A piece is never retried on another worker (``allowed-failures`` 0): a worker that dies mid-piece
fails the operation at once, cleanly, instead of running the piece that may have killed it again.
A worker that stops answering (stopped, hung) misses its heartbeats; after ``worker_ttl`` seconds
the scheduler restarts it, which fails the operation waiting on it the same way.

The cluster stops when the server closes this process's stdin or dies (the parent-death signal).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import sys
from types import FrameType

_PR_SET_PDEATHSIG = 1


PROFILING_OFF = {"distributed.worker.profile.enabled": False}
"""Dask's statistical profiler walks each worker's task stack every 10 ms for a dashboard the
server never serves: 1.2 s of CPU a worker in a 16384² calc then stats on 2 cores (DD-MCP-101)."""


CAUSES_FOLLOWED = 16
"""How far down an exception's chain of causes :func:`failure` looks (a chain may be a cycle)."""


def failure(exc: BaseException) -> str:
    """The first cause of a failed start, on one line: Dask reports a worker that could not bind its
    port as "Nanny failed to start", the ``OSError`` that says why is further down the chain."""
    cause = exc
    for _ in range(CAUSES_FOLLOWED):
        deeper = cause.__cause__ or cause.__context__
        if deeper is None:
            break
        cause = deeper
    return " ".join(f"{type(cause).__name__}: {cause}".split())[:300]


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> None:
    config = json.loads(sys.argv[1])
    address_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    signal.signal(signal.SIGTERM, _stop)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dask %(levelname)s %(message)s")
    import dask
    from distributed import LocalCluster

    from llmc_mcp.compute.dask_engine import load_security

    dask.config.set(
        {
            "distributed.scheduler.allowed-failures": 0,
            "distributed.scheduler.worker-ttl": f"{int(config['worker_ttl'])}s",
            # No HTTP routes (health, metrics, dashboard) on the scheduler or the workers: nothing to serve.
            "distributed.scheduler.http.routes": [],
            "distributed.worker.http.routes": [],
            **PROFILING_OFF,
        }
    )
    try:
        cluster = LocalCluster(
            n_workers=int(config["workers"]),
            threads_per_worker=1,
            processes=True,
            memory_limit=f"{int(config['memory_mb'])}MiB",
            worker_port=str(config["worker_ports"]),
            host="127.0.0.1",
            protocol="tls://",
            security=load_security(config["credentials"]),
            scheduler_port=0,
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.WARNING,
        )
    except Exception as exc:
        address_out.write(f"error {failure(exc)}\n")
        address_out.close()
        raise SystemExit(1) from None
    with cluster:
        address_out.write(cluster.scheduler_address + "\n")
        address_out.close()
        sys.stdin.read()


if __name__ == "__main__":
    main()
