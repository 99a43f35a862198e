"""Scale (issue 24): five operations on 4096², 16384² and 32768² rasters, llmc's local and Dask engines
against the tools people use for each, on the same machine: time, CPU time, peak memory, and how each
grows with the raster.

Inputs, generated once per size in windows of 512 rows (never a whole array in memory), deterministic,
float32, EPSG:32618, 10 m cells, tiled 512 x 512, DEFLATE + predictor 3, no nodata (32768² is 4 GiB of
pixels per file uncompressed, twice a Dask worker's 2 GiB memory limit):

- ``red.tif``, ``nir.tif``: smooth reflectance-like fields (NDVI between about 0.3 and 0.9);
- ``dem.tif``: smooth hills, z = 500 + 300 sin(c / 700) cos(r / 900) + 0.05 c (c, r: column, row),
  with closed depressions between the hills; ``warm.tif``: its first 64 x 64 cells;
- ``zones.gpkg``: 16 zones, circles of 64 vertices on a 4 x 4 grid over the raster (about 64% of it).

Operations (llmc: ``op = get_operation(name); op.run(ctx, op.validate(args))``, the gate not involved,
output quotas raised above the default 2 GiB per session so the largest outputs are allowed):

- ``calc_stats``: ``raster.calc`` (nir - red) / (nir + red) to float32, then ``raster.stats`` of it
  (default percentiles). Reference: numexpr over rasterio windows of 512 x 2048 (as bench/analysis.py),
  written with the same creation options, then two numpy passes over the output's windows (moments;
  a 65536-bin histogram for the percentiles, as llmc does for float bands);
- ``expr_stats``: the same summary asked for in one call, ``raster.calc_stats`` (nothing written).
  Reference: the same numexpr loop fused the same way, nothing written, the float32 values counted in
  the same two passes (the expression evaluated in each);
- ``reproject``: ``raster.reproject`` of dem.tif to EPSG:4326, bilinear. Reference: ``gdalwarp -multi
  -wo NUM_THREADS=ALL_CPUS -r bilinear -t_srs EPSG:4326 -wm 256`` (llmc's warp memory) on the grid llmc
  chose (``-te``/``-ts`` from llmc's output), NaN nodata, llmc's creation options;
- ``slope``: ``terrain.slope`` of dem.tif. Reference: ``gdaldem slope`` with the same creation options;
- ``convert``: ``raster.convert`` of dem.tif to ZSTD (predictor 3, 512 tiles). Reference: ``gdal_translate``
  with the same creation options;
- ``zonal``: ``raster.zonal_stats`` of dem.tif over zones.gpkg, mean, sum, count. Reference:
  exactextract's ``exact_extract`` with its ``RasterioRasterSource`` (as bench/zonal.py);
- ``flow``: ``hydrology.condition`` (fill_flats) then ``hydrology.flow_direction`` (d8) then
  ``hydrology.flow_accumulation`` (cells), timed together, after the same chain on warm.tif (numba
  compiles then, untimed). Routing holds the whole grid in the process that runs the operation, and
  refuses a grid larger than its memory limit holds: that refusal is the result printed for that size.
  Reference: pyflwdir ``fill_depressions`` (filled DEM and D8) and ``upstream_area('cell')``, the three
  grids written as llmc writes them (DEFLATE, 512 tiles), after the same warm-up; not run where it would
  need more than ``--reference-memory-mb`` (its peak was 908 MiB at 4096²: 54 MiB per million cells).

Every run is a fresh child process (``python bench/scale.py --one ...``, started through ``sh`` so its
``ru_maxrss`` is its own), after its imports:

- llmc local: the operation in the child, ``num_threads`` = all cores, under RLIMIT_AS =
  ``--memory-mb`` (default 2048: what a server worker and each Dask worker gets), GDAL's block cache
  sized from it as a worker's is, ``MALLOC_ARENA_MAX=2`` as in the worker pool. CPU: the child's
  (all threads); peak: its ``ru_maxrss``;
- llmc dask: the same child with a ``DaskEngine`` on a ``LocalCluster`` of one single-threaded worker
  process per core, 2 GiB memory limit each, the hardening plugin registered (as tests/engines/
  conftest.py), started for that run alone (so the workers' ``ru_maxrss`` is this run's; restarting the
  workers of one cluster instead sometimes left them out for a minute) and warmed (llmc imported);
  plain TCP, as an operator's cluster may be, or with ``--tls`` every connection TLS with one private
  certificate, as the server's own cluster is. Results are taken from the workers directly, as the
  server's own cluster (and an operator's with ``--dask-worker-ports``) does, not through the scheduler.
  CPU around the timed run, read by the child: the workers' (also shown alone) + the child's + this
  process's, where the scheduler runs (``run_on_scheduler``); peak: the largest worker's
  ``ru_maxrss`` (``client MiB``: the child's, which plans, writes and, for flow, routes);
- reference: the tool in a child under RLIMIT_AS = ``--reference-memory-mb`` (default 3/4 of RAM: on a
  shared machine a tool that cannot fit fails instead of calling the OOM killer); GDAL tools run as a
  grandchild (CPU and peak from the child's RUSAGE_CHILDREN).

Cold by default, as a script is: every process's first touch of its heap, GDAL's block cache and
Dask's buffers is inside the clock (on Dask three processes pay it: measured, 0.6-1 s of a 16384²
calc). ``--warm`` runs each operation once more first, untimed, in the same child (and cluster), and
removes what it wrote; the reference tools too: the steady state of a server, whose workers and
cluster serve call after call.

An operation that fails on Dask (not converted yet: a piece that does not pickle, ...) is reported as
"not on dask (<error type>)" and the script goes on. Each size's files are removed before the next
(``--keep`` keeps them; ``--workdir`` chooses where, default a temporary folder under /tmp), and each
operation's outputs before the next. Disk at 32768²: about 1.3 GiB of compressed inputs plus one
operation's three outputs (slope: about 6 GiB).

Time: 4096² took 3 min on 2 cores at load average 6-10; 16384² slope alone 3 min (llmc local 34 s,
dask 74 s, gdaldem 54 s). The whole default run: about an hour there (16384² ~15 min, 32768² ~40 min;
llmc's flow is refused above 4096² at 2 GiB, pyflwdir is not run at 32768²).

Run: .venv/bin/python bench/scale.py [--sizes 4096,16384,32768]
     [--ops calc_stats,expr_stats,reproject,slope,convert,zonal,flow] [--engines local,dask]
     [--workdir DIR] [--keep] [--warm] [--tls] [--rounds N] [--memory-mb 2048]
     Smoke test: --sizes 1024,2048. Needs gdal-bin (gdalwarp, gdaldem, gdal_translate) for those
     three references.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZES = (4096, 16384, 32768)
OPS = ("calc_stats", "expr_stats", "reproject", "slope", "convert", "zonal", "flow")
ENGINES = ("local", "dask")
BLOCK = 512
CELL = 10.0
LEFT, TOP, CRS = 300_000.0, 5_000_000.0, "EPSG:32618"
WARM = 64
ZONE_GRID = 4
STATS = ["mean", "sum", "count"]
PERCENTILES = [2.0, 25.0, 50.0, 75.0, 98.0]
FINE_BINS = 1 << 16
PYFLWDIR_MIB_PER_MCELL = 54
"""The reference chain's peak RSS per million cells (908 MiB at 4096² on the development machine)."""
CORES = os.cpu_count() or 1
CREATION = {"TILED": "YES", "BLOCKXSIZE": "512", "BLOCKYSIZE": "512", "COMPRESS": "DEFLATE", "PREDICTOR": "3",
            "BIGTIFF": "IF_SAFER", "NUM_THREADS": str(CORES)}  # fmt: skip
