"""``raster.clip``: cut a raster to a box or to polygons; output pixels are exactly source pixels.

Nothing is resampled: the output grid is a window of the source grid (``crop=True``) or the source
grid itself (``crop=False``), and each kept cell holds its source value. Which cells are inside is
rasterio's rule (``rasterio.features``): a cell whose centre is inside, or with ``all_touched`` any
cell the shape touches.

A box in the raster's CRS on a grid that is not rotated needs no rasterizing: its cells are a
rectangle worked out from the inverse geotransform (so north-up and south-up grids are the same
arithmetic). A box in another CRS is first replaced by its bounding box in the raster's CRS, with
each edge densified (21 points) so a curved edge stays inside it: an output grid is a rectangle of
the raster's CRS, so it cannot follow the box's outline (a polygon in ``mask`` can). A box's cell
whose centre lies exactly on its edge is inside.

Polygons (and a box on a rotated grid) are rasterized with ``geometry_mask`` window by window: a
first pass over their envelope finds the exact rows and columns holding inside cells (the crop),
the second writes. Memory is one window whatever the raster's size.

Outside cells follow ``raster.reproject``'s nodata rule (:func:`.reproject._output_nodata`): the
source's nodata, else NaN for float data, else an internal mask (or alpha 0 when the source has an
alpha band), so they are never silent zeros.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import rasterio
from pydantic import Field
from pyproj import CRS, Transformer
from pyproj.exceptions import ProjError
from rasterio.enums import ColorInterp
from rasterio.features import geometry_mask
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.grid_checks import is_rotated
from llmc_mcp.compute.models import Bounds
from llmc_mcp.compute.output import (
    check_src_dst,
    creation_options,
    describe_output,
    single_dtype,
    write_atomically,
)
from llmc_mcp.compute.pixels import grid_windows
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import CrsError, InvalidArgument, RasterError, Refused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.geodesy.reference import RASTER_SPREAD
from llmc_mcp.geodesy.routes import choose_operation
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import (
    ClipMaskKind,
    ClipResult,
    ClipWindow,
    GeoreferencingChoice,
    OutputGeoTiff,
)
from llmc_mcp.operations.raster.reproject import _output_nodata, carry_metadata

if TYPE_CHECKING:
    import shapely

    from llmc_mcp.compute.polygons import Polygons

OUTPUT_BLOCK = 512
WINDOW_ROWS = 512
WINDOW_COLS = 2048
"""Windows of 512 rows (one row of output tiles) by up to 2048 columns: about 1 M cells per band."""
DENSIFY_POINTS = 21
SNAP = 1e-6
"""A box edge within a millionth of a cell of a cell edge is on it (float noise of the CRS units)."""


@operation("raster", read_only=False, inputs=("src", "mask"), outputs=("dst",))
def clip(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster.")],
    dst: OutputGeoTiff,
    bounds: Annotated[
        tuple[float, float, float, float] | None,
        Field(description="Box (left, bottom, right, top) in bounds_crs; x first (longitude for EPSG:4326)."),
    ] = None,
    bounds_crs: Annotated[
        str | None,
        Field(description="CRS of bounds (EPSG code, WKT, PROJ string); default: the raster's own."),
    ] = None,
    mask: Annotated[
        str | None,
        Field(description="Workspace-relative vector file of polygons (GeoPackage, GeoJSON, Shapefile)."),
    ] = None,
    mask_layer: Annotated[
        str | None, Field(description="Layer of mask to use; needed when the file has several.")
    ] = None,
    crop: Annotated[
        bool,
        Field(description="True: shrink the grid to the inside cells; False: keep the source grid."),
    ] = True,
    all_touched: Annotated[
        bool,
        Field(description="True: every cell the box/polygons touch is inside; False: cells whose centre is."),
    ] = False,
    georeferencing: GeoreferencingChoice = None,
) -> ClipResult:
    """Cut a raster to a box or to polygons; outside cells become nodata. Pixels are never resampled.

    Give ``bounds`` (a box in ``bounds_crs``, default the raster's CRS), ``mask`` (polygons of a
    vector file, transformed to the raster's CRS), or both (the cells inside both). A cell is inside
    when its centre is inside, or with ``all_touched=True`` when the shape touches it (the rule of
    rasterio.features). A box in another CRS becomes its bounding box in the raster's CRS (edges
    densified), which with all_touched=True covers the whole box; to cut exactly to its outline,
    pass it as a polygon in mask.

    ``crop=True`` (default) makes the output grid the smallest window of source pixels holding every
    inside cell (same pixel size and alignment; output pixel (r, c) is source pixel (row_off + r,
    col_off + c)); ``crop=False`` keeps the source grid. Inside cells keep their source values
    (source nodata stays nodata); outside cells become the source's nodata, else NaN for float
    data, else are masked out by an internal mask (alpha 0 when the source has an alpha band), as in
    raster.reproject. All bands; metadata, colour table and scale/offset are carried over. The output
    is a 512x512-tiled DEFLATE GeoTIFF, streamed window by window and renamed onto dst when complete.

    Errors (ApiError, by e.type): invalid_argument for neither bounds nor mask, a malformed box, a box
    that misses the raster (its bounds are given in both CRSs) or holds no cell centre (try
    all_touched), or dst equal to src; crs_error for an unknown bounds_crs; raster_error when
    bounds_crs or mask is given but the raster has no CRS; refused when a sidecar overrides its
    georeferencing (pass georeferencing), a mask feature has no area (a line, a point, an empty or
    collapsed polygon), the mask layer has no features, or its polygons hold no cell of the raster
    (both extents are given); path_refused/not_found/invalid_argument for a bad mask file.
    """
    _check_arguments(bounds, bounds_crs, mask, mask_layer)
    src_path, dst_path = check_src_dst(ctx, src, dst)
    with (
        gdal_env(ctx),
        open_for_read(
            ctx, src, "src", resolved=src_path, georeferencing=georeferencing or "refuse"
        ) as source,
    ):
        shown = ctx.workspace.relative(src_path)
        dtype = single_dtype(source, shown)
        rotated = is_rotated(source.transform)
        box, transformation = _box_in_raster_crs(source, bounds, bounds_crs, shown)
        box_transformed = transformation is not None
        rect = Window(0, 0, source.width, source.height)
        shapes: list[list[shapely.Geometry]] = []
        if box is not None:
            if rotated:
                import shapely

                shapes.append([shapely.box(*box)])
            else:
                rect = _box_window(source, box, all_touched)
                _check_selected(rect, source, bounds, bounds_crs, box, shown)
        read: Polygons | None = None
        if mask is not None:
            read = _mask_polygons(ctx, source, mask, mask_layer, shown)
            shapes.append(read.geometries)
            if read.transformation is not None:
                how = f"mask: layer '{read.layer}' from {read.source_crs}: {read.transformation}"
                transformation = how if transformation is None else f"{transformation}; {how}"
        if shapes:
            rect = _shapes_window(source, rect, shapes, all_touched, ctx.engine)
            _check_selected(rect, source, bounds, bounds_crs, box, shown, read)
        nodata = _output_nodata(source, dtype, None, None)
        has_alpha = ColorInterp.alpha in source.colorinterp
        outside_as: ClipMaskKind = (
            "nodata" if nodata is not None else ("alpha" if has_alpha else "internal_mask")
        )
        grid = rect if crop else Window(0, 0, source.width, source.height)
        profile: dict[str, Any] = {
            "driver": "GTiff",
            "width": int(grid.width),
            "height": int(grid.height),
            "count": source.count,
            "dtype": dtype.name,
            "crs": source.crs,
            "transform": source.window_transform(grid),
            "nodata": nodata,
            "tiled": True,
            "blockxsize": OUTPUT_BLOCK,
            "blockysize": OUTPUT_BLOCK,
            **creation_options(ctx, "DEFLATE", dtype, source.count, None, None, cog=False),
        }
        plan = _ClipPlan(grid, rect, shapes, all_touched, nodata, outside_as, profile, ctx.engine)
        write_atomically(ctx, plan, source, src_path, dst_path)
    total = int(grid.width) * int(grid.height)
    return ClipResult(
        output=describe_output(ctx, dst, dst_path),
        window=ClipWindow(
            col_off=int(grid.col_off),
            row_off=int(grid.row_off),
            width=int(grid.width),
            height=int(grid.height),
        ),
        bounds=None if box is None else Bounds(left=box[0], bottom=box[1], right=box[2], top=box[3]),
        polygons=0 if read is None else len(read.geometries),
        inside_cells=plan.inside,
        outside_cells=total - plan.inside,
        outside_as=outside_as,
        nodata=nodata,
        transformation=transformation,
        note=_note(all_touched, outside_as, nodata, box_transformed, 0 if read is None else read.repaired),
    )


def _check_arguments(
    bounds: tuple[float, float, float, float] | None,
    bounds_crs: str | None,
    mask: str | None,
    mask_layer: str | None,
) -> None:
    if bounds is None and mask is None:
        raise InvalidArgument(
            "Neither bounds nor mask is given: there is nothing to clip to.",
            fix="Pass bounds=(left, bottom, right, top) (with bounds_crs if not the raster's CRS), or mask= "
            "a polygon file.",
        )
    if bounds_crs is not None and bounds is None:
        raise InvalidArgument("bounds_crs is given without bounds.", fix="Pass bounds, or drop bounds_crs.")
    if mask_layer is not None and mask is None:
        raise InvalidArgument("mask_layer is given without mask.", fix="Pass mask, or drop mask_layer.")
    if bounds is not None:
        left, bottom, right, top = bounds
        if not all(math.isfinite(v) for v in bounds):
            raise InvalidArgument(
                f"bounds {bounds} holds a value that is not finite.", fix="Pass four numbers."
            )
        if not (left < right and bottom < top):
            raise InvalidArgument(
                f"bounds {bounds} is not (left, bottom, right, top) with left < right and bottom < top.",
                fix="Order the box as (left, bottom, right, top): x (longitude) first. A box across the "
                "antimeridian must be clipped in two parts.",
            )


def _box_in_raster_crs(
    source: DatasetReader,
    bounds: tuple[float, float, float, float] | None,
    bounds_crs: str | None,
    shown: str,
) -> tuple[tuple[float, float, float, float] | None, str | None]:
    """The box in the raster's CRS and, when it was transformed, how."""
    if bounds is None or bounds_crs is None:
        return bounds, None
    given = parse_crs(bounds_crs, "bounds_crs")
    raster_crs = _raster_crs(source, shown, "bounds_crs")
    if given.equals(raster_crs, ignore_axis_order=True):
        return bounds, None
    # The operation is chosen for the box's points, as crs.transform would choose it for them.
    xs, ys = np.meshgrid(
        np.linspace(bounds[0], bounds[2], RASTER_SPREAD), np.linspace(bounds[1], bounds[3], RASTER_SPREAD)
    )
    chosen = choose_operation(given, raster_crs, xs.ravel(), ys.ravel())
    try:
        box = chosen.box(bounds, DENSIFY_POINTS)
    except ProjError as exc:
        raise CrsError(
            f"bounds {bounds} cannot be expressed in the CRS of '{shown}' ({str(exc)[:200]}).",
            fix="Give bounds within the area the raster's CRS is defined for, or in the raster's CRS.",
        ) from None
    if not all(math.isfinite(v) for v in box):
        raise CrsError(
            f"bounds {bounds} fall outside the domain of the CRS of '{shown}'.",
            fix="Give bounds within the area the raster's CRS is defined for, or in the raster's CRS.",
        )
    operation = chosen.operation
    accuracy = "accuracy unknown" if operation.accuracy_m is None else f"accuracy {operation.accuracy_m:g} m"
    how = f"bounds: {operation.name} ({accuracy}); bounding box of the edges, {DENSIFY_POINTS} points each"
    if chosen.route is not None and not operation.ballpark:
        how += f"; chained through {chosen.route}"
    if chosen.why_ballpark is not None:
        how += f"; ballpark: {chosen.why_ballpark}"
    return (float(box[0]), float(box[1]), float(box[2]), float(box[3])), how


