"""Every operation that takes an input raster takes an allowed URL where it takes a workspace path, and
answers exactly as it does for the same bytes in the workspace.

Each case runs twice in this process: on workspace files, then on the same files served by a loopback
server (``tests/remote_server.py``). The answers must be equal once names are put aside, and every
raster written must be equal cell for cell. The gate is not involved here (``tests/
test_remote_server_faces.py`` gates remote inputs); operations are run as the faces run them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from llmc_mcp.capture import capture
from llmc_mcp.compute.engine import local_engine
from llmc_mcp.config import Quota
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations import get_operation
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.outputs import LocalOutputs, OutputLedger
from llmc_mcp.remote.access import RemoteAccess, configure
from llmc_mcp.remote.allowlist import Allowlist
from llmc_mcp.remote.fetcher import Fetcher
from llmc_mcp.remote.transport import call_scope
from llmc_mcp.workspace import Workspace
from tests.remote_server import RangeServer

SIDE = 96
CELL = 30.0
WEST, NORTH = 500_000.0, 4_600_000.0
CENTRE = [WEST + SIDE / 2 * CELL + 5, NORTH - SIDE / 2 * CELL - 5]
BOX = [WEST + 20 * CELL, NORTH - 70 * CELL, WEST + 60 * CELL, NORTH - 30 * CELL]


def _write(path: Path, data: np.ndarray, **extra: Any) -> None:
    profile = {
        "driver": "GTiff", "width": data.shape[1], "height": data.shape[0], "count": 1,
        "dtype": data.dtype.name,
        "crs": "EPSG:32633", "transform": from_origin(extra.pop("west", WEST), NORTH, CELL, CELL),
        "tiled": True, "blockxsize": 32, "blockysize": 32, "compress": "deflate", **extra,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as out:
        out.write(data, 1)


def _inputs(root: Path) -> None:
    """A valley DEM, a second DEM overlapping it, zones on its grid, and its D8 grid and accumulation."""
    rows, cols = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    dem = 100 + 0.5 * np.abs(cols - SIDE / 2) + 0.2 * (SIDE - rows) + np.sin(cols / 7) * np.cos(rows / 5)
    _write(root / "dem.tif", dem.astype(np.float32), nodata=-9999.0)
    _write(root / "dem2.tif", (dem + 3).astype(np.float32), nodata=-9999.0, west=WEST + 40 * CELL)
    _write(root / "zones.tif", ((rows // 32) * 3 + cols // 32 + 1).astype(np.uint8), nodata=0)
    ctx = OperationContext(Workspace(root), 1, LocalOutputs(OutputLedger(Workspace(root), Quota())))
    run(ctx, "hydrology.flow_direction", {"dem": "dem.tif", "dst": "fdir.tif"})
    run(ctx, "hydrology.flow_accumulation", {"flow_dir": "fdir.tif", "dst": "acc.tif"})


INPUTS = ("dem.tif", "dem2.tif", "zones.tif", "fdir.tif", "acc.tif")

CASES: list[tuple[str, dict[str, Any]]] = [
    ("raster.info", {"path": "dem.tif"}),
    ("raster.stats", {"path": "dem.tif", "histogram_bins": 8}),
    ("raster.sample", {"path": "dem.tif", "points": [CENTRE]}),
    ("raster.area", {"path": "zones.tif"}),
    ("raster.preview", {"path": "dem.tif", "max_size": 64}),
    ("raster.reproject", {"src": "dem.tif", "dst": "{out}", "dst_crs": "EPSG:4326",
                          "resampling": "bilinear"}),
    ("raster.convert", {"src": "dem.tif", "dst": "{out}", "driver": "COG"}),
    ("raster.calc", {"expression": "a * 2 + b",
                     "inputs": {"a": {"path": "dem.tif"}, "b": {"path": "zones.tif"}}, "dst": "{out}"}),
    ("raster.align", {"src": "dem2.tif", "like": "dem.tif", "dst": "{out}"}),
    ("raster.merge", {"sources": ["dem.tif", "dem2.tif"], "dst": "{out}", "method": "mean"}),
    ("raster.reclassify", {"src": "dem.tif", "dst": "{out}", "rules": [{"min": 0, "max": 110, "to": 1},
                                                                        {"min": 110, "max": 1000, "to": 2}]}),
    ("raster.clip", {"src": "dem.tif", "dst": "{out}", "bounds": BOX}),
    ("raster.zonal_stats", {"path": "dem.tif", "zones": "zones.tif", "stats": ["mean", "count", "median"]}),
    ("terrain.slope", {"dem": "dem.tif", "dst": "{out}"}),
    ("terrain.aspect", {"dem": "dem.tif", "dst": "{out}"}),
    ("terrain.hillshade", {"dem": "dem.tif", "dst": "{out}"}),
    ("terrain.roughness", {"dem": "dem.tif", "dst": "{out}"}),
    ("hydrology.condition", {"dem": "dem.tif", "dst": "{out}"}),
    ("hydrology.flow_direction", {"dem": "dem.tif", "dst": "{out}"}),
    ("hydrology.flow_accumulation", {"flow_dir": "fdir.tif", "dst": "{out}"}),
    ("hydrology.streams", {"accumulation": "acc.tif", "dst": "{out}", "threshold": 30}),
    ("hydrology.watershed", {"flow_dir": "fdir.tif", "pour_points": [CENTRE], "dst": "{out}"}),
]  # fmt: skip


def run(ctx: OperationContext, qualname: str, args: dict[str, Any]) -> Any:
    op = get_operation(qualname)
    validated = op.validate(args)
    with gdal_env(ctx), call_scope(), capture(qualname, validated):
        return op.run(ctx, validated)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OperationContext, RangeServer]]:
    root = tmp_path_factory.mktemp("remote-ops")
    _inputs(root)
    workspace = Workspace(root)
    with RangeServer() as server:
        for name in INPUTS:
            server.files[f"data/{name}"] = (root / name).read_bytes()
        fetcher = Fetcher(Allowlist([server.base + "data/"]))
        configure(RemoteAccess(fetcher.allowlist, fetcher))
        try:
            outputs = LocalOutputs(OutputLedger(workspace, Quota()))
            yield OperationContext(workspace, 2, outputs, engine=local_engine(2)), server
        finally:
            configure(None)
            fetcher.close()


def _with(args: Any, names: dict[str, str], out: str) -> Any:
    if isinstance(args, str):
        return out if args == "{out}" else names.get(args, args)
    if isinstance(args, dict):
        return {k: _with(v, names, out) for k, v in args.items()}
    if isinstance(args, list):
        return [_with(v, names, out) for v in args]
    return args


@pytest.mark.parametrize(("qualname", "args"), CASES, ids=[case[0] for case in CASES])
def test_an_allowed_url_gives_the_answer_of_the_same_file_in_the_workspace(
    world: tuple[OperationContext, RangeServer], qualname: str, args: dict[str, Any]
) -> None:
    """Guards against an operation that takes only workspace paths (a URL refused, or half-supported:
    a second input, a `like`, a zone raster read locally), or that reads remote bytes differently."""
    ctx, server = world
    slug = qualname.replace(".", "_")
    urls = {name: server.url(f"data/{name}") for name in INPUTS}
    local = run(ctx, qualname, _with(args, {}, f"local_{slug}.tif")).model_dump(mode="json")
    remote = run(ctx, qualname, _with(args, urls, f"remote_{slug}.tif")).model_dump(mode="json")
    shown = json.dumps(remote)
    for name, url in urls.items():
        shown = shown.replace(url, name)
    expected = json.dumps(local, sort_keys=True, indent=0).splitlines()
    got = json.dumps(json.loads(shown.replace(f"remote_{slug}", f"local_{slug}")), sort_keys=True, indent=0)
    assert got.splitlines() == expected
    if "{out}" in json.dumps(args):
        with (
            rasterio.open(ctx.workspace.root / f"local_{slug}.tif") as a,
            rasterio.open(ctx.workspace.root / f"remote_{slug}.tif") as b,
        ):
            assert (a.crs, a.transform, a.tags()) == (b.crs, b.transform, b.tags())
            np.testing.assert_array_equal(a.read(), b.read())