"""llmc's creation options for a float32 output (compute.output.creation_options), given to the tools."""
REFERENCES = {"calc_stats": "numexpr + numpy", "expr_stats": "numexpr + numpy, fused",
              "reproject": "gdalwarp", "slope": "gdaldem slope", "convert": "gdal_translate",
              "zonal": "exactextract",
              "flow": "pyflwdir"}  # fmt: skip


# ------------------------------------------------------------------------------------------- inputs


def write_field(path: Path, size: int, field: Callable[[Any, Any], Any]) -> None:
    """A float32 raster of ``field(rows, cols)``, written 512 rows at a time (rows a column vector)."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32", "crs": CRS,
               "transform": from_origin(LEFT, TOP, CELL, CELL), "tiled": True, "blockxsize": BLOCK,
               "blockysize": BLOCK, "compress": "DEFLATE", "predictor": 3, "num_threads": CORES,
               "bigtiff": "IF_SAFER"}  # fmt: skip
    cols = np.arange(size, dtype=np.float64)[None, :]
    with rasterio.open(path, "w", **profile) as out:
        for top in range(0, size, BLOCK):
            rows = np.arange(top, min(top + BLOCK, size), dtype=np.float64)[:, None]
            values = np.broadcast_to(field(rows, cols), (rows.shape[0], size)).astype(np.float32)
            out.write(values, 1, window=Window(0, top, size, rows.shape[0]))


def dem(r: Any, c: Any) -> Any:
    import numpy as np

    return 500 + 300 * np.sin(c / 700) * np.cos(r / 900) + 0.05 * c


def red(r: Any, c: Any) -> Any:
    import numpy as np

    return 0.05 + 0.03 * (1 + np.sin(c / 300)) + 0.01 * np.cos(r / 410)


def nir(r: Any, c: Any) -> Any:
    import numpy as np

    return 0.35 + 0.2 * (1 + np.cos(r / 500)) + 0.02 * np.sin(c / 230)


def write_zones(path: Path, size: int) -> None:
    import numpy as np
    import shapely

    from llmc_mcp.compute.polygons import hardened_pyogrio

    step = size * CELL / ZONE_GRID
    centres = (np.arange(ZONE_GRID) + 0.5) * step
    xs, ys = np.meshgrid(LEFT + centres, TOP - centres)
    circles = shapely.buffer(shapely.points(xs.ravel(), ys.ravel()), 0.45 * step, quad_segs=16)
    hardened_pyogrio().raw.write(
        str(path), shapely.to_wkb(circles), [np.arange(circles.size, dtype="int64")], ["zone"],
        layer="zones", driver="GPKG", geometry_type="Polygon", crs=CRS,
    )  # fmt: skip


def write_inputs(folder: Path, size: int) -> float:
    """All inputs of one size; the seconds it took."""
    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    for name, field in (("red.tif", red), ("nir.tif", nir), ("dem.tif", dem)):
        write_field(folder / name, size, field)
    write_field(folder / "warm.tif", WARM, dem)
    write_zones(folder / "zones.gpkg", size)
    return time.perf_counter() - start


# ------------------------------------------------------------------------------- llmc, in a child


def llmc_context(ws: Path, engine: Any) -> Any:
    from llmc_mcp.config import Quota
    from llmc_mcp.operations import OperationContext
    from llmc_mcp.outputs import LocalOutputs, OutputLedger
    from llmc_mcp.workspace import Workspace

    workspace = Workspace(ws)
    quota = Quota(session_bytes=1 << 42, workspace_bytes=1 << 42)
    outputs = LocalOutputs(OutputLedger(workspace, quota=quota))
    return OperationContext(workspace, num_threads=CORES, engine=engine, outputs=outputs)


def run_op(ctx: Any, name: str, **args: Any) -> Any:
    from llmc_mcp.operations import get_operation

    op = get_operation(name)
    return op.run(ctx, op.validate(args))


def llmc_calc_stats(ctx: Any, tag: str) -> dict[str, Any]:
    inputs = [{"name": "nir", "path": "nir.tif"}, {"name": "red", "path": "red.tif"}]
    run_op(ctx, "raster.calc", expression="(nir - red) / (nir + red)", inputs=inputs, dst=f"ndvi_{tag}.tif")
    band = run_op(ctx, "raster.stats", path=f"ndvi_{tag}.tif", percentiles=PERCENTILES).bands[0]
    return {"check": f"mean {band.mean:.6f}, p50 {band.percentiles['p50']:.6f}"}


def llmc_expr_stats(ctx: Any, tag: str) -> dict[str, Any]:
    inputs = [{"name": "nir", "path": "nir.tif"}, {"name": "red", "path": "red.tif"}]
    band = run_op(ctx, "raster.calc_stats", expression="(nir - red) / (nir + red)", inputs=inputs,
                  percentiles=PERCENTILES).stats  # fmt: skip
    return {"check": f"mean {band.mean:.6f}, p50 {band.percentiles['p50']:.6f}"}


def llmc_reproject(ctx: Any, tag: str) -> dict[str, Any]:
    info = run_op(ctx, "raster.reproject", src="dem.tif", dst=f"dem4326_{tag}.tif", dst_crs="EPSG:4326",
                  resampling="bilinear")  # fmt: skip
    b = info.bounds
    return {"check": f"{info.width} x {info.height}", "grid": [b.left, b.bottom, b.right, b.top,
                                                              info.width, info.height]}  # fmt: skip


def llmc_slope(ctx: Any, tag: str) -> dict[str, Any]:
    run_op(ctx, "terrain.slope", dem="dem.tif", dst=f"slope_{tag}.tif")
    return {"check": ""}


def llmc_convert(ctx: Any, tag: str) -> dict[str, Any]:
    run_op(ctx, "raster.convert", src="dem.tif", dst=f"dem_zstd_{tag}.tif", compress="ZSTD")
    return {"check": ""}


def llmc_zonal(ctx: Any, tag: str) -> dict[str, Any]:
    result = run_op(ctx, "raster.zonal_stats", path="dem.tif", zones="zones.gpkg", stats=STATS)
    zones = [dict(zone.stats) for zone in result.results]
    return {"check": zonal_check(zones)}


def zonal_check(zones: list[dict[str, Any]]) -> str:
    count = sum(float(z["count"]) for z in zones)
    means = sum(float(z["mean"]) for z in zones) / len(zones)
    return f"{len(zones)} zones, count {count:,.1f}, mean of means {means:.4f}"


def llmc_flow(ctx: Any, tag: str, dem_name: str = "dem.tif") -> dict[str, Any]:
    filled, d8, acc = (f"{kind}_{tag}.tif" for kind in ("filled", "d8", "acc"))
    run_op(ctx, "hydrology.condition", dem=dem_name, dst=filled, method="fill_flats")
    run_op(ctx, "hydrology.flow_direction", dem=filled, dst=d8, routing="d8")
    result = run_op(ctx, "hydrology.flow_accumulation", flow_dir=d8, dst=acc)
    return {"check": f"max {result.max_value:,.0f} cells"}


LLMC: dict[str, Callable[[Any, str], dict[str, Any]]] = {
    "calc_stats": llmc_calc_stats, "expr_stats": llmc_expr_stats, "reproject": llmc_reproject,
    "slope": llmc_slope, "convert": llmc_convert, "zonal": llmc_zonal,
    "flow": llmc_flow,
}  # fmt: skip


def child_llmc(spec: dict[str, Any]) -> dict[str, Any]:
    from llmc_mcp.compute.engine import local_engine
    from llmc_mcp.gdal.environment import size_block_cache

    size_block_cache(spec["memory_mb"] or 2048)
    ws, op, tag = Path(spec["ws"]), spec["op"], f"llmc_{spec['engine']}"
    engine: Any = local_engine(CORES)
    if spec["engine"] == "dask":
        from llmc_mcp.compute.dask_engine import DaskEngine, load_security

        security = load_security(spec["credentials"]) if spec.get("credentials") else None
        engine = DaskEngine(spec["address"], security=security, direct=True)
        engine.client()  # connected before the clock starts
    ctx = llmc_context(ws, engine)
    try:
        if op == "flow":
            llmc_flow(ctx, f"warm_{tag}", "warm.tif")  # numba compiles here, untimed
        if spec.get("warm"):
            first_run(ws, lambda: LLMC[op](ctx, f"first_{tag}"))
        if spec["engine"] != "dask":
            return timed(lambda: LLMC[op](ctx, tag))
        workers, scheduler = cluster_cpu(engine.client())
        result = timed(lambda: LLMC[op](ctx, tag))
        workers_after, scheduler_after = cluster_cpu(engine.client())
        result["worker_cpu"] = workers_after - workers
        result["cpu"] += result["worker_cpu"] + scheduler_after - scheduler
        return result
    finally:
        if spec["engine"] == "dask":
            engine.close()


def first_run(ws: Path, work: Callable[[], Any]) -> None:
    """``work`` once, untimed, and the files it wrote removed (``--warm``)."""
    before = set(ws.iterdir())
    work()
    for path in set(ws.iterdir()) - before:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


# -------------------------------------------------------------------------- references, in a child


def reference_calc_stats(ws: Path, _grid: Any) -> dict[str, Any]:
    import numexpr
    import numpy as np
    import rasterio
    from rasterio.windows import Window

    numexpr.set_num_threads(CORES)
    env = rasterio.Env(GDAL_NUM_THREADS=str(CORES), GDAL_CACHEMAX=256 << 20)
    with env, rasterio.open(ws / "nir.tif") as a, rasterio.open(ws / "red.tif") as b:
        profile = {"driver": "GTiff", "width": a.width, "height": a.height, "count": 1, "dtype": "float32",
                   "crs": a.crs, "transform": a.transform, "nodata": float("nan"),
                   **{k.lower(): v for k, v in CREATION.items()}}  # fmt: skip
        windows = [Window(c, r, min(2048, a.width - c), min(BLOCK, a.height - r))
                   for r in range(0, a.height, BLOCK) for c in range(0, a.width, 2048)]  # fmt: skip
        with rasterio.open(ws / "ndvi_reference.tif", "w", **profile) as out:
            for w in windows:
                n, r = a.read(1, window=w), b.read(1, window=w)
                out.write(numexpr.evaluate("(n - r) / (n + r)", local_dict={"n": n, "r": r}), 1, window=w)
    with env, rasterio.open(ws / "ndvi_reference.tif") as ds:
        count, total, squares, low, high = 0, 0.0, 0.0, math.inf, -math.inf
        for w in windows:  # first pass: moments and range
            v = ds.read(1, window=w).astype(np.float64)
            v = v[np.isfinite(v)]
            count, total, squares = count + v.size, total + v.sum(), squares + (v * v).sum()
            low, high = min(low, float(v.min())), max(high, float(v.max()))
        bins = np.zeros(FINE_BINS, np.int64)
        for w in windows:  # second pass: the histogram the percentiles come from
            v = ds.read(1, window=w)
            bins += np.histogram(v[np.isfinite(v)], FINE_BINS, (low, high))[0]
    mean = total / count
    edges = np.linspace(low, high, FINE_BINS + 1)
    cumulative = np.cumsum(bins)
    p50 = float(edges[np.searchsorted(cumulative, 0.5 * count)])
    std = math.sqrt(max(squares / count - mean * mean, 0.0))
    return {"check": f"mean {mean:.6f}, p50 {p50:.6f} (std {std:.4f})"}


def reference_expr_stats(ws: Path, _grid: Any) -> dict[str, Any]:
    """The same NDVI summary as a user would fuse it: numexpr over windows of the two inputs, nothing
    written, the float32 values counted in two passes (moments and range, then the histogram)."""
    import numexpr
    import numpy as np
    import rasterio
    from rasterio.windows import Window

    numexpr.set_num_threads(CORES)
    env = rasterio.Env(GDAL_NUM_THREADS=str(CORES), GDAL_CACHEMAX=256 << 20)
    with env, rasterio.open(ws / "nir.tif") as a, rasterio.open(ws / "red.tif") as b:
        windows = [Window(c, r, min(2048, a.width - c), min(BLOCK, a.height - r))
                   for r in range(0, a.height, BLOCK) for c in range(0, a.width, 2048)]  # fmt: skip

        def ndvi(w: Window) -> Any:
            n, r = a.read(1, window=w), b.read(1, window=w)
            v = numexpr.evaluate("(n - r) / (n + r)", local_dict={"n": n, "r": r}).astype(np.float32)
            return v[np.isfinite(v)]

        count, total, squares, low, high = 0, 0.0, 0.0, math.inf, -math.inf
        for w in windows:
            v = ndvi(w).astype(np.float64)
            count, total, squares = count + v.size, total + v.sum(), squares + (v * v).sum()
            low, high = min(low, float(v.min())), max(high, float(v.max()))
        bins = np.zeros(FINE_BINS, np.int64)
        for w in windows:
            bins += np.histogram(ndvi(w), FINE_BINS, (low, high))[0]
    mean = total / count
    edges = np.linspace(low, high, FINE_BINS + 1)
    p50 = float(edges[np.searchsorted(np.cumsum(bins), 0.5 * count)])
    std = math.sqrt(max(squares / count - mean * mean, 0.0))
    return {"check": f"mean {mean:.6f}, p50 {p50:.6f} (std {std:.4f})"}


def reference_reproject(ws: Path, grid: list[float] | None) -> dict[str, Any]:
    command = ["gdalwarp", "-q", "-overwrite", "-multi", "-wo", "NUM_THREADS=ALL_CPUS", "-r", "bilinear",
               "-t_srs", "EPSG:4326", "-wm", "256", "-dstnodata", "nan"]  # fmt: skip
    if grid:
        command += ["-te", *(repr(v) for v in grid[:4]), "-ts", str(int(grid[4])), str(int(grid[5]))]
    run_tool([*command, *options(), str(ws / "dem.tif"), str(ws / "dem4326_reference.tif")])
    return {"check": f"{int(grid[4])} x {int(grid[5])}" if grid else "its own grid"}


def reference_slope(ws: Path, _grid: Any) -> dict[str, Any]:
    run_tool(["gdaldem", "slope", "-q", *options(), str(ws / "dem.tif"), str(ws / "slope_reference.tif")])
    return {"check": ""}


def reference_convert(ws: Path, _grid: Any) -> dict[str, Any]:
    creation = {**CREATION, "COMPRESS": "ZSTD"}
    flags = [item for key, value in creation.items() for item in ("-co", f"{key}={value}")]
    run_tool(["gdal_translate", "-q", *flags, str(ws / "dem.tif"), str(ws / "dem_zstd_reference.tif")])
    return {"check": ""}


def reference_zonal(ws: Path, _grid: Any) -> dict[str, Any]:
    import pyogrio
    import rasterio
    import shapely
    from exactextract import exact_extract
    from exactextract.feature import JSONFeatureSource
    from exactextract.raster import RasterioRasterSource

    _, _, wkb, _ = pyogrio.raw.read(str(ws / "zones.gpkg"), columns=[])
    features = [{"type": "Feature", "properties": {}, "geometry": g.__geo_interface__}
                for g in shapely.from_wkb(wkb)]  # fmt: skip
    with rasterio.open(ws / "dem.tif") as ds:
        rows = exact_extract(RasterioRasterSource(ds), JSONFeatureSource(features), STATS, output="geojson")
    return {"check": zonal_check([row["properties"] for row in rows])}


def reference_flow(ws: Path, _grid: Any) -> dict[str, Any]:
    from llmc_mcp.operations.hydrology._grid import pyflwdir

    library = pyflwdir()
    pyflwdir_chain(library, ws, "warm.tif", "warm_reference")  # numba compiles here, untimed
    return timed(lambda: pyflwdir_chain(library, ws, "dem.tif", "reference"))


def pyflwdir_chain(library: Any, ws: Path, src: str, tag: str) -> dict[str, Any]:
    import numpy as np
    import rasterio

    with rasterio.open(ws / src) as ds:
        z, profile = ds.read(1), ds.profile
    filled, d8 = library.dem.fill_depressions(z, nodata=float("nan"))
    del z
    accumulated = library.from_array(d8, ftype="d8", check_ftype=True).upstream_area(unit="cell")
    profile.update(compress="DEFLATE", num_threads=CORES, tiled=True, blockxsize=BLOCK, blockysize=BLOCK)
    for name, data, nodata in (("filled", filled.astype(np.float32), None), ("d8", d8, 247),
                               ("acc", accumulated.astype(np.int32), -1)):  # fmt: skip
        profile.update(dtype=data.dtype.name, nodata=nodata, predictor=3 if data.dtype.kind == "f" else 2)
        with rasterio.open(ws / f"{name}_{tag}.tif", "w", **profile) as out:
            out.write(data, 1)
    return {"check": f"max {float(accumulated.max()):,.0f} cells"}


REFERENCE: dict[str, Callable[[Path, Any], dict[str, Any]]] = {
    "calc_stats": reference_calc_stats, "expr_stats": reference_expr_stats, "reproject": reference_reproject,
    "slope": reference_slope, "convert": reference_convert,
    "zonal": reference_zonal, "flow": reference_flow,
}  # fmt: skip


def options() -> list[str]:
    return [item for key, value in CREATION.items() for item in ("-co", f"{key}={value}")]


def run_tool(command: list[str]) -> None:
    """A GDAL tool as a grandchild through ``sh``, so RUSAGE_CHILDREN's peak is the tool's own."""
    done = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exit {done.returncode}: {done.stderr.strip()[-300:]}")


def child_reference(spec: dict[str, Any]) -> dict[str, Any]:
    ws, op = Path(spec["ws"]), spec["op"]
    if spec.get("warm"):  # the timed run writes the same files again
        REFERENCE[op](ws, spec.get("grid"))
    if op == "flow":
        return REFERENCE[op](ws, None)  # times itself, after its warm-up
    return timed(lambda: REFERENCE[op](ws, spec.get("grid")))


# ---------------------------------------------------------------------------------- child protocol


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Wall and CPU seconds of ``work`` (this process's threads and its waited-for children)."""
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = work()
    result["wall"] = time.perf_counter() - start
    result["cpu"] = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu
    return result


