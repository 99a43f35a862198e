from typing import Literal, TypedDict
Resampling = Literal['nearest', 'bilinear', 'cubic', 'cubic_spline', 'lanczos', 'average', 'mode', 'min', 'max', 'med', 'q1', 'q3', 'sum', 'rms']
Compression = Literal['NONE', 'DEFLATE', 'LZW', 'ZSTD', 'PACKBITS', 'JPEG', 'WEBP', 'LERC', 'LERC_DEFLATE', 'LERC_ZSTD']
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
def align(
    src: str,  # Workspace-relative raster to resample (must have a CRS).
    like: str,  # Workspace-relative raster whose grid (CRS, transform, size) the output takes.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    resampling: Resampling = 'nearest',  # How output pixels are computed: 'nearest' or 'mode' for categories; 'bilinear'/'cubic'/'average' for continuous values; 'sum' to conserve totals.
    src_nodata: float | None = None,  # Treat this source value as nodata (overrides the file's nodata).
    dst_nodata: float | None = None,  # Output nodata; default as raster.reproject: the source's, else NaN for floats.
    compress: Compression = 'DEFLATE',  # Output compression; JPEG/WEBP/LERC* are lossy and need a justification.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> RasterInfo:
    """Resample and reproject ``src`` onto exactly the grid of ``like``; returns the output's raster.info.
    Errors: invalid_argument when dst is src or like, or for a nodata value the data type cannot hold; refused when a sidecar overrides the georeferencing of either (pass georeferencing); raster_error when src or like has no CRS, or reading/writing fails.
    Reflection (may raise reflection.ReflectionRequired): crs_datum: when like's CRS is not src's: like's CRS, as raster.reproject's dst_crs; resampling: always: the resampling method, for this kind of data (categorical, continuous or integer); format_selection: when compress is lossy (JPEG, WEBP, LERC*)
    """
    ...
