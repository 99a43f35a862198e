"""The DEM side every ``terrain`` operation shares: units, ground spacing, and the windowed write.

A 3x3 terrain measure is only as right as the distances and heights it divides. So, before any
pixel, the DEM's header is turned into metres (:class:`Dem`):

- horizontal: a projected CRS's cell size times its unit's metres (EPSG:2277 is in US survey feet);
  a geographic CRS's cells get their ground spacing on the ellipsoid, row by row (a 1" cell is 31 m
  east-west at the equator and 15 m at 60°), with ``pyproj.Geod``; projections whose scale strays
  more than 1 % from true inside the raster (Web Mercator away from the equator) are refused, since
  their metres are not ground metres;
- vertical: ``z_factor`` (metres per elevation unit) from the argument, the band's declared unit,
  the CRS's vertical axis, or, for a projected CRS, its horizontal unit (gdaldem's assumption);
- orientation: gradients are taken toward geographic east and north from the signs of the
  geotransform, so a south-up or east-to-west grid gives the same slope and aspect as north-up.

Pixels are read in windows with a one-cell halo (:class:`TerrainPlan`), so memory does not grow
with the raster; a cell whose 3x3 window holds nodata, or lies on the raster's edge, is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numexpr as ne
import numpy as np
import rasterio
from pyproj import CRS, Geod, Proj, Transformer
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.grid_checks import check_cell_size, check_north_up
from llmc_mcp.compute.output import check_src_dst, creation_options, describe_output, write_atomically
from llmc_mcp.compute.pixels import grid_windows, read_valid
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.geodesy.reference import geographic_degrees, horizontal_part
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.terrain.models import GroundSpacing, TerrainResult, ZFactorSource

WINDOW_ROWS = 512
WINDOW_COLS = 1024
"""Output cells computed at once: 512 rows (one row of the output's tiles) by up to 1024 columns.
The kernels hold about a dozen float64 arrays of that size (4 MiB each), whatever the raster's size."""
OUTPUT_BLOCK = 512
MAX_SCALE_ERROR = 0.01
"""How far a projection's scale may stray from 1 inside the raster before its cell size stops being a
ground distance we accept (UTM: 0.04 %; Web Mercator at 10° latitude: 1.5 %)."""

_METRES_PER_UNIT: dict[str, float] = {
    **dict.fromkeys(("m", "metre", "metres", "meter", "meters"), 1.0),
    **dict.fromkeys(("ft", "foot", "feet", "international foot", "intl foot", "ft (international)"), 0.3048),
    **dict.fromkeys(
        (
            "us survey foot",
            "us survey feet",
            "foot (us survey)",
            "us-ft",
            "ftus",
            "ft us",
            "us ft",
            "us foot",
            "foot us",
            "survey foot",
        ),
        1200 / 3937,
    ),
    **dict.fromkeys(("cm", "centimetre", "centimeter", "centimetres", "centimeters"), 0.01),
    **dict.fromkeys(("mm", "millimetre", "millimeter", "millimetres", "millimeters"), 0.001),
    **dict.fromkeys(("km", "kilometre", "kilometer", "kilometres", "kilometers"), 1000.0),
}
"""Elevation units a band may declare, in metres. Anything else is refused: guessing would scale slopes."""


@dataclass(frozen=True)
class Spans:
    """Signed ground distances (metres) across a window's 3x3 neighbourhoods.

    ``x[k]``: from the centre of the column left of a cell to the one right of it, positive toward
    east, for each row of the padded window (rows of a geographic grid differ). ``y[k]``: from the row
    above to the row below each output row, positive toward north. Both are column vectors.
    """

    x: np.ndarray
    y: np.ndarray


@dataclass
class Dem:
    """A DEM's band 1, with everything needed to turn its cells into metres; picklable, so windows can
    be computed where the engine runs them (the DEM is opened there by its checked path)."""

    ctx: PieceContext
    source: SourceRaster
    shown: str
    scale: float
    offset: float
    z_factor: float | None
    z_factor_source: ZFactorSource | None
    ground_spacing: GroundSpacing
    _x_sign: float
    _y_sign: float
    _metres_per_unit: float
    _geod: Geod | None
    _degrees_per_unit: float

    @classmethod
    def from_dataset(
        cls, ctx: OperationContext, ds: DatasetReader, z_factor: float | None, *, gradient: bool
    ) -> Dem:
        """The DEM, refused when its cells cannot be put in metres; ``gradient=False`` (roughness, which
        compares heights only) skips the vertical unit and the projection's scale."""
        shown = shown_dataset(ctx, ds)
        raster = SourceRaster.of(ctx, ds, "dem", "refuse")
        dtype = np.dtype(ds.dtypes[0])
        if dtype.kind == "c":
            raise InvalidArgument(f"band 1 of '{shown}' is complex-valued.", fix="Use a real-valued DEM.")
        check_north_up(
            ds.transform,
            shown,
            ": its rows and columns are not east-west and north-south, which the 3x3 gradient needs.",
            fix="Write a north-up copy with raster.reproject (dst_crs: the file's own CRS, resampling "
            "'bilinear'), then use the copy.",
        )
        check_cell_size(ds.transform, shown)
        if ds.crs is None:
            raise InvalidArgument(
                f"'{shown}' has no CRS, so its cell size has no known unit and slopes would be guesses.",
                fix="Write a copy with its CRS assigned (the one its producer used) and use that.",
            )
        if z_factor is not None and not (math.isfinite(z_factor) and z_factor > 0):
            raise InvalidArgument(
                f"z_factor={z_factor} is not a positive number.",
                fix="Pass metres per elevation unit (0.3048 for feet), or null to use the declared unit.",
            )
        crs = parse_crs(ds.crs.to_wkt())
        horizontal = horizontal_part(crs)
        factor, source = _z_factor(ds, crs, horizontal, z_factor, shown) if gradient else (None, None)
        scale, offset = scale_offset(ds, 1)
        x_sign, y_sign = _axis_signs(horizontal, shown)
        if horizontal.is_geographic:
            ellipsoid = horizontal.ellipsoid
            assert ellipsoid is not None  # a geographic CRS always has its datum's ellipsoid
            geod = Geod(a=ellipsoid.semi_major_metre, b=ellipsoid.semi_minor_metre)
            degrees = math.degrees(horizontal.axis_info[0].unit_conversion_factor)
            return cls(raster.context, raster, shown, scale, offset, factor, source, "geographic_per_row",
                       x_sign, y_sign, 1.0, geod, degrees)  # fmt: skip
        if gradient and horizontal.is_projected:  # an engineering (local) CRS is true to scale by definition
            _check_true_scale(horizontal, ds, shown)
        metres = horizontal.axis_info[0].unit_conversion_factor
        return cls(raster.context, raster, shown, scale, offset, factor, source, "projected",
                   x_sign, y_sign, metres, None, 1.0)  # fmt: skip

    @property
    def dataset(self) -> DatasetReader:
        return self.source.dataset()

    # -- ground spacing -------------------------------------------------------------------------------

    def spans(self, row0: int, rows: int) -> Spans:
        """The spans of output rows [row0, row0 + rows), padded by one row each side for ``x``."""
        t = self.dataset.transform
        if self._geod is None:
            x = np.full((rows + 2, 1), 2 * t.a * self._metres_per_unit * self._x_sign)
            y = np.full((rows, 1), 2 * t.e * self._metres_per_unit * self._y_sign)
            return Spans(x, y)
        lat = self._latitudes(np.arange(row0 - 1, row0 + rows + 1))  # the padded window's rows
        on_earth = np.clip(lat, -90.0, 90.0)  # Geod refuses latitudes past a pole; those rows are NaN
        step = abs(t.a) * self._degrees_per_unit
        zeros = np.zeros_like(lat)
        _, _, across = self._geod.inv(zeros, on_earth, np.full_like(lat, 2 * step), on_earth)
        east = math.copysign(1.0, t.a) * self._x_sign
        x = np.where(np.abs(lat) < 90.0, np.asarray(across) * east, np.nan)
        # Each output row's neighbours above and below: padded rows k and k + 2.
        _, _, along = self._geod.inv(zeros[2:], on_earth[:-2], zeros[2:], on_earth[2:])
        north = math.copysign(1.0, t.e) * self._y_sign
        inside = (np.abs(lat[:-2]) <= 90.0) & (np.abs(lat[2:]) <= 90.0)
        y = np.where(inside, np.asarray(along) * north, np.nan)
        return Spans(x[:, None], y[:, None])

    def _latitudes(self, rows: np.ndarray) -> np.ndarray:
        """Latitude (degrees) of each row's centres; past a pole is kept past it so it can be refused."""
        t = self.dataset.transform
        return (t.f + t.e * (rows + 0.5)) * self._degrees_per_unit

    def cell_size_m(self) -> tuple[float, float]:
        middle = self.dataset.height // 2
        spans = self.spans(middle, 1)
        return abs(float(spans.x[1, 0])) / 2, abs(float(spans.y[0, 0])) / 2

    # -- pixels ---------------------------------------------------------------------------------------

    def read_padded(self, window: Window) -> np.ndarray:
        """Elevations (float64, stored values times scale plus offset) of ``window`` and its one-cell halo;
        NaN where nodata, masked, not finite, or outside the raster."""
        ds = self.dataset
        row0, col0 = int(window.row_off) - 1, int(window.col_off) - 1
        rows, cols = int(window.height) + 2, int(window.width) + 2
        r0, c0 = max(row0, 0), max(col0, 0)
        r1, c1 = min(row0 + rows, ds.height), min(col0 + cols, ds.width)
        raw, valid = read_valid(self.ctx, ds, 1, Window(c0, r0, c1 - c0, r1 - r0))
        out = np.empty((rows, cols))
        # The halo outside the raster: at most one row or column each side.
        for edge in (out[: r0 - row0], out[r1 - row0 :], out[:, : c0 - col0], out[:, c1 - col0 :]):
            edge.fill(np.nan)
        inside = out[r0 - row0 : r1 - row0, c0 - col0 : c1 - col0]
        # Cast to float64 before scaling: a float32 product would round before it is widened.
        np.multiply(raw, self.scale, out=inside, dtype=np.float64)
        if self.offset:
            inside += self.offset
        if not valid.all():
            np.copyto(inside, np.nan, where=~valid)
        return out


Kernel = Callable[[np.ndarray, Spans, float], np.ndarray]
"""``kernel(padded elevations, spans, z_factor) -> values`` of the window's cells (NaN: undefined)."""


HORN_EAST = "((c - a) / x0 + 2 * (f - d) / x1 + (i - g) / x2) * q"
HORN_NORTH = "((g + 2 * h + i) - (a + 2 * b + c)) * q / y"
"""dz/d(east) and dz/d(north) (metres per metre) by Horn's (1981) weighted differences, as gdaldem, in
numexpr's language over :func:`horn_neighbours`. Each row's east-west difference is divided by that
row's own spacing (they differ on a geographic grid); on a projected grid this is exactly gdaldem's
``((c + 2f + i) - (a + 2d + g)) / (8 ewres)``. A kernel that needs only a function of the gradient
(slope) puts both in one expression: one pass over the window, no gradient arrays kept."""


def horn_neighbours(z: np.ndarray, spans: Spans, z_factor: float) -> dict[str, Any]:
    """The operands of :data:`HORN_EAST` and :data:`HORN_NORTH`: the 3x3 neighbours of every output
    cell as views of the padded ``z`` (a b c / d e f / g h i, north-up in array order), the spans of
    the rows above, at and below, and the z factor over Horn's weight sum (4)."""
    return {
        "a": z[:-2, :-2], "b": z[:-2, 1:-1], "c": z[:-2, 2:], "d": z[1:-1, :-2], "f": z[1:-1, 2:],
        "g": z[2:, :-2], "h": z[2:, 1:-1], "i": z[2:, 2:],
        "x0": spans.x[:-2], "x1": spans.x[1:-1], "x2": spans.x[2:], "y": spans.y, "q": z_factor / 4,
    }  # fmt: skip


def horn_gradient(z: np.ndarray, spans: Spans, z_factor: float) -> tuple[np.ndarray, np.ndarray]:
    """dz/d(east) and dz/d(north) of the window's cells (:data:`HORN_EAST`, :data:`HORN_NORTH`).

    numexpr: one pass per component instead of numpy's dozen temporaries, the same float64 operations
    in the same order (equal to the numpy form to the bit)."""
    neighbours = horn_neighbours(z, spans, z_factor)
    return ne.evaluate(HORN_EAST, local_dict=neighbours), ne.evaluate(HORN_NORTH, local_dict=neighbours)


def touches_nodata(z: np.ndarray) -> np.ndarray:
    """Output cells whose 3x3 window (in the padded ``z``) holds a NaN."""
    bad = np.isnan(z)
    rows, cols = z.shape[0] - 2, z.shape[1] - 2
    out = np.zeros((rows, cols), dtype=bool)
    for dr in range(3):
        for dc in range(3):
            out |= bad[dr : dr + rows, dc : dc + cols]
    return out


def run(
    ctx: OperationContext,
    dem: str,
    dst: str,
    kernel: Kernel,
    *,
    z_factor: float | None,
    measure: str,
    note: str,
    flat_value: float | None = None,
    gradient: bool = True,
) -> TerrainResult:
    """Open ``dem``, reconcile its units, and write ``kernel`` over every window to ``dst`` atomically."""
    src_path, dst_path = check_src_dst(ctx, dem, dst)
    with gdal_env(ctx), open_for_read(ctx, dem, "dem", resolved=src_path) as ds:
        source = Dem.from_dataset(ctx, ds, z_factor, gradient=gradient)
        profile: dict[str, Any] = {
            "driver": "GTiff", "width": ds.width, "height": ds.height, "count": 1, "dtype": "float32",
            "crs": ds.crs, "transform": ds.transform, "nodata": math.nan, "tiled": True,
            "blockxsize": OUTPUT_BLOCK, "blockysize": OUTPUT_BLOCK,
            **creation_options(ctx, "DEFLATE", np.dtype("float32"), 1, None, None, cog=False),
        }  # fmt: skip
        plan = TerrainPlan(TerrainPiece(source, kernel, source.z_factor or 1.0), profile, measure, ctx.engine)
        write_atomically(ctx, plan, ds, src_path, dst_path)
        cell = source.cell_size_m()
    if source.z_factor_source is not None:
        how = source.z_factor_source.replace("_", " ")
        units = f" z_factor {source.z_factor:g} m per elevation unit ({how})."
    else:
        units = " Values are in the DEM's elevation units, as stored times its declared scale."
    return TerrainResult(
        output=describe_output(ctx, dst, dst_path),
        measure=measure,
        z_factor=source.z_factor,
        z_factor_source=source.z_factor_source,
        ground_spacing=source.ground_spacing,
        cell_size_m=cell,
        flat_value=flat_value,
        valid_cells=plan.valid,
        nodata_cells=plan.nodata,
        note=note + units + " Edge cells and cells whose 3x3 window holds nodata are NaN.",
    )


@dataclass
class TerrainPlan:
    """The write: every window's padded elevations through the kernel into the output; counts cells."""

    piece: TerrainPiece
    profile: dict[str, Any]
    measure: str
    engine: Engine
    valid: int = 0
    nodata: int = 0

    def write(self, source: DatasetReader, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **self.profile) as out:
            out.set_band_description(1, self.measure)
            for window, (values, bad) in self.engine.map(
                windows(out.width, out.height), self.piece, writes=True
            ):
                self.nodata += bad
                self.valid += values.size - bad
                out.write(values, 1, window=window)


@dataclass(frozen=True)
class TerrainPiece:
    """What one window computes, wherever the engine runs it: the DEM, the kernel, the z factor."""

    dem: Dem
    kernel: Kernel
    z_factor: float

    def __call__(self, window: Window) -> tuple[np.ndarray, int]:
        """One window's output, NaN where its 3x3 neighbourhood holds nodata or the value is not
        finite, and how many such cells it has."""
        z = self.dem.read_padded(window)
        spans = self.dem.spans(int(window.row_off), int(window.height))
        values = self.kernel(z, spans, self.z_factor)
        invalid = touches_nodata(z)
        invalid |= ~np.isfinite(values)
        out = values.astype(np.float32)
        np.copyto(out, np.nan, where=invalid)
        return out, int(np.count_nonzero(invalid))


def windows(width: int, height: int) -> Iterator[Window]:
    return grid_windows(Window(0, 0, width, height), WINDOW_ROWS, WINDOW_COLS)


def _z_factor(
    ds: DatasetReader, crs: CRS, horizontal: CRS, given: float | None, shown: str
) -> tuple[float, ZFactorSource]:
    if given is not None:
        return float(given), "argument"
    unit = (ds.units[0] or "").strip()
    if unit:
        key = " ".join(unit.lower().replace("_", " ").split())
        if key in _METRES_PER_UNIT:
            return _METRES_PER_UNIT[key], "band_unit"
        raise InvalidArgument(
            f"band 1 of '{shown}' declares the unit {unit[:40]!r}, which is not a length unit known here "
            "(m, ft, US survey foot, cm, mm, km).",
            fix="Pass z_factor: metres per elevation unit (0.3048 for feet, 1 for metres).",
        )
    for sub in crs.sub_crs_list:
        if sub.is_vertical and sub.axis_info:
            return float(sub.axis_info[0].unit_conversion_factor), "crs_vertical_unit"
    if horizontal.is_geographic:
        return 1.0, "assumed_metres"
    return float(horizontal.axis_info[0].unit_conversion_factor), "horizontal_unit"


def _axis_signs(horizontal: CRS, shown: str) -> tuple[float, float]:
    """+1/-1 for grid x toward east and grid y toward north (westing/southing axes flip them)."""
    directions = [axis.direction.lower() for axis in horizontal.axis_info[:2]]
    x_sign = -1.0 if "west" in directions else 1.0
    y_sign = -1.0 if "south" in directions else 1.0
    known = {"east", "west", "north", "south"}
    if not set(directions) <= known:
        raise InvalidArgument(
            f"'{shown}': its CRS's axes point {directions}, not east/north, so a gradient has no compass "
            "direction.",
            fix="Reproject the DEM to a projected CRS with easting/northing axes (e.g. its UTM zone).",
        )
    return x_sign, y_sign


def _check_true_scale(horizontal: CRS, ds: DatasetReader, shown: str) -> None:
    """Refuse a projection whose map distances differ from ground distances by over MAX_SCALE_ERROR."""
    t = ds.transform
    cols = np.array([0.5, ds.width / 2, ds.width - 0.5])
    rows = np.array([0.5, ds.height / 2, ds.height - 0.5])
    cc, rr = np.meshgrid(cols, rows)
    x, y = t @ (cc.ravel(), rr.ravel())
    to_geo = Transformer.from_crs(horizontal, geographic_degrees(horizontal), always_xy=True)
    lon, lat = to_geo.transform(np.asarray(x), np.asarray(y), errcheck=False)
    factors = Proj(horizontal).get_factors(lon, lat, errcheck=False)
    scales = np.concatenate([np.asarray(factors.meridional_scale), np.asarray(factors.parallel_scale)])
    scales = scales[np.isfinite(scales)]
    if scales.size and float(np.abs(scales - 1.0).max()) > MAX_SCALE_ERROR:
        worst = float(scales[np.argmax(np.abs(scales - 1.0))])
        raise InvalidArgument(
            f"'{shown}' is in {horizontal.name!r}, whose map distances are {worst:.3f} times ground "
            "distances somewhere in this raster: its cell size is not a ground distance, and slopes "
            "would be off by that factor.",
            fix="raster.reproject the DEM to a CRS true to scale here (its UTM zone, or a local projected "
            "CRS; resampling 'bilinear'), or keep it in geographic coordinates (EPSG:4326): both are "
            "measured right.",
        )
