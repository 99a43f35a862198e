"""The Dask engine: an operation's pieces run on a Dask cluster's workers, results come back in order.

The operation itself does not change: it plans on the header where it runs, maps its pieces
through :meth:`DaskEngine.map` exactly as through the local engine, and writes each result as it
arrives, through the ledger, from this one process (the server's side is the only writer; workers
only read). What runs on a Dask worker is our piece function on a picklable piece: a window, a
:class:`~llmc_mcp.compute.sources.SourceRaster` to read it from, and the operation's parameters.
Agent code never does: the sandbox has no client and no network.

Runs of up to :data:`MAX_RUN` neighbouring pieces are one task each, submitted a few at a time
(:attr:`DaskEngine.in_flight`: twice the cluster's threads by default), and the next one only when
the oldest run's results have been taken, so the memory held here is bounded by that many runs,
whatever the raster's size; on each worker it is bounded by the runs it holds. The answer equals
the local engine's cell for cell: the same function runs on the same pieces, and results are folded
in the pieces' order.

A piece that fails raises its own error here (a refusal names its file as it would locally). A
worker that dies mid-piece fails the operation with :class:`EngineFailed`: pieces are never retried
on another worker, so a killed worker leaves a failed call and, since nothing was committed, no
output. So does a worker the scheduler restarts because it stopped answering (the server's own
cluster does so after a minute without its heartbeats). Closing the loop early (a failure, a
cancelled job) cancels the pieces still queued.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numexpr
import rasterio

from llmc_mcp.compute.progress import report
from llmc_mcp.errors import LlmcError
from llmc_mcp.gdal.environment import HARDENED_CONFIG

log = logging.getLogger(__name__)

Piece = TypeVar("Piece")
Result = TypeVar("Result")

CONNECT_SECONDS = 10.0
"""How long a scheduler may take to answer before the engine gives up on it."""
MAX_RUN = 8
"""Neighbouring pieces in one task, at most (see :meth:`DaskEngine.map`)."""


class EngineFailed(LlmcError):
    """The Dask cluster could not finish the work: a worker died, or the scheduler went away."""

    kind = "engine_failed"


def run_pieces(compute: Callable[[Any], Any], pieces: list[Any]) -> tuple[list[Any], Exception | None]:
    """What a Dask worker runs for a run of pieces: ``compute(piece)`` of each in order, in the
    hardened GDAL environment, on one thread (GDAL's and numexpr's): the cluster runs tasks side by
    side, one per worker thread, and threads within a piece would only compete for the same cores.

    A run is one task, so the cluster's cost per task (a few milliseconds of scheduling, transfer and
    bookkeeping) is paid once per run. A piece that fails ends the run: the results before it come
    back with its error, which the engine raises at that piece's turn."""
    numexpr.set_num_threads(1)
    results: list[Any] = []
    with rasterio.Env(**HARDENED_CONFIG, GDAL_NUM_THREADS="1"):
        for piece in pieces:
            try:
                results.append(compute(piece))
            except Exception as exc:
                return results, exc
    return results, None


def load_security(path: str | Path) -> Any:
    """The TLS settings of the server's own cluster, whose one PEM file (:func:`write_credentials`)
    is its certificate authority, and every side's certificate and key: each connection is encrypted
    and both ends must hold it. Dask reads the file where it connects (given contents instead, it
    would write them to a temporary file, which a confined engine worker cannot)."""
    from distributed.security import Security

    pem = str(path)
    return Security(
        tls_ca_file=pem,
        tls_client_cert=pem,
        tls_client_key=pem,
        tls_scheduler_cert=pem,
        tls_scheduler_key=pem,
        tls_worker_cert=pem,
        tls_worker_key=pem,
        require_encryption=True,
    )


def write_credentials(path: Path) -> Path:
    """A new self-signed certificate and its key, in one PEM file ``path`` (mode 0600)."""
    from distributed.security import Security

    fresh = Security.temporary()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(fresh.tls_client_key + fresh.tls_client_cert)
    return path


