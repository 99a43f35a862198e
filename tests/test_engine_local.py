"""The local engine one piece ahead: the same answers as one piece at a time, from a helper thread that
never shares a dataset handle, stays within its bound, and is gone when the loop ends.

A worker with two threads or more computes the next piece while the operation writes the current one
(:func:`~llmc_mcp.compute.engine.local_engine`); the answers must not depend on it.
"""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.env

from llmc_mcp.compute.engine import LOCAL, local_engine
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.gdal.environment import HARDENED_CONFIG, gdal_env
from llmc_mcp.operations import OperationContext
from llmc_mcp.workspace import Workspace
from tests.engines.same import run_on_both
from tests.rasters import write

AHEAD = local_engine(2)


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "llmc-engine-ahead"]


@pytest.fixture
def sequential_ctx(workspace: Workspace) -> OperationContext:
    return OperationContext(workspace, num_threads=2, engine=LOCAL)


@pytest.fixture
def ahead_ctx(workspace: Workspace) -> OperationContext:
    return OperationContext(workspace, num_threads=2, engine=AHEAD)


@pytest.fixture
def dem(workspace_dir: Path) -> str:
    """Larger than one window (512 x 1024) each way, with a nodata hole across a window edge and a
    declared scale."""
    rng = np.random.default_rng(11)
    rows, cols = np.mgrid[0:1100, 0:1300].astype("float32")
    z = (rows * 0.4 + np.cos(cols / 50) * 20 + rng.normal(0, 0.5, rows.shape)).astype("float32")
    z[505:520, 1015:1030] = -9999
    write(workspace_dir / "dem.tif", z, nodata=-9999, scales=(0.5,), block=256)
    return "dem.tif"


def test_two_threads_get_the_engine_one_piece_ahead_and_one_thread_the_plain_one():
    """Guards against a one-thread worker paying for a helper thread it has no core for."""
    assert local_engine(1) is LOCAL and LOCAL.ahead == 0
    assert local_engine(2).ahead == 1 and local_engine(8).ahead == 1


def test_results_come_back_in_the_pieces_order():
    """Guards against a helper's results taken in the order they finished instead of the pieces'."""
    pieces = list(range(200))
    assert [(p, r) for p, r in AHEAD.map(pieces, lambda p: p * p, writes=True)] == [
        (p, p * p) for p in pieces
    ]


def test_at_most_one_piece_is_computed_ahead_of_the_caller():
    """Guards against a helper that reads the whole raster ahead: memory must stay bounded by pieces."""
    lock = threading.Lock()
    taken = 0
    lead: list[int] = []

    def compute(piece: int) -> int:
        with lock:
            lead.append(piece - taken)
        return piece

    for _, _result in AHEAD.map(range(100), compute, writes=True):
        with lock:
            taken += 1
    # Starting piece p while the caller's loop body has finished `taken` results: the caller still
    # holds piece `taken`, so p - taken is how many pieces run ahead of it.
    assert max(lead) <= AHEAD.ahead


def test_pieces_of_a_writing_loop_run_in_a_helper_thread_and_the_rest_in_the_callers():
    """Guards against the engine quietly running every piece in the caller's thread (no overlap), and
    against a loop that only folds counts paying for a thread (and new dataset handles) for nothing."""
    caller = threading.get_ident()
    assert {r for _, r in LOCAL.map(range(5), lambda _: threading.get_ident())} == {caller}
    assert caller not in {r for _, r in AHEAD.map(range(5), lambda _: threading.get_ident(), writes=True)}
    assert {r for _, r in AHEAD.map(range(5), lambda _: threading.get_ident())} == {caller}


def test_a_failing_piece_raises_its_own_error_at_its_turn_and_nothing_after_it_runs():
    """Guards against an error lost in the helper thread, raised out of order, or followed by more work."""
    computed: list[int] = []

    def compute(piece: int) -> int:
        computed.append(piece)
        if piece == 3:
            raise ValueError("piece 3 is bad")
        return piece

    received = []
    with pytest.raises(ValueError, match="piece 3 is bad"):
        for _, result in AHEAD.map(range(10), compute, writes=True):
            received.append(result)
    assert received == [0, 1, 2]
    assert computed == [0, 1, 2, 3]
    assert not _helpers()


