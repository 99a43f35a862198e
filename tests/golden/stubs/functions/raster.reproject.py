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
def reproject(
    src: str,  # Workspace-relative input raster (must have a CRS).
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    dst_crs: str,  # Target CRS: EPSG code ('EPSG:6933'), WKT, PROJ string or PROJJSON.
    resampling: Resampling = 'nearest',  # How output pixels are computed: 'nearest' or 'mode' for categories; 'bilinear'/'cubic'/'average' for continuous values; 'sum' to conserve totals.
    resolution: list[float] | None = None,  # Output pixel size in dst_crs units: [size] or [x, y]. Excludes width/height.
    width: int | None = None,  # Output columns. Without height, height keeps the extent's aspect ratio.
    height: int | None = None,  # Output rows. Without width, width keeps the extent's aspect ratio.
    bounds: tuple[float, float, float, float] | None = None,  # Output extent (left, bottom, right, top) in dst_crs units, like gdalwarp -te.
    src_nodata: float | None = None,  # Treat this source value as nodata (overrides the file's nodata).
    dst_nodata: float | None = None,  # Nodata value of the output; default: the source's, else NaN for float data, else none (an alpha band or internal mask then marks the data).
    compress: Compression = 'DEFLATE',  # Output compression; JPEG/WEBP/LERC* are lossy and need a justification. Lossy data with nodata (the area outside the footprint): its edges become noise.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> RasterInfo:
    """Reproject a raster to another CRS and write a tiled GeoTIFF.
    Errors (ApiError, by e.type): invalid_argument for conflicting or out-of-range grid options, src == dst, a nodata value the data type cannot hold, a compression the data cannot use (JPEG/WEBP need uint8), or an output over 2**32 pixels per band; crs_error for an unknown dst_crs; raster_error when the source has no CRS, its extent cannot be expressed in dst_crs (pass bounds), or reading/writing fails.
    Reflection (may raise reflection.ReflectionRequired): crs_datum: always: the target CRS (dst_crs); resampling: always: the resampling method, for this kind of data (categorical, continuous or integer); format_selection: when compress is lossy (JPEG, WEBP, LERC*)
    """
    ...
