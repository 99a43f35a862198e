"""``raster.clip``: cut a raster to a box or to polygons; output pixels are exactly source pixels.

Nothing is resampled: the output grid is a window of the source grid (``crop=True``) or the source
grid itself (``crop=False``), and each kept cell holds its source value. Which cells are inside is
rasterio's rule (``rasterio.features``): a cell whose centre is inside, or with ``all_touched`` any
cell the shape touches.

Which cells are kept is worked out in :mod:`.clip_cells`. A box in another CRS is first replaced by
its bounding box in the raster's CRS, with each edge densified (21 points) so a curved edge stays
inside it: an output grid is a rectangle of the raster's CRS, so it cannot follow the box's outline
(a polygon in ``mask`` can).

Outside cells follow ``raster.reproject``'s nodata rule (:func:`.reproject._output_nodata`): the
source's nodata, else NaN for float data, else an internal mask (or alpha 0 when the source has an
alpha band), so they are never silent zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import rasterio
from pydantic import Field
from pyproj import CRS, Transformer
from pyproj.exceptions import ProjError
from rasterio.enums import ColorInterp
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
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import CrsError, InvalidArgument, RasterError, Refused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_location
from llmc_mcp.geodesy.reference import RASTER_SPREAD
from llmc_mcp.geodesy.routes import choose_operation
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.clip_cells import InsideCells, box_window, clip_windows, shapes_window
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
DENSIFY_POINTS = 21


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
    policy = georeferencing or "refuse"
    with (
        gdal_env(ctx),
        open_for_read(ctx, src, "src", resolved=src_path, georeferencing=policy) as source,
    ):
        shown = shown_location(ctx, src_path)
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
                rect = box_window(source, box, all_touched)
                _check_selected(rect, source, bounds, bounds_crs, box, shown)
        read: Polygons | None = None
        if mask is not None:
            read = _mask_polygons(ctx, source, mask, mask_layer, shown)
            shapes.append(read.geometries)
            if read.transformation is not None:
                how = f"mask: layer '{read.layer}' from {read.source_crs}: {read.transformation}"
                transformation = how if transformation is None else f"{transformation}; {how}"
        if shapes:
            rect = shapes_window(source, rect, shapes, all_touched, ctx.engine)
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
        inside = InsideCells(source.transform, rect, shapes, all_touched)
        piece = ClipPiece(SourceRaster.of(ctx, source, "src", policy), grid, inside, nodata, outside_as)
        plan = _ClipPlan(piece, profile, ctx.engine)
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


def _mask_polygons(
    ctx: OperationContext, source: DatasetReader, mask: str, layer: str | None, shown: str
) -> Polygons:
    from llmc_mcp.compute.polygons import read_polygons  # pyogrio and shapely: only when a mask is used

    _raster_crs(source, shown, "mask")
    return read_polygons(ctx, mask, argument="mask", target_crs=source.crs, layer=layer)


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

    piece: ClipPiece
    profile: dict[str, Any]
    engine: Engine
    inside: int = 0

    def write(self, source: DatasetReader, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **self.profile) as out:
            carry_metadata(source, out)
            windows = clip_windows(Window(0, 0, self.piece.grid.width, self.piece.grid.height))
            # Inside cells are added up here, in the windows' order: a piece may run elsewhere.
            for window, (values, inside, mask) in self.engine.map(
                windows, self.piece, progress=False, writes=True
            ):
                self.inside += inside
                out.write(values, window=window)
                if mask is not None:
                    out.write_mask(mask, window=window)


@dataclass(frozen=True)
class ClipPiece:
    """One output window of the clip, wherever the engine runs it: the source by its checked path,
    where the output grid lies on it, which cells are inside, and how outside cells are marked."""

    source: SourceRaster
    grid: Window
    """The output grid as a window of the source's."""
    inside: InsideCells
    nodata: float | None
    outside_as: ClipMaskKind

    def __call__(self, window: Window) -> tuple[np.ndarray, int, np.ndarray | None]:
        """One output window: its values, how many of its cells are inside, and its mask when the
        outside is kept as an internal mask."""
        source = self.source.dataset()
        at = Window(
            window.col_off + self.grid.col_off,
            window.row_off + self.grid.row_off,
            window.width,
            window.height,
        )
        inside = self.inside(at)
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
