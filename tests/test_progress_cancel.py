"""Progress notifications and cancellation through real MCP clients, in both faces and both eras.

The rasters are built here on paper: a W x H grid that raster.calc writes in windows of 512 rows by
2048 columns (``calc.WINDOW_ROWS``/``WINDOW_COLS``), so a 3000 x 3000 grid is 6 x 2 = 12 windows and
every fraction a client sees is a multiple of 1/12.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from rasterio.windows import Window

from llmc_mcp.compute.progress import Tracker
from llmc_mcp.config import Settings
from llmc_mcp.sandbox.relay import ProgressRelay
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import stdio_params, structured, text

pytestmark = pytest.mark.anyio

ERAS = ["auto", "legacy"]
WINDOWS = 12
"""raster.calc's windows over a 3000 x 3000 grid: ceil(3000 / 512) * ceil(3000 / 2048)."""
CALC = {"expression": "a * 2", "inputs": [{"name": "a", "path": "big.tif"}], "dst": "double.tif"}
CALC_CODE = "raster.calc('a * 2', [{{'name': 'a', 'path': 'big.tif'}}], '{dst}')['valid_count']"


def constant_raster(path: Path, size: int, value: float = 2.0) -> Path:
    """A size x size float32 grid of one value in UTM 18N, written by blocks (it compresses to little)."""
    profile = {
        "driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32",
        "crs": "EPSG:32618", "transform": Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0),
        "tiled": True, "blockxsize": 512, "blockysize": 512, "compress": "deflate",
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        for row in range(0, size, 512):
            rows = min(512, size - row)
            ds.write(np.full((1, rows, size), value, dtype="float32"), window=Window(0, row, size, rows))
    return path


class Progress:
    """What a client's progress callback received, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))

    @property
    def values(self) -> list[float]:
        return [value for value, _total, _message in self.seen]


def settings(mode: str, workspace: Path) -> Settings:
    return Settings(mode=mode, workspace=workspace, exec_timeout=60, memory_mb=2048)  # type: ignore[arg-type]


LEDGER = Path(".llmc", "outputs")
"""The server's bookkeeping of writes in flight (its journal, its lock), created by the first write."""


def snapshot(root: Path) -> set[str]:
    """Every file and folder of the workspace but the ledger's bookkeeping, by relative path."""
    return {
        str(p.relative_to(root)) for p in root.rglob("*") if not p.relative_to(root).is_relative_to(LEDGER)
    }


def assert_windowed_fractions(values: list[float], end: float) -> None:
    """Strictly increasing multiples of 1/12, ending at ``end``."""
    assert values == sorted(set(values)), values
    assert all(abs(v * WINDOWS - round(v * WINDOWS)) < 1e-9 for v in values), values
    assert values[-1] == end
    assert len(values) >= 2  # the first window is always sent; the last value always follows


@pytest.mark.parametrize("era", ERAS)
async def test_classic_calc_reports_window_fractions_ending_at_one(workspace_dir: Path, era: str) -> None:
    """Guards against progress that is invented (not the windows' count), out of order, or never
    reaches its end: a classic tool call's values are fractions of 12 windows with total 1."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    async with Client(build_server(settings("classic", workspace_dir)), mode=era) as client:
        result = await client.call_tool("raster_calc", CALC, progress_callback=progress)
    assert not result.is_error, text(result)
    assert_windowed_fractions(progress.values, 1.0)
    assert {total for _v, total, _m in progress.seen} == {1.0}
    assert progress.seen[-1][2] == f"raster.calc: {WINDOWS} of {WINDOWS}"


@pytest.mark.parametrize("era", ERAS)
async def test_a_conversion_reports_gdals_own_progress_ending_at_one(workspace_dir: Path, era: str) -> None:
    """Guards against a conversion (one GDAL CreateCopy) that runs silent however long it takes: its
    values are GDAL's completed fractions, increasing, ending at 1 with total 1."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    args = {"src": "big.tif", "dst": "big_zstd.tif", "compress": "ZSTD"}
    async with Client(build_server(settings("classic", workspace_dir)), mode=era) as client:
        result = await client.call_tool("raster_convert", args, progress_callback=progress)
    assert not result.is_error, text(result)
    assert progress.values == sorted(set(progress.values)) and progress.values[-1] == 1.0, progress.values
    assert len(progress.values) >= 2 and {total for _v, total, _m in progress.seen} == {1.0}


