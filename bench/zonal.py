"""``raster.zonal_stats`` over 10,000 polygons against exactextract called directly on the same data.

Inputs, built here: a 4000 x 4000 float32 raster in UTM (10 m cells, tiled 512, DEFLATE + predictor 3,
a smooth field plus noise, 1% of cells nodata) and 10,000 polygons in a GeoPackage: circles of 33
vertices (radius 50-300 m, so ~80 to ~2800 cells each, random centres, partly overlapping), one layer,
in the raster's CRS. Statistics: mean, min, max, count.

- llmc in-process: ``get_operation("raster.zonal_stats").run(ctx, args)``: reading the GeoPackage with
  the hardened pyogrio, the checks, exactextract fed through llmc's band source (masks via
  ``read_valid``) and feature source (WKB), result models built;
- llmc through a worker: the classic tool ``raster_zonal_stats`` called with the SDK's in-process MCP
  client (a worker process runs the operation; the 10,000 results cross the channel as JSON);
- baseline: exactextract's own ``exact_extract`` with its ``RasterioRasterSource`` on the same file and
  the same polygons read with pyogrio and handed over as GeoJSON-like features (exactextract reads
  vectors itself only through GDAL's Python bindings or fiona, neither installed here), GeoJSON output.

Best of three runs each (the worker: best of three calls after a warm-up call); results compared zone
by zone (relative difference at most 1e-9). About a minute on 2 cores.

Run: .venv/bin/python bench/zonal.py
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

SIZE = 4000
ZONES = 10_000
RUNS = 3
STATS = ["mean", "min", "max", "count"]
LEFT, TOP, CELL = 400_000.0, 5_000_000.0, 10.0
CRS = "EPSG:32631"


def write_raster(path: Path) -> None:
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    rng = np.random.default_rng(7)
    profile = {
        "driver": "GTiff", "width": SIZE, "height": SIZE, "count": 1, "dtype": "float32", "crs": CRS,
        "transform": from_origin(LEFT, TOP, CELL, CELL), "nodata": -9999.0, "tiled": True,
        "blockxsize": 512, "blockysize": 512, "compress": "deflate", "predictor": 3,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        for top in range(0, SIZE, 512):
            rows = min(512, SIZE - top)
            r, c = np.mgrid[top : top + rows, 0:SIZE]
            field = np.sin(r / 300.0) * np.cos(c / 450.0) * 100 + rng.normal(0, 5, (rows, SIZE))
            field[rng.random((rows, SIZE)) < 0.01] = -9999.0
            dst.write(field.astype("float32"), 1, window=Window(0, top, SIZE, rows))


def write_zones(path: Path) -> None:
    import numpy as np
    import shapely

    from llmc_mcp.operations.vectors import hardened_pyogrio

    rng = np.random.default_rng(11)
    extent = SIZE * CELL
    xs = LEFT + rng.uniform(300, extent - 300, ZONES)
    ys = TOP - rng.uniform(300, extent - 300, ZONES)
    radii = rng.uniform(50, 300, ZONES)
    circles = shapely.buffer(shapely.points(xs, ys), radii, quad_segs=8)
    hardened_pyogrio().raw.write(
        str(path),
        shapely.to_wkb(circles),
        [np.arange(ZONES, dtype="int64")],
        ["zone"],
        layer="zones",
        driver="GPKG",
        geometry_type="Polygon",
        crs=CRS,
    )


def llmc_runs(ws: Path) -> tuple[float, list[dict[str, Any]]]:
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.workspace import Workspace

    op = get_operation("raster.zonal_stats")
    ctx = OperationContext(Workspace(ws), num_threads=2)
    args = op.validate({"path": "field.tif", "zones": "zones.gpkg", "stats": STATS})
    times, stats = [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = op.run(ctx, args)
        times.append(time.perf_counter() - start)
        stats = [dict(zone.stats) for zone in result.results]
    return min(times), stats


def baseline_runs(ws: Path) -> tuple[float, list[dict[str, Any]]]:
    import pyogrio
    import rasterio
    import shapely
    from exactextract import exact_extract
    from exactextract.feature import JSONFeatureSource
    from exactextract.raster import RasterioRasterSource

    times, stats = [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        _, _, wkb, _ = pyogrio.raw.read(str(ws / "zones.gpkg"), columns=[])
        features = [
            {"type": "Feature", "properties": {}, "geometry": g.__geo_interface__}
            for g in shapely.from_wkb(wkb)
        ]
        with rasterio.open(ws / "field.tif") as ds:
            rows = exact_extract(
                RasterioRasterSource(ds), JSONFeatureSource(features), STATS, output="geojson"
            )
        times.append(time.perf_counter() - start)
        stats = [{s: row["properties"][s] for s in STATS} for row in rows]
    return min(times), stats


def worker_runs(ws: Path) -> tuple[float, list[dict[str, Any]]]:
    import anyio
    from mcp import Client

    from llmc_mcp.config import Settings
    from llmc_mcp.server.app import build_server

    async def go() -> tuple[float, list[dict[str, Any]]]:
        settings = Settings(mode="classic", workspace=ws, exec_timeout=120, memory_mb=2048)
        args = {"path": "field.tif", "zones": "zones.gpkg", "stats": STATS}
        times, stats = [], []
        async with Client(build_server(settings)) as client:
            await client.call_tool("raster_zonal_stats", args)  # warm-up: worker spawn, imports
            for _ in range(RUNS):
                start = time.perf_counter()
                answer = await client.call_tool("raster_zonal_stats", args)
                times.append(time.perf_counter() - start)
                assert answer.structured_content is not None, answer.content
                stats = [zone["stats"] for zone in answer.structured_content["results"]]
        return min(times), stats

    return anyio.run(go)


def agree(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[bool, float]:
    worst = 0.0
    if len(a) != len(b):
        return False, math.inf
    for x, y in zip(a, b, strict=True):
        for name in STATS:
            u, v = x[name], y[name]
            u = None if u is None or (isinstance(u, float) and math.isnan(u)) else float(u)
            v = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
            if (u is None) != (v is None):
                return False, math.inf
            if u is not None and v is not None:
                worst = max(worst, abs(u - v) / max(abs(v), 1e-12))
    return worst <= 1e-9, worst


def main() -> None:
    from _common import banner, finish, print_table, quiet_logs, ratio

    start = banner("zonal.py", f"raster.zonal_stats over {ZONES:,} polygons vs exactextract directly")
    quiet_logs()
    with tempfile.TemporaryDirectory(prefix="llmc-bench-zonal-") as folder:
        ws = Path(folder)
        began = time.perf_counter()
        write_raster(ws / "field.tif")
        write_zones(ws / "zones.gpkg")
        print(
            f"\nfield.tif: {SIZE} x {SIZE} float32 (1% nodata); zones.gpkg: {ZONES:,} circles of 33 "
            f"vertices; written in {time.perf_counter() - began:.1f} s"
        )
        base_time, base_stats = baseline_runs(ws)
        llmc_time, llmc_stats = llmc_runs(ws)
        worker_time, worker_stats = worker_runs(ws)
        same, worst = agree(llmc_stats, base_stats)
        same_worker, worst_worker = agree(worker_stats, base_stats)
        print_table(
            [f"{ZONES:,} polygons, {', '.join(STATS)}", "best of 3 s", "vs exactextract", "agree"],
            [
                ["llmc in-process (op.run)", f"{llmc_time:.3f}", ratio(llmc_time, base_time),
                 f"{'yes' if same else 'NO'} (max rel diff {worst:.1g})"],
                ["llmc classic tool via a worker", f"{worker_time:.3f}", ratio(worker_time, base_time),
                 f"{'yes' if same_worker else 'NO'} (max rel diff {worst_worker:.1g})"],
                ["exactextract directly (RasterioRasterSource)", f"{base_time:.3f}", "1.00x", ""],
            ],
        )  # fmt: skip
    finish(
        start,
        f"zonal_stats over {ZONES:,} polygons: {ratio(llmc_time, base_time)} exactextract's time in-process, "
        f"{ratio(worker_time, base_time)} through a worker; results "
        f"{'agree' if same and same_worker else 'DIFFER'}",
    )


if __name__ == "__main__":
    main()
