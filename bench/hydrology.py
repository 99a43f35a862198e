"""Hydrology: ``hydrology.flow_accumulation`` on a 4096 x 4096 grid against pyflwdir called directly.

Setup: a 4096 x 4096 float32 DEM (EPSG:32633, 10 m cells: two valleys falling north to south with
1 m of seeded noise, so it has thousands of small depressions) is filled once with pyflwdir directly
and written as a tiled DEFLATE GeoTIFF. Each run below is in a fresh child process (started through
``sh`` so ``ru_maxrss`` is the child's own):

- directions: ``hydrology.flow_direction`` (D8 by steepest descent, DD-MCP-069) on the filled DEM
  writes the D8 grid both accumulations read, so they compare on the same directions. Its codes are
  also compared with the D8 pyflwdir's flood gave while filling (each cell to its lowest neighbour):
  the share of diagonal codes in each, and of cells where they agree;
- llmc: ``get_operation("hydrology.flow_accumulation")`` run as ``op.run(ctx, op.validate(...))``:
  read with the hostile-file checks, D8 codes checked, loop check, accumulation, atomic tiled write
  with its read-back;
- baseline: rasterio reads the same band, ``pyflwdir.from_array`` + ``upstream_area('cell')``, the
  result saved with ``numpy.save`` (no GeoTIFF, no checks).

Each child first runs the same work on a 64 x 64 grid (numba compiles then: that is the first-call
cost of a fresh worker, which keeps no compiled code on disk) and reports it, then the timed 4096²
run, its peak RSS (``ru_maxrss``) and RSS before it; peak memory per million cells is
(peak - before) / 16.78. The two accumulations are compared cell for cell. About 60-90 s on 2 cores.

Run: .venv/bin/python bench/hydrology.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE = 4096
WARM = 64

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import numpy as np
import rasterio

root, which, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

def llmc(src, dst):
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.workspace import Workspace
    op = get_operation("hydrology.flow_accumulation")
    return op.run(OperationContext(Workspace(root)), op.validate({"flow_dir": src, "dst": dst}))

def direction(src, dst):
    from llmc_mcp.operations import OperationContext, get_operation
    from llmc_mcp.workspace import Workspace
    op = get_operation("hydrology.flow_direction")
    return op.run(OperationContext(Workspace(root)), op.validate({"dem": src, "dst": dst}))

def direct(src, dst):
    from llmc_mcp.operations.hydrology._grid import pyflwdir
    library = pyflwdir()
    with rasterio.open(root / src) as ds:
        d8 = ds.read(1)
    network = library.from_array(d8, ftype="d8", check_ftype=True)
    np.save(root / dst, network.upstream_area(unit="cell"))

run = {"llmc": llmc, "direct": direct, "direction": direction}[which]
src, dst = ("dem.tif", "d8.tif") if which == "direction" else ("d8.tif", f"acc_{which}")
suffix = ".npy" if which == "direct" else ".tif"
dst = dst if dst.endswith(".tif") else dst + suffix
t = time.perf_counter(); run("warm_" + src, "warm_" + dst); first = time.perf_counter() - t
before = rss_mib()
t = time.perf_counter(); run(src, dst); elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"first_call_s": first, "seconds": elapsed, "rss_before_mib": before, "peak_mib": peak}))
"""


def dem(size: int, seed: int = 0) -> object:
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:size, 0:size].astype("float32")
    across = np.minimum(np.abs(cols - size / 4), np.abs(cols - 3 * size / 4))
    return (0.05 * across + 0.02 * (size - rows) + rng.random((size, size), dtype="float32")).astype(
        "float32"
    )


