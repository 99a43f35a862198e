"""``crs.transform``: points from one CRS to another, by the one coordinate operation chosen for them
(:func:`~llmc_mcp.geodesy.routes.choose_operation`), with that operation named in the result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import numpy as np
from pydantic import Field
from pyproj import CRS

from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import CrsError, InvalidArgument
from llmc_mcp.geodesy.routes import ChosenOperation, choose_operation
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.crs.info import crs_kind
from llmc_mcp.operations.crs.models import TransformResult

MAX_POINTS = 100_000
"""Points per crs.transform call: far above any lookup an agent makes by hand, and small enough that the
call (and its JSON) stays fast; more points belong in a raster, transformed by raster.reproject."""


_TWO_D = ("geographic", "projected", "bound", "compound")


@operation("crs", read_only=True)
def transform(
    ctx: OperationContext,
    points: Annotated[
        list[tuple[float, float]],
        Field(
            description="Points as (x, y) pairs, x first whatever the CRS's official axis order: "
            "(longitude, latitude) for a geographic CRS, (easting, northing) for a projected one; "
            f"1 to {MAX_POINTS:,} finite numbers."
        ),
    ],
    src_crs: Annotated[
        str,
        Field(
            description="CRS the points are in: 'EPSG:4326', another authority code, WKT, PROJ or PROJJSON."
        ),
    ],
    dst_crs: Annotated[str, Field(description="CRS to transform the points into (same forms as src_crs).")],
) -> TransformResult:
    """Transform points between CRSs, x first, and say which operation PROJ used and how accurate it is.

    Axis order is always x first, in and out, even for EPSG:4326 whose official order is latitude
    first: the most common source of points landing in the wrong hemisphere. The operation is the
    most accurate whose area of use contains every point; when PROJ offers none, or only ballparks,
    two are chained through the source's Greenwich-meridian twin (Monte Mario (Rome) to Monte Mario)
    or its datum's geographic CRS (raster.reproject, raster.align and clip boxes choose alike).
    ``operation`` gives its name, its accuracy in metres (EPSG's figure; null when unknown) and
    ``ballpark``, true only when no datum shift exists for these points, PROJ then matching the
    datums' axes (errors of tens to hundreds of metres; the note says why). Grids are never downloaded: when
    a more accurate operation needs a grid that is not installed, ``better_unavailable`` names it
    and its grids, and the result uses the best operation available. A point PROJ cannot transform
    (outside the projection's domain or a grid's extent) comes back as null and is counted in
    ``failed``. Reads nothing from the workspace.

    Errors: InvalidArgument for no points, more than 100,000, or a coordinate that is not a finite
    number; CrsError when a CRS is not understood, is not horizontal (geocentric, vertical), or no
    operation between the two exists.
    """
    xs, ys = _check_points(points)
    src = _horizontal_crs(src_crs, "src_crs")
    dst = _horizontal_crs(dst_crs, "dst_crs")
    chosen = choose_operation(src, dst, xs, ys)
    out_x, out_y = chosen.transformer.transform(xs, ys, errcheck=False)
    ok = np.isfinite(out_x) & np.isfinite(out_y)
    result = [(float(x), float(y)) if good else None for x, y, good in zip(out_x, out_y, ok, strict=True)]
    failed = int(ok.size - np.count_nonzero(ok))
    return TransformResult(
        points=result,
        failed=failed,
        operation=chosen.operation,
        covers_points=chosen.covers,
        better_unavailable=chosen.better_unavailable,
        note=_transform_note(chosen, failed),
    )


def _check_points(points: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    if not points:
        raise InvalidArgument("points is empty.", fix="Pass at least one (x, y) pair, e.g. [[3.0, 0.0]].")
    if len(points) > MAX_POINTS:
        raise InvalidArgument(
            f"points has {len(points):,} pairs; one call takes at most {MAX_POINTS:,}.",
            fix=f"Split the points into calls of at most {MAX_POINTS:,}, or put them in a raster and use "
            "raster.reproject.",
        )
    array = np.asarray(points, dtype="float64").reshape(-1, 2)
    bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
    if bad.size:
        shown = ", ".join(str(int(i)) for i in bad[:5]) + (" ..." if bad.size > 5 else "")
        raise InvalidArgument(
            f"points at index {shown} hold a coordinate that is not a finite number (NaN or ±Inf).",
            fix="Drop those points or replace them with real coordinates.",
        )
    return array[:, 0].copy(), array[:, 1].copy()


def _horizontal_crs(text: str, argument: str) -> CRS:
    parsed = parse_crs(text, argument)
    kind = crs_kind(parsed)
    if kind not in _TWO_D:
        raise CrsError(
            f"{argument} {parsed.name!r} is a {kind} CRS; crs.transform takes (x, y) points in a geographic "
            "or projected CRS.",
            fix="Pass the horizontal CRS, e.g. 'EPSG:4326' rather than a geocentric or vertical one.",
        )
    return parsed


def _transform_note(chosen: ChosenOperation, failed: int) -> str:
    used, better = chosen.operation, chosen.better_unavailable
    notes = []
    if used.ballpark:
        notes.append(
            f"{chosen.why_ballpark}: PROJ used a ballpark operation (datums taken as equal), so positions "
            "may be off by tens to hundreds of metres; its accuracy is unknown."
        )
    elif used.accuracy_m is None:
        notes.append(f"Used {used.name!r}; its accuracy is not stated.")
    elif used.accuracy_m == 0:
        notes.append(f"Used {used.name!r}: a conversion on one datum, exact.")
    else:
        notes.append(f"Used {used.name!r}, accurate to {used.accuracy_m:g} m.")
    if chosen.route is not None and not used.ballpark:
        notes.append(
            f"No operation PROJ offers directly covers these points, so two were chained through "
            f"{chosen.route}."
        )
    if better:
        grids = sorted({grid for op in better for grid in op.missing_grids})
        notes.append(
            f"{len(better)} more accurate operation(s) (best: {better[0].name!r}, "
            f"{better[0].accuracy_m:g} m) need grid(s) not installed here ({', '.join(grids)}); grids are "
            "never downloaded."
        )
    if not chosen.covers:
        notes.append(
            "The points extend beyond the operation's area of use: its stated accuracy does not hold."
        )
    if failed:
        notes.append(f"{failed} point(s) could not be transformed and are null.")
    return " ".join(notes)
