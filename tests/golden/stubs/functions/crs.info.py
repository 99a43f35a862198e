from typing import Literal, TypedDict
CrsKind = Literal['geographic', 'projected', 'compound', 'geocentric', 'vertical', 'engineering', 'bound', 'other']
class Axis(TypedDict):
    name: str
    abbreviation: str
    direction: str  # 'north'
    unit: str
class Ellipsoid(TypedDict):
    name: str
    semi_major_m: float
    inverse_flattening: float  # Inverse flattening (0 for a sphere)
class AreaOfUse(TypedDict):
    name: str
    west: float
    south: float
    east: float
    north: float
class CrsInfo(TypedDict):
    name: str
    kind: CrsKind
    units: str | None
    axes: list[Axis]  # Axes in the definition's order (EPSG:4326 is latitude first
    datum: str | None  # Geodetic datum (or datum ensemble) name
    ellipsoid: Ellipsoid | None
    epsg: int | None
    authority: str | None  # 'AUTHORITY:CODE' (EPSG, ESRI, OGC, ...) of an exact match
    area_of_use: AreaOfUse | None
    projection_method: str | None
    preserves: list[str]
    wkt: str | None
def info(
    crs: str,  # The CRS: an EPSG code ('EPSG:6933'), another authority code ('ESRI:54009'), WKT, a PROJ string ('+proj=moll +datum=WGS84') or PROJJSON.
    include_wkt: bool = False,  # Also return the WKT2 definition (long).
) -> CrsInfo:
    """Describe a CRS: kind, units, axes, datum, ellipsoid, area of use and what its projection preserves.
    Errors: CrsError when PROJ does not understand the definition.
    """
    ...