def write_filled(root: Path, name: str, size: int) -> tuple[float, object]:
    """Fill the DEM with pyflwdir directly and write it; seconds it took (JIT included), and the D8
    pyflwdir's flood gave (each cell to its lowest neighbour)."""
    import rasterio
    from affine import Affine

    from llmc_mcp.operations.hydrology._grid import pyflwdir

    t = time.perf_counter()
    filled, d8 = pyflwdir().dem.fill_depressions(dem(size), nodata=float("nan"))
    elapsed = time.perf_counter() - t
    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32",
               "crs": "EPSG:32633", "transform": Affine(10, 0, 500_000, 0, -10, 4_600_000), "tiled": True,
               "blockxsize": 512, "blockysize": 512, "compress": "DEFLATE"}  # fmt: skip
    with rasterio.open(root / name, "w", **profile) as out:
        out.write(filled.astype("float32"), 1)
    return elapsed, d8


def child(root: Path, which: str) -> dict[str, float]:
    script = root / "child.py"
    script.write_text(CHILD)
    command = f"exec '{sys.executable}' '{script}' '{root}' {which} {SIZE}"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{which} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import numpy as np
    import rasterio

    root = Path(tempfile.mkdtemp(prefix="llmc-bench-hydrology-"))
    routing, lowest = write_filled(root, "dem.tif", SIZE)
    write_filled(root, "warm_dem.tif", WARM)
    figures = {which: child(root, which) for which in ("direction", "llmc", "direct")}
    with rasterio.open(root / "d8.tif") as ds:
        steepest = ds.read(1)
    diagonal = np.isin(steepest, (2, 8, 32, 128)).mean()
    lowest_diagonal = np.isin(lowest, (2, 8, 32, 128)).mean()
    same = float((steepest == lowest).mean())
    with rasterio.open(root / "acc_llmc.tif") as ds:
        ours = ds.read(1)
    theirs = np.load(root / "acc_direct.npy")
    agree = float((ours == theirs).mean())
    cells = SIZE * SIZE / 1e6
    print(f"# hydrology.flow_accumulation, {SIZE} x {SIZE} ({cells:.2f} M cells), 2 cores\n")
    print(
        f"Input: a noisy two-valley DEM filled by pyflwdir fill_depressions ({routing:.1f} s incl. JIT); "
        "D8 from hydrology.flow_direction (the 'direction' row).\n"
    )
    print(
        f"D8 codes: {diagonal:.1%} diagonal by steepest descent, {lowest_diagonal:.1%} in pyflwdir's flood "
        f"(lowest neighbour); they agree on {same:.1%} of cells.\n"
    )
    print("| run | 64² first call (JIT), s | 4096² call, s | RSS before, MiB | peak RSS, MiB | MiB/M cells |")
    print("|---|---|---|---|---|---|")
    for which, f in figures.items():
        per = (f["peak_mib"] - f["rss_before_mib"]) / cells
        print(
            f"| {which} | {f['first_call_s']:.2f} | {f['seconds']:.2f} | {f['rss_before_mib']:.0f} | "
            f"{f['peak_mib']:.0f} | {per:.1f} |"
        )
    ratio = figures["llmc"]["seconds"] / figures["direct"]["seconds"]
    per_llmc = (figures["llmc"]["peak_mib"] - figures["llmc"]["rss_before_mib"]) / cells
    print(f"\nAgreement: {agree:.6f} of cells equal (max accumulation {int(ours.max()):,}).")
    print(
        f"SUMMARY: flow_accumulation {SIZE}² llmc {figures['llmc']['seconds']:.2f} s vs pyflwdir direct "
        f"{figures['direct']['seconds']:.2f} s (ratio {ratio:.2f}x), agreement {agree:.6f}, peak "
        f"{per_llmc:.1f} MiB per M cells, first call (JIT) {figures['llmc']['first_call_s']:.2f} s"
    )
    direction = figures["direction"]
    print(
        f"SUMMARY: flow_direction d8 {SIZE}² {direction['seconds']:.2f} s, peak "
        f"{(direction['peak_mib'] - direction['rss_before_mib']) / cells:.1f} MiB per M cells "
        f"({direction['peak_mib']:.0f} MiB RSS), first call (JIT) {direction['first_call_s']:.2f} s"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