def _raster_crs(source: DatasetReader, shown: str, argument: str) -> CRS:
    if source.crs is None:
        raise RasterError(
            f"'{shown}' has no CRS, so {argument} cannot be placed on it.",
            fix="Use a georeferenced raster, or give bounds in its grid coordinates without bounds_crs.",
        )
    return parse_crs(source.crs.to_wkt(), "raster CRS")


def _snap(value: float) -> float:
    nearest = round(value)
    return float(nearest) if abs(value - nearest) < SNAP else value


def _box_window(source: DatasetReader, box: tuple[float, float, float, float], all_touched: bool) -> Window:
    """The cells of a grid that is not rotated inside an axis-aligned box, clipped to the raster
    (possibly empty). Inverse geotransform of the corners, so any sign of pixel size works."""
    left, bottom, right, top = box
    cols, rows = ~source.transform @ (np.array([left, right]), np.array([top, bottom]))
    c0, c1 = sorted(_snap(float(c)) for c in cols)
    r0, r1 = sorted(_snap(float(r)) for r in rows)
    if all_touched:  # every cell overlapping the box (by more than its edge)
        first_col, end_col, first_row, end_row = math.floor(c0), math.ceil(c1), math.floor(r0), math.ceil(r1)
    else:  # cells whose centre (k + 0.5) is inside, edges included
        first_col, end_col = math.ceil(c0 - 0.5), math.floor(c1 - 0.5) + 1
        first_row, end_row = math.ceil(r0 - 0.5), math.floor(r1 - 0.5) + 1
    return _clamp(source, first_col, end_col, first_row, end_row)


