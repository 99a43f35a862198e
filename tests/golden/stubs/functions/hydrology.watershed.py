from typing import Literal, TypedDict
class CrsRef(TypedDict):
    epsg: int | None
    name: str
    wkt: str | None
class Bounds(TypedDict):
    left: float  # Minimum x (west edge)
    bottom: float  # Minimum y (south edge)
    right: float  # Maximum x (east edge)
    top: float  # Maximum y (north edge)
class RasterInfo(TypedDict):
    path: str
    driver: str
    width: int  # Number of columns (pixels)
    height: int  # Number of rows (pixels)
    count: int
    dtypes: list[str]
    crs: CrsRef | None
    transform: tuple[float, float, float, float, float, float]  # Affine geotransform (a, b, c, d, e, f)
    bounds: Bounds
    res: tuple[float, float]  # Pixel size (x, y) in CRS units
    nodata: list[float | None]  # Nodata value of each band (NaN possible)
    mask_flags: list[list[str]]
    block_shapes: list[tuple[int, int]]  # Internal block (rows, cols) of each band
    compression: str | None
    interleave: str | None  # 'PIXEL' or 'BAND' layout of multi-band data
    layout: str | None  # 'COG' for a Cloud Optimized GeoTIFF
    overviews: list[list[int]]
    descriptions: list[str | None]  # Band descriptions (names)
    scales: list[float]  # Declared scale of each band (1 when none)
    offsets: list[float]  # Declared offset of each band (0 when none)
    units: list[str | None]
    registration: Literal['Area', 'Point'] | None
    colorinterp: list[str]
    tags: dict[str, str]  # Dataset metadata (default domain)
    tags_truncated: bool
    file_size_bytes: int
    georeferencing: Literal['file', 'aux.xml', 'world file', 'tab file', 'none']
    georeferencing_note: str
class PourPoint(TypedDict):
    id: int
    x: float
    y: float
    row: int
    col: int
    cell_x: float
    cell_y: float
    snap_distance_m: float  # Ground distance (m) from the point to the outlet cell's centre
    accumulation_cells: int
    cells: int
    area_m2: float
class WatershedResult(TypedDict):
    output: RasterInfo
    points: list[PourPoint]
    note: str
def watershed(
    flow_dir: str,  # Workspace-relative D8 grid from hydrology.flow_direction.
    pour_points: list[tuple[float, float]],  # Outlets as [[x, y], ...] (x = easting or longitude), at most 1000.
    dst: str,  # Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced.
    points_crs: str | None = None,  # CRS of the points (EPSG code, WKT, PROJ string), x first; default: the grid's.
    snap_distance: float | None = None,  # Move each point to the cell of highest accumulation within this ground distance (metres); default: no snapping, the cell the point falls in.
) -> WatershedResult:
    """Catchments of pour points on a D8 grid: int32 ids (1..n, in the order given), 0 none, -1 nodata. Reads the whole grid into memory (routing needs it): at most what the worker's memory holds.
    Errors: InvalidArgument for no points or more than 1000, a negative snap_distance, a point off the grid or on nodata, two points on one outlet cell, a grid without a CRS, not D8 codes or drains in a loop, or too many cells; CrsError for an unknown points_crs.
    """
    ...
