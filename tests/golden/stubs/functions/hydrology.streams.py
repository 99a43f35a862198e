from typing import Literal, TypedDict
ThresholdUnits = Literal['cells', 'm2']
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
class StreamsResult(TypedDict):
    output: RasterInfo
    threshold: float
    threshold_units: ThresholdUnits
    stream_cells: int
    note: str
def streams(
    accumulation: str,  # Workspace-relative output of hydrology.flow_accumulation.
    dst: str,  # Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced.
    threshold: float,  # Drainage area that makes a cell a channel (>= threshold).
    threshold_units: ThresholdUnits = 'cells',  # 'cells' or 'm2': must be the accumulation's own units (checked from its tag).
) -> StreamsResult:
    """Channel cells: 1 where the accumulation is at least ``threshold``, else 0 (uint8; 255 nodata). Reads the whole grid: at most what the worker's memory holds (4096² in 2 GiB).
    Errors: InvalidArgument for a threshold that is not a positive number, units that differ from the accumulation's (or a weighted accumulation), too many cells, or dst equal to the input.
    Reflection (may raise reflection.ReflectionRequired): hydrology: always: the drainage area (threshold, in its units) that makes a cell a channel
    """
    ...