def _clamp(source: DatasetReader, first_col: int, end_col: int, first_row: int, end_row: int) -> Window:
    first_col, end_col = max(first_col, 0), min(end_col, source.width)
    first_row, end_row = max(first_row, 0), min(end_row, source.height)
    return Window(first_col, first_row, max(end_col - first_col, 0), max(end_row - first_row, 0))


def _mask_polygons(
    ctx: OperationContext, source: DatasetReader, mask: str, layer: str | None, shown: str
) -> Polygons:
    from llmc_mcp.compute.polygons import read_polygons  # pyogrio and shapely: only when a mask is used

    _raster_crs(source, shown, "mask")
    return read_polygons(ctx, mask, argument="mask", target_crs=source.crs, layer=layer)


def _shapes_window(
    source: DatasetReader,
    rect: Window,
    shapes: Sequence[Sequence[shapely.Geometry]],
    all_touched: bool,
    engine: Engine,
) -> Window:
    """The smallest window holding every cell inside ``rect`` and inside each group of shapes.

    Starts from the shapes' envelope in pixel space (every cell they can touch), then rasterizes it
    window by window and keeps the rows and columns that hold an inside cell.
    """
    import shapely

    envelope = rect
    for group in shapes:
        minx, miny, maxx, maxy = shapely.total_bounds(np.asarray(group, dtype=object))
        cols, rows = ~source.transform @ (
            np.array([minx, maxx, minx, maxx]),
            np.array([miny, miny, maxy, maxy]),
        )
        touched = _clamp(
            source,
            math.floor(_snap(float(cols.min()))),
            math.ceil(_snap(float(cols.max()))),
            math.floor(_snap(float(rows.min()))),
            math.ceil(_snap(float(rows.max()))),
        )
        envelope = _intersect(envelope, touched)
    if envelope.width == 0 or envelope.height == 0:
        return envelope
    any_row = np.zeros(int(envelope.height), dtype=bool)
    any_col = np.zeros(int(envelope.width), dtype=bool)

    def rasterized(window: Window) -> np.ndarray:
        return _inside(source.transform, window, rect, shapes, all_touched)

    for window, inside in engine.map(_windows(envelope), rasterized, progress=False):
        r0, c0 = int(window.row_off - envelope.row_off), int(window.col_off - envelope.col_off)
        any_row[r0 : r0 + int(window.height)] |= inside.any(axis=1)
        any_col[c0 : c0 + int(window.width)] |= inside.any(axis=0)
    if not any_row.any():
        return Window(envelope.col_off, envelope.row_off, 0, 0)
    rows, cols = np.flatnonzero(any_row), np.flatnonzero(any_col)
    return Window(
        int(envelope.col_off + cols[0]),
        int(envelope.row_off + rows[0]),
        int(cols[-1] - cols[0] + 1),
        int(rows[-1] - rows[0] + 1),
    )


