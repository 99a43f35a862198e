"""What every hydrology operation shares: the library, whole-grid reads, the D8 encoding, the write.

Flow routing is a global problem: where a cell drains depends on cells anywhere upstream or down, so
these operations read the whole grid into memory (unlike the raster namespace, which streams). The
cost is bounded by what the routing worker's memory holds (:func:`routing_capacity`), refused above
with the fix, instead of a worker killed by its
memory limit halfway. Outputs go through the atomic, granted, read-back write of
:mod:`llmc_mcp.compute.output`.

pyflwdir (Deltares, MIT; DD-MCP-052) does the routing. Its functions are numba ``cache=True`` JITs:
numba would read and write compiled code beside its source, and a directory the workers of two
sessions could both write would let one session plant code for the other. :func:`pyflwdir` imports
it under :func:`.compiled.compiled_code`: compiled code is read from the server's kernel cache, which
only the server's warm-up writes (DD-MCP-100), or compiled in memory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import rasterio
from pyproj import Geod, Transformer
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import LOCAL
from llmc_mcp.compute.grid_checks import is_rotated
from llmc_mcp.compute.memory import MiB, limit_flags, memory_limit
from llmc_mcp.compute.models import RasterInfo
from llmc_mcp.compute.output import creation_options, describe_output, geotiff_output_path, write_atomically
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.gdal.remote_datasets import dataset_location, input_location, same_file
from llmc_mcp.geodesy.reference import geographic_degrees, horizontal_part
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.hydrology.compiled import compiled_code

ROUTING_BASELINE = 768 * MiB
"""Address space a worker takes before routing's arrays: Python with GDAL and numpy (about 210 MiB
idle), and numba, LLVM and pyflwdir's compiled code (about 450 MiB more after a first routing)."""
ROUTING_BYTES_PER_CELL = 80
"""Address space routing takes per cell, with margin: it peaks at about 38 MiB per million cells of
resident memory (bench/hydrology.py: accumulation 640 MiB at 4096², D8 directions 400 MiB). With the
baseline, a worker's default 2 GiB holds 16,777,216 cells (4096²), the constant limit this replaced,
and 8 GiB 97 million (about 9,860²)."""


def routing_capacity(limit_bytes: int) -> int:
    """Cells a routing operation may hold within ``limit_bytes`` of address space."""
    return max(0, limit_bytes - ROUTING_BASELINE) // ROUTING_BYTES_PER_CELL


D8_NODATA = 247
"""pyflwdir's nodata value for D8 grids; written as the output's declared nodata."""
D8_PIT = 0
D8_VALUES = frozenset({0, 1, 2, 4, 8, 16, 32, 64, 128, 255, D8_NODATA})
"""ESRI D8: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE; 0 (or 255) drains nowhere; 247 nodata."""
D8_ENCODING = (
    "ESRI D8 (uint8): 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE (row down = south on a north-up "
    "grid); 0 = drains nowhere (an outlet on the grid's or data's edge, or an interior pit); 247 = nodata"
)
OUTPUT_BLOCK = 512
MAX_SHAPE_SPREAD = 0.01
"""How far (relative) the ratios of a row's neighbour distances may differ between its ends and its
middle, where they are measured: beyond, the projection changes the cells' ground shape across the
grid (a wide equal-area grid far from its centre) and one set of distances per row would be wrong."""
ROUTING_TAG = "LLMC_ROUTING"
"""Band tag recording a flow direction grid's routing ('d8', 'dinf', 'mfd'): accumulation reads each
differently, and an MFD mask of single receivers holds valid D8 codes."""
ACCUMULATION_TAG = "LLMC_ACCUMULATION_UNITS"
"""Band tag recording what an accumulation counts ('cells', 'm2', 'weights'), so a stream threshold
in other units is refused instead of compared with the wrong quantity."""


@functools.cache
def pyflwdir() -> ModuleType:
    """pyflwdir, imported once per process with its compiled code read from the server's kernel cache
    or compiled in memory, never written to disk by this process (:mod:`.compiled`)."""
    with compiled_code():
        import pyflwdir as module
        import pyflwdir.dem  # its decorators run at import too
    return module


