"""Raster operations on large files: llmc's reproject vs gdalwarp, and streaming stats under a memory cap.

Part 1 - reprojection. An 8192 x 8192 float32 raster (smooth field, EPSG:32618, 10 m pixels, tiled
512, DEFLATE + predictor 3) is reprojected to EPSG:4326 with bilinear resampling:

- llmc: ``get_operation("raster.reproject")`` run as ``op.run(ctx, op.validate({...}))`` with an
  ``OperationContext`` of num_threads=2 (the gate is not involved);
- baseline: the ``gdalwarp`` command-line tool (Debian gdal-bin) on exactly the output grid llmc
  chose (``-te``/``-ts`` from llmc's output), ``-r bilinear -t_srs EPSG:4326 -wo NUM_THREADS=2 -multi
  -co TILED=YES -co COMPRESS=DEFLATE``, plus the options that make the outputs alike (512 tiles,
  predictor 3, NaN nodata, 256 MB warp memory as llmc uses, 2 compression threads).

Three runs each, alternating (llmc, gdalwarp, llmc, ...) so load from other processes hits both;
reported: wall and CPU time per run, best-of ratios, pixel agreement (validity agreement, share of
pixels within tolerances, max and mean abs difference over pixels valid in both), and each output's
error against the analytic field (the exact answer the warp approximates). The input is single-band:
a 3-band run triples every figure without telling more, and the script must stay well under 5 min.

Part 2 - ``raster.stats`` on a raster larger than the memory it may use. A 24000 x 24000 uint16
raster (1.07 GiB uncompressed, cheap pattern written block by block, DEFLATE) is summarised in child
processes, each reporting its own time and peak RSS (``ru_maxrss``):

- llmc ``raster.stats`` with RLIMIT_AS = 512 MiB (less than half the raster's uncompressed size);
- llmc ``raster.stats`` without a limit (GDAL's default block cache then sizes itself to 5% of RAM);
- baseline: read the whole band into numpy + numpy min/max/mean/std/percentiles, without a limit;
- the same baseline under the 512 MiB limit (expected to fail).

Run: .venv/bin/python bench/raster.py      (gdalwarp: apt-get install -y gdal-bin)
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WARP_SIZE = 8192
WARP_BANDS = 1
WARP_RUNS = 3
STATS_SIZE = 24_000
STATS_LIMIT_MIB = 512
PERCENTILES = [2.0, 25.0, 50.0, 75.0, 98.0]
TOLERANCES = (1e-3, 1e-2, 5e-2)
"""Absolute tolerances for pixel agreement. The field spans about 200..1400 and changes by up to ~0.5
per output pixel, so 0.05 is ~1/10 pixel of positional difference and ~4e-5 relative."""


# ------------------------------------------------------------------------------------------- inputs


def write_smooth_field(path: Path, size: int, bands: int) -> None:
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    profile = {
        "driver": "GTiff", "width": size, "height": size, "count": bands, "dtype": "float32",
        "crs": "EPSG:32618", "transform": from_origin(500_000.0, 4_900_000.0, 10.0, 10.0),
        "tiled": True, "blockxsize": 512, "blockysize": 512, "compress": "DEFLATE", "predictor": 3,
        "num_threads": 2, "BIGTIFF": "IF_SAFER",
    }  # fmt: skip
    x = np.arange(size, dtype=np.float64)
    with rasterio.Env(GDAL_NUM_THREADS="2"), rasterio.open(path, "w", **profile) as out:
        for row in range(0, size, 512):
            h = min(512, size - row)
            y = np.arange(row, row + h, dtype=np.float64)[:, None]
            for b in range(1, bands + 1):
                field = 500 + 300 * np.sin(x / (700 * b)) * np.cos(y / 900) + 0.05 * x + 0.02 * y
                out.write(field.astype(np.float32), b, window=Window(0, row, size, h))


def write_pattern(path: Path, size: int) -> None:
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.windows import Window

    profile = {
        "driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "uint16",
        "crs": "EPSG:32618", "transform": from_origin(300_000.0, 5_000_000.0, 10.0, 10.0),
        "tiled": True, "blockxsize": 512, "blockysize": 512, "compress": "DEFLATE", "predictor": 2,
        "ZLEVEL": 1, "num_threads": 2, "BIGTIFF": "YES",
    }  # fmt: skip
    cols = np.arange(size, dtype=np.uint32)[None, :]
    with rasterio.Env(GDAL_NUM_THREADS="2"), rasterio.open(path, "w", **profile) as out:
        for row in range(0, size, 512):
            h = min(512, size - row)
            rows = np.arange(row, row + h, dtype=np.uint32)[:, None]
            out.write(((rows * 7 + cols * 3) % 60_000).astype(np.uint16), 1, window=Window(0, row, size, h))


# ------------------------------------------------------------------------------------------- part 1


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def llmc_reproject(ws: Path) -> tuple[float, float, Any]:
    """(wall s, CPU s of this process's threads, output info)."""
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.workspace import Workspace

    op = get_operation("raster.reproject")
    ctx = OperationContext(Workspace(ws), num_threads=2)
    args = op.validate(
        {"src": "field.tif", "dst": "llmc_4326.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}
    )
    cpu, start = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    info = op.run(ctx, args)
    return time.perf_counter() - start, cpu_seconds(resource.RUSAGE_SELF) - cpu, info


def gdalwarp_command(gdalwarp: str, ws: Path, info: Any, out: str) -> list[str]:
    b = info.bounds
    return [
        gdalwarp, "-q", "-overwrite", "-r", "bilinear", "-t_srs", "EPSG:4326",
        "-te", repr(b.left), repr(b.bottom), repr(b.right), repr(b.top),
        "-ts", str(info.width), str(info.height),
        "-wo", "NUM_THREADS=2", "-multi", "-wm", "256", "-dstnodata", "nan",
        "-co", "TILED=YES", "-co", "BLOCKXSIZE=512", "-co", "BLOCKYSIZE=512", "-co", "COMPRESS=DEFLATE",
        "-co", "PREDICTOR=3", "-co", "NUM_THREADS=2", "-co", "BIGTIFF=IF_SAFER",
        str(ws / "field.tif"), str(ws / out),
    ]  # fmt: skip


def run_gdalwarp(command: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the gdalwarp process)."""
    cpu, start = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, cpu_seconds(resource.RUSAGE_CHILDREN) - cpu


def field_value(x: Any, y: Any, band: int) -> Any:
    """The smooth field at (fractional) source pixel indices, as write_smooth_field computes it."""
    import numpy as np

    return 500 + 300 * np.sin(x / (700 * band)) * np.cos(y / 900) + 0.05 * x + 0.02 * y


def truth_errors(paths: dict[str, Path], rows: int = 150, seed: int = 5) -> dict[str, dict[str, float]]:
    """Error of each output against the analytic field, on ``rows`` random full output rows.

    Each output pixel centre is taken to EPSG:32618 with pyproj (exactly, no approximation), turned
    into source pixel indices and the field evaluated there; only points inside the source's pixel
    centres are used (where bilinear interpolation is defined). Bilinear interpolation of this
    field deviates from it by at most ~1e-4, so larger errors come from the warp's geometry.
    """
    import numpy as np
    import rasterio
    from pyproj import Transformer
    from rasterio.windows import Window

    to_utm = Transformer.from_crs("EPSG:4326", "EPSG:32618", always_xy=True)
    out: dict[str, dict[str, float]] = {}
    with rasterio.open(next(iter(paths.values()))) as ref:
        t, width, height = ref.transform, ref.width, ref.height
    chosen = sorted(np.random.default_rng(seed).choice(height, size=min(rows, height), replace=False))
    errors: dict[str, list[Any]] = {name: [] for name in paths}
    handles = {name: rasterio.open(path) for name, path in paths.items()}
    try:
        cols = np.arange(width) + 0.5
        for row in chosen:
            lon, lat = t.c + cols * t.a, np.full(width, t.f + (row + 0.5) * t.e)
            east, north = to_utm.transform(lon, lat)
            x, y = (east - 500_000.0) / 10.0 - 0.5, (4_900_000.0 - north) / 10.0 - 0.5
            inside = (x >= 0) & (x <= WARP_SIZE - 1) & (y >= 0) & (y <= WARP_SIZE - 1)
            for name, ds in handles.items():
                for band in range(1, ds.count + 1):
                    got = ds.read(band, window=Window(0, int(row), width, 1))[0].astype(np.float64)
                    keep = inside & np.isfinite(got)
                    errors[name].append(np.abs(got[keep] - field_value(x[keep], y[keep], band)))
    finally:
        for ds in handles.values():
            ds.close()
    for name, parts in errors.items():
        e = np.concatenate(parts)
        out[name] = {"n": float(e.size), "mean": float(e.mean()), "p99": float(np.percentile(e, 99)),
                     "max": float(e.max())}  # fmt: skip
    return out


def compare(a_path: Path, b_path: Path) -> dict[str, Any]:
    import numpy as np
    import rasterio
    from rasterio.windows import Window

    out: dict[str, Any] = {
        "pixels": 0,
        "valid_both": 0,
        "valid_mismatch": 0,
        **{f"within {t:g}": 0 for t in TOLERANCES},
        "identical": 0,
        "max": 0.0,
        "sum": 0.0,
    }
    with rasterio.open(a_path) as a, rasterio.open(b_path) as b:
        pixel = abs(a.transform.a)
        offset = max(abs(p - q) for p, q in zip(a.transform[:6], b.transform[:6], strict=True)) / pixel
        if (a.width, a.height, a.count) != (b.width, b.height, b.count) or offset > 1e-6:
            raise SystemExit(
                f"grids differ: {a.width}x{a.height} {a.transform!r} vs {b.width}x{b.height} {b.transform!r}"
            )
        out["offset"] = offset
        out["grid"] = f"{a.width} x {a.height} x {a.count} {a.dtypes[0]}"
        for row in range(0, a.height, 1024):
            window = Window(0, row, a.width, min(1024, a.height - row))
            x, y = a.read(window=window, masked=True), b.read(window=window, masked=True)
            xv = ~np.ma.getmaskarray(x) & np.isfinite(np.ma.getdata(x))
            yv = ~np.ma.getmaskarray(y) & np.isfinite(np.ma.getdata(y))
            both = xv & yv
            diff = np.abs(
                np.ma.getdata(x)[both].astype(np.float64) - np.ma.getdata(y)[both].astype(np.float64)
            )
            out["pixels"] += xv.size
            out["valid_both"] += int(both.sum())
            out["valid_mismatch"] += int((xv != yv).sum())
            for t in TOLERANCES:
                out[f"within {t:g}"] += int((diff <= t).sum())
            out["identical"] += int((diff == 0).sum())
            if diff.size:
                out["max"] = max(out["max"], float(diff.max()))
                out["sum"] += float(diff.sum())
    return out


# ------------------------------------------------------------------------------------------- part 2


def child(kind: str, ws: str, limit_mib: int) -> None:
    """Runs in a subprocess: apply the limit first, then work; prints one JSON line."""
    if limit_mib:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib << 20, limit_mib << 20))
    start = time.perf_counter()
    result: dict[str, Any] = {}
    try:
        if kind == "llmc":
            from llmc_mcp.gdal.environment import size_block_cache
            from llmc_mcp.operations import OperationContext, get_operation
            from llmc_mcp.workspace import Workspace

            if limit_mib:
                # What a worker started with --memory-mb does: GDAL's block cache from the budget.
                size_block_cache(limit_mib)
            op = get_operation("raster.stats")
            ctx = OperationContext(Workspace(ws), num_threads=2)
            args = op.validate({"path": "big.tif", "percentiles": PERCENTILES})
            work = time.perf_counter()
            band = op.run(ctx, args).bands[0]
            result = {"min": band.min, "max": band.max, "mean": band.mean, "std": band.std,
                      "valid": band.valid_count, "percentiles": list(band.percentiles.values())}  # fmt: skip
        else:
            import numpy as np
            import rasterio

            work = time.perf_counter()
            with rasterio.open(Path(ws) / "big.tif") as ds:
                data = ds.read(1)
            result = {"min": float(data.min()), "max": float(data.max()), "mean": float(data.mean()),
                      "std": float(data.std()), "valid": int(data.size),
                      "percentiles": [float(v) for v in np.percentile(data, PERCENTILES)]}  # fmt: skip
        result["work_seconds"] = time.perf_counter() - work
    except MemoryError:
        result = {"error": "MemoryError"}
    except Exception as exc:  # a GDAL allocation failure surfaces as a rasterio/llmc error
        result = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    result["seconds"] = time.perf_counter() - start
    result["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open("/proc/self/status") as status:
        result["vmhwm_kib"] = next((int(line.split()[1]) for line in status if line.startswith("VmHWM")), 0)
    print(json.dumps(result))


def run_child(kind: str, ws: Path, limit_mib: int) -> dict[str, Any]:
    """Run one child and collect the JSON line it prints (its own ru_maxrss and VmHWM included).

    The child is started through ``sh`` (not exec'd by it): on Linux a process's ru_maxrss starts at
    the RSS of the image it was exec'd from, so a child forked straight from this process (which
    holds GDAL's block cache after part 1) would inherit this process's peak. Forked from a small
    shell, it starts at a few MiB; VmHWM (per address space) cross-checks it.
    """
    start = time.perf_counter()
    command = [sys.executable, __file__, "--child", kind, str(ws), str(limit_mib)]
    proc = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", *command], capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if lines:
        result: dict[str, Any] = json.loads(lines[-1])
    else:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        result = {"error": f"died (exit {proc.returncode}) {tail[0][:120]}", "maxrss_kib": 0, "vmhwm_kib": 0}
    result["wall"] = wall
    return result


# --------------------------------------------------------------------------------------------- main


def number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.6f}"


def main() -> None:
    from _common import banner, finish, mib, print_table, quiet_logs, ratio

    start = banner("raster.py", "reproject vs gdalwarp on 8192^2 float32; raster.stats under RLIMIT_AS")
    quiet_logs()
    ws = Path(tempfile.mkdtemp(prefix="llmc-bench-raster-"))
    summary_parts = []
    try:
        # ---- part 1
        t0 = time.perf_counter()
        write_smooth_field(ws / "field.tif", WARP_SIZE, WARP_BANDS)
        generated = time.perf_counter() - t0
        size_mib = WARP_SIZE * WARP_SIZE * WARP_BANDS * 4 / (1 << 20)
        on_disk = mib((ws / "field.tif").stat().st_size)
        print(f"\ninput: {WARP_SIZE} x {WARP_SIZE} x {WARP_BANDS} float32 EPSG:32618, {size_mib:.0f} MiB "
              f"uncompressed, {on_disk} MiB on disk, written in {generated:.1f} s")  # fmt: skip
        llmc_runs = [llmc_reproject(ws)]
        info = llmc_runs[0][2]
        gdalwarp = shutil.which("gdalwarp")
        warp_runs: list[tuple[float, float]] = []
        if gdalwarp is None:
            print("\ngdalwarp is not on PATH: skipping the baseline. Install it with:\n"
                  "  apt-get update && apt-get install -y gdal-bin")  # fmt: skip
        else:
            version = subprocess.run([gdalwarp, "--version"], capture_output=True, text=True).stdout.strip()
            command = gdalwarp_command(gdalwarp, ws, info, "gdalwarp_4326.tif")
            print("gdalwarp command: " + " ".join(Path(c).name if c.startswith("/") else c for c in command))
            for i in range(WARP_RUNS):  # alternate, so load from other processes hits both alike
                warp_runs.append(run_gdalwarp(command))
                if i + 1 < WARP_RUNS:
                    llmc_runs.append(llmc_reproject(ws))
        llmc_wall, llmc_cpu = min(r[0] for r in llmc_runs), min(r[1] for r in llmc_runs)

        def run_row(label: str, runs: list[Any], output: str) -> list[object]:
            wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
            walls, cpus = " / ".join(f"{r[0]:.2f}" for r in runs), " / ".join(f"{r[1]:.2f}" for r in runs)
            size = mib((ws / output).stat().st_size)
            return [label, walls, f"{wall:.2f}", ratio(wall, llmc_wall), cpus, ratio(cpu, llmc_cpu), size]

        rows = [run_row("llmc raster.reproject (op.run)", llmc_runs, "llmc_4326.tif")]
        if warp_runs:
            warp_wall = min(r[0] for r in warp_runs)
            rows.append(run_row(f"gdalwarp ({version.split(',')[0]})", warp_runs, "gdalwarp_4326.tif"))
        print_table(
            ["reproject to EPSG:4326, bilinear, 2 threads", "wall s per run", "best wall s", "vs llmc",
             "CPU s per run", "best CPU vs llmc", "output MiB"],
            rows,
            f"Reprojection (output grid {info.width} x {info.height}; runs alternate llmc, gdalwarp, ...)",
        )  # fmt: skip
        if gdalwarp is not None:
            agree = compare(ws / "llmc_4326.tif", ws / "gdalwarp_4326.tif")
            valid = max(1, agree["valid_both"])
            print_table(["pixel agreement llmc vs gdalwarp", "value"], [
                ["grid", agree["grid"]],
                ["max geotransform difference", f"{agree['offset']:.2g} pixel"],
                ["pixels valid in both", f"{agree['valid_both']:,} of {agree['pixels']:,}"],
                ["validity differs (one valid, other nodata)",
                 f"{agree['valid_mismatch']:,} ({agree['valid_mismatch'] / agree['pixels']:.4%})"],
                ["identical values", f"{agree['identical'] / valid:.4%}"],
                *[[f"within {t:g} (abs)", f"{agree[f'within {t:g}'] / valid:.4%}"] for t in TOLERANCES],
                ["max abs diff (valid in both)", f"{agree['max']:.6g}"],
                ["mean abs diff (valid in both)", f"{agree['sum'] / valid:.3g}"],
            ], "Agreement")  # fmt: skip
            truth = truth_errors({"llmc": ws / "llmc_4326.tif", "gdalwarp": ws / "gdalwarp_4326.tif"})
            print_table(
                ["output", "pixels sampled", "mean abs error", "p99 abs error", "max abs error"],
                [[k, f"{v['n']:,.0f}", f"{v['mean']:.3g}", f"{v['p99']:.3g}", f"{v['max']:.3g}"]
                 for k, v in truth.items()],
                "Error against the analytic field (exact pyproj transform of each output pixel centre)",
            )  # fmt: skip
            summary_parts.append(
                f"reproject llmc {llmc_wall:.1f} s vs gdalwarp {warp_wall:.1f} s best wall "
                f"({ratio(warp_wall, llmc_wall)}), "
                f"{agree[f'within {TOLERANCES[-1]:g}'] / valid:.2%} within {TOLERANCES[-1]:g}, "
                f"max diff {agree['max']:.3g}"
            )
        else:
            summary_parts.append(f"reproject llmc {llmc_wall:.1f} s (gdalwarp skipped)")
        for name in ("field.tif", "llmc_4326.tif", "gdalwarp_4326.tif"):
            (ws / name).unlink(missing_ok=True)

        # ---- part 2
        t0 = time.perf_counter()
        write_pattern(ws / "big.tif", STATS_SIZE)
        uncompressed = STATS_SIZE * STATS_SIZE * 2
        generated = time.perf_counter() - t0
        on_disk = mib((ws / "big.tif").stat().st_size)
        print(
            f"\nstats input: {STATS_SIZE} x {STATS_SIZE} uint16, {mib(uncompressed)} MiB uncompressed, "
            f"{on_disk} MiB on disk, written in {generated:.1f} s; RLIMIT_AS {STATS_LIMIT_MIB} MiB"
        )
        runs = [
            ("llmc raster.stats", "llmc", STATS_LIMIT_MIB),
            ("llmc raster.stats", "llmc", 0),
            ("numpy whole array (baseline)", "numpy", 0),
            ("numpy whole array", "numpy", STATS_LIMIT_MIB),
        ]
        results = [(label, limit, run_child(kind, ws, limit)) for label, kind, limit in runs]
        baseline = results[2][2]
        rows = []
        for label, limit, r in results:
            rss = r["maxrss_kib"] * 1024
            rows.append([
                label, f"{limit} MiB" if limit else "none", r.get("error", "ok"),
                f"{r['work_seconds']:.2f}" if "work_seconds" in r else "-", f"{r['wall']:.2f}", mib(rss),
                mib(r["vmhwm_kib"] * 1024),
                f"{rss / uncompressed:.2f}",
                ratio(r["work_seconds"], baseline["work_seconds"]) if "work_seconds" in r else "-",
            ])  # fmt: skip
        print_table(["stats of 1 band, 576 M pixels", "RLIMIT_AS", "outcome", "work s", "process wall s",
                     "peak RSS MiB (ru_maxrss)", "VmHWM MiB", "RSS / raster", "work vs numpy"], rows,
                    "Streaming stats vs whole-array numpy")  # fmt: skip
        limited = results[0][2]
        if "error" not in limited and "error" not in baseline:
            checks = [(k, limited[k], baseline[k]) for k in ("min", "max", "mean", "std", "valid")]
            pairs = zip(PERCENTILES, limited["percentiles"], baseline["percentiles"], strict=True)
            checks += [(f"p{p:g}", a, b) for p, a, b in pairs]
            print_table(["value", "llmc (limited)", "numpy", "abs diff"],
                        [[k, number(a), number(b), f"{abs(a - b):.3g}"] for k, a, b in checks],
                        "Same answers?")  # fmt: skip
        summary_parts.append(
            f"stats under {STATS_LIMIT_MIB} MiB: {limited.get('error', 'ok')}, peak RSS "
            f"{mib(limited['maxrss_kib'] * 1024)} MiB vs numpy {mib(baseline['maxrss_kib'] * 1024)} MiB "
            f"(raster {mib(uncompressed)} MiB)"
        )
        finish(start, "; ".join(summary_parts))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