class DaskEngine:
    """Runs pieces on the Dask cluster at ``address``; connects on first use, once per process.

    ``security``: Dask's TLS settings for a ``tls://`` cluster (the server's own cluster always is).
    ``direct``: take results from the workers that hold them rather than through the scheduler, which
    would receive each one and send it on: on a machine the workers share, a copy of every result
    less (measured, 2.5 to 5 s of CPU for a 1 GiB raster on 2 cores, DD-MCP-097). Where this process
    may connect to the scheduler alone (a confined engine worker whose cluster's worker ports are
    unknown), it must be off: Dask would retry each refused connection until its connect timeout."""

    name = "dask"

    def __init__(
        self, address: str, *, security: Any = None, in_flight: int | None = None, direct: bool = False
    ):
        self.address = address
        self.security = security
        self.in_flight = in_flight
        self.direct = direct
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from distributed import Client

                try:
                    self._client = Client(
                        self.address,
                        timeout=CONNECT_SECONDS,
                        set_as_default=False,
                        name="llmc-mcp",
                        security=self.security,
                        direct_to_workers=self.direct,
                    )
                except (OSError, TimeoutError) as exc:
                    raise EngineFailed(
                        f"the Dask scheduler at {self.address} cannot be reached ({type(exc).__name__}).",
                        fix="Start the cluster again, or ask the operator to restart the server.",
                    ) from None
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def map(
        self,
        pieces: Iterable[Piece],
        compute: Callable[[Piece], Result],
        *,
        what: str | None = None,
        progress: bool = True,
        writes: bool = False,
    ) -> Iterator[tuple[Piece, Result]]:
        listed = list(pieces)
        if not listed:
            return
        client = self.client()
        threads = client.nthreads()
        workers = sorted(threads)
        run = min(MAX_RUN, max(1, len(listed) // (4 * max(1, len(workers)))))
        limit = self.in_flight or max(2, 2 * sum(threads.values()))
        runs = iter(enumerate(listed[start : start + run] for start in range(0, len(listed), run)))
        queued: deque[tuple[list[Piece], Any]] = deque()

        def submit(index: int, batch: list[Piece]) -> Any:
            # A run of neighbouring pieces is one task on one worker, whose GDAL block cache then
            # holds the tiles they share (a window's halo row lies in the previous window's tiles);
            # another worker takes a run whose own is gone.
            home = [workers[index % len(workers)]] if workers else None
            return client.submit(
                run_pieces, compute, batch, pure=False, retries=0, workers=home, allow_other_workers=True
            )

        try:
            for index, pieces_of_run in runs:
                queued.append((pieces_of_run, submit(index, pieces_of_run)))
                if len(queued) >= limit:
                    break
            done = 0
            while queued:
                pieces_of_run, future = queued.popleft()
                results, error = _result(future, self.address)
                future.release()
                following = next(runs, None)
                if following is not None:
                    queued.append((following[1], submit(*following)))
                for piece, result in zip(pieces_of_run, results, strict=False):
                    done += 1
                    yield piece, result
                    if progress:
                        report(done, len(listed), what)
                if error is not None:
                    raise error
        finally:
            if queued:
                client.cancel([future for _, future in queued])


def _result(future: Any, address: str) -> Any:
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    try:
        return future.result()
    except KilledWorker:
        raise EngineFailed(
            "a Dask worker died or stopped answering while computing a piece of this operation; nothing "
            "was written.",
            fix="Run it again; if workers keep dying, give them more memory (--memory-mb) or ask the "
            "operator to check the cluster.",
        ) from None
    except (CommClosedError, OSError) as exc:
        raise EngineFailed(
            f"the connection to the Dask scheduler at {address} was lost ({type(exc).__name__}); "
            "nothing was written.",
            fix="Run it again once the cluster is back.",
        ) from None
