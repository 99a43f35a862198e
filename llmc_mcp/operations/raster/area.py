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
from pathlib import Path
from typing import Annotated

import numpy as np
from affine import Affine
from pydantic import Field
from pyproj import CRS, Geod, Transformer
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.geodesy.reference import geographic_degrees, horizontal_part
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.models import AreaMethod, GeoreferencingChoice, RasterArea, ValueArea
from llmc_mcp.operations.raster.pixels import grid_windows, read_valid

CHUNK_CELLS = 1 << 20
"""Cells read at once."""
MAX_VALUES = 10_000
"""Distinct values one call reports; a continuous band has millions and needs classes first."""
LATTICE = 256
"""Cells per axis measured exactly by ``geodesic_cells`` before it interpolates between them."""
_ALIGNED_DEG = 1e-9
"""How far (degrees, ~0.1 mm) a row may stray from a parallel and still be treated as one."""


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
        shown = ctx.workspace.relative(Path(ds.name))
        dtype = _check_band(ds, band, shown)
        crs = _check_grid(ds, shown)
        cells = CellAreas(crs, ds.transform, ds.width, ds.height)
        planar_cell = _planar_cell_m2(crs, ds.transform)
        keys = _keys(wanted, dtype)
        counts: dict[float, int] = {}
        sums: dict[float, float] = {}
        excluded = 0
        for window in _windows(ds.width, ds.height):
            data, valid = read_valid(ctx, ds, band, window)
            excluded += int(valid.size - np.count_nonzero(valid))
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
        method=cells.method,
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


