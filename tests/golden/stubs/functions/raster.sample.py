from typing import Literal, TypedDict
class SampledPoint(TypedDict):
    x: float  # The point's x as given (in the request's crs)
    y: float  # The point's y as given (in the request's crs)
    row: int | None  # Row of the cell holding the point (0-based)
    col: int | None  # Column of the cell holding the point (0-based)
    cell_x: float | None  # x of the cell's centre (raster CRS)
    cell_y: float | None  # y of the cell's centre (raster CRS)
    values: list[float | None]
    raw: list[float | None]
class SampleResult(TypedDict):
    path: str
    bands: list[int]
    scales: list[float]  # Declared scale of each sampled band (1 when none)
    offsets: list[float]  # Declared offset of each sampled band (0 when none)
    units: list[str | None]
    points: list[SampledPoint]
    outside_count: int  # Points outside the raster (every value null)
    note: str
def sample(
    path: str,  # Workspace-relative raster file.
    points: list[tuple[float, float]],  # Points as [[x, y], ...] (x = easting or longitude), at most 100,000.
    crs: str | None = None,  # CRS of the points (EPSG code, WKT, PROJ string), x first even for EPSG:4326; default: the raster's own.
    bands: list[int] | None = None,  # Band numbers (1-based) to sample; default: all bands.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> SampleResult:
    """The values of a raster at points: each point's cell (row, column, centre) and its band values.
    Errors (ApiError, by e.type): invalid_argument for no points or more than 100,000, or a band outside 1..count; crs_error for an unknown crs; raster_error when crs is given but the raster has none or pixels cannot be read; refused when a sidecar overrides the file's georeferencing (pass georeferencing).
    """
    ...