def check_size(ds: DatasetReader, shown: str, argument: str) -> None:
    """Refuse a grid the worker that routes it cannot hold, naming the size that fits, the memory that
    would hold this one, and the flag that gives it (:mod:`llmc_mcp.compute.memory`)."""
    cells = ds.width * ds.height
    limit = memory_limit()
    capacity = routing_capacity(limit)
    if cells > capacity:
        fits = math.isqrt(capacity)
        side = math.ceil(math.sqrt(cells / max(capacity, 1)) * 10) / 10
        needed = math.ceil((ROUTING_BASELINE + cells * ROUTING_BYTES_PER_CELL) / MiB)
        raise InvalidArgument(
            f"{argument}: '{shown}' has {cells:,} cells ({ds.width} x {ds.height}); flow routing holds the "
            f"whole grid in memory, and {limit // MiB:,} MiB hold at most {capacity:,} cells (about "
            f"{fits} x {fits}).",
            fix=f"Coarsen it (raster.reproject with a cell about {side}x larger, resampling 'average' for a "
            f"DEM), or split it into hydrologically complete basins and route each; or ask the operator "
            f"for {needed:,} MiB ({limit_flags()}).",
        )


def check_grid(ds: DatasetReader, shown: str, argument: str) -> None:
    """A north-up (or south-up) grid of one band: D8 neighbours are rows and columns."""
    if is_rotated(ds.transform):
        raise InvalidArgument(
            f"{argument}: '{shown}' has a rotated or sheared grid; D8 neighbours are rows and columns.",
            fix="Write a north-up copy with raster.reproject (dst_crs: its own CRS) and route that.",
        )
    if ds.count != 1:
        raise InvalidArgument(
            f"{argument}: '{shown}' has {ds.count} bands; hydrology reads one grid.",
            fix="Extract the band first (raster.calc with one input).",
        )
    check_size(ds, shown, argument)


def check_square(ds: DatasetReader, shown: str, argument: str, routing: str) -> None:
    """Refuse grids whose cells are not ground squares, where dinf and mfd slopes would be wrong.

    On square cells neither the D-infinity angle nor the MFD shares depend on the cell size or its
    units (every slope scales alike), so a projected grid of square cells needs nothing more.
    """
    if ds.crs is not None and ds.crs.is_geographic:
        raise InvalidArgument(
            f"{argument}: '{shown}' is on a geographic grid (degrees); {routing} splits flow by slopes, and "
            "a degree of longitude is shorter on the ground than a degree of latitude.",
            fix="Reproject the DEM to a projected CRS in metres (raster.reproject), or use routing 'd8'.",
        )
    width, height = abs(ds.transform.a), abs(ds.transform.e)
    if not math.isclose(width, height, rel_tol=1e-9):
        raise InvalidArgument(
            f"{argument}: '{shown}' has {width:g} x {height:g} cells; {routing} is computed on square "
            "cells only.",
            fix="Resample to square cells (raster.reproject with one resolution), or use routing 'd8'.",
        )


@dataclass(frozen=True)
class NeighbourDistances:
    """Ground distances (metres; the grid's own unit without a CRS) between cell centres, per row.

    ``east[r]``: from a cell of row r to its east (and west) neighbour. ``south[r]``, ``south_east[r]``,
    ``south_west[r]``: from a cell of row r to its neighbour below, below-right and below-left (row
    r + 1; the last row's are unused); a cell's neighbours above are row r - 1's below, seen from the
    other end. "South" and "east" are grid directions (next row, next column).
    """

    east: np.ndarray
    south: np.ndarray
    south_east: np.ndarray
    south_west: np.ndarray


