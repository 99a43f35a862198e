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
class GeoreferencingReading(TypedDict):
    crs: CrsRef | None
    transform: tuple[float, float, float, float, float, float]
    bounds: Bounds
    res: tuple[float, float]
class RasterFileInfo(TypedDict):
    path: str
    driver: str
    width: int  # Number of columns (pixels)
    height: int  # Number of rows (pixels)
    count: int
    dtypes: list[str]
    crs: CrsRef | None
    transform: tuple[float, float, float, float, float, float] | None  # Affine geotransform (a, b, c, d, e, f)
    bounds: Bounds | None
    res: tuple[float, float] | None  # Pixel size (x, y) in CRS units
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
    georeferencing_conflict: str | None
    file_georeferencing: GeoreferencingReading | None
    sidecar_georeferencing: GeoreferencingReading | None
def info(
    path: str,  # Workspace-relative raster file, e.g. 'data/dem.tif'.
    include_wkt: bool = False,  # Also return the CRS as WKT2 (long).
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side the top-level crs, transform, bounds and res follow if a .aux.xml overrides the file's own georeferencing; null: neither (both are reported apart).
) -> RasterFileInfo:
    """Describe a raster: size, bands, data types, CRS, grid, nodata, layout, overviews and metadata.
    Errors (ApiError, by e.type): not_found if the file does not exist, raster_error if it is not a raster GDAL can read.
    """
    ...
