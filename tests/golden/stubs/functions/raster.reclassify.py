from typing import Literal, TypedDict
ClassDtype = Literal['uint8', 'uint16', 'int16', 'uint32', 'int32']
class ReclassRule(TypedDict):
    value: float | None  # Match cells equal to this value (exactly)
    min: float | None
    max: float | None
    to: int
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
class ReclassRuleCount(TypedDict):
    value: float | None
    min: float | None  # Range start (inclusive)
    max: float | None  # Range end (exclusive)
    to: int
    cells: int
class ClassCount(TypedDict):
    value: int
    cells: int
class ReclassifyResult(TypedDict):
    output: RasterInfo
    band: int
    physical: bool  # True when rules were matched against raw * scale + offset (the band declares them)
    scale: float  # The band's declared scale (1 when none)
    offset: float  # The band's declared offset (0 when none)
    dtype: str
    nodata: int
    rules: list[ReclassRuleCount]
    classes: list[ClassCount]
    unmatched_cells: int
    nodata_cells: int
    note: str
def reclassify(
    src: str,  # Workspace-relative input raster.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    rules: list[ReclassRule],  # Rules: [{'value': 3, 'to': 1}, {'min': 0, 'max': 10, 'to': 2}, ...]; a range is [min, max): min inclusive, max exclusive, null for an open end. Rules must not overlap. A mapping {'3': 1, '5': 2} (value to class) is accepted too.
    default: int | None = None,  # Class for valid cells no rule matches; null (default) makes them nodata.
    band: int = 1,  # Source band, 1-based.
    physical: bool = True,  # Match rules against raw * scale + offset when the band declares a scale or offset (e.g. temperatures in kelvin); False matches the stored values.
    dtype: ClassDtype | None = None,  # Output data type; default: the smallest holding every class and the nodata.
    nodata: int | None = None,  # Output nodata value; default: one no class uses (reported).
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> ReclassifyResult:
    """Reclassify one band: values or half-open ranges [min, max) become integer classes (a class raster).
    Errors (ApiError, by e.type): invalid_argument for no rules, a malformed or overlapping rule (both named), NaN bounds, a class or nodata the dtype cannot hold, nodata equal to a class, a band outside 1..count, or dst equal to src; not_found/raster_error for an unreadable source; refused for one whose sidecar overrides its georeferencing (pass georeferencing: the output copies it); quota_exceeded past a quota.
    """
    ...