@pytest.mark.parametrize("era", ERAS)
async def test_progress_crosses_the_stdio_transport(workspace_dir: Path, era: str) -> None:
    """Guards against progress that only the in-process client sees: over the real ``llmc-mcp``
    command the values travel as ``notifications/progress`` against the call's token."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    async with Client(stdio_params(workspace_dir, "--mode", "classic"), mode=era) as client:
        result = await client.call_tool("raster_calc", CALC, progress_callback=progress)
    assert not result.is_error, text(result)
    assert_windowed_fractions(progress.values, 1.0)


@pytest.mark.parametrize("era", ERAS)
async def test_execute_code_relays_one_operations_progress_ending_at_one(
    workspace_dir: Path, era: str
) -> None:
    """Guards against execute_code swallowing the progress of the operations its code runs."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    async with Client(build_server(settings("code", workspace_dir)), mode=era) as client:
        code = CALC_CODE.format(dst="double.tif")
        result = await client.call_tool("execute_code", {"code": code}, progress_callback=progress)
    assert structured(result)["ok"], text(result)
    assert_windowed_fractions(progress.values, 1.0)
    assert {total for _v, total, _m in progress.seen} == {None}


@pytest.mark.parametrize("era", ERAS)
async def test_execute_code_with_two_operations_counts_on_past_one(workspace_dir: Path, era: str) -> None:
    """Guards against the second operation of one call starting the values over at zero, which a
    client must not be sent: the value is operations finished plus the current one's fraction."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    code = CALC_CODE.format(dst="one.tif") + "\n" + CALC_CODE.format(dst="two.tif")
    async with Client(build_server(settings("code", workspace_dir)), mode=era) as client:
        result = await client.call_tool("execute_code", {"code": code}, progress_callback=progress)
    assert structured(result)["ok"], text(result)
    assert_windowed_fractions(progress.values, 2.0)
    assert progress.seen[-1][2] == f"raster.calc: {WINDOWS} of {WINDOWS}"


REPROJECT_JUSTIFIED = """
def reproject():
    return raster.reproject("big.tif", "big_4326.tif", dst_crs="EPSG:4326", resampling="nearest")
try:
    reproject()
except reflection.ReflectionRequired as missing:
    for hint in missing.hints:
        reflection.persist(hint["hash"], hint["domain"], {
            "intent": "Geographic coordinates for a web viewer that expects latitude and longitude.",
            "alternatives": [{"method": "keep UTM", "why_not": "The viewer needs lat/lon."}],
            "choice": {"method": list(hint["prompt_args"].values())[0],
                       "rationale": "It matches the viewer.", "tradeoffs": "Every pixel is resampled."},
            "confidence": "medium"})
reproject()["width"]
"""


@pytest.mark.parametrize("era", ERAS)
async def test_a_reprojection_reports_its_warped_windows(workspace_dir: Path, era: str) -> None:
    """Guards against the warp loop running silent: after the gate, raster.reproject's windows are
    reported, ending at 1.0 (the refused first attempt wrote nothing and reported nothing)."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    async with Client(build_server(settings("code", workspace_dir)), mode=era) as client:
        result = await client.call_tool(
            "execute_code", {"code": REPROJECT_JUSTIFIED}, progress_callback=progress
        )
    assert structured(result)["ok"], text(result)
    assert progress.values == sorted(set(progress.values)) and progress.values[-1] == 1.0
    assert len(progress.values) >= 2
    assert {message.split(":")[0] for _v, _t, message in progress.seen} == {"raster.reproject"}


async def test_statistics_and_terrain_report_their_own_loops(workspace_dir: Path) -> None:
    """Guards against long operations other than calc running silent: raster.stats and terrain.slope
    name themselves in the messages, and the call ends on a whole number of finished loops."""
    constant_raster(workspace_dir / "big.tif", 3000)
    progress = Progress()
    code = "raster.stats('big.tif')\nterrain.slope('big.tif', 'slope.tif')['valid_cells']"
    async with Client(build_server(settings("code", workspace_dir)), mode="legacy") as client:
        result = await client.call_tool("execute_code", {"code": code}, progress_callback=progress)
    assert structured(result)["ok"], text(result)
    operations = [message.split(":")[0] for _v, _t, message in progress.seen if message]
    assert operations[0] == "raster.stats" and operations[-1] == "terrain.slope"
    assert operations == sorted(operations)  # every stats value before every slope value
    assert progress.values == sorted(set(progress.values))
    assert progress.values[-1] == int(progress.values[-1]) >= 2


def test_tracker_sends_at_most_five_a_second_and_always_the_last() -> None:
    """Guards against a progress message per window (thousands on a large raster, each a write to
    the client) and against the rate limit eating the final value."""
    sent: list[float] = []
    now = [0.0]
    tracker = Tracker(
        lambda value, _total, _message: sent.append(value), one_operation=True, clock=lambda: now[0]
    )
    for window in range(1, 101):  # a window every 1/64 s (exact in binary)
        now[0] = window / 64
        tracker.report(window, 100, "raster.calc")
    tracker.close()
    # 0.2 s is 12.8 ticks: windows 1, 14, 27, ... 92 go out as they finish, then the held-back 100.
    assert sent == [w / 100 for w in (1, 14, 27, 40, 53, 66, 79, 92, 100)]


