"""``crs.info``: what a coordinate reference system is, before an agent commits to it."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field
from pyproj import CRS

from llmc_mcp.compute.models import Ellipsoid
from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.geodesy.reference import horizontal_part
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.crs.models import AreaOfUse, Axis, CrsInfo, CrsKind

_AREA = "area"
_CONFORMAL = "conformal"
_AZIMUTH = "direction from centre"

_PRESERVES: dict[str, tuple[str, ...]] = {
    "lambert azimuthal equal area": (_AREA, _AZIMUTH),
    "albers equal area": (_AREA,),
    "lambert cylindrical equal area": (_AREA,),
    "mollweide": (_AREA,),
    "sinusoidal": (_AREA,),
    "equal earth": (_AREA,),
    "goode homolosine": (_AREA,),
    "interrupted goode homolosine": (_AREA,),
    "eckert iv": (_AREA,),
    "eckert vi": (_AREA,),
    "hammer & eckert-greifendorff": (_AREA,),
    "quartic authalic": (_AREA,),
    "bonne": (_AREA,),
    "transverse mercator": (_CONFORMAL,),
    "transverse mercator zoned grid system": (_CONFORMAL,),
    "mercator": (_CONFORMAL,),
    "lambert conic conformal": (_CONFORMAL,),
    "polar stereographic": (_CONFORMAL, _AZIMUTH),
    "oblique stereographic": (_CONFORMAL, _AZIMUTH),
    "stereographic": (_CONFORMAL, _AZIMUTH),
    "hotine oblique mercator": (_CONFORMAL,),
    "laborde oblique mercator": (_CONFORMAL,),
    "krovak": (_CONFORMAL,),
    "new zealand map grid": (_CONFORMAL,),
    "equidistant cylindrical": ("equidistant along meridians",),
    "equidistant conic": ("equidistant along meridians",),
    "azimuthal equidistant": ("equidistant from the centre", _AZIMUTH),
    "modified azimuthal equidistant": ("equidistant from the centre", _AZIMUTH),
    "cassini-soldner": ("equidistant along the central meridian",),
    "american polyconic": ("equidistant along the central meridian and every parallel",),
    "orthographic": (_AZIMUTH,),
    "gnomonic": (_AZIMUTH,),
}
"""Keyed by pyproj's method name, lower-cased, without its "(variant A)"/"(2SP)"/"(Spherical)" suffix.
Pseudo-Mercator (EPSG:3857) is deliberately absent: its spherical formulas on an ellipsoidal datum
make it neither conformal nor equal-area."""


@operation("crs", read_only=True)
def info(
    ctx: OperationContext,
    crs: Annotated[
        str,
        Field(
            description="The CRS: an EPSG code ('EPSG:6933'), another authority code ('ESRI:54009'), "
            "WKT, a PROJ string ('+proj=moll +datum=WGS84') or PROJJSON."
        ),
    ],
    include_wkt: Annotated[bool, Field(description="Also return the WKT2 definition (long).")] = False,
) -> CrsInfo:
    """Describe a CRS: kind, units, axes, datum, ellipsoid, area of use and what its projection preserves.

    Use it to check a target CRS before reprojecting: whether it is projected, its units (metres or
    degrees), where it is valid (area_of_use) and whether it is equal-area (needed for area
    statistics), conformal (shapes/angles) or equidistant. ``preserves`` is derived from the
    projection method; an empty list means a compromise projection, an unprojected CRS or a method
    not in the table, never "everything". ``epsg``/``authority`` are filled only for an exact match.
    Reads nothing from the workspace.

    Errors: CrsError when PROJ does not understand the definition.
    """
    parsed = parse_crs(crs)
    horizontal = horizontal_part(parsed)
    epsg, authority = identify(parsed)
    method = _projection_method(horizontal)
    area = parsed.area_of_use
    axes = [
        Axis(name=a.name, abbreviation=a.abbrev, direction=a.direction, unit=a.unit_name)
        for a in parsed.axis_info
    ]
    horizontal_axes = horizontal.axis_info
    ellipsoid = horizontal.ellipsoid
    return CrsInfo(
        name=parsed.name,
        kind=crs_kind(parsed),
        units=horizontal_axes[0].unit_name if horizontal_axes else None,
        axes=axes,
        datum=horizontal.datum.name if horizontal.datum else None,
        ellipsoid=Ellipsoid(
            name=ellipsoid.name,
            semi_major_m=ellipsoid.semi_major_metre,
            inverse_flattening=ellipsoid.inverse_flattening,
        )
        if ellipsoid
        else None,
        epsg=epsg,
        authority=authority,
        area_of_use=AreaOfUse(
            name=area.name, west=area.west, south=area.south, east=area.east, north=area.north
        )
        if area
        else None,
        projection_method=method,
        preserves=list(_preserves(method)),
        wkt=parsed.to_wkt() if include_wkt else None,
    )


def crs_kind(crs: CRS) -> CrsKind:
    """The kind of ``crs`` as results name it (``crs.transform`` refuses kinds it cannot take)."""
    # Bound and compound first: pyproj answers is_projected/is_geographic for their components too.
    if crs.is_bound:
        return "bound"
    if crs.is_compound:
        return "compound"
    if crs.is_geocentric:
        return "geocentric"
    if crs.is_projected:
        return "projected"
    if crs.is_geographic:
        return "geographic"
    if crs.is_vertical:
        return "vertical"
    if crs.is_engineering:
        return "engineering"
    return "other"


def _projection_method(crs: CRS) -> str | None:
    if not crs.is_projected or crs.coordinate_operation is None:
        return None
    return crs.coordinate_operation.method_name


def _preserves(method: str | None) -> tuple[str, ...]:
    if method is None:
        return ()
    key = re.sub(r"\s*\([^)]*\)", "", method).strip().lower()
    return _PRESERVES.get(key, ())