def _intersect(a: Window, b: Window) -> Window:
    col0, row0 = max(a.col_off, b.col_off), max(a.row_off, b.row_off)
    col1 = min(a.col_off + a.width, b.col_off + b.width)
    row1 = min(a.row_off + a.height, b.row_off + b.height)
    return Window(col0, row0, max(col1 - col0, 0), max(row1 - row0, 0))


def _inside(
    transform: Any,
    window: Window,
    rect: Window,
    shapes: Sequence[Sequence[shapely.Geometry]],
    all_touched: bool,
) -> np.ndarray:
    """Which cells of ``window`` (source pixel coordinates) are inside ``rect`` and every shape group."""
    import shapely

    height, width = int(window.height), int(window.width)
    rows = np.arange(window.row_off, window.row_off + height)
    cols = np.arange(window.col_off, window.col_off + width)
    inside = ((rows >= rect.row_off) & (rows < rect.row_off + rect.height))[:, None] & (
        (cols >= rect.col_off) & (cols < rect.col_off + rect.width)
    )[None, :]
    if not shapes or not inside.any():
        return inside
    window_transform = rasterio.windows.transform(window, transform)
    corners_x, corners_y = window_transform @ (
        np.array([0, width, 0, width]),
        np.array([0, 0, height, height]),
    )
    frame = shapely.box(corners_x.min(), corners_y.min(), corners_x.max(), corners_y.max())
    for group in shapes:
        candidates = np.asarray(group, dtype=object)
        candidates = candidates[shapely.intersects(candidates, frame)]
        if candidates.size == 0:
            return np.zeros_like(inside)
        inside &= geometry_mask(
            list(candidates),
            out_shape=(height, width),
            transform=window_transform,
            all_touched=all_touched,
            invert=True,
        )
    return inside


