from typing import Literal, TypedDict
ConditionMethod = Literal['fill', 'fill_flats', 'breach']
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
class ConditionResult(TypedDict):
    output: RasterInfo  # raster.info of the conditioned DEM (float32)
    method: ConditionMethod
    max_depth: float | None
    raised_cells: int
    max_raise: float
    volume_cells: float  # Sum of raises over cells (vertical units x cells)
    lowered_cells: int
    max_lowering: float
    note: str
def condition(
    dem: str,  # Workspace-relative DEM (one band, north-up).
    dst: str,  # Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced.
    method: ConditionMethod = 'fill',  # 'fill': raise depressions to their spill height (priority flood). 'fill_flats': the same, plus a float32 step a cell towards the spill point so every cell drains (for dinf, mfd). 'breach': cut the cheapest channel out of each pit instead of raising it.
    max_depth: float | None = None,  # fill: keep as sinks (lakes, karst) depressions at least this far (vertical units) below the spill point they are entered from. breach: the deepest cut allowed; pits needing more are filled. Default: no limit. Not with fill_flats.
) -> ConditionResult:
    """Fill a DEM's closed depressions to their spill height (max_depth keeps deep ones as sinks); 'fill_flats' also slopes every flat towards its outlet; 'breach' cuts channels out of pits instead. Reads the whole grid: at most what the worker's memory holds.
    Errors: InvalidArgument for a max_depth that is not positive (or given with fill_flats), a rotated or multi-band grid, too many cells, or dst equal to dem; RasterError for unreadable pixels.
    Reflection (may raise reflection.ReflectionRequired): hydrology: always: how depressions are handled (method, and max_depth: which sinks are kept)
    """
    ...
