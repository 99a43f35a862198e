from typing import Literal, TypedDict
AreaMethod = Literal['ellipsoidal_quadrangle', 'geodesic_cells']
class ValueArea(TypedDict):
    value: float
    cells: int
    area_m2: float
    area_ha: float  # The same area in hectares (area_m2 / 10,000)
    planar_area_m2: float | None  # Their area on the plane of the raster's projected CRS
class RasterArea(TypedDict):
    path: str
    band: int
    ellipsoid: str
    areas: list[ValueArea]
    total_cells: int
    total_area_m2: float
    total_planar_area_m2: float | None  # Their area on the plane of the raster's projected CRS
    planar_cell_m2: float | None  # One cell's area on that plane in square metres
    note: str
    nodata_cells: int
    method: AreaMethod  # How each cell's ground area was found
    method_note: str
def area(
    path: str,  # Workspace-relative raster file, e.g. 'landcover.tif'.
    band: int = 1,  # Band number (1-based) whose values are measured.
    values: list[float] | None = None,  # Only these values (each reported, even with 0 cells); default: every value.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> RasterArea:
    """Area per value of a band: ground area on the ellipsoid (m², ha), any CRS; and on the CRS's plane.
    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, a complex band, a non-finite value in values, more than 10,000 distinct values (pass values, or classify first), a raster without a CRS or with a rotated grid; refused when a sidecar overrides the file's georeferencing (pass georeferencing) or valid cells lie outside the projection's domain; raster_error when pixels cannot be read.
    """
    ...
