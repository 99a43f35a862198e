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
class TerrainResult(TypedDict):
    output: RasterInfo
    measure: str
    z_factor: float | None  # Metres per elevation unit used (0.3048 for feet)
    z_factor_source: Literal['argument', 'band_unit', 'crs_vertical_unit', 'horizontal_unit', 'assumed_metres'] | None  # Where z_factor came from (null for roughness)
    ground_spacing: Literal['projected', 'geographic_per_row']
    cell_size_m: tuple[float, float]  # Ground size (x, y) in metres of a middle-row cell
    flat_value: float | None
    valid_cells: int
    nodata_cells: int
    note: str
def slope(
    dem: str,  # Workspace-relative elevation raster (band 1 is used), e.g. 'dem.tif'.
    dst: str,  # Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced.
    units: Literal['degrees', 'percent'] = 'degrees',  # 'degrees' (0..90) or 'percent' (100 x rise/run; 45 degrees is 100).
    z_factor: float | None = None,  # Metres per elevation unit (0.3048 for feet; also a vertical exaggeration). Default: from the band's declared unit, the CRS's vertical unit, or the unit of a projected CRS.
) -> TerrainResult:
    """Slope of a DEM in degrees or percent, with horizontal and vertical units reconciled; float32 GeoTIFF.
    Errors: InvalidArgument for a DEM without CRS, a rotated grid, an unknown declared elevation unit (pass z_factor), a projection whose scale is more than 1 % off true inside the raster (Web Mercator: reproject to UTM), or dst equal to dem; NotFound/RasterError for an unreadable DEM.
    """
    ...