def child(spec: dict[str, Any]) -> None:
    """One measured run; prints one JSON line. The memory limit is set before any import."""
    limit = spec.get("limit_mb") or 0
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit << 20, limit << 20))
    try:
        result = child_llmc(spec) if spec["tool"] == "llmc" else child_reference(spec)
    except Exception as exc:  # any failure is a result to print, not a crash of the benchmark
        from llmc_mcp.compute.dask_engine import EngineFailed
        from llmc_mcp.errors import LlmcError

        refused = isinstance(exc, LlmcError) and not isinstance(exc, EngineFailed)
        message = " ".join(str(exc).split())[:400]
        cause = exc.__cause__ or exc.__context__  # Dask wraps a pickling error: its cause names the piece
        if cause is not None:
            message = " ".join(f"caused by {type(cause).__name__}: {cause}".split())[:300] + " | " + message
        result = {"error": type(exc).__name__, "message": message, "refused": refused}
    # A GDAL tool's peak is its own (a grandchild's), not this small interpreter's.
    usage = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    result["maxrss_kib"] = max(u.ru_maxrss for u in usage)
    print(json.dumps(result))


CLEAN_ENVIRON = dict(os.environ)
"""This process's environment as it started: Dask's nanny leaves its workers' variables in the
environment of the process that starts a cluster (``MALLOC_TRIM_THRESHOLD_``, ``OMP_NUM_THREADS=1``),
and every child started after would inherit them (a local slope then took 16.6 s instead of 11.1 s).
Children get this one; the server's own cluster runs in a process of its own."""


def spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one child through ``sh`` (so its ``ru_maxrss`` starts small) and read its JSON line."""
    env = {**CLEAN_ENVIRON, "MALLOC_ARENA_MAX": "2"} if spec["tool"] == "llmc" else dict(CLEAN_ENVIRON)
    command = ["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable, __file__, "--one", json.dumps(spec)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "Timeout", "message": f"no answer within {timeout:.0f} s", "refused": False}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    tail = " ".join(done.stderr.strip().splitlines()[-2:])[-300:]
    return {"error": f"died (exit {done.returncode})", "message": tail, "refused": False}


# --------------------------------------------------------------------------------------------- Dask


def worker_usage() -> dict[str, float]:
    """Run on each Dask worker (or the scheduler's process): its CPU seconds and peak RSS so far."""
    import resource as r

    usage = r.getrusage(r.RUSAGE_SELF)
    return {"cpu": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss}


def cluster_cpu(client: Any) -> tuple[float, float]:
    """CPU seconds so far of the cluster's workers, and of the process its scheduler runs in (the
    bench's own: the LocalCluster is started there)."""
    workers = sum(usage["cpu"] for usage in client.run(worker_usage).values())
    return workers, client.run_on_scheduler(worker_usage)["cpu"]


def worker_warm() -> None:
    """Run on each fresh Dask worker: the imports a first piece would otherwise pay inside the clock."""
    import llmc_mcp.compute.dask_engine
    import llmc_mcp.operations  # noqa: F401


def measure_dask(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """A dask run on a cluster of its own, as tests/engines/conftest.py starts one (one single-threaded
    worker process per core here): fresh workers, so their ``ru_maxrss`` is this run's (and, with
    ``--warm``, its first run's), warmed before the child runs; the child measures the cluster's CPU
    seconds around the timed run, this process the workers' peak."""
    import dask
    from distributed import Client, LocalCluster

    from llmc_mcp.compute.dask_engine import load_security, write_credentials
    from llmc_mcp.gdal.dask_workers import HardenedGdal
    from llmc_mcp.server.embedded_cluster import PROFILING_OFF

    tls: dict[str, Any] = {}
    if spec.get("tls"):  # as the server's own cluster: every connection TLS, one private certificate
        folder = Path(tempfile.mkdtemp(prefix="llmc-bench-tls-"))
        spec["credentials"] = str(write_credentials(folder / "cluster.pem"))
        tls = {"protocol": "tls://", "security": load_security(spec["credentials"])}
    with dask.config.set(PROFILING_OFF), LocalCluster(
        n_workers=CORES, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", memory_limit="2GiB", **tls,
    ) as cluster, Client(cluster, set_as_default=False, security=tls.get("security")) as client:  # fmt: skip
        client.register_plugin(HardenedGdal(2048))
        try:
            client.run(worker_warm)
        except Exception as exc:  # llmc not importable there: the run itself will say so
            print(f"  (warming the workers failed: {type(exc).__name__})", flush=True)
        result = spawn({**spec, "address": cluster.scheduler_address}, timeout)
        after = client.run(worker_usage)
    if spec.get("credentials"):
        shutil.rmtree(Path(spec["credentials"]).parent)
    result["client_maxrss_kib"] = result.get("maxrss_kib", 0)
    result["maxrss_kib"] = max(u["maxrss_kib"] for u in after.values())
    return result


# -------------------------------------------------------------------------------------------- report


def machine(gdal_cli: str) -> None:
    versions = []
    for module in ("numexpr", "exactextract", "distributed"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            versions.append(f"{module} missing")
    free = shutil.disk_usage(tempfile.gettempdir()).free / (1 << 30)
    print(f"# tools: {gdal_cli or 'gdal-bin missing (gdalwarp, gdaldem)'}; {', '.join(versions)}")
    print(f"# load average before: {load()}; {free:.0f} GiB free in {tempfile.gettempdir()}")
    print("# columns: load = 1-min load average as the run started; CPU s = every process of the run (dask: "
          "workers + operation process + scheduler); peak MiB = ru_maxrss of the process doing the pixel "
          "work (dask: the largest worker); client MiB = the dask run's operation process")  # fmt: skip


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def outcome(run: dict[str, Any], engine: str) -> str:
    if "error" not in run:
        return run.get("check", "")
    if run.get("refused"):
        return f"refused: {run['message']}"
    if engine == "dask":
        return f"not on dask ({run['error']})"
    return f"failed ({run['error']})"


def figure(run: dict[str, Any] | None, key: str, digits: int = 2) -> str:
    return f"{run[key]:.{digits}f}" if run and key in run and "error" not in run else "-"


def report(
    op: str, sizes: list[int], results: dict[tuple[int, str], dict[str, Any]], tools: list[str]
) -> None:
    from _common import print_table, ratio

    rows, notes = [], []
    for size in sizes:
        ref = results.get((size, "reference"))
        ok = ref is not None and "error" not in ref
        for tool in tools:
            run = results.get((size, tool))
            if run is None:
                continue
            good = "error" not in run
            engine = tool.removeprefix("llmc ")
            rows.append([
                f"{size}²", tool if tool != "reference" else REFERENCES[op], f"{run.get('load', 0):.1f}",
                figure(run, "wall"), figure(run, "cpu"),
                figure(run, "worker_cpu") if "worker_cpu" in run else "",
                f"{run['maxrss_kib'] / 1024:.0f}" if good else "-",
                f"{run['client_maxrss_kib'] / 1024:.0f}" if good and "client_maxrss_kib" in run else "",
                ratio(run["wall"], ref["wall"]) if good and ok else "-",
                ratio(run["cpu"], ref["cpu"]) if good and ok else "-",
                outcome(run, engine)[:100],
            ])  # fmt: skip
            if not good:
                notes.append(f"- {size}² {tool}: {run['error']}: {run['message']}")
    headers = ["size", "tool", "load", "wall s", "CPU s", "workers CPU s", "peak MiB", "client MiB",
               "wall / ref", "CPU / ref", "result"]  # fmt: skip
    print_table(headers, rows, title=f"## {op}")
    if notes:
        print("\nNot measured, and why:\n" + "\n".join(notes))
    print("\nGrowth (wall s per megapixel; peak MiB, per worker on dask):")
    for tool in tools:
        done = [
            (s, results[(s, tool)])
            for s in sizes
            if (s, tool) in results and "error" not in results[(s, tool)]
        ]
        if done:
            per = " · ".join(f"{s}² {r['wall'] / (s * s / 1e6):.4f}" for s, r in done)
            peak = " · ".join(f"{s}² {r['maxrss_kib'] / 1024:.0f}" for s, r in done)
            print(f"- {tool if tool != 'reference' else REFERENCES[op]}: s/Mpx {per}; peak MiB {peak}")


# ---------------------------------------------------------------------------------------------- main


def measure_size(args: argparse.Namespace, size: int, folder: Path,
                 results: dict[str, dict[tuple[int, str], dict[str, Any]]]) -> None:  # fmt: skip
    seconds = write_inputs(folder, size)
    on_disk = sum(p.stat().st_size for p in folder.iterdir()) / (1 << 20)
    print(f"\n# {size}²: inputs written in {seconds:.1f} s ({on_disk:,.0f} MiB on disk)", flush=True)
    before = set(folder.iterdir())
    for op in args.ops:
        base = {"ws": str(folder), "op": op, "memory_mb": args.memory_mb, "limit_mb": args.memory_mb,
                "warm": args.warm, "tls": args.tls}  # fmt: skip
        rounds: dict[str, list[dict[str, Any]]] = {}
        for number in range(1, args.rounds + 1):
            measure_round(args, size, op, base, rounds, number)
            if number < args.rounds or not args.keep:  # each round writes its outputs afresh
                for path in set(folder.iterdir()) - before:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
        for tool, runs in rounds.items():
            results[op][(size, tool)] = median_run(runs)
        results[op][(size, "rounds")] = rounds


def measure_round(args: argparse.Namespace, size: int, op: str, base: dict[str, Any],
                  rounds: dict[str, list[dict[str, Any]]], number: int) -> None:  # fmt: skip
    """One round of ``op`` at ``size``: each engine, then the reference tool (warping onto the grid
    llmc chose), appended to ``rounds`` under each tool's name."""
    tag = f" (round {number} of {args.rounds})" if args.rounds > 1 else ""
    grid = None
    for engine in args.engines:
        spec = {**base, "tool": "llmc", "engine": engine}
        started = os.getloadavg()[0]
        run = measure_dask(spec, args.timeout) if engine == "dask" else spawn(spec, args.timeout)
        run["load"] = started
        rounds.setdefault(f"llmc {engine}", []).append(run)
        grid = grid or run.get("grid")
        print(f"  {op} llmc {engine}{tag}: {figure(run, 'wall')} s  {outcome(run, engine)[:120]}", flush=True)
    spec = {**base, "tool": "reference", "limit_mb": args.reference_memory_mb, "grid": grid}
    needed = size * size / 1e6 * PYFLWDIR_MIB_PER_MCELL
    if op == "flow" and needed > args.reference_memory_mb:
        message = (f"pyflwdir would need about {needed / 1024:.0f} GiB ({PYFLWDIR_MIB_PER_MCELL} MiB per "
                   f"M cells), over --reference-memory-mb {args.reference_memory_mb}")  # fmt: skip
        run = {"error": "not run", "refused": True, "message": message}
    elif op in ("reproject", "slope", "convert") and not shutil.which(REFERENCES[op].split()[0]):
        run = {"error": "not run", "refused": True, "message": "gdal-bin is not installed"}
    else:
        started = os.getloadavg()[0]
        run = spawn(spec, args.timeout)
        run["load"] = started
    rounds.setdefault("reference", []).append(run)
    print(f"  {op} {REFERENCES[op]}{tag}: {figure(run, 'wall')} s  {outcome(run, 'ref')[:120]}", flush=True)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (the lower of the middle two for an even count), or the first
    failure: what the table shows of several rounds."""
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda run: run["wall"])
    return ordered[(len(ordered) - 1) // 2]


def each_round(rounds: dict[str, Any], engine: str) -> str:
    """`` (rounds 1.02x, 1.10x, ...)``: each round's ratio, engine against the reference of that round."""
    pairs = list(zip(rounds.get(f"llmc {engine}", []), rounds.get("reference", []), strict=False))
    if len(pairs) < 2:
        return ""
    ratios = [f"{r['wall'] / f['wall']:.2f}x" for r, f in pairs if "error" not in r and "error" not in f]
    return f" (rounds {', '.join(ratios)})"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep every size's files")
    parser.add_argument("--warm", action="store_true",
                        help="time each run after an untimed one in its process or cluster")  # fmt: skip
    parser.add_argument("--tls", action="store_true",
                        help="Dask's connections in TLS, as in the server's own cluster")  # fmt: skip
    parser.add_argument("--memory-mb", type=int, default=2048, help="RLIMIT_AS of llmc's children; 0: none")
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20
    parser.add_argument("--reference-memory-mb", type=int, default=physical * 3 // 4,
                        help="RLIMIT_AS of the reference tools' children (default 3/4 of RAM)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run each operation's engines and reference this many times, alternating; the "
                        "tables show each tool's median run, the summary each round's ratio too")  # fmt: skip
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.ops = [o for o in args.ops.split(",") if o]
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = (set(args.ops) - set(OPS)) | (set(args.engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown: {', '.join(sorted(unknown))}")
    return args


def main() -> None:
    from _common import banner, finish, quiet_logs

    args = parse()
    start = banner("scale.py", f"{', '.join(args.ops)} at {', '.join(f'{s}²' for s in args.sizes)}: "
                   f"llmc {' and '.join(args.engines)} vs the reference tools")  # fmt: skip
    quiet_logs()
    gdal_cli = subprocess.run(["gdalinfo", "--version"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("gdalinfo") else ""  # fmt: skip
    machine(gdal_cli)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="llmc-bench-scale-"))
    results: dict[str, dict[tuple[int, str], dict[str, Any]]] = {op: {} for op in args.ops}
    try:
        for size in args.sizes:
            folder = root / str(size)
            try:
                measure_size(args, size, folder, results)
            finally:
                if not args.keep:
                    shutil.rmtree(folder, ignore_errors=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n# load average after: {load()}")
    tools = [f"llmc {e}" for e in args.engines] + ["reference"]
    for op in args.ops:
        report(op, args.sizes, results[op], tools)
    parts = []
    for op in args.ops:
        for engine in args.engines:
            runs = [
                (s, results[op].get((s, f"llmc {engine}")), results[op].get((s, "reference")))
                for s in args.sizes
            ]
            shown = [f"{s}² {r['wall'] / f['wall']:.2f}x" + each_round(results[op][(s, "rounds")], engine)
                     for s, r, f in runs if r and f and "error" not in r and "error" not in f]  # fmt: skip
            parts.append(f"{op} {engine} " + (", ".join(shown) or "n/a"))
    finish(start, "wall time vs reference: " + "; ".join(parts))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        child(json.loads(sys.argv[2]))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        main()
