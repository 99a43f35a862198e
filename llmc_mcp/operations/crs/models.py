"""Result models and vocabulary of the ``crs`` namespace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmc_mcp.compute.models import Ellipsoid
from llmc_mcp.geodesy.description import TransformOperation
from llmc_mcp.results import ResultModel

CrsKind = Literal[
    "geographic", "projected", "compound", "geocentric", "vertical", "engineering", "bound", "other"
]


class AreaOfUse(ResultModel):
    name: str = Field(description="Where the CRS is meant to be used.")
    west: float = Field(description="Western limit, degrees longitude.")
    south: float = Field(description="Southern limit, degrees latitude.")
    east: float = Field(
        description="Eastern limit, degrees longitude (may be < west across the antimeridian)."
    )
    north: float = Field(description="Northern limit, degrees latitude.")


class Axis(ResultModel):
    name: str = Field(description="Axis name, e.g. 'Geodetic latitude', 'Easting'.")
    abbreviation: str = Field(description="Short name, e.g. 'Lat', 'E'.")
    direction: str = Field(description="'north', 'east', 'up', ...")
    unit: str = Field(description="Unit name, e.g. 'degree', 'metre'.")


class CrsInfo(ResultModel):
    """Facts about a CRS an agent needs before choosing it for an analysis."""

    name: str = Field(description="CRS name.")
    kind: CrsKind = Field(description="Type of CRS.")
    units: str | None = Field(description="Unit of the first horizontal axis, e.g. 'metre', 'degree'.")
    axes: list[Axis] = Field(
        description="Axes in the definition's order (EPSG:4326 is latitude first; GeoTIFFs still use x=lon)."
    )
    datum: str | None = Field(description="Geodetic datum (or datum ensemble) name.")
    ellipsoid: Ellipsoid | None = Field(description="Reference ellipsoid, when the CRS has one.")
    epsg: int | None = Field(description="EPSG code when the definition is exactly an EPSG CRS.")
    authority: str | None = Field(description="'AUTHORITY:CODE' (EPSG, ESRI, OGC, ...) of an exact match.")
    area_of_use: AreaOfUse | None = Field(
        description="Area the CRS is valid for; null for custom definitions."
    )
    projection_method: str | None = Field(
        description="Map projection method, e.g. 'Transverse Mercator'; null for unprojected CRSs."
    )
    preserves: list[str] = Field(
        description="What the projection keeps undistorted, as known from its method: 'area' (equal-area), "
        "'conformal' (local shapes and angles), 'equidistant ...' (distances along some lines), "
        "'direction from centre'. Empty for unprojected CRSs and compromise/unknown projections."
    )
    wkt: str | None = Field(None, description="WKT2 definition; only filled when asked for (include_wkt).")


class TransformResult(ResultModel):
    """Transformed coordinates and the operation that produced them."""

    points: list[tuple[float, float] | None] = Field(
        description="(x, y) in dst_crs, x first (easting or longitude), in request order; null for a point "
        "PROJ could not transform (outside the projection's domain or the grid's extent)."
    )
    failed: int = Field(description="How many points are null.")
    operation: TransformOperation = Field(description="The operation used for every point.")
    covers_points: bool = Field(
        description="True when the operation's area of use contains every point; false means it was used "
        "beyond the area its accuracy is stated for."
    )
    better_unavailable: list[TransformOperation] = Field(
        description="More accurate operations for these points (or some of them) that PROJ knows but cannot "
        "run here because a grid is missing (grids are never downloaded), best first, at most 5."
    )
    note: str = Field(description="What the agent should know about this result, in a sentence or two.")
