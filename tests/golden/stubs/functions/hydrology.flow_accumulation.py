from typing import Literal, TypedDict
AccumulationUnits = Literal['cells', 'm2']
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
class FlowAccumulationResult(TypedDict):
    output: RasterInfo
    units: str
    max_value: float
    weight_nodata_cells: int
    note: str
def flow_accumulation(
    flow_dir: str,  # Workspace-relative flow directions from hydrology.flow_direction.
    dst: str,  # Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced.
    weights: str | None = None,  # Workspace-relative raster on the same grid whose values are summed instead of counting cells (e.g. runoff per cell); its nodata cells add nothing.
    units: AccumulationUnits = 'cells',  # 'cells': count of cells draining through each cell (itself included); 'm2': their ground area in square metres on the ellipsoid, right on geographic grids too.
    dem: str | None = None,  # Only for mfd directions, and required there: the DEM they were derived from (MFD splits flow by its slopes, which the mask does not record).
) -> FlowAccumulationResult:
    """Upstream cell counts, ground areas (m², on the ellipsoid) or weighted sums along D8, dinf or mfd flow (read from the grid's LLMC_ROUTING tag). Reads the whole grid: at most what the worker's memory holds.
    Errors (ApiError, by e.type): invalid_argument for a grid that is not D8 codes (without a routing tag), not dinf angles, or drains in a loop, an unknown routing tag, weights together with units='m2', a grid without a CRS for m2, mfd without its DEM (or with another), dem with d8 or dinf, too many cells, or dst equal to an input; refused for weights or dem on another grid, or an input whose sidecar overrides its georeferencing; raster_error for unreadable pixels.
    """
    ...