def _check_selected(
    rect: Window,
    source: DatasetReader,
    bounds: tuple[float, float, float, float] | None,
    bounds_crs: str | None,
    box: tuple[float, float, float, float] | None,
    shown: str,
    polygons: Polygons | None = None,
) -> None:
    """Refuse an empty selection, saying whether the shapes miss the raster or fall between cell centres."""
    if rect.width > 0 and rect.height > 0:
        return
    left, bottom, right, top = source.bounds
    extent = f"'{shown}' covers {_show_box((left, bottom, right, top))} in its own CRS"
    if bounds_crs is not None and source.crs is not None:
        extent += _bounds_in(source, bounds_crs)
    if box is not None and (box[0] >= right or box[2] <= left or box[1] >= top or box[3] <= bottom):
        shown_box = _show_box(box) + (" in the raster's CRS" if bounds_crs is not None else "")
        raise InvalidArgument(
            f"bounds {bounds} miss the raster (the box is {shown_box}): {extent}.",
            fix="Give a box that overlaps the raster, x (longitude) first, in bounds_crs (or the raster's "
            "CRS when bounds_crs is omitted).",
        )
    if polygons is not None:
        import shapely

        spread = shapely.total_bounds(np.asarray(polygons.geometries, dtype=object))
        extent += f"; the mask polygons span {_show_box(tuple(float(v) for v in spread))} in the raster's CRS"
    if polygons is not None and box is None:  # a file's polygons miss, not an argument: the file must change
        raise Refused(
            f"mask: the polygons of layer '{polygons.layer}' of '{polygons.files[0]}' hold no cell of the "
            f"raster (no cell centre inside, or they miss it): {extent}.",
            fix="Pass polygons that overlap the raster (a wrong CRS in the file, or x and y swapped, puts "
            "them elsewhere), or all_touched=True to keep every cell a polygon smaller than a cell touches.",
        )
    what = f"bounds {bounds}" + ("" if polygons is None else " and the mask polygons together")
    raise InvalidArgument(
        f"{what} hold no cell of the raster (no cell centre inside, or they miss it): {extent}.",
        fix="Give shapes that overlap the raster, or pass all_touched=True to keep every cell a shape "
        "smaller than a cell touches.",
    )


