"""A regional-size DEM (10^8 cells) through fill, D8 and flow accumulation, each as a job, through the server.

What is measured: the three routing steps an agent runs on a regional DEM - ``hydrology.condition``
(method 'fill', priority flood), ``hydrology.flow_direction`` (routing 'd8') and
``hydrology.flow_accumulation`` - on a generated 10,000 x 10,000 float32 DEM (10^8 cells; ``--size``).

How: the DEM is deterministic (EPSG:32633, 10 m cells, tiled 512, DEFLATE + predictor 3), written in row
windows of 512 rows so the generator never holds the whole grid. The terrain drains like a region: a
tilt towards the south, a trunk valley down the middle, chevron tributary valleys joining it, a
mid-scale undulation, +-0.5 m noise and one cell in 500 lowered by 1-5 m (about 200,000 pits at 10^8
cells), so the fill has work to do and nearly everything drains to one outlet on the south edge.

The steps go through the real server in code mode, exactly as an agent would: an in-process server
(``mcp.Client(build_server(Settings(mode="code", reflection="hints", job_memory_mb=M, ...)))``), each
step one ``execute_code`` call doing ``jobs.start(hydrology.<op>, ...)`` (the gate's
``ReflectionRequired`` caught, a justification persisted per hint, the job started again), then
``jobs.wait(job, timeout=50)`` calls until it ends, then ``jobs.result(job)``. ``M`` is the smallest
job worker memory (rounded up to 256 MiB) whose routing capacity (``_grid.routing_capacity``: about
(limit - 768 MiB) / 80 bytes per cell) admits the grid; ``--job-memory-mb`` overrides it.

Reported per step: wall time from the job record (finished - created) and as measured by the script
(from the start call to the wait that saw it end), peak resident memory of the job worker (a
background thread reads ``/proc/<pid>/status`` VmRSS and VmHWM every 0.5 s of every process whose
command line holds ``llmc_mcp.sandbox.worker``; the worker with the highest RSS during the step is
the job's), the output's size on disk, and for the accumulation a sanity figure: its maximum (a large
share of the grid when drainage is regional) and the share of cells with accumulation 1 (ridges).

The workspace (``--workdir``, default a new directory under /tmp) is removed at the end unless
``--keep``; the server's private state (``LLMC_MCP_STATE_DIR``) is a temporary directory beside it.

Run: .venv/bin/python bench/regional.py               (10^8 cells: ~10 GB of job worker memory, minutes)
     .venv/bin/python bench/regional.py --size 2000   (smoke test, seconds)
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
from _common import banner, finish, mib, print_table, quiet_logs
from mcp import Client
from mcp.types import CallToolResult

from tests.mcp_helpers import structured, text

BLOCK = 512
CELL = 10.0
SEED = 20261128
PIT_SHARE = 1 / 500
"""Share of cells lowered by 1-5 m: single-cell pits on top of those the noise makes."""
WAIT_SLICE = 50
"""Seconds each ``jobs.wait`` call waits (under the 60 s ``--exec-timeout`` of one execute_code call)."""
EXEC_TIMEOUT = 60.0
POLL = 0.5
WORKER_MARK = "llmc_mcp.sandbox.worker"
TERMINAL = ("completed", "failed", "cancelled")
JUSTIFICATION = {
    "intent": "Drainage network of a regional DEM: depressions filled, D8 directions, upstream cell counts.",
    "alternatives": [{"method": "breach", "why_not": "A benchmark of the fill route; breaching is measured "
                      "elsewhere (bench/hydrology_routing.py)."}],
    "choice": {"method": "", "rationale": "The standard conditioning and routing for a drainage network.",
               "tradeoffs": "Filling raises pit floors; D8 sends all of a cell's flow to one neighbour."},
    "confidence": "medium",
}  # fmt: skip
STEPS = (
    ("condition fill", "hydrology.condition", '"dem.tif", "filled.tif", method="fill"', "filled.tif"),
    ("flow_direction d8", "hydrology.flow_direction", '"filled.tif", "d8.tif", routing="d8"', "d8.tif"),
    ("flow_accumulation", "hydrology.flow_accumulation", '"d8.tif", "acc.tif"', "acc.tif"),
)


# ---------------------------------------------------------------------------------------------- inputs


def terrain(rows: Any, cols: Any, size: int, rng: Any) -> Any:
    """Elevations (float64, m) of the cells at ``rows`` (column vector) x ``cols`` of a ``size`` grid."""
    import numpy as np

    u = cols / size  # 0 west .. 1 east
    v = rows / size  # 0 north .. 1 south
    side = np.abs(u - 0.5)
    z = 200.0 + 800.0 * (1.0 - v) + 400.0 * side  # regional tilt to the south, trunk valley at u = 0.5
    fade = np.minimum(1.0, 8.0 * side)  # tributary ridges fade out at the trunk
    z = z + 80.0 * fade * np.abs(np.sin(2 * np.pi * (5.0 * v + 4.0 * side)))  # chevron tributaries
    z = z + 15.0 * np.sin(2 * np.pi * 13.0 * u) * np.sin(2 * np.pi * 11.0 * v + 1.0)
    z = z + rng.uniform(-0.5, 0.5, z.shape)
    pits = rng.random(z.shape) < PIT_SHARE
    z[pits] -= rng.uniform(1.0, 5.0, int(pits.sum()))
    return z


def write_dem(path: Path, size: int) -> None:
    """The DEM, tiled 512 and DEFLATE-compressed (predictor 3), written 512 rows at a time."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    profile = {
        "driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32",
        "crs": "EPSG:32633", "transform": from_origin(400_000.0, 5_200_000.0, CELL, CELL),
        "tiled": True, "blockxsize": BLOCK, "blockysize": BLOCK, "compress": "DEFLATE", "predictor": 3,
        "num_threads": 2, "BIGTIFF": "IF_SAFER",
    }  # fmt: skip
    cols = np.arange(size, dtype=np.float64)
    with rasterio.Env(GDAL_NUM_THREADS="2"), rasterio.open(path, "w", **profile) as out:
        for row in range(0, size, BLOCK):
            h = min(BLOCK, size - row)
            rows = np.arange(row, row + h, dtype=np.float64)[:, None]
            rng = np.random.default_rng([SEED, row])
            out.write(terrain(rows, cols, size, rng).astype(np.float32), 1, window=Window(0, row, size, h))


