from typing import Literal, TypedDict
FlowRouting = Literal['d8', 'dinf', 'mfd']
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
class FlowDirectionResult(TypedDict):
    output: RasterInfo
    routing: FlowRouting
    encoding: str
    outlet_cells: int
    sink_cells: int
    note: str
def flow_direction(
    dem: str,  # Workspace-relative DEM, conditioned first (hydrology.condition).
    dst: str,  # Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced.
    routing: FlowRouting = 'd8',  # 'd8': all of a cell's flow to one neighbour (uint8 ESRI codes). 'dinf': D-infinity angle in degrees clockwise from north, flow split between two neighbours (float32). 'mfd': flow split among every lower neighbour (uint16 sum of their D8 codes).
) -> FlowDirectionResult:
    """Flow directions: d8 ESRI codes (uint8), dinf angles in degrees from north (float32), or mfd masks (uint16, the sum of receiving neighbours' D8 codes). Depressions are not filled. Reads the whole grid: at most what the worker's memory holds (4096² in 2 GiB). The band is tagged LLMC_ROUTING for flow_accumulation.
    Errors: InvalidArgument for a rotated or multi-band grid, too many cells, dst equal to dem, or (dinf, mfd) a geographic grid or non-square cells; Refused (d8) for a CRS whose cells have no ground size somewhere or change shape along a row by over 1%; RasterError for unreadable pixels.
    Reflection (may raise reflection.ReflectionRequired): hydrology: always: the flow routing model (single- or multiple-flow)
    """
    ...
