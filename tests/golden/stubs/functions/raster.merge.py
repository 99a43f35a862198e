from typing import Literal, TypedDict
MergeMethod = Literal['first', 'last', 'min', 'max', 'mean', 'sum', 'count']
Resampling = Literal['nearest', 'bilinear', 'cubic', 'cubic_spline', 'lanczos', 'average', 'mode', 'min', 'max', 'med', 'q1', 'q3', 'sum', 'rms']
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
class MergeSource(TypedDict):
    path: str
    resampled: bool  # True when its cells are off the mosaic's lattice
    footprint_cells: int  # Output cells (per band) its extent covers
    valid_cells: int  # Cell values (all bands) it has on the output grid
    used_cells: int
class MergeResult(TypedDict):
    output: RasterInfo
    method: MergeMethod
    sources: list[MergeSource]
    overlap_cells: int  # Cell values (all bands) where two or more sources had a value
    nodata: float | None  # The output's nodata value
    note: str
def merge(
    sources: list[str],  # Workspace-relative rasters on one CRS, in order (first/last use it).
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    method: MergeMethod = 'first',  # How a cell several sources cover is combined: first/last (by list order), min, max, mean, sum, or count (how many sources have a value). Nodata never takes part.
    resampling: Resampling = 'nearest',  # For sources off the mosaic's cell lattice only: how they are warped onto it.
    bounds: tuple[float, float, float, float] | None = None,  # Output extent (left, bottom, right, top) in the sources' CRS; default: their union.
    resolution: list[float] | None = None,  # Output cell size, [size] or [x, y], in CRS units; default: the first source's.
    nodata: float | None = None,  # Output nodata; default: the sources' common one, else NaN for float output.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> MergeResult:
    """Mosaic rasters of one CRS onto one grid, combining overlapping cells with ``method``.
    Errors: invalid_argument for no or duplicate sources, rotated grids, dst equal to a source, an output over 2**32 cells, a nodata the type cannot hold or that a computed cell equals; refused for sources on different CRSs, with different band counts, scales or offsets, or one whose georeferencing a sidecar overrides (pass georeferencing); raster_error for a source without CRS or unreadable.
    Reflection (may raise reflection.ReflectionRequired): aggregation: when source footprints overlap: how overlapping cells combine, for this kind of data; resampling: when a source is off the mosaic's cell lattice: the resampling method, for this kind of data
    """
    ...