async def test_relay_drops_values_a_subverted_worker_should_not_send() -> None:
    """Guards against a worker making the server send a client values that go backwards, pass their
    total, are not numbers, or come faster than the worker's own limit allows."""
    relayed: list[float] = []

    async def handler(progress: float, _total: float | None, _message: str) -> None:
        relayed.append(progress)

    relay = ProgressRelay(handler, clock=lambda: 0.0)
    for params in (
        {"progress": 0.5, "total": 1.0},
        {"progress": 0.25, "total": 1.0},  # backwards
        {"progress": 2.0, "total": 1.0},  # past its total
        {"progress": "0.9", "total": 1.0},  # not a number
        {"progress": float("nan")},
        "not an object",
        *({"progress": 0.5 + i / 100} for i in range(1, 40)),  # a flood within one second
    ):
        await relay.relay(params)
    assert relayed == [0.5, *(0.5 + i / 100 for i in range(1, 20))]


def worker_gone(pid: int) -> bool:
    """The process is gone (or a zombie nobody will run again)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def cancel_at_first_progress(client: Client, tool: str, args: dict[str, Any]) -> None:
    """Call ``tool`` and cancel the request when its first progress notification arrives."""
    with anyio.CancelScope() as scope:

        async def cancel(_progress: float, _total: float | None, _message: str | None) -> None:
            scope.cancel()

        await client.call_tool(tool, args, progress_callback=cancel)
        pytest.fail("the call finished before it could be cancelled")


WARM_UP = {"classic": {"path": "big.tif"}, "code": {"code": "1"}}
CANCEL_CASES = [
    ("classic", "raster_calc", {**CALC, "dst": "out/big2.tif"}),
    ("code", "execute_code", {"code": CALC_CODE.format(dst="out/big2.tif")}),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(("mode", "tool", "args"), CANCEL_CASES)
async def test_a_cancelled_call_stops_its_worker_and_leaves_nothing(
    workspace_dir: Path, era: str, mode: str, tool: str, args: dict[str, Any]
) -> None:
    """Guards against a cancelled call that runs on to the end (and writes), or that leaves its
    temporary file, the output's folder or a provenance record behind, or a session that no longer
    serves. An 8000 x 8000 calc (64 windows) is cancelled after its first window."""
    constant_raster(workspace_dir / "big.tif", 8000)
    server = build_server(settings(mode, workspace_dir))
    async with Client(server, mode=era) as client:
        await client.call_tool("raster_info" if mode == "classic" else tool, WARM_UP[mode])
        (pid,) = server.pool.worker_pids().values()
        before = snapshot(workspace_dir)
        await cancel_at_first_progress(client, tool, args)
        with anyio.fail_after(1.0):  # the bound: the work stops within a second
            while not worker_gone(pid):
                await anyio.sleep(0.01)
        # The next call of the session waits for the cancelled one's cleanup (the session's lock).
        if mode == "classic":
            served = structured(await client.call_tool("raster_info", {"path": "big.tif"}))
            assert served["width"] == 8000
        else:
            served = structured(
                await client.call_tool("execute_code", {"code": "raster.info('big.tif')['width']"})
            )
            assert served["result"] == 8000
        (fresh,) = server.pool.worker_pids().values()
    assert fresh != pid
    assert snapshot(workspace_dir) == before
    assert not list((workspace_dir / LEDGER).rglob("*.json"))  # no write left in flight
    assert not os.path.exists(workspace_dir / "out" / "big2.tif.provenance.json")


def workers_of(workspace: Path) -> set[int]:
    """Live worker processes serving ``workspace`` (their command line carries its path)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if (
            "llmc_mcp.sandbox.worker" in command
            and str(workspace) in command
            and not worker_gone(int(entry.name))
        ):
            found.add(int(entry.name))
    return found


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_cancelled_over_stdio_stops_its_worker_and_leaves_nothing(
    workspace_dir: Path, era: str
) -> None:
    """Guards against a cancellation that only the in-process transport honours: over the real
    ``llmc-mcp`` command, the cancelled call's worker is gone within a second and nothing is left."""
    constant_raster(workspace_dir / "big.tif", 8000)
    async with Client(stdio_params(workspace_dir, "--mode", "classic"), mode=era) as client:
        await client.call_tool("raster_info", {"path": "big.tif"})
        before, workers = snapshot(workspace_dir), workers_of(workspace_dir)
        await cancel_at_first_progress(client, "raster_calc", {**CALC, "dst": "out/big2.tif"})
        with anyio.fail_after(1.0):  # one worker (the busy one; the other is the warm spare) is gone
            while len(workers - workers_of(workspace_dir)) != 1:
                await anyio.sleep(0.01)
        served = structured(await client.call_tool("raster_info", {"path": "big.tif"}))
        assert served["width"] == 8000
    assert snapshot(workspace_dir) == before
    assert not list((workspace_dir / LEDGER).rglob("*.json"))