def accumulation_facts(path: Path) -> dict[str, Any]:
    """Maximum, count of cells equal to 1, and valid cells of the accumulation, read block by block."""
    import numpy as np
    import rasterio

    top, ones, valid = -math.inf, 0, 0
    with rasterio.open(path) as ds:
        for _, window in ds.block_windows(1):
            masked = ds.read(1, window=window, masked=True)
            data = masked.compressed()
            if data.size:
                top = max(top, float(data.max()))
                ones += int(np.count_nonzero(data == 1))
                valid += int(data.size)
        dtype = ds.dtypes[0]
    return {"max": top, "ones": ones, "valid": valid, "dtype": dtype}


def memory_for(cells: int) -> int:
    """The smallest job worker memory (MiB, a multiple of 256) whose routing capacity holds ``cells``."""
    from llmc_mcp.operations.hydrology._grid import routing_capacity

    mb = 256 * math.ceil((cells * 80 + 768 * 2**20) / 2**20 / 256)
    while routing_capacity(mb * 2**20) < cells:
        mb += 256
    while mb > 256 and routing_capacity((mb - 256) * 2**20) >= cells:
        mb -= 256
    return mb


# --------------------------------------------------------------------------------------------- memory


class WorkerMemory:
    """Every 0.5 s, VmRSS and VmHWM (KiB) of the processes whose command line holds the worker module."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.peak_rss: dict[int, int] = {}
        """Highest VmRSS seen per pid since :meth:`reset`."""
        self.hwm: dict[int, int] = {}
        """Last VmHWM seen per pid (the process's own peak since it started)."""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        with self._lock:
            self.peak_rss = {}

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        with self._lock:
            return dict(self.peak_rss), dict(self.hwm)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(POLL)

    def sample(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if WORKER_MARK.encode() not in handle.read():
                        continue
                fields = {}
                with open(f"/proc/{entry}/status") as handle:
                    for line in handle:
                        if line.startswith(("VmRSS:", "VmHWM:")):
                            fields[line[:5]] = int(line.split()[1])
            except OSError:
                continue
            pid = int(entry)
            with self._lock:
                if "VmRSS" in fields:
                    self.peak_rss[pid] = max(self.peak_rss.get(pid, 0), fields["VmRSS"])
                if "VmHWM" in fields:
                    self.hwm[pid] = fields["VmHWM"]


# ---------------------------------------------------------------------------------------------- steps


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "n/a"


async def call(client: Client, code: str, what: str) -> Any:
    result: CallToolResult = await client.call_tool("execute_code", {"code": code})
    data = structured(result)
    if result.is_error or not data.get("ok", True):
        raise SystemExit(f"{what} failed:\n{data.get('error') or text(result)[:3000]}")
    return data.get("result")


def start_code(qualname: str, args: str) -> str:
    """Agent code starting a job of ``qualname``: the gate's question answered once, then started again."""
    start = f"jobs.start({qualname}, {args})"
    return (
        f"JUSTIFICATION = {JUSTIFICATION!r}\n"
        "asked = []\n"
        "try:\n"
        f"    job = {start}\n"
        "except reflection.ReflectionRequired as e:\n"
        "    asked = e.hints\n"
        "    for hint in asked:\n"
        "        answer = dict(JUSTIFICATION, choice=dict(JUSTIFICATION['choice']))\n"
        "        answer['choice']['method'] = str(list(hint['prompt_args'].values())[0])\n"
        "        reflection.persist(hint['hash'], hint['domain'], answer)\n"
        f"    job = {start}\n"
        "{'job': job, 'asked': [[h['domain'], h['prompt_args']] for h in asked]}"
    )


async def run_step(client: Client, ws: Path, memory: WorkerMemory, step: tuple[str, str, str, str]) -> dict:
    label, qualname, args, output = step
    memory.reset()
    t0 = time.perf_counter()
    started = await call(client, start_code(qualname, args), f"{label}: jobs.start")
    state = started["job"]
    waits = 0
    while state.get("status") not in TERMINAL:
        state = await call(client, f"jobs.wait(job, timeout={WAIT_SLICE})", f"{label}: jobs.wait")
        waits += 1
    wall = time.perf_counter() - t0
    memory.sample()
    peaks, hwm = memory.snapshot()
    if state["status"] != "completed":
        raise SystemExit(f"{label}: job {state['status']}: {state.get('error') or state.get('message')}")
    result = await call(client, "jobs.result(job)", f"{label}: jobs.result")
    pid = max(peaks, key=peaks.__getitem__) if peaks else None
    return {
        "label": label,
        "asked": started["asked"],
        "record_s": (state["finished"] or math.nan) - state["created"],
        "wall_s": wall,
        "waits": waits,
        "pid": pid,
        "peak_rss_kib": peaks.get(pid, 0) if pid else 0,
        "hwm_kib": hwm.get(pid, 0) if pid else 0,
        "bytes": (ws / output).stat().st_size,
        "result": result,
    }


def result_note(result: Any) -> str:
    """The few figures of an operation's result worth a column (counts, extremes)."""
    if not isinstance(result, dict):
        return "-"
    keys = ("raised_cells", "lowered_cells", "sink_cells", "pits", "outlets", "max_value", "max")
    found = {k: result[k] for k in keys if k in result}
    for k, v in (result.get("stats") or {}).items() if isinstance(result.get("stats"), dict) else ():
        if k in keys:
            found[k] = v
    return ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in found.items()) or "-"


# ----------------------------------------------------------------------------------------------- main


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="side of the square DEM, cells")
    parser.add_argument("--workdir", type=Path, help="workspace (default: a new directory under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the workspace and its rasters")
    parser.add_argument("--job-memory-mb", type=int, help="MiB for the job worker (default: least that fits)")
    options = parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    size = options.size
    cells = size * size
    job_mb = options.job_memory_mb or memory_for(cells)
    what = f"fill, D8 and accumulation of a {size:,} x {size:,} DEM, each a job, code mode"
    start = banner("regional.py", what)
    load_start = loadavg()
    print(f"# load average at start {load_start}; {cells:,} cells; --job-memory-mb {job_mb}")
    quiet_logs()

    from llmc_mcp.config import Settings
    from llmc_mcp.operations.hydrology._grid import routing_capacity
    from llmc_mcp.server.app import build_server

    made = options.workdir is None
    ws = Path(tempfile.mkdtemp(prefix="llmc-bench-regional-")) if made else options.workdir
    ws.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="llmc-bench-regional-state-"))
    os.environ["LLMC_MCP_STATE_DIR"] = str(state)
    steps: list[dict[str, Any]] = []
    try:
        t = time.perf_counter()
        write_dem(ws / "dem.tif", size)
        gen_s = time.perf_counter() - t
        dem_bytes = (ws / "dem.tif").stat().st_size
        print(f"# DEM written in {gen_s:.1f} s, {mib(dem_bytes)} MiB: {ws / 'dem.tif'}")
        settings = Settings(mode="code", workspace=ws, reflection="hints", job_memory_mb=job_mb,
                            exec_timeout=EXEC_TIMEOUT)  # fmt: skip
        with WorkerMemory() as memory:
            async with Client(build_server(settings)) as client:
                for step in STEPS:
                    steps.append(await run_step(client, ws, memory, step))
                    s = steps[-1]
                    rss = s["peak_rss_kib"] / 1024
                    print(f"# {s['label']}: {s['wall_s']:.1f} s, peak RSS {rss:.0f} MiB, load {loadavg()}",
                          flush=True)  # fmt: skip
        t = time.perf_counter()
        acc = accumulation_facts(ws / "acc.tif")
        acc_s = time.perf_counter() - t
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if not options.keep:
            shutil.rmtree(ws if made else ws / "dem.tif", ignore_errors=True)
            if not made:
                for name in ("filled.tif", "d8.tif", "acc.tif"):
                    (ws / name).unlink(missing_ok=True)
    load_end = loadavg()

    rows = [["generate DEM (this script, rows of 512)", "-", f"{gen_s:.1f}", "-", "-", mib(dem_bytes), "-"]]
    for s in steps:
        rows.append([
            s["label"], f"{s['record_s']:.1f}", f"{s['wall_s']:.1f}", f"{s['peak_rss_kib'] / 1024:.0f}",
            f"{s['hwm_kib'] / 1024:.0f}", mib(s["bytes"]), result_note(s["result"]),
        ])  # fmt: skip
    total_record = sum(s["record_s"] for s in steps)
    total_wall = sum(s["wall_s"] for s in steps)
    rows.append(["three steps", f"{total_record:.1f}", f"{total_wall:.1f}",
                 f"{max(s['peak_rss_kib'] for s in steps) / 1024:.0f}", "-", "-", "-"])  # fmt: skip
    print_table(
        ["step", "job record s", "script wall s", "worker peak RSS MiB", "worker VmHWM (since start) MiB",
         "output MiB", "result"],
        rows,
        f"{size:,} x {size:,} float32 DEM ({cells:,} cells, EPSG:32633, {CELL:g} m), code mode, each step a "
        f"job; --job-memory-mb {job_mb} (routing capacity {routing_capacity(job_mb * 2**20):,} cells)",
    )  # fmt: skip
    share = acc["ones"] / acc["valid"] if acc["valid"] else math.nan
    print(
        f"\nAccumulation ({acc['dtype']}, read back in {acc_s:.1f} s): max {acc['max']:,.0f} cells = "
        f"{acc['max'] / cells:.1%} of the grid; cells with accumulation 1 (ridges): {acc['ones']:,} = "
        f"{share:.1%} of {acc['valid']:,} valid."
    )
    asked = [f"{s['label']}: {', '.join(d for d, _ in s['asked']) or 'none'}" for s in steps]
    print(f"Gate questions answered (domains): {'; '.join(asked)}.")
    print(f"jobs.wait calls ({WAIT_SLICE} s each at most): "
          + ", ".join(f"{s['label']} {s['waits']}" for s in steps)
          + f". Job worker pids: {', '.join(str(s['pid']) for s in steps)}.")  # fmt: skip
    print(f"Load average: start {load_start}, end {load_end}.")
    finish(
        start,
        f"{cells:,} cells: fill {steps[0]['record_s']:.1f} s, D8 {steps[1]['record_s']:.1f} s, accumulation "
        f"{steps[2]['record_s']:.1f} s (job records; {total_record:.1f} s in all), worker peak RSS "
        f"{max(s['peak_rss_kib'] for s in steps) / 1024:.0f} MiB with --job-memory-mb {job_mb}; max "
        f"accumulation {acc['max'] / cells:.1%} of the grid",
    )


if __name__ == "__main__":
    anyio.run(main)
