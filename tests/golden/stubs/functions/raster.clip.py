from typing import Literal, TypedDict
ClipMaskKind = Literal['nodata', 'internal_mask', 'alpha']
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
class ClipWindow(TypedDict):
    col_off: int
    row_off: int
    width: int
    height: int
class ClipResult(TypedDict):
    output: RasterInfo
    window: ClipWindow
    bounds: Bounds | None  # The box in the raster's CRS
    polygons: int  # Mask polygons used (0 without mask)
    inside_cells: int  # Output cells inside the box/mask (their source values kept)
    outside_cells: int
    outside_as: ClipMaskKind
    nodata: float | None  # Output nodata value (NaN possible)
    transformation: str | None  # How bounds or mask were brought into the raster's CRS
    note: str
def clip(
    src: str,  # Workspace-relative input raster.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    bounds: tuple[float, float, float, float] | None = None,  # Box (left, bottom, right, top) in bounds_crs; x first (longitude for EPSG:4326).
    bounds_crs: str | None = None,  # CRS of bounds (EPSG code, WKT, PROJ string); default: the raster's own.
    mask: str | None = None,  # Workspace-relative vector file of polygons (GeoPackage, GeoJSON, Shapefile).
    mask_layer: str | None = None,  # Layer of mask to use; needed when the file has several.
    crop: bool = True,  # True: shrink the grid to the inside cells; False: keep the source grid.
    all_touched: bool = False,  # True: every cell the box/polygons touch is inside; False: cells whose centre is.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> ClipResult:
    """Cut a raster to a box or to polygons; outside cells become nodata. Pixels are never resampled.
    Errors (ApiError, by e.type): invalid_argument for neither bounds nor mask, a malformed box, a box that misses the raster (its bounds are given in both CRSs) or holds no cell centre (try all_touched), or dst equal to src; crs_error for an unknown bounds_crs; raster_error when bounds_crs or mask is given but the raster has no CRS; refused when a sidecar overrides its georeferencing (pass georeferencing), a mask feature has no area (a line, a point, an empty or collapsed polygon), the mask layer has no features, or its polygons hold no cell of the raster (both extents are given); path_refused/not_found/invalid_argument for a bad mask file.
    """
    ...
