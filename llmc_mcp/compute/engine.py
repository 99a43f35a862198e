"""The seam every operation's pixel work goes through: an :class:`Engine` maps a function over the
pieces of a grid (windows, row bands, (window, shape) reads) and hands the results back in order.

Operations cut their work into pieces and say what each piece computes; the engine decides where and
when that runs. The operation's loop reads::

    for window, values in ctx.engine.map(windows, compute, what="slope"):
        out.write(values, 1, window=window)

:class:`LocalEngine` runs ``compute`` on each piece in this process, in order, one piece in memory at
a time or, given two threads or more, one piece ahead in a helper thread, and reports progress
(:mod:`~llmc_mcp.compute.progress`) after the loop body is done with each piece. The results come
back in the pieces' order, so a
caller that writes windows, or folds statistics whose order matters (first-pass then second-pass
accumulators, the first source winning in a mosaic), gets the same answer from any engine.

A chunked or distributed engine (Dask, issue 24) stands beside it behind the same :meth:`Engine.map`:
it may run ``compute`` for many pieces at once, elsewhere, and still yields in order. What it can
take is what ``compute`` allows: a function that is picklable and a pure function of its piece,
reading its inputs by workspace path rather than through a dataset opened by the caller, and
returning its result rather than adding it to the caller's counters. The local engine one piece ahead
takes the same pieces (they run in another thread); :data:`LOCAL`, one piece at a time in the
caller's thread, takes any callable. DD-MCP-081 records which operations' pieces are pure and how.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import rasterio.env

from llmc_mcp.compute.progress import report
from llmc_mcp.compute.sources import close_thread_datasets
from llmc_mcp.gdal.environment import HARDENED_CONFIG

Piece = TypeVar("Piece")
Result = TypeVar("Result")


class Engine(Protocol):
    """Runs ``compute`` over ``pieces``; yields ``(piece, result)`` in the pieces' order."""

    @property
    def name(self) -> str: ...

    def map(
        self,
        pieces: Iterable[Piece],
        compute: Callable[[Piece], Result],
        *,
        what: str | None = None,
        progress: bool = True,
        writes: bool = False,
    ) -> Iterator[tuple[Piece, Result]]:
        """``what`` names the loop in progress messages; ``progress=False`` for a loop that is not
        the operation's main work (a scan before the write), whose counts are not reported.
        ``writes=True`` says the loop body writes each result to an output, work of its own that the
        next pieces can be computed beside (a loop that only folds counts has none)."""
        ...


class LocalEngine:
    """The windowed engine of this process: results in order, progress after each piece.

    ``ahead=0`` runs each piece in the caller's thread, one at a time. ``ahead=1`` (what a process with
    two or more threads gets, :func:`local_engine`) computes the next piece of a loop that writes
    (``writes=True``) in a helper thread while the caller writes the current one: reading and
    decoding the source, the kernel, and compressing the output (which GDAL does as the block cache
    fills, in whichever thread reads) then overlap instead of taking turns on one core. A loop that
    only folds counts runs in the caller's thread either way: it has nothing to overlap, and there
    its pieces reuse the blocks the caller's dataset has cached (statistics' second pass).

    At most ``ahead + 1`` pieces are in memory at once (computed or being computed), whatever the
    raster's size. The helper runs in a copy of the caller's context variables (the call's remote
    budget, its provenance capture) and GDAL environment, opens its own datasets (a dataset handle is
    never used by two threads, :class:`~llmc_mcp.compute.sources.SourceRaster`), and closes them when
    the loop ends.
    """

    name = "local"

    def __init__(self, ahead: int = 0) -> None:
        self.ahead = ahead

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
        if writes and self.ahead > 0 and len(listed) > 1:
            results: Iterator[Result] = _computed_ahead(listed, compute, self.ahead)
        else:
            results = (compute(piece) for piece in listed)
        try:
            for done, (piece, result) in enumerate(zip(listed, results, strict=True), 1):
                yield piece, result
                if progress:
                    report(done, len(listed), what)
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()


def _computed_ahead(pieces: list[Piece], compute: Callable[[Piece], Result], ahead: int) -> Iterator[Result]:
    """``compute`` of each piece, in order, run by one helper thread at most ``ahead`` pieces ahead of
    the one the caller is using.

    A piece holds a slot from the moment the helper starts it until the caller's loop body is done
    with it, so at most ``ahead + 1`` pieces (being computed, queued, or in the caller's hands) are in
    memory. A piece that raises ends the helper; its exception is raised here, at that piece's turn.
    When the caller stops early (an error in its loop body, a closed generator), the helper is told to
    stop and this waits for the piece it is computing (one piece: bounded work), so nothing still reads
    once the caller goes on.
    """
    done: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    slots = threading.Semaphore(ahead + 1)
    stop = threading.Event()
    options = {**HARDENED_CONFIG, **(rasterio.env.getenv() if rasterio.env.hasenv() else {})}

    def work() -> None:
        try:
            with rasterio.Env(**options):
                for piece in pieces:
                    slots.acquire()
                    if stop.is_set():
                        return
                    try:
                        outcome: tuple[bool, Any] = (True, compute(piece))
                    except BaseException as exc:
                        done.put((False, exc))
                        return
                    done.put(outcome)
        finally:
            close_thread_datasets()

    context = contextvars.copy_context()
    helper = threading.Thread(target=context.run, args=(work,), name="llmc-engine-ahead", daemon=True)
    helper.start()
    try:
        for _ in pieces:
            ok, value = done.get()
            if not ok:
                raise value
            yield value
            slots.release()
    finally:
        stop.set()
        slots.release()  # a helper waiting for a slot wakes, sees ``stop`` and ends
        helper.join()


LOCAL = LocalEngine()
"""The engine an operation context has unless it is given another: one piece at a time."""


def local_engine(num_threads: int) -> LocalEngine:
    """The local engine for a process with ``num_threads`` threads: one piece ahead from two threads on."""
    return LocalEngine(ahead=1) if num_threads > 1 else LOCAL