class CellAreas:
    """The ground area (m², on the CRS's ellipsoid) of every cell of a north-up or south-up grid."""

    def __init__(self, crs: CRS, transform: Affine, width: int, height: int):
        self.transform = transform
        self.width, self.height = width, height
        horizontal = horizontal_part(crs)
        ellipsoid = horizontal.ellipsoid
        if ellipsoid is None:
            raise InvalidArgument(
                f"The raster's CRS {crs.name!r} has no ellipsoid, so it has no ground area.",
                fix="Assign the raster its geographic or projected CRS.",
            )
        self.ellipsoid_name = ellipsoid.name
        self.a = ellipsoid.semi_major_metre
        self.b = ellipsoid.semi_minor_metre
        self.e2 = 1 - (self.b / self.a) ** 2
        self.geographic = horizontal.is_geographic
        if self.geographic:
            # Degrees straight from the grid: no PROJ call, and rows past a pole stay visible to clip.
            factor = math.degrees(horizontal.axis_info[0].unit_conversion_factor)
            self._to_degrees = lambda x, y: (np.asarray(x) * factor, np.asarray(y) * factor)
        else:
            to_geo = Transformer.from_crs(horizontal, geographic_degrees(horizontal), always_xy=True)
            self._to_degrees = lambda x, y: to_geo.transform(x, y, errcheck=False)
        quadrangles = self.geographic or self._quadrangles()
        self.method: AreaMethod = "ellipsoidal_quadrangle" if quadrangles else "geodesic_cells"
        if quadrangles:
            self._span = math.radians(self._lon_span())
            self.note = (
                f"Rows are parallels and columns meridians, so each row's cells are quadrangles between two "
                f"parallels; their area is the closed-form area on the {self.ellipsoid_name} ellipsoid, "
                "exact, computed once per row."
            )
        else:
            self._lattice()

    # -- which method ---------------------------------------------------------------------------------

    def _quadrangles(self) -> bool:
        """Whether grid rows are parallels and columns meridians, with longitude linear in the column."""
        cols = np.array([0.0, self.width / 2, self.width])
        rows = np.array([0.0, self.height / 2, self.height])
        cc, rr = np.meshgrid(cols, rows)
        x, y = self.transform @ (cc.ravel(), rr.ravel())
        lon, lat = (np.asarray(v, dtype="float64").reshape(3, 3) for v in self._to_degrees(x, y))
        if not (np.isfinite(lon).all() and np.isfinite(lat).all()):
            return False
        same_lat = np.ptp(lat, axis=1).max() <= _ALIGNED_DEG
        same_lon = np.abs(_wrap(lon - lon[0])).max() <= _ALIGNED_DEG  # each column against its top
        steps = _wrap(np.diff(lon[1]))  # along the middle row, across the antimeridian too
        linear = abs(steps[0] - steps[1]) <= _ALIGNED_DEG
        return bool(same_lat and same_lon and linear)

    def _lon_span(self) -> float:
        """A cell's longitude span in degrees: the same for every cell when columns are meridians."""
        t = self.transform
        if self.geographic:
            lon, _ = self._to_degrees(np.asarray([t.a]), np.asarray([0.0]))
            return abs(float(lon[0]))
        y = t.f + t.e * self.height / 2
        lon, _ = self._to_degrees(np.asarray([t.c, t.c + t.a]), np.asarray([y, y]))
        return abs(float(_wrap(np.asarray([lon[1] - lon[0]]))[0]))

    # -- ellipsoidal_quadrangle -----------------------------------------------------------------------

    def _zone(self, lat_deg: np.ndarray) -> np.ndarray:
        """Area (m²) per radian of longitude between the equator and each latitude, on the ellipsoid.

        S(φ) = b²/2 · [sin φ / (1 - e² sin² φ) + atanh(e sin φ) / e]; R² sin φ on a sphere.
        """
        s = np.sin(np.radians(np.clip(lat_deg, -90.0, 90.0)))
        if self.e2 == 0:
            return self.a**2 * s
        e = math.sqrt(self.e2)
        return self.b**2 / 2 * (s / (1 - self.e2 * s * s) + np.arctanh(e * s) / e)

    def _row_areas(self, row0: int, rows: int) -> np.ndarray:
        """The area of one cell of each row in rows [row0, row0 + rows), from its edges' latitudes."""
        t = self.transform
        edges = np.arange(row0, row0 + rows + 1, dtype="float64")
        x_mid = np.full(edges.shape, self.width / 2)
        x, y = t @ (x_mid, edges)
        _, lat = self._to_degrees(np.asarray(x), np.asarray(y))
        zone = self._zone(np.asarray(lat, dtype="float64"))
        return self._span * np.abs(np.diff(zone))

    # -- geodesic_cells -------------------------------------------------------------------------------

    def _lattice(self) -> None:
        """Ground/planar area ratios of a lattice of cells (every cell when the raster is small)."""
        step_r = max(1, math.ceil(self.height / LATTICE))
        step_c = max(1, math.ceil(self.width / LATTICE))
        self._rows = np.unique(np.append(np.arange(0, self.height, step_r), self.height - 1)).astype(
            "float64"
        )
        self._cols = np.unique(np.append(np.arange(0, self.width, step_c), self.width - 1)).astype("float64")
        cc, rr = np.meshgrid(self._cols, self._rows)
        corners = [(cc, rr), (cc + 1, rr), (cc + 1, rr + 1), (cc, rr + 1)]
        lons, lats = [], []
        for col, row in corners:
            x, y = self.transform @ (col.ravel(), row.ravel())
            lon, lat = self._to_degrees(np.asarray(x), np.asarray(y))
            lons.append(np.asarray(lon, dtype="float64"))
            lats.append(np.asarray(lat, dtype="float64"))
        lon_q, lat_q = np.stack(lons, axis=1), np.stack(lats, axis=1)
        geod = Geod(a=self.a, b=self.b)
        planar = abs(self.transform.a * self.transform.e)
        ratio = np.full(lon_q.shape[0], np.nan)
        for i in range(lon_q.shape[0]):
            if np.isfinite(lon_q[i]).all() and np.isfinite(lat_q[i]).all():
                ground, _ = geod.polygon_area_perimeter(lon_q[i], lat_q[i])
                ratio[i] = abs(ground) / planar
        self._ratio = ratio.reshape(len(self._rows), len(self._cols))
        exact = step_r == 1 and step_c == 1
        how = (
            "every cell measured"
            if exact
            else f"a lattice of {len(self._rows)} x {len(self._cols)} cells (every {step_r} rows, {step_c} "
            "columns) measured and the ground/planar ratio interpolated bilinearly between them (the "
            "ratio is the inverse of the projection's areal scale, a smooth field: on a 60 x 60 km UTM "
            "raster of 100 m cells interpolation moves no cell by 2e-9, 600 x 600 km of 1 km cells by 5e-8)"
        )
        self.note = (
            f"Each cell's four corners were taken to latitude/longitude on the {self.ellipsoid_name} "
            f"ellipsoid and the geodesic quadrangle's area measured (pyproj.Geod); {how}. The cell's "
            "edges are straight in the projection, the quadrangle's are geodesics: the difference grows with "
            "the square of the cell size (2e-9 for 1 km UTM cells, 2e-7 for 10 km)."
        )

    def _cell_ratios(self, window: Window) -> np.ndarray:
        """Bilinear between lattice cells; at a lattice cell, its own ratio (a NaN neighbour stays out)."""
        r0, r1, wr = _bracket(np.arange(window.row_off, window.row_off + window.height), self._rows)
        c0, c1, wc = _bracket(np.arange(window.col_off, window.col_off + window.width), self._cols)
        g = self._ratio
        top = _lerp(g[np.ix_(r0, c0)], g[np.ix_(r0, c1)], wc[None, :])
        bottom = _lerp(g[np.ix_(r1, c0)], g[np.ix_(r1, c1)], wc[None, :])
        return _lerp(top, bottom, wr[:, None])

    # -- both -----------------------------------------------------------------------------------------

    def window(self, window: Window) -> np.ndarray:
        """Ground area (m²) of every cell of ``window``, shaped like its pixels."""
        shape = (int(window.height), int(window.width))
        if self.method == "ellipsoidal_quadrangle":
            per_row = self._row_areas(int(window.row_off), shape[0])
            return np.broadcast_to(per_row[:, None], shape)
        return self._cell_ratios(window) * abs(self.transform.a * self.transform.e)


def _bracket(at: np.ndarray, knots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each position, the knots on either side (indices) and the weight of the second."""
    if len(knots) == 1:
        zero = np.zeros(len(at), dtype=np.intp)
        return zero, zero, np.zeros(len(at))
    i = np.clip(np.searchsorted(knots, at, side="right") - 1, 0, len(knots) - 2)
    w = np.clip((at - knots[i]) / (knots[i + 1] - knots[i]), 0.0, 1.0)
    return i, i + 1, w


def _lerp(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a + (b - a) w, where a weight of 0 or 1 takes one side alone (so NaN on the other does not spread)."""
    return np.where(w == 0, a, np.where(w == 1, b, a + (b - a) * w))


def _wrap(degrees: np.ndarray) -> np.ndarray:
    """Longitude differences into [-180, 180)."""
    return (np.asarray(degrees) + 180.0) % 360.0 - 180.0


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
    t = ds.transform
    if t.b != 0 or t.d != 0:
        raise InvalidArgument(
            f"'{shown}' has a rotated or sheared grid (geotransform b={t.b:g}, d={t.d:g}); raster.area "
            "measures north-up (or south-up) grids only.",
            fix="Write a north-up copy first with raster.reproject (dst_crs: the file's own CRS, resampling "
            "'nearest' for classes), then measure the copy.",
        )
    if t.a == 0 or t.e == 0:
        raise InvalidArgument(
            f"'{shown}' has a zero cell size in its geotransform.", fix="Fix its georeferencing."
        )
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