def _show_box(box: tuple[float, float, float, float]) -> str:
    return "(" + ", ".join(f"{v:.10g}" for v in box) + ")"


def _bounds_in(source: DatasetReader, bounds_crs: str) -> str:
    target = parse_crs(bounds_crs, "bounds_crs")
    transformer = Transformer.from_crs(parse_crs(source.crs.to_wkt(), "raster CRS"), target, always_xy=True)
    try:
        left, bottom, right, top = transformer.transform_bounds(*source.bounds, densify_pts=DENSIFY_POINTS)
    except ProjError:
        return f" (its extent cannot be expressed in {bounds_crs})"
    return f" and {_show_box((left, bottom, right, top))} in {bounds_crs}"


@dataclass
class _ClipPlan:
    """The write: each output window read from the source, outside cells replaced; counts inside cells."""

    grid: Window
    rect: Window
    shapes: Sequence[Sequence[shapely.Geometry]]
    all_touched: bool
    nodata: float | None
    outside_as: ClipMaskKind
    profile: dict[str, Any]
    engine: Engine
    inside: int = 0

    def write(self, source: DatasetReader, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **self.profile) as out:
            carry_metadata(source, out)
            windows = _windows(Window(0, 0, self.grid.width, self.grid.height))
            clipped = functools.partial(self._clipped, source)
            for window, (values, inside, mask) in self.engine.map(windows, clipped, progress=False):
                self.inside += inside
                out.write(values, window=window)
                if mask is not None:
                    out.write_mask(mask, window=window)

    def _clipped(self, source: DatasetReader, window: Window) -> tuple[np.ndarray, int, np.ndarray | None]:
        """One output window: its values, how many of its cells are inside, and its mask when the
        outside is kept as an internal mask."""
        at = Window(
            window.col_off + self.grid.col_off,
            window.row_off + self.grid.row_off,
            window.width,
            window.height,
        )
        inside = _inside(source.transform, at, self.rect, self.shapes, self.all_touched)
        data = source.read(window=at, masked=True)
        values = np.ma.getdata(data)
        if self.outside_as == "nodata":
            keep = inside[None] & ~np.ma.getmaskarray(data)
            return (
                np.where(keep, values, np.asarray(self.nodata, dtype=values.dtype)),
                int(inside.sum()),
                None,
            )
        kept = np.where(inside[None], values, np.zeros((), dtype=values.dtype))
        mask = inside & (source.dataset_mask(window=at) > 0) if self.outside_as == "internal_mask" else None
        return kept, int(inside.sum()), mask


def _windows(area: Window) -> Iterator[Window]:
    return grid_windows(area, WINDOW_ROWS, WINDOW_COLS)


def _note(
    all_touched: bool, outside_as: ClipMaskKind, nodata: float | None, box_transformed: bool, repaired: int
) -> str:
    rule = "every cell the box/polygons touch" if all_touched else "cells whose centre is inside"
    marks = {
        "nodata": f"set to nodata ({nodata:g})" if nodata is not None else "",
        "internal_mask": "masked out by an internal mask (the source has no nodata value)",
        "alpha": "given alpha 0 (the source has an alpha band and no nodata value)",
    }[outside_as]
    text = f"Inside: {rule}. Outside cells are {marks}; source values were copied, never resampled."
    if box_transformed:
        text += " The box was given in another CRS: its bounding box in the raster's CRS was used."
    if repaired:
        text += f" {repaired} invalid mask polygon(s) were repaired (make_valid) before use."
    return text
