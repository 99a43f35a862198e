"""A window of a large remote COG: llmc-mcp's reading against a whole-file download and against
``gdal_translate -srcwin`` on ``/vsicurl/`` of the same URL, over a loopback server that adds 20 ms to
every request (a nearby object store's round trip).

Input: a 16384 x 16384 uint16 COG (512-pixel tiles, DEFLATE, overviews) of smooth noise, about
200 MiB, served by ``tests/remote_server.py`` with range requests and ETags. Measured, three runs each,
alternating, caches emptied between runs:

- llmc: ``raster.clip`` of a 1024 x 1024 window at the centre, in this process through the server's
  own client (``Fetcher``) and the opener workers use, written as a GeoTIFF into a workspace;
- a confined worker: the same clip from agent code through a real server (``execute_code``), so each
  range also crosses the worker's channel to the server;
- ``gdal_translate -srcwin`` of the same window from ``/vsicurl/`` of the same URL (GDAL's own HTTP
  reader, its defaults), when the GDAL command-line tools are installed;
- a whole-file download (what copying the scene into the workspace first costs).

Printed: requests, bytes received, and wall time for each, and the ratios against ``gdal_translate``.

Run: .venv/bin/python bench/remote.py [--side 16384] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine_line, quiet_logs

sys.path.insert(0, str(ROOT))
from tests.remote_server import RangeServer, make_cog

WINDOW = 1024
RUNS = 3


def smooth_noise(side: int) -> np.ndarray:
    """Values that compress like a real DEM or band (neither constant nor random)."""
    rng = np.random.default_rng(25)
    coarse = rng.integers(0, 4000, size=(side // 64 + 2, side // 64 + 2)).astype(np.float32)
    rows = np.linspace(0, coarse.shape[0] - 1.001, side)
    cols = np.linspace(0, coarse.shape[1] - 1.001, side)
    r0, c0 = rows.astype(int), cols.astype(int)
    fr, fc = (rows - r0)[:, None], (cols - c0)[None, :]
    grid = (
        coarse[r0][:, c0] * (1 - fr) * (1 - fc)
        + coarse[r0 + 1][:, c0] * fr * (1 - fc)
        + coarse[r0][:, c0 + 1] * (1 - fr) * fc
        + coarse[r0 + 1][:, c0 + 1] * fr * fc
    )
    return (grid + rng.integers(0, 50, size=(side, side))).astype(np.uint16)


def llmc_in_process(url: str, bounds: list[float], prefix: str) -> None:
    from llmc_mcp.capture import capture
    from llmc_mcp.config import Quota
    from llmc_mcp.gdal.environment import gdal_env
    from llmc_mcp.operations import raster
    from llmc_mcp.operations.catalog import OperationContext
    from llmc_mcp.outputs import LocalOutputs, OutputLedger
    from llmc_mcp.remote.access import RemoteAccess, configure
    from llmc_mcp.remote.allowlist import Allowlist
    from llmc_mcp.remote.fetcher import Fetcher
    from llmc_mcp.remote.reader import BLOCKS
    from llmc_mcp.remote.transport import call_scope
    from llmc_mcp.workspace import Workspace

    BLOCKS.clear()
    fetcher = Fetcher(Allowlist([prefix]))
    configure(RemoteAccess(fetcher.allowlist, fetcher))
    workspace = Workspace(tempfile.mkdtemp(prefix="llmc-bench-remote-"))
    ctx = OperationContext(workspace, 2, LocalOutputs(OutputLedger(workspace, Quota())))
    try:
        args = raster.clip.validate({"src": url, "dst": "window.tif", "bounds": bounds})
        with gdal_env(ctx), call_scope(), capture("raster.clip", args):
            raster.clip.run(ctx, args)
    finally:
        configure(None)
        fetcher.close()
        shutil.rmtree(workspace.root, ignore_errors=True)


def llmc_confined_worker(url: str, bounds: list[float], prefix: str) -> float:
    """The clip from agent code through a real server; returns the call's own wall time (the worker's
    start is not counted: a session's worker is warm after its first call)."""
    import anyio
    from mcp import Client

    from llmc_mcp.config import Settings
    from llmc_mcp.server.app import build_server

    workspace = Path(tempfile.mkdtemp(prefix="llmc-bench-remote-"))
    settings = Settings(mode="code", workspace=workspace, reflection="hints", allow_remote=(prefix,))
    code = f"raster.clip({url!r}, 'window.tif', bounds={bounds!r})['output']['width']"
    elapsed = 0.0

    async def run() -> None:
        nonlocal elapsed
        async with Client(build_server(settings)) as client:
            await client.call_tool("execute_code", {"code": "1"})
            start = time.perf_counter()
            answer = await client.call_tool("execute_code", {"code": code})
            elapsed = time.perf_counter() - start
            if answer.is_error:
                raise RuntimeError(str(answer.structured_content)[:500])

    try:
        anyio.run(run)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    return elapsed