def test_a_caller_that_stops_early_leaves_no_helper_running():
    """Guards against a helper thread left computing (and reading files) after the operation failed."""
    computed: list[int] = []

    def compute(piece: int) -> int:
        computed.append(piece)
        return piece

    results = AHEAD.map(range(100), compute, writes=True)
    for _, result in results:
        if result == 4:
            break
    results.close()
    assert not _helpers()
    assert len(computed) <= 5 + AHEAD.ahead


def test_the_helper_reads_through_its_own_handle_and_closes_it(ahead_ctx: OperationContext, dem: str):
    """Guards against two threads using the caller's dataset handle at once (GDAL handles are not
    thread-safe) and against a helper's handle kept open after the loop (a deleted file kept on disk)."""
    path = ahead_ctx.workspace.root / dem
    with gdal_env(ahead_ctx), rasterio.open(path) as caller_ds:
        source = SourceRaster.of(ahead_ctx, caller_ds)
        assert source.dataset() is caller_ds
        seen = [ds for _, ds in AHEAD.map(range(3), lambda _: source.dataset(), writes=True)]
        assert all(ds is not caller_ds for ds in seen)
        assert len({id(ds) for ds in seen}) == 1
        assert seen[0].closed
        assert not caller_ds.closed


def test_the_helper_runs_in_the_callers_context_and_gdal_environment(ahead_ctx: OperationContext):
    """Guards against a helper thread that loses the call's context (its remote budget, provenance
    capture) or GDAL's hardened options and thread budget, which are set per thread."""
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("this call")

    def compute(_: int) -> tuple[str, dict[str, object]]:
        return marker.get(), rasterio.env.getenv()

    with gdal_env(ahead_ctx):
        (_, (value, options)), *_ = list(AHEAD.map(range(2), compute, writes=True))
    assert value == "this call"
    assert options["GDAL_NUM_THREADS"] == "2"
    assert all(options[name] == setting for name, setting in HARDENED_CONFIG.items())


def test_slope_ahead_equals_slope_one_piece_at_a_time(
    sequential_ctx: OperationContext, ahead_ctx: OperationContext, dem: str
):
    """Guards against a halo, a window offset or a nodata count changed by computing ahead."""
    left, _ = run_on_both(sequential_ctx, ahead_ctx, "terrain.slope", dem=dem)
    assert left.nodata_cells > 0


def test_calc_and_stats_ahead_equal_one_piece_at_a_time(
    sequential_ctx: OperationContext, ahead_ctx: OperationContext, dem: str
):
    """Guards against results folded out of order (floating sums, percentiles) when pieces run ahead."""
    inputs = [{"name": "z", "path": dem}]
    run_on_both(sequential_ctx, ahead_ctx, "raster.calc", expression="z * 2 + 1", inputs=inputs)
    left, _ = run_on_both(
        sequential_ctx, ahead_ctx, "raster.stats", dst=None, path=dem, percentiles=[5, 50, 95]
    )
    assert left.bands[0].nodata_count == 15 * 15


def test_zonal_and_reclassify_ahead_equal_one_piece_at_a_time(
    sequential_ctx: OperationContext, ahead_ctx: OperationContext, dem: str
):
    """Guards against zone partials or class counts combined out of order when pieces run ahead."""
    write(
        sequential_ctx.workspace.root / "zones.tif",
        (np.arange(1100 * 1300) % 7).reshape(1100, 1300).astype("uint8"),
    )
    run_on_both(sequential_ctx, ahead_ctx, "raster.zonal_stats", dst=None, path=dem, zones="zones.tif",
                stats=["mean", "count", "median"])  # fmt: skip
    rules = [{"min": None, "max": 200, "to": 1}, {"min": 200, "max": None, "to": 2}]
    run_on_both(sequential_ctx, ahead_ctx, "raster.reclassify", src=dem, rules=rules)
