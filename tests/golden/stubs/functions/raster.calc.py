from typing import Literal, TypedDict
CalcDtype = Literal['float32', 'float64', 'uint8', 'uint16', 'int16', 'uint32', 'int32']
class CalcInput(TypedDict):
    name: str
    path: str
    band: int
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
class CalcInputUsed(TypedDict):
    name: str  # The expression's name for this band
    path: str
    band: int
    dtype: str  # The band's stored data type
    nodata: float | None  # The band's nodata value (NaN possible)
    scale: float  # The band's declared scale (1 when none is declared)
    offset: float  # The band's declared offset (0 when none is declared)
    applied: bool
class CalcResult(TypedDict):
    output: RasterInfo
    expression: str
    physical: bool  # True when each input's scale and offset were applied first
    inputs: list[CalcInputUsed]
    nodata: float | None  # The output's nodata value
    valid_count: int
    nodata_count: int
    note: str
def calc(
    expression: str,  # Band math over the input names, e.g. '(nir - red) / (nir + red)': numbers, + - * / ** %, comparisons, & | ~, where(cond, a, b) and element-wise math functions (sqrt, log, ...).
    inputs: list[CalcInput],  # The expression's names: [{'name': 'nir', 'path': 's2.tif', 'band': 8}, ...] (band defaults to 1). A mapping {'nir': {'path': 's2.tif', 'band': 8}, ...} is accepted too.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    dtype: CalcDtype = 'float32',  # Output data type; integer types round to the nearest whole number.
    nodata: float | None = None,  # Output nodata value; default NaN for float outputs. Integer outputs need one.
    physical: bool = True,  # Apply each band's declared scale and offset (raw * scale + offset) before the expression, so it sees physical values (reflectance, kelvin); False uses stored values.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> CalcResult:
    """Band math: evaluate an expression over bands of rasters that share one grid; write one-band GeoTIFF.
    Errors (ApiError, by e.type): invalid_argument for an expression outside the allowlist (the message lists what is allowed), an input name that is not an identifier or is unused, an integer dtype without nodata, a nodata value the dtype cannot hold, or dst equal to an input; refused for inputs on different grids (align them first) or one whose sidecar overrides its georeferencing (pass georeferencing); not_found/raster_error for an unreadable input; quota_exceeded when the output would pass a quota.
    """
    ...
