"""The seam every operation's pixel work goes through: an :class:`Engine` maps a function over the
pieces of a grid (windows, row bands, (window, shape) reads) and hands the results back in order.

Operations cut their work into pieces and say what each piece computes; the engine decides where and
when that runs. The operation's loop reads::

    for window, values in ctx.engine.map(windows, compute, what="slope"):
        out.write(values, 1, window=window)

:class:`LocalEngine`, the one engine today, runs ``compute`` on each piece in this process, in order,
one piece in memory at a time, and reports progress (:mod:`~llmc_mcp.compute.progress`) after the
loop body is done with each piece. The results come back in the pieces' order, so a
caller that writes windows, or folds statistics whose order matters (first-pass then second-pass
accumulators, the first source winning in a mosaic), gets the same answer from any engine.

A chunked or distributed engine (Dask, issue 24) stands beside it behind the same :meth:`Engine.map`:
it may run ``compute`` for many pieces at once, elsewhere, and still yields in order. What it can
take is what ``compute`` allows: a function that is picklable and a pure function of its piece,
reading its inputs by workspace path rather than through a dataset opened by the caller, and
returning its result rather than adding it to the caller's counters. The local engine takes any
callable; DD-MCP-081 records which operations' pieces are pure already and what the rest need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from llmc_mcp.compute.progress import report

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
    ) -> Iterator[tuple[Piece, Result]]:
        """``what`` names the loop in progress messages; ``progress=False`` for a loop that is not
        the operation's main work (a scan before the write), whose counts are not reported."""
        ...


class LocalEngine:
    """The windowed engine of this process: one piece at a time, in order, progress after each."""

    name = "local"

    def map(
        self,
        pieces: Iterable[Piece],
        compute: Callable[[Piece], Result],
        *,
        what: str | None = None,
        progress: bool = True,
    ) -> Iterator[tuple[Piece, Result]]:
        listed = list(pieces)
        for done, piece in enumerate(listed, 1):
            yield piece, compute(piece)
            if progress:
                report(done, len(listed), what)


LOCAL = LocalEngine()
"""The engine an operation context has unless it is given another."""
