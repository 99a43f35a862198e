"""How the Dask engine sends pieces: runs of neighbouring pieces as one task, results in order."""

from __future__ import annotations

import pytest
from distributed import get_task_stream

from llmc_mcp.compute.dask_engine import MAX_RUN, DaskEngine

FAILING = 13


def _square(piece: int) -> int:
    return piece * piece


def _square_unless_failing(piece: int) -> int:
    if piece == FAILING:
        raise ValueError(f"piece {piece} refused")
    return piece * piece


def test_neighbouring_pieces_run_as_one_task_and_come_back_in_order(dask_engine: DaskEngine) -> None:
    """Guards against one task per piece, whose few milliseconds of scheduling and transfer each
    cost a slope a tenth of its time, and against a run's results yielded out of order."""
    pieces = list(range(8 * MAX_RUN))
    with get_task_stream(client=dask_engine.client()) as stream:
        results = list(dask_engine.map(pieces, _square))
    assert results == [(p, p * p) for p in pieces]
    tasks = [t for t in stream.data if str(t["key"]).startswith("run_pieces")]
    assert len(tasks) == len(pieces) // MAX_RUN


def test_a_failing_piece_raises_its_error_after_the_pieces_before_it(dask_engine: DaskEngine) -> None:
    """Guards against a run that fails losing the results of its pieces before the failing one, or
    the error raised as another type than the piece's own."""
    yielded = []
    with pytest.raises(ValueError, match=f"piece {FAILING} refused"):
        for piece, _ in dask_engine.map(range(8 * MAX_RUN), _square_unless_failing):
            yielded.append(piece)
    assert yielded == list(range(FAILING))
