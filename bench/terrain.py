"""``terrain.slope`` on a 4096 x 4096 DEM against its kernel called directly, gdaldem, and xarray-spatial.

Input: a 4096 x 4096 float32 DEM (EPSG:32618, 10 m cells, tiled 512, DEFLATE + predictor 3) of
smooth hills, z = 500 + 300 sin(c / 700) cos(r / 900) + 0.05 c (c, r: column and row), whose
slope is known in closed form. Measured, three runs each, alternating:

- llmc: ``get_operation("terrain.slope")`` run in-process (num_threads=2, the local engine one piece
  ahead, as in a worker): windows of 512 x 1024 with a one-cell halo, units reconciled, float32
  output written atomically and read back;
- the kernel called directly: the same Horn gradient (numexpr, ``horn_gradient``) over the same windows
  of the array in memory, timed without reading or writing (so the rest of llmc's time is I/O,
  compression, unit checks and the read-back);
- ``gdaldem slope`` (Debian gdal-bin, GDAL 3.6.2), same creation options (when it is installed);
- ``xrspatial.slope`` (xarray-spatial, numba), run in another interpreter when ``XRSPATIAL_PYTHON``
  names one that has it (xarray-spatial 0.5.3 is the newest for Python 3.11 and is not a dependency
  of the project): its first call (numba compiling) and its best warm call, pixels in memory.

Agreement: max |difference| from llmc over interior cells (the outer ring is nodata in all), and each
output's max error against the closed-form slope. Takes about a minute on 2 cores.

Run: .venv/bin/python bench/terrain.py      (gdaldem: apt-get install -y gdal-bin;
     xarray-spatial: XRSPATIAL_PYTHON=/path/to/python-with-xarray-spatial .venv/bin/python bench/terrain.py)
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZE = 4096
CELL = 10.0
RUNS = 3
CREATION = {"TILED": "YES", "BLOCKXSIZE": "512", "BLOCKYSIZE": "512", "COMPRESS": "DEFLATE", "PREDICTOR": "3",
            "NUM_THREADS": "2", "BIGTIFF": "IF_SAFER"}  # fmt: skip

XRSPATIAL_SCRIPT = """
import json, sys, time
import numpy as np, rasterio, xarray as xr
import xrspatial
with rasterio.open(sys.argv[1]) as ds:
    z = ds.read(1)
    profile = ds.profile
ys = np.arange(z.shape[0]) * -10.0
xs = np.arange(z.shape[1]) * 10.0
agg = xr.DataArray(z, dims=("y", "x"), coords={"y": ys, "x": xs})
times = []
for _ in range(4):
    start = time.perf_counter()
    out = xrspatial.slope(agg)
    times.append(time.perf_counter() - start)
profile.update(dtype="float32", nodata=float("nan"))
with rasterio.open(sys.argv[2], "w", **profile) as dst:
    dst.write(np.asarray(out.data, dtype="float32"), 1)
