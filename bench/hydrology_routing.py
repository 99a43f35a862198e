"""Hydrology written here (DD-MCP-068): breach, fill_flats, dinf and mfd on a 4096 x 4096 DEM.

Setup: the noisy two-valley 4096 x 4096 float32 DEM of ``bench/hydrology.py`` (EPSG:32633, 10 m cells,
thousands of small depressions), written as a tiled DEFLATE GeoTIFF. Each step runs in a fresh child
process (started through ``sh`` so ``ru_maxrss`` is the child's own) through the catalog
(``op.run(ctx, op.validate(...))``: hostile-file checks, whole-grid read, kernel, atomic tiled write
with its read-back), after the same step on a 64 x 64 grid (numba compiles then, in memory: the
first-call cost of a fresh worker). Reported: that first call, the 4096² call, RSS before it, peak
RSS, and peak memory per million cells. Flow directions and accumulations run on the fill_flats
output (dinf and mfd route nothing across flats). No baseline: no licence-compatible library has
these (DD-MCP-067). About 2 minutes on 2 cores.

Run: .venv/bin/python bench/hydrology_routing.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

SIZE = 4096
WARM = 64
STEPS = (
    ("condition breach", "hydrology.condition", {"dem": "dem{s}.tif", "dst": "b{s}.tif", "method": "breach"}),
    ("condition fill_flats", "hydrology.condition",
     {"dem": "dem{s}.tif", "dst": "ff{s}.tif", "method": "fill_flats"}),
    ("flow_direction dinf", "hydrology.flow_direction",
     {"dem": "ff{s}.tif", "dst": "dinf{s}.tif", "routing": "dinf"}),
    ("flow_accumulation dinf", "hydrology.flow_accumulation",
     {"flow_dir": "dinf{s}.tif", "dst": "ad{s}.tif"}),
    ("flow_direction mfd", "hydrology.flow_direction",
     {"dem": "ff{s}.tif", "dst": "mfd{s}.tif", "routing": "mfd"}),
    ("flow_accumulation mfd", "hydrology.flow_accumulation",
     {"flow_dir": "mfd{s}.tif", "dst": "am{s}.tif", "dem": "ff{s}.tif"}),
)  # fmt: skip

CHILD = r"""
import json, resource, sys, time
from pathlib import Path

root, name, args = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])

def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.workspace import Workspace

op = get_operation(name)
ctx = OperationContext(Workspace(root))

def run(suffix):
    return op.run(ctx, op.validate({k: v.replace("{s}", suffix) for k, v in args.items()}))

t = time.perf_counter(); run("_warm"); first = time.perf_counter() - t
before = rss_mib()
t = time.perf_counter(); result = run(""); elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
extra = {k: getattr(result, k) for k in ("lowered_cells", "raised_cells", "sink_cells", "max_value")
         if hasattr(result, k)}
print(json.dumps({"first_call_s": first, "seconds": elapsed, "rss_before_mib": before, "peak_mib": peak,
                  **extra}))
"""


def write_dem(root: Path, name: str, size: int) -> None:
    import rasterio
    from affine import Affine

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hydrology import dem

    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32",
               "crs": "EPSG:32633", "transform": Affine(10, 0, 500_000, 0, -10, 4_600_000), "tiled": True,
               "blockxsize": 512, "blockysize": 512, "compress": "DEFLATE"}  # fmt: skip
    with rasterio.open(root / name, "w", **profile) as out:
        out.write(dem(size), 1)


def child(root: Path, name: str, args: dict[str, str]) -> dict[str, float]:
    script = root / "child.py"
    script.write_text(CHILD)
    command = ["sh", "-c", 'exec "$0" "$@"', sys.executable, str(script), str(root), name, json.dumps(args)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="llmc-bench-hydrology-routing-"))
    write_dem(root, "dem.tif", SIZE)
    write_dem(root, "dem_warm.tif", WARM)
    cells = SIZE * SIZE / 1e6
    print(f"# hydrology breach, fill_flats, dinf, mfd: {SIZE} x {SIZE} ({cells:.2f} M cells), 2 cores\n")
    print(
        "| step | 64² first call (JIT), s | 4096² call, s | RSS before, MiB | peak RSS, MiB | MiB/M cells "
        "| result |"
    )
    print("|---|---|---|---|---|---|---|")
    summary = []
    for label, name, args in STEPS:
        f = child(root, name, args)
        per = (f["peak_mib"] - f["rss_before_mib"]) / cells
        shown = {
            k: v for k, v in f.items() if k not in ("first_call_s", "seconds", "rss_before_mib", "peak_mib")
        }
        print(
            f"| {label} | {f['first_call_s']:.2f} | {f['seconds']:.2f} | {f['rss_before_mib']:.0f} | "
            f"{f['peak_mib']:.0f} | {per:.1f} | {json.dumps(shown)} |"
        )
        summary.append(f"{label} {f['seconds']:.1f} s / {f['peak_mib']:.0f} MiB peak")
    print(f"\nSUMMARY: {SIZE}²: " + "; ".join(summary))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
