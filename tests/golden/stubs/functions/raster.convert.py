from typing import Literal, TypedDict
Compression = Literal['NONE', 'DEFLATE', 'LZW', 'ZSTD', 'PACKBITS', 'JPEG', 'WEBP', 'LERC', 'LERC_DEFLATE', 'LERC_ZSTD']
OverviewResampling = Literal['nearest', 'bilinear', 'cubic', 'cubic_spline', 'lanczos', 'average', 'mode', 'gauss', 'rms']
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
def convert(
    src: str,  # Workspace-relative input raster.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    driver: Literal['GTiff', 'COG'] = 'GTiff',  # 'GTiff', or 'COG' for a Cloud Optimized GeoTIFF (always tiled, overviews last; the result reports driver 'GTiff' with layout 'COG').
    compress: Compression = 'DEFLATE',  # Compression; JPEG/WEBP/LERC* are lossy and need a justification. Lossy data with nodata: the nodata edges become noise (values near, not equal to, nodata).
    predictor: Literal[1, 2, 3] | None = None,  # 1 none, 2 integer, 3 floating point; null picks 2 or 3 for DEFLATE/LZW/ZSTD.
    tiled: bool = True,  # Tiled layout (blocksize x blocksize); False writes strips.
    blocksize: int = 512,  # Tile size in pixels (rows per strip when not tiled): a multiple of 16 in 16..4096.
    overviews: list[int] | Literal['auto'] | None = None,  # Overview factors such as [2, 4, 8], or 'auto' (halve until the smaller side is under 256 pixels); null for none. COG accepts only 'auto' or null.
    overview_resampling: OverviewResampling = 'nearest',  # How overview pixels are computed: 'nearest' or 'mode' for categories; 'average', 'bilinear' or 'cubic' for continuous values.
    quality: int | None = None,  # JPEG/WEBP quality 1..100 (JPEG default 75); only with those compressions.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> RasterInfo:
    """Rewrite a raster as GeoTIFF or Cloud Optimized GeoTIFF with a chosen compression, layout, overviews.
    Errors (ApiError, by e.type): invalid_argument for options that do not apply: COG with tiled=False or explicit factors, blocksize not a multiple of 16 in 16..4096, predictor 2 on float or 3 on integer data, predictor or quality with a compression that has none, JPEG/WEBP on non-uint8 data, WEBP without 3/4 bands, overview factors below 2, overview_resampling without overviews, src == dst; raster_error when reading or writing fails.
    Reflection (may raise reflection.ReflectionRequired): format_selection: when compress is lossy (JPEG, WEBP, LERC*); resampling: when overviews are built: overview_resampling, for this kind of data
    """
    ...