print(json.dumps({"version": xrspatial.__version__, "first": times[0], "warm": min(times[1:])}))
"""


def write_dem(path: Path) -> None:
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    profile = {
        "driver": "GTiff", "width": SIZE, "height": SIZE, "count": 1, "dtype": "float32",
        "crs": "EPSG:32618", "transform": from_origin(300_000.0, 5_000_000.0, CELL, CELL),
        "tiled": True, "blockxsize": 512, "blockysize": 512, "compress": "DEFLATE", "predictor": 3,
        "num_threads": 2,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as out:
        for row in range(0, SIZE, 512):
            r, c = np.mgrid[row : row + 512, 0:SIZE].astype(np.float64)
            out.write(field(r, c).astype(np.float32), 1, window=Window(0, row, SIZE, 512))


def field(r: Any, c: Any) -> Any:
    import numpy as np

    return 500 + 300 * np.sin(c / 700) * np.cos(r / 900) + 0.05 * c


def true_slope(r: Any, c: Any) -> Any:
    """Degrees, from the closed-form gradient (per metre: per cell / CELL; rows run south)."""
    import numpy as np

    d_col = (300 / 700 * np.cos(c / 700) * np.cos(r / 900) + 0.05) / CELL
    d_row = (-300 / 900 * np.sin(c / 700) * np.sin(r / 900)) / CELL
    return np.degrees(np.arctan(np.hypot(d_col, d_row)))


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_llmc(ws: Path) -> tuple[float, float]:
    from llmc_mcp.compute.engine import local_engine
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.workspace import Workspace

    op = get_operation("terrain.slope")
    ctx = OperationContext(Workspace(ws), num_threads=2, engine=local_engine(2))
    cpu, start = cpu_self(), time.perf_counter()
    op.run(ctx, op.validate({"dem": "dem.tif", "dst": "llmc_slope.tif"}))
    return time.perf_counter() - start, cpu_self() - cpu


def run_direct(ws: Path) -> tuple[float, float]:
    """The same kernel over the same windows, on the array in memory: horn_gradient and degrees, timed
    without reading, writing or checks (as xarray-spatial's warm call is); then written for agreement."""
    import numpy as np
    import rasterio

    from llmc_mcp.operations.terrain.dem import WINDOW_COLS, WINDOW_ROWS, Spans, horn_gradient

    with rasterio.open(ws / "dem.tif") as ds:
        z = np.pad(ds.read(1).astype(np.float64), 1, constant_values=np.nan)
        profile = ds.profile
    out = np.empty((SIZE, SIZE), np.float32)
    cpu, start = cpu_self(), time.perf_counter()
    for row in range(0, SIZE, WINDOW_ROWS):
        rows = min(WINDOW_ROWS, SIZE - row)
        spans = Spans(np.full((rows + 2, 1), 2 * CELL), np.full((rows, 1), -2 * CELL))
        for col in range(0, SIZE, WINDOW_COLS):
            cols = min(WINDOW_COLS, SIZE - col)
            east, north = horn_gradient(z[row : row + rows + 2, col : col + cols + 2], spans, 1.0)
            out[row : row + rows, col : col + cols] = np.degrees(np.arctan(np.hypot(east, north)))
    timed = time.perf_counter() - start, cpu_self() - cpu
    profile.update(dtype="float32", nodata=float("nan"), **{k.lower(): v for k, v in CREATION.items()})
    with rasterio.open(ws / "direct_slope.tif", "w", **profile) as dst:
        dst.write(out, 1)
    return timed


def run_gdaldem(gdaldem: str, ws: Path) -> tuple[float, float]:
    options = [item for key, value in CREATION.items() for item in ("-co", f"{key}={value}")]
    command = [gdaldem, "slope", "-q", str(ws / "dem.tif"), str(ws / "gdaldem_slope.tif"), *options]
    cpu, start = cpu_children(), time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, cpu_children() - cpu


def run_xrspatial(python: str, ws: Path) -> dict[str, Any] | str:
    import json

    done = subprocess.run(
        [python, "-c", XRSPATIAL_SCRIPT, str(ws / "dem.tif"), str(ws / "xrspatial_slope.tif")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def interior(path: Path) -> Any:
    import numpy as np
    import rasterio

    with rasterio.open(path) as ds:
        data = ds.read(1, masked=True)
    return np.ma.filled(data.astype(np.float64), np.nan)[1:-1, 1:-1]


def agreement(reference: Any, other: Any) -> tuple[float, int]:
    """Max |difference| where both have values, and the cells where exactly one has a value."""
    import numpy as np

    both = np.isfinite(reference) & np.isfinite(other)
    one = int(np.count_nonzero(np.isfinite(reference) != np.isfinite(other)))
    return float(np.abs(reference[both] - other[both]).max()), one


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import numpy as np
    from _common import banner, finish, print_table, quiet_logs, ratio

    start = banner(
        "terrain.py", f"terrain.slope on {SIZE}^2 float32 vs the kernel direct, gdaldem, xarray-spatial"
    )
    quiet_logs()
    ws = Path(tempfile.mkdtemp(prefix="llmc-bench-terrain-"))
    try:
        write_dem(ws / "dem.tif")
        gdaldem = shutil.which("gdaldem")
        if gdaldem is None:
            print("\ngdaldem is not on PATH: skipping that baseline (apt-get install -y gdal-bin).")
            gdal_version = ""
        else:
            gdal_version = subprocess.run(
                [gdaldem, "--version"], capture_output=True, text=True
            ).stdout.strip()
        runs: dict[str, list[tuple[float, float]]] = {"llmc": [], "direct": [], "gdaldem": []}
        for _ in range(RUNS):
            runs["llmc"].append(run_llmc(ws))
            runs["direct"].append(run_direct(ws))
            if gdaldem is not None:
                runs["gdaldem"].append(run_gdaldem(gdaldem, ws))
        python = os.environ.get("XRSPATIAL_PYTHON")
        xrs = run_xrspatial(python, ws) if python else "skipped: XRSPATIAL_PYTHON is not set"

        best = {name: min(r[0] for r in done) for name, done in runs.items() if done}
        cpu = {name: min(r[1] for r in done) for name, done in runs.items() if done}
        rows = [
            ["llmc terrain.slope (windows + halo, atomic write, read-back)", f"{best['llmc']:.2f}",
             f"{cpu['llmc']:.2f}", "1.00"],
            ["Horn kernel direct (same windows, in memory, no I/O)", f"{best['direct']:.2f}",
             f"{cpu['direct']:.2f}", ratio(best["llmc"], best["direct"])],
        ]  # fmt: skip
        if "gdaldem" in best:
            rows.append([f"gdaldem slope ({gdal_version.split(',')[0]})", f"{best['gdaldem']:.2f}",
                         f"{cpu['gdaldem']:.2f}", ratio(best["llmc"], best["gdaldem"])])  # fmt: skip
        if isinstance(xrs, dict):
            label = f"xrspatial.slope {xrs['version']}"
            rows.append([f"{label} warm (in memory, no I/O)", f"{xrs['warm']:.2f}", "",
                         ratio(best["llmc"], xrs["warm"])])  # fmt: skip
            rows.append([f"{label} first call (numba compiles)", f"{xrs['first']:.2f}", "",
                         ratio(best["llmc"], xrs["first"])])  # fmt: skip
        print_table(["slope of 4096 x 4096", "best wall s", "CPU s", "llmc / this"], rows,
                    title=f"Time, best of {RUNS} (alternating)")  # fmt: skip

        r, c = np.mgrid[1 : SIZE - 1, 1 : SIZE - 1].astype(np.float64)
        truth = true_slope(r, c)
        llmc = interior(ws / "llmc_slope.tif")
        outputs = {"Horn kernel direct": ws / "direct_slope.tif", "gdaldem slope": ws / "gdaldem_slope.tif",
                   "xrspatial.slope": ws / "xrspatial_slope.tif"}  # fmt: skip
        agree_rows = [["llmc terrain.slope", "", "", f"{float(np.nanmax(np.abs(llmc - truth))):.2e}"]]
        for name, path in outputs.items():
            if path.exists():
                other = interior(path)
                diff, one = agreement(llmc, other)
                agree_rows.append(
                    [name, f"{diff:.2e}", str(one), f"{float(np.nanmax(np.abs(other - truth))):.2e}"]
                )
        headers = [
            "output",
            "max |diff| from llmc (deg)",
            "cells valid in one only",
            "max |error| vs truth (deg)",
        ]
        print_table(
            headers, agree_rows, title="Agreement on the interior cells (truth: the closed-form slope)"
        )
        if not isinstance(xrs, dict):
            print(f"\nxarray-spatial: {xrs}")
        parts = [f"llmc {best['llmc']:.2f} s", f"direct kernel {ratio(best['llmc'], best['direct'])}"]
        if "gdaldem" in best:
            parts.append(f"gdaldem {ratio(best['llmc'], best['gdaldem'])}")
        else:
            parts.append("gdaldem not installed")
        if isinstance(xrs, dict):
            parts.append(f"xrspatial warm {ratio(best['llmc'], xrs['warm'])}")
        max_diff = max((agreement(llmc, interior(p))[0] for p in outputs.values() if p.exists()), default=0.0)
        parts.append(f"max |diff| {max_diff:.1e} deg")
        finish(start, "terrain.slope 4096^2: " + ", ".join(parts))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
