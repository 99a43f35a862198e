"""``raster.area``: ground area per value, in square metres on the ellipsoid, whatever the CRS; beside
it, the area on the raster's own projected plane.

A cell count times the nominal cell size is not a ground area: a 0.01° cell is 1.2 km² at the equator
and 0.2 km² at 80°N, a Web Mercator cell covers four times less ground at 60° than at the equator,
and a cell of a CRS in US survey feet holds square feet. So every cell gets its own ground area, on
the ellipsoid of the raster's CRS, by one of two methods (:class:`CellAreas`):

- ``ellipsoidal_quadrangle``: when the grid's rows are parallels and its columns meridians
  (geographic CRSs, Mercator, Pseudo-Mercator, other normal cylindrical projections; checked on the
  grid itself, not looked up by projection name), every cell of a row is the same quadrangle between
  two parallels, whose area has a closed form. Exact; computed once per row.
- ``geodesic_cells``: any other projection. A cell's four corners are taken to latitude/longitude
  and the area of that geodesic quadrangle is measured (``pyproj.Geod``), as a ratio to the cell's
  planar area. Up to 256 x 256 cells every cell is measured; beyond, a lattice of at most 257 x 257
  cells is, and the ratio (a smooth field: the inverse of the projection's areal scale) is
  interpolated bilinearly, which bounds the cost whatever the raster's size.

The planar area is the other right answer, to another question: cells times the cell's area on the
CRS's plane (``|a·e − b·d|`` in CRS units², times the square of the unit in metres, so a US survey foot
is 1200/3937 m). It is what the grid itself declares and what tools that measure in the CRS report;
it differs from the ground by the projection's areal scale (UTM: 0.9992 on its central meridian).
A geographic CRS has no plane, so no planar area.

Pixels are read in windows of ~1 M cells, so memory does not grow with the raster.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Annotated

import numpy as np
from affine import Affine
from pydantic import Field
from pyproj import CRS
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.cell_areas import CellAreas
from llmc_mcp.compute.grid_checks import check_cell_size, check_north_up
from llmc_mcp.compute.models import AreaMethod
from llmc_mcp.compute.pixels import grid_windows, read_valid
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.geodesy.reference import horizontal_part
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import GeoreferencingChoice, RasterArea, ValueArea

CHUNK_CELLS = 1 << 20
"""Cells read at once."""
MAX_VALUES = 10_000
"""Distinct values one call reports; a continuous band has millions and needs classes first."""


@operation("raster", read_only=True, inputs=("path",))
def area(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file, e.g. 'landcover.tif'.")],
    band: Annotated[int, Field(description="Band number (1-based) whose values are measured.")] = 1,
    values: Annotated[
        list[float] | None,
        Field(description="Only these values (each reported, even with 0 cells); default: every value."),
    ] = None,
    georeferencing: GeoreferencingChoice = None,
) -> RasterArea:
    """Area per value of a band: ground area on the ellipsoid (m², ha), any CRS; and on the CRS's plane.

    Use it for class areas (land cover, burn scars, flood extents) in whatever CRS the raster is in:
    geographic degrees, Web Mercator or a projected CRS in feet. Each cell gets its own ground area
    on the ellipsoid of the raster's CRS (a cell count times a nominal cell size is not a ground
    area: cells shrink toward the poles in degrees, Mercator inflates them, feet are not metres).
    ``method`` names how: 'ellipsoidal_quadrangle' (rows are parallels and columns meridians:
    geographic, Mercator and other normal cylindrical grids; exact) or 'geodesic_cells' (other
    projections: each cell's corners to latitude/longitude, geodesic area; on a 257 x 257 lattice
    interpolated for rasters larger than 256 x 256, see ``method_note``). Nodata, masked and
    non-finite cells are excluded and counted in ``nodata_cells``. Streams over windows of ~1 M
    cells. Rotated or sheared grids are refused.

    Beside each ground area, ``planar_area_m2`` is the area on the plane of a projected CRS: cells
    times the cell's area there, converted from the CRS's unit (feet too) to m²; null for a
    geographic CRS. Use the ground area for how much of the Earth the cells cover (land cover,
    burn scars, flood extents); use the planar area to agree with the grid's own numbers and with
    tools that measure in that CRS (on UTM's central meridian the plane is 0.08% smaller).

    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, a complex band, a
    non-finite value in values, more than 10,000 distinct values (pass values, or classify first),
    a raster without a CRS or with a rotated grid; refused when a sidecar overrides the file's
    georeferencing (pass georeferencing) or valid cells lie outside the projection's domain;
    raster_error when pixels cannot be read.
    """
    wanted = _check_values(values)
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing=georeferencing or "refuse") as ds:
        shown = shown_dataset(ctx, ds)
        dtype = _check_band(ds, band, shown)
        crs = _check_grid(ds, shown)
        cells = CellAreas(crs, ds.transform, ds.width, ds.height)
        planar_cell = _planar_cell_m2(crs, ds.transform)
        keys = _keys(wanted, dtype)
        counts: dict[float, int] = {}
        sums: dict[float, float] = {}
        excluded = 0

        def weighed(window: Window) -> tuple[np.ndarray, np.ndarray, int]:
            """The window's valid values (the wanted ones, when values are given), their ground
            areas, and how many cells it excludes."""
            data, valid = read_valid(ctx, ds, band, window)
            areas = cells.window(window)
            if np.isnan(areas[valid]).any():
                raise Refused(
                    f"'{shown}': some valid cells lie outside the domain of its projection (their corners "
                    "do not map to the Earth), so they have no ground area.",
                    fix="Set those cells to nodata, or clip the raster to the CRS's area of use.",
                )
            picked = data[valid]
            weights = areas[valid]
            if keys is not None:
                keep = np.isin(
                    picked, np.asarray([k for k in keys.values() if not math.isnan(k)], dtype=dtype)
                )
                picked, weights = picked[keep], weights[keep]
            return picked, weights, int(valid.size - np.count_nonzero(valid))

        windows = _windows(ds.width, ds.height)
        for _, (picked, weights, skipped) in ctx.engine.map(windows, weighed, progress=False):
            excluded += skipped
            _merge(counts, sums, picked, weights, shown)
    if keys is not None:
        rows = [(requested, key) for requested, key in keys.items()]
    else:
        rows = [(key, key) for key in sorted(counts)]
    found = [
        ValueArea(
            value=requested,
            cells=counts.get(key, 0),
            area_m2=sums.get(key, 0.0),
            area_ha=sums.get(key, 0.0) / 10_000,
            planar_area_m2=None if planar_cell is None else counts.get(key, 0) * planar_cell,
        )
        for requested, key in rows
    ]
    total_cells = sum(counts.values())
    total = math.fsum(sums.values())
    planar_total = None if planar_cell is None else total_cells * planar_cell
    # Named here, not only in the result model: the stub names the Literal types of this module.
    method: AreaMethod = cells.method
    return RasterArea(
        path=shown,
        band=band,
        ellipsoid=cells.ellipsoid_name,
        areas=found,
        total_cells=total_cells,
        total_area_m2=total,
        total_planar_area_m2=planar_total,
        planar_cell_m2=planar_cell,
        note=_which_area(cells.ellipsoid_name, crs.name, total, planar_total),
        nodata_cells=excluded,
        method=method,
        method_note=cells.note,
    )


def _planar_cell_m2(crs: CRS, transform: Affine) -> float | None:
    """One cell's area on the plane of a projected CRS, in m²; None for a geographic CRS (no plane)."""
    horizontal = horizontal_part(crs)
    if not horizontal.is_projected:
        return None
    # Metres per CRS unit on each axis: 1200/3937 for a US survey foot, 0.3048 for an international foot.
    x_unit, y_unit = (axis.unit_conversion_factor for axis in horizontal.axis_info[:2])
    return abs(transform.a * transform.e - transform.b * transform.d) * x_unit * y_unit


def _which_area(ellipsoid: str, crs_name: str, ground: float, planar: float | None) -> str:
    """The sentence on which area answers which question, with how far apart they are here."""
    text = (
        f"area_m2 is the ground area on the {ellipsoid} ellipsoid: use it for how much of the Earth the "
        "cells cover (land cover, burn scars, flood extents)"
    )
    if planar is None:
        return text + "; a geographic CRS has no plane, so there is no planar area."
    text += (
        f"; planar_area_m2 is the area on the plane of {crs_name!r} (cells times cell size): use it to "
        "agree with the grid's own numbers and with tools that measure in that CRS."
    )
    if ground > 0:
        text += f" Here the planar total is {planar / ground:.6g} times the ground total."
    return text


def _check_values(values: Sequence[float] | None) -> list[float] | None:
    if values is None:
        return None
    if not values:
        raise InvalidArgument(
            "values is an empty list.", fix="Omit values (null) for every value, or list some."
        )
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise InvalidArgument(
            f"values {bad} are not finite numbers; NaN and ±Inf cells are nodata, never counted.",
            fix="List real cell values, e.g. [1, 2, 5].",
        )
    if len(values) > MAX_VALUES:
        raise InvalidArgument(f"values lists {len(values)} values; at most {MAX_VALUES}.", fix="List fewer.")
    return list(dict.fromkeys(float(v) for v in values))


def _keys(wanted: list[float] | None, dtype: np.dtype) -> dict[float, float] | None:
    """Each requested value and the value it is in the band's type (what cells are compared with).

    In a float32 band 0.1 is stored as 0.100000001...; a value an integer band cannot hold matches no cell.
    """
    if wanted is None:
        return None
    keys = {}
    for value in wanted:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            held = value.is_integer() and info.min <= value <= info.max
            keys[value] = value if held else math.nan
        else:
            keys[value] = float(np.asarray(value, dtype=dtype))
    return keys


def _check_band(ds: DatasetReader, band: int, shown: str) -> np.dtype:
    if not 1 <= band <= ds.count:
        raise InvalidArgument(
            f"band {band} does not exist in '{shown}', which has {ds.count} band(s).",
            fix=f"Band numbers start at 1: pass a value in 1..{ds.count}.",
        )
    dtype = np.dtype(ds.dtypes[band - 1])
    if dtype.kind == "c":
        raise InvalidArgument(
            f"band {band} of '{shown}' is complex-valued.", fix="Measure a real-valued band."
        )
    return dtype


def _check_grid(ds: DatasetReader, shown: str) -> CRS:
    check_north_up(
        ds.transform,
        shown,
        "; raster.area measures north-up (or south-up) grids only.",
        fix="Write a north-up copy first with raster.reproject (dst_crs: the file's own CRS, resampling "
        "'nearest' for classes), then measure the copy.",
    )
    check_cell_size(ds.transform, shown)
    if ds.crs is None:
        raise InvalidArgument(
            f"'{shown}' has no CRS, so its cells have no known ground size.",
            fix="Write a copy with its CRS assigned (the one its producer used) and measure that.",
        )
    return parse_crs(ds.crs.to_wkt())


def _windows(width: int, height: int) -> Iterator[Window]:
    cols = min(width, CHUNK_CELLS)
    return grid_windows(Window(0, 0, width, height), max(1, min(height, CHUNK_CELLS // cols)), cols)


def _merge(
    counts: dict[float, int], sums: dict[float, float], values: np.ndarray, areas: np.ndarray, shown: str
) -> None:
    if values.size == 0:
        return
    distinct, inverse = np.unique(values, return_inverse=True)
    n = np.bincount(inverse.ravel(), minlength=len(distinct))
    s = np.bincount(inverse.ravel(), weights=areas.astype("float64", copy=False), minlength=len(distinct))
    for value, count, total in zip(distinct.tolist(), n.tolist(), s.tolist(), strict=True):
        key = float(value)
        counts[key] = counts.get(key, 0) + int(count)
        sums[key] = sums.get(key, 0.0) + float(total)
    if len(counts) > MAX_VALUES:
        raise InvalidArgument(
            f"'{shown}' has more than {MAX_VALUES:,} distinct values: areas per value are for classes.",
            fix="Pass values=[...] with the values to measure, or classify the band first.",
        )