def gdal_translate(url: str, offset: int, out: Path) -> None:
    env = {
        **os.environ,
        "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
        "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
    }
    for key in ("GDAL_HTTP_PROXY", "GDAL_HTTPS_PROXY", "CPL_VSIL_CURL_USE_HEAD"):
        env.pop(key, None)
    command = ["gdal_translate", "-q", "-srcwin", str(offset), str(offset), str(WINDOW), str(WINDOW)]
    command += ["-co", "TILED=YES", "-co", "COMPRESS=DEFLATE", f"/vsicurl/{url}", str(out)]
    subprocess.run(command, check=True, env=env)


def download(url: str, out: Path) -> None:
    with urllib.request.urlopen(url, timeout=600) as answer, out.open("wb") as sink:
        shutil.copyfileobj(answer, sink, 1 << 20)


def measure(server: RangeServer, work: Any) -> dict[str, float]:
    server.reset_counters()
    start = time.perf_counter()
    own = work()
    wall = time.perf_counter() - start
    return {
        "wall": own if isinstance(own, float) else wall,
        "requests": len(server.requests),
        "bytes": server.bytes_sent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16384)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    quiet_logs()
    print(machine_line())
    cells = smooth_noise(args.side)
    cog = make_cog(None, width=args.side, height=args.side, dtype="uint16", blocksize=512, fill=cells)
    size = len(cog) / 2**20
    print(f"COG {args.side} x {args.side} uint16, {size:.1f} MiB; window {WINDOW} x {WINDOW} at the centre;")
    print(f"{args.latency * 1000:.0f} ms added per request; loopback, so no bandwidth limit (a download is")
    print("as fast as the disk here; over 100 Mbit/s each MiB costs about 0.08 s more).")
    offset = (args.side - WINDOW) // 2
    left, top = 500_000 + offset * 10, 5_000_000 - offset * 10
    bounds = [left, top - WINDOW * 10, left + WINDOW * 10, top]
    have_gdal = shutil.which("gdal_translate") is not None
    scratch = Path(tempfile.mkdtemp(prefix="llmc-bench-remote-"))
    results: dict[str, list[dict[str, float]]] = {}
    with RangeServer() as server:
        server.files["cogs/scene.tif"] = cog
        server.latency = args.latency
        url, prefix = server.url("cogs/scene.tif"), server.base + "cogs/"
        runs = {
            "llmc (in process)": lambda: llmc_in_process(url, bounds, prefix),
            "llmc (confined worker)": lambda: llmc_confined_worker(url, bounds, prefix),
            "whole-file download": lambda: download(url, scratch / "scene.tif"),
        }
        if have_gdal:
            runs["gdal_translate -srcwin /vsicurl/"] = lambda: gdal_translate(
                url, offset, scratch / "gdal.tif"
            )
        for _ in range(RUNS):
            for name, work in runs.items():
                results.setdefault(name, []).append(measure(server, work))
    shutil.rmtree(scratch, ignore_errors=True)
    reference = min(
        r["wall"] for r in results.get("gdal_translate -srcwin /vsicurl/", [{"wall": float("nan")}])
    )
    print(f"{'reader':34} {'requests':>8} {'MiB':>8} {'share':>7} {'best s':>8} {'vs gdal':>8}")
    summary: dict[str, Any] = {}
    for name, runs_of in results.items():
        best = min(r["wall"] for r in runs_of)
        requests = runs_of[-1]["requests"]
        received = runs_of[-1]["bytes"]
        share = received / len(cog)
        ratio = best / reference if reference == reference else float("nan")
        print(f"{name:34} {requests:8d} {received / 2**20:8.2f} {share:7.2%} {best:8.3f} {ratio:7.2f}x")
        summary[name] = {"requests": requests, "bytes": received, "best_s": round(best, 3)}
    print("SUMMARY: " + json.dumps(summary))


if __name__ == "__main__":
    main()