def neighbour_distances(ds: DatasetReader, shown: str, argument: str) -> NeighbourDistances:
    """The ground distances to each row's neighbours, on the CRS's ellipsoid between unprojected centres.

    Geodesics between the centres measure any CRS alike: a geographic grid's east-west distance shrinks
    with latitude row by row, and a projection's scale (Mercator, equal-area grids) is undone. They
    are measured in the middle column and checked at both ends of each row: a projection that changes
    the cells' ground shape along a row by more than MAX_SHAPE_SPREAD is refused. Without a CRS the
    cell's width and height are taken as lengths in one unit; in a local (engineering) CRS, in its
    axes' units.
    """
    t = ds.transform
    rows = np.arange(ds.height, dtype="float64")
    horizontal = None if ds.crs is None else horizontal_part(parse_crs(ds.crs.to_wkt()))
    if horizontal is None or horizontal.ellipsoid is None:
        # No CRS, or a local (engineering) one: the plane is the ground, in the axes' units.
        units = (
            [1.0, 1.0] if horizontal is None else [a.unit_conversion_factor for a in horizontal.axis_info[:2]]
        )
        width, height = abs(t.a) * units[0], abs(t.e) * units[-1]
        diagonal = math.hypot(width, height)
        full = np.ones_like(rows)
        return NeighbourDistances(width * full, height * full, diagonal * full, diagonal * full)
    ellipsoid = horizontal.ellipsoid
    geod = Geod(a=ellipsoid.semi_major_metre, b=ellipsoid.semi_minor_metre)
    to_geo = Transformer.from_crs(horizontal, geographic_degrees(horizontal), always_xy=True)

    def measure(col: int) -> np.ndarray:
        """east, south, south_east, south_west from the cells of column ``col`` (rows of a 4 x rows array)."""
        corners = [(col + dc + 0.5, rows + dr + 0.5) for dr, dc in ((0, 0), (0, 1), (1, 0), (1, 1))]
        lonlat = [to_geo.transform(*(t @ corner), errcheck=False) for corner in corners]
        pairs = ((0, 1), (0, 2), (0, 3), (1, 2))
        return np.array([geod.inv(*lonlat[a], *lonlat[b])[2] for a, b in pairs])

    middle = measure(ds.width // 2)
    used = np.ones(middle.shape, dtype=bool)
    used[1:, -1] = False  # the last row has no row below
    if not (np.isfinite(middle[used]) & (middle[used] > 0)).all():
        raise Refused(
            f"{argument}: '{shown}' has rows whose cells have no ground size (past a pole, or outside "
            "the area its projection covers), so D8 slopes cannot be measured there.",
            fix="Clip the DEM to the area its CRS covers (raster.clip), or reproject it.",
        )
    if ds.width > 1 and ds.height > 1:
        shape = middle[:, :-1] / middle[1, :-1]
        for col in (0, ds.width - 2):
            end = measure(col)
            spread = float(np.nanmax(np.abs(end[:, :-1] / end[1, :-1] / shape - 1.0)))
            if not spread <= MAX_SHAPE_SPREAD:  # NaN (an end outside the projection's area) too
                raise Refused(
                    f"{argument}: in '{shown}' ({horizontal.name!r}) the ground shape of the cells changes "
                    f"by {spread:.1%} along a row, so one set of neighbour distances per row would "
                    "misjudge which neighbour is steepest.",
                    fix="Reproject the DEM to a conformal CRS (its UTM zone) or to geographic "
                    "coordinates (EPSG:4326), where cell shapes are constant along rows.",
                )
    return NeighbourDistances(*middle)


def check_dst(ctx: OperationContext, dst: str, sources: dict[str, str]) -> Path:
    """``dst`` as a path: a GeoTIFF name that is none of the inputs (writing would destroy it)."""
    dst_path = geotiff_output_path(ctx, dst)
    for argument, name in sources.items():
        if same_file(input_location(ctx, name, argument), dst_path):
            raise InvalidArgument(
                f"dst is the same file as {argument} ('{name}'); writing would destroy it.",
                fix="Write to a new name, e.g. 'out/result.tif'.",
            )
    return dst_path


def read_elevation(ctx: OperationContext, ds: DatasetReader) -> np.ndarray:
    """Band 1 as float32 physical elevations (scale and offset applied), NaN where not valid.

    float32 because pyflwdir's priority queue orders cells by float32 elevation: float64 input would be
    filled to float32-rounded spill heights anyway.
    """
    raw, valid = read_valid(ctx, ds, 1)
    scale, offset = scale_offset(ds, 1)
    elevation = raw.astype("float64") * scale + offset
    return np.where(valid, elevation, np.nan).astype("float32")


def read_d8(ctx: OperationContext, ds: DatasetReader, shown: str, argument: str) -> np.ndarray:
    """A D8 grid as uint8 with 247 where not valid, refused unless every value is an ESRI D8 code."""
    raw, valid = read_valid(ctx, ds, 1)
    if raw.dtype.kind not in "iu":
        raise InvalidArgument(
            f"{argument}: '{shown}' holds {raw.dtype.name} values, not D8 flow directions.",
            fix="Pass the output of hydrology.flow_direction (uint8, ESRI D8 codes).",
        )
    if raw.dtype == np.uint8:  # the usual case: one table lookup per cell instead of a set test
        codes = np.zeros(256, dtype=bool)
        codes[list(D8_VALUES)] = True
        bad = valid & ~codes[raw]
    else:
        bad = valid & ~np.isin(raw, np.fromiter(D8_VALUES, dtype="int64"))
    if bad.any():
        found = sorted({int(v) for v in np.unique(raw[bad])[:5]})
        raise InvalidArgument(
            f"{argument}: '{shown}' has values {found} that are not D8 codes ({D8_ENCODING}).",
            fix="Pass the output of hydrology.flow_direction; other encodings (TauDEM 1-8, GRASS, LDD) "
            "are not read.",
        )
    return np.where(valid, raw, D8_NODATA).astype("uint8")


def flow_network(ctx: OperationContext, ds: DatasetReader, shown: str, argument: str) -> Any:
    """The pyflwdir network of a D8 grid, refused if some cells never reach an outlet (a loop).

    pyflwdir orders cells by walking upstream from the cells that drain nowhere (``idxs_seq``, which
    every accumulation needs anyway): a valid cell it never reaches drains into a loop. A grid with no
    valid cell or of one cell is refused first: pyflwdir cannot represent either.
    """
    routing = ds.tags(1).get(ROUTING_TAG, "d8")
    if routing != "d8":
        raise InvalidArgument(
            f"{argument}: '{shown}' holds {routing} flow directions (its {ROUTING_TAG} tag); this operation "
            "follows single D8 paths.",
            fix="Derive D8 directions (hydrology.flow_direction with routing='d8') from the same DEM.",
        )
    d8 = read_d8(ctx, ds, shown, argument)
    require_data(d8 != D8_NODATA, shown, argument)
    if d8.size == 1:
        raise Refused(
            f"{argument}: '{shown}' is a single cell; flow routing needs cells to route between.",
            fix="Route a DEM that covers the whole drainage area.",
        )
    try:
        network = pyflwdir().from_array(d8, ftype="d8", check_ftype=False, transform=ds.transform)
    except ValueError:
        # Past the two checks above, pyflwdir's only refusal left is a grid where no cell drains nowhere
        # ("no pits found"): every valid cell drains on to another, so all of them end in loops.
        stuck = np.flatnonzero(d8.ravel() != D8_NODATA)
    else:
        ordered = np.zeros(d8.size, dtype=bool)
        ordered[network.idxs_seq] = True
        stuck = np.flatnonzero(network.mask.ravel() & ~ordered)
    if stuck.size:
        row, col = divmod(int(stuck[0]), ds.width)
        raise InvalidArgument(
            f"{argument}: {stuck.size:,} cells of '{shown}' drain into a loop (e.g. row {row}, col {col}), "
            "so they reach no outlet and have no defined accumulation.",
            fix="Recompute the directions with hydrology.flow_direction from a conditioned DEM.",
        )
    return network


def require_data(valid: np.ndarray, shown: str, argument: str) -> None:
    """Refuse a grid whose every cell is nodata: routing it has no answer, not an empty one."""
    if not valid.any():
        raise Refused(
            f"{argument}: every cell of '{shown}' is nodata, so there is no flow to route.",
            fix="Check the DEM it came from (raster.stats: valid_count; raster.info: nodata) and derive it "
            "again from one with data.",
        )


@dataclass(frozen=True)
class GridPlan:
    """One in-memory grid to write as a tiled, compressed GeoTIFF on ``source``'s grid."""

    data: np.ndarray
    nodata: float | None
    tags: dict[str, str]
    options: dict[str, str]

    def write(self, source: DatasetReader, tmp: Path) -> None:
        profile = {
            "driver": "GTiff",
            "width": source.width,
            "height": source.height,
            "count": 1,
            "dtype": self.data.dtype.name,
            "crs": source.crs,
            "transform": source.transform,
            "nodata": self.nodata,
            "tiled": True,
            "blockxsize": OUTPUT_BLOCK,
            "blockysize": OUTPUT_BLOCK,
            **self.options,
        }
        bands = [
            Window(0, row, source.width, min(OUTPUT_BLOCK, source.height - row))
            for row in range(0, source.height, OUTPUT_BLOCK)
        ]
        with rasterio.open(tmp, "w", **profile) as out:
            # The routed grid is already whole in this process (routing needs it whole, on any
            # engine): its rows are written from here, never shipped to a cluster and back.
            for window, rows in LOCAL.map(bands, self._rows):
                out.write(rows, 1, window=window)
            if self.tags:
                out.update_tags(1, **self.tags)

    def _rows(self, window: Window) -> np.ndarray:
        """The rows of the grid that ``window`` (a band of whole rows) covers."""
        return self.data[int(window.row_off) : int(window.row_off + window.height)]


def write_grid(
    ctx: OperationContext,
    source: DatasetReader,
    dst: str,
    dst_path: Path,
    data: np.ndarray,
    nodata: float | None,
    tags: dict[str, str] | None = None,
) -> RasterInfo:
    """Write ``data`` on ``source``'s grid to ``dst`` atomically (granted, read back); its raster.info."""
    options = creation_options(ctx, "DEFLATE", data.dtype, 1, None, None, cog=False)
    plan = GridPlan(data, nodata, tags or {}, options)
    write_atomically(ctx, plan, source, dataset_location(source), dst_path)
    return describe_output(ctx, dst, dst_path)
