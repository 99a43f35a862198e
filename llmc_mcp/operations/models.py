"""Result models and closed vocabularies of the raster, CRS and files operations.

These models are part of the public contract: the faces render them as JSON
and the stubs show their fields to agents, so every field carries a
description and holds plain data only (no rasterio or pyproj objects). Floats
that can be NaN (nodata, statistics of float rasters) serialize as the
string ``"NaN"`` rather than breaking strict JSON parsers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Resampling = Literal[
    "nearest",
    "bilinear",
    "cubic",
    "cubic_spline",
    "lanczos",
    "average",
    "mode",
    "min",
    "max",
    "med",
    "q1",
    "q3",
    "sum",
    "rms",
]
"""GDAL's warp resampling methods. ``gauss`` is absent on purpose: GDAL only offers it for overviews."""

OverviewResampling = Literal[
    "nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "gauss", "rms"
]
"""GDAL's overview resampling methods (min/max/med/q1/q3/sum exist only for warping)."""

Compression = Literal[
    "NONE", "DEFLATE", "LZW", "ZSTD", "PACKBITS", "JPEG", "WEBP", "LERC", "LERC_DEFLATE", "LERC_ZSTD"
]
"""GeoTIFF/COG compressions. JPEG, WEBP and LERC* can change pixel values."""

CrsKind = Literal[
    "geographic", "projected", "compound", "geocentric", "vertical", "engineering", "bound", "other"
]


class _Model(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings", frozen=True)


class CrsRef(_Model):
    """A raster's CRS, short: enough to compare and to pass on as ``dst_crs``."""

    epsg: int | None = Field(description="EPSG code when the CRS is exactly an EPSG definition, else null.")
    name: str = Field(description="Human-readable CRS name, e.g. 'WGS 84 / UTM zone 18N'.")
    wkt: str | None = Field(None, description="WKT2 definition; only filled when asked for (include_wkt).")


class Bounds(_Model):
    """An axis-aligned extent in the units of the raster's CRS."""

    left: float = Field(description="Minimum x (west edge).")
    bottom: float = Field(description="Minimum y (south edge).")
    right: float = Field(description="Maximum x (east edge).")
    top: float = Field(description="Maximum y (north edge).")


class RasterInfo(_Model):
    """What a raster file is: grid, georeferencing, layout, encoding and metadata."""

    path: str = Field(description="Workspace-relative file name.")
    driver: str = Field(
        description="GDAL driver that read the file, e.g. 'GTiff' (a COG reads as 'GTiff': see layout)."
    )
    width: int = Field(description="Number of columns (pixels).")
    height: int = Field(description="Number of rows (pixels).")
    count: int = Field(description="Number of bands.")
    dtypes: list[str] = Field(description="Data type of each band, e.g. 'uint8', 'float32'.")
    crs: CrsRef | None = Field(description="Coordinate reference system, or null when the file has none.")
    transform: tuple[float, float, float, float, float, float] = Field(
        description="Affine geotransform (a, b, c, d, e, f): x = a*col + b*row + c, y = d*col + e*row + f. "
        "b and d are non-zero for rotated or sheared grids."
    )
    bounds: Bounds = Field(
        description="Extent covered by the pixels in CRS units (rotated grids: the envelope of the corners)."
    )
    res: tuple[float, float] = Field(description="Pixel size (x, y) in CRS units, both positive.")
    nodata: list[float | None] = Field(
        description="Nodata value of each band (NaN possible), null when unset."
    )
    mask_flags: list[list[str]] = Field(
        description="GDAL mask flags of each band: 'all_valid', 'per_dataset' (an internal/external mask), "
        "'alpha' (validity from an alpha band), 'nodata'."
    )
    block_shapes: list[tuple[int, int]] = Field(description="Internal block (rows, cols) of each band.")
    compression: str | None = Field(description="Compression as GDAL reports it, e.g. 'DEFLATE', or null.")
    interleave: str | None = Field(description="'PIXEL' or 'BAND' layout of multi-band data, when known.")
    layout: str | None = Field(
        description="'COG' for a Cloud Optimized GeoTIFF (GDAL's IMAGE_STRUCTURE LAYOUT), else null.",
    )
    overviews: list[list[int]] = Field(
        description="Overview decimation factors of each band, e.g. [2, 4, 8]; [] when none were built."
    )
    descriptions: list[str | None] = Field(description="Band descriptions (names), null when unset.")
    scales: list[float] = Field(
        description="Declared scale of each band (1 when none): physical value = raw * scale + offset."
    )
    offsets: list[float] = Field(description="Declared offset of each band (0 when none).")
    units: list[str | None] = Field(description="Declared unit of each band, e.g. 'K', null when unset.")
    registration: Literal["Area", "Point"] | None = Field(
        description="AREA_OR_POINT: 'Area' (a value covers its cell) or 'Point' (a value is at the cell "
        "centre; the transform still gives the cell corners); null when the file does not say."
    )
    colorinterp: list[str] = Field(
        description="Colour interpretation of each band, e.g. 'red', 'gray', 'alpha'."
    )
    tags: dict[str, str] = Field(
        description="Dataset metadata (default domain), at most 50 keys with values cut at 500 characters."
    )
    tags_truncated: bool = Field(description="True when keys were dropped or values cut from tags.")
    file_size_bytes: int = Field(description="Size of the main file in bytes (sidecar files not counted).")


class Histogram(_Model):
    """Counts of valid pixels in equal-width bins over [min, max]; the last bin includes max."""

    edges: list[float] = Field(description="Bin edges, one more than the counts.")
    counts: list[int] = Field(description="Valid pixels in each bin.")


class RawStats(_Model):
    """The stored-value statistics beside physical ones: what the file holds before scale and offset."""

    min: float | None = Field(description="Smallest valid stored value.")
    max: float | None = Field(description="Largest valid stored value.")
    mean: float | None = Field(description="Mean of valid stored values.")
    std: float | None = Field(description="Population standard deviation of valid stored values.")
    percentiles: dict[str, float] = Field(
        description="Requested percentiles of stored values, keyed like 'p50'."
    )


class BandStats(_Model):
    """Statistics of one band's valid pixels (nodata, masked and non-finite pixels excluded)."""

    band: int = Field(description="Band number, 1-based.")
    min: float | None = Field(description="Smallest valid value, null when there is none.")
    max: float | None = Field(description="Largest valid value, null when there is none.")
    mean: float | None = Field(description="Mean of valid values, null when there is none.")
    std: float | None = Field(description="Population standard deviation of valid values (ddof=0).")
    valid_count: int = Field(description="Pixels counted as data.")
    nodata_count: int = Field(description="Pixels excluded: nodata value, mask/alpha, NaN or ±Inf.")
    percentiles: dict[str, float] = Field(
        description="Requested percentiles keyed like 'p50' or 'p2.5' (linear interpolation between "
        "order statistics, as numpy.percentile); empty when there is no valid pixel."
    )
    histogram: Histogram | None = Field(None, description="Present when histogram_bins was given.")
    scale: float = Field(1.0, description="The band's declared scale (1 when none).")
    offset: float = Field(0.0, description="The band's declared offset (0 when none).")
    raw: RawStats | None = Field(
        None,
        description="Statistics of the stored values, when the figures above are physical (raw * scale + "
        "offset applied); null when they are the stored values themselves.",
    )


class RasterStats(_Model):
    """Per-band statistics of a raster and how they were computed."""

    path: str = Field(description="Workspace-relative file name.")
    bands: list[BandStats] = Field(description="One entry per requested band, in request order.")
    approx: bool = Field(description="True when computed from decimated pixels, not every pixel.")
    method: str = Field(description="How pixels were read and how percentiles were derived.")


class Ellipsoid(_Model):
    name: str = Field(description="Ellipsoid name, e.g. 'WGS 84'.")
    semi_major_m: float = Field(description="Semi-major axis in metres.")
    inverse_flattening: float = Field(description="Inverse flattening (0 for a sphere).")


class AreaOfUse(_Model):
    name: str = Field(description="Where the CRS is meant to be used.")
    west: float = Field(description="Western limit, degrees longitude.")
    south: float = Field(description="Southern limit, degrees latitude.")
    east: float = Field(
        description="Eastern limit, degrees longitude (may be < west across the antimeridian)."
    )
    north: float = Field(description="Northern limit, degrees latitude.")


class Axis(_Model):
    name: str = Field(description="Axis name, e.g. 'Geodetic latitude', 'Easting'.")
    abbreviation: str = Field(description="Short name, e.g. 'Lat', 'E'.")
    direction: str = Field(description="'north', 'east', 'up', ...")
    unit: str = Field(description="Unit name, e.g. 'degree', 'metre'.")


class CrsInfo(_Model):
    """Facts about a CRS an agent needs before choosing it for an analysis."""

    name: str = Field(description="CRS name.")
    kind: CrsKind = Field(description="Type of CRS.")
    units: str | None = Field(description="Unit of the first horizontal axis, e.g. 'metre', 'degree'.")
    axes: list[Axis] = Field(
        description="Axes in the definition's order (EPSG:4326 is latitude first; GeoTIFFs still use x=lon)."
    )
    datum: str | None = Field(description="Geodetic datum (or datum ensemble) name.")
    ellipsoid: Ellipsoid | None = Field(description="Reference ellipsoid, when the CRS has one.")
    epsg: int | None = Field(description="EPSG code when the definition is exactly an EPSG CRS.")
    authority: str | None = Field(description="'AUTHORITY:CODE' (EPSG, ESRI, OGC, ...) of an exact match.")
    area_of_use: AreaOfUse | None = Field(
        description="Area the CRS is valid for; null for custom definitions."
    )
    projection_method: str | None = Field(
        description="Map projection method, e.g. 'Transverse Mercator'; null for unprojected CRSs."
    )
    preserves: list[str] = Field(
        description="What the projection keeps undistorted, as known from its method: 'area' (equal-area), "
        "'conformal' (local shapes and angles), 'equidistant ...' (distances along some lines), "
        "'direction from centre'. Empty for unprojected CRSs and compromise/unknown projections."
    )
    wkt: str | None = Field(None, description="WKT2 definition; only filled when asked for (include_wkt).")


class RasterSummary(_Model):
    """A raster in one line, from its header: what ``files.list`` shows beside each raster file."""

    driver: str = Field(
        description="GDAL driver that read the file, e.g. 'GTiff' (a COG too: raster.info's layout says so)."
    )
    width: int = Field(description="Number of columns (pixels).")
    height: int = Field(description="Number of rows (pixels).")
    count: int = Field(description="Number of bands.")
    dtype: str = Field(description="Data type of the bands, e.g. 'uint8'; comma-separated when they differ.")
    crs: str | None = Field(
        description="'EPSG:<code>' when the CRS is exactly an EPSG definition, else its name; null when the "
        "file has none."
    )


class FileEntry(_Model):
    """One file of the workspace, as ``files.list`` shows it."""

    name: str = Field(description="Workspace-relative name, as every operation takes it.")
    size_bytes: int = Field(description="Size in bytes (of the link itself for a link that is not followed).")
    modified: str = Field(description="Last modification time, ISO 8601 in UTC.")
    written_by_llmc: bool = Field(
        description="True when llmc-mcp wrote the file and nobody changed it since: files.remove accepts it."
    )
    raster: RasterSummary | None = Field(
        description="For a raster file (by suffix) that passed the input checks: its summary; else null."
    )
    refused: str | None = Field(
        description="Why the file cannot be used as an input: a link not followed, a raster refused by the "
        "hostile-file checks or one GDAL cannot open, with the fix; null otherwise."
    )


class FileListing(_Model):
    """What ``files.list`` found, bounded."""

    files: list[FileEntry] = Field(description="Matching files, sorted by name; at most 1,000.")
    truncated: int = Field(description="How many more files matched and are not shown (0 when none).")
    summaries_skipped: int = Field(
        description="How many raster files are shown without a summary because at most 200 are read per call."
    )
    note: str | None = Field(description="What was left out and how to narrow the pattern; else null.")


class RemovedFile(_Model):
    """What ``files.remove`` deleted."""

    path: str = Field(description="The file removed.")
    removed: list[str] = Field(
        description="Every file deleted: the file, then its sidecars (.aux.xml, .ovr, .msk)."
    )
    freed_bytes: int = Field(description="Quota bytes freed: the file and its sidecars, as written.")
    session_bytes: int = Field(description="Bytes of outputs this session still holds against its quota.")
    session_files: int = Field(description="Output files this session still holds against its quota.")


class CalcInput(BaseModel):
    """One name of a ``raster.calc`` expression: which band of which file it stands for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The name the expression uses, e.g. 'nir': a Python identifier.")
    path: str = Field(description="Workspace-relative raster file.")
    band: int = Field(1, description="Band number, 1-based (default 1).")


class CalcInputUsed(_Model):
    """What one expression name was bound to, and how its values were turned into numbers."""

    name: str = Field(description="The expression's name for this band.")
    path: str = Field(description="Workspace-relative raster file.")
    band: int = Field(description="Band number, 1-based.")
    dtype: str = Field(description="The band's stored data type, e.g. 'uint16'.")
    nodata: float | None = Field(description="The band's nodata value (NaN possible), null when unset.")
    scale: float = Field(description="The band's declared scale (1 when none is declared).")
    offset: float = Field(description="The band's declared offset (0 when none is declared).")
    applied: bool = Field(description="True when value = raw * scale + offset was used in the expression.")


class CalcResult(_Model):
    """What ``raster.calc`` wrote and how each input was read."""

    output: RasterInfo = Field(description="raster.info of the written file.")
    expression: str = Field(description="The expression as evaluated.")
    physical: bool = Field(description="True when each input's scale and offset were applied first.")
    inputs: list[CalcInputUsed] = Field(description="Each name of the expression, in the order given.")
    nodata: float | None = Field(description="The output's nodata value (NaN for float outputs by default).")
    valid_count: int = Field(description="Output cells with a value.")
    nodata_count: int = Field(
        description="Output cells set to nodata: nodata in an input, or a result that is not finite (x/0, "
        "log(0)) or does not fit the output dtype."
    )
    note: str = Field(description="How values were computed (scale/offset, precision, nodata).")


class SampledPoint(_Model):
    """The values of one requested point."""

    x: float = Field(description="The point's x as given (in the request's crs).")
    y: float = Field(description="The point's y as given (in the request's crs).")
    row: int | None = Field(description="Row of the cell holding the point (0-based), null when outside.")
    col: int | None = Field(description="Column of the cell holding the point (0-based), null when outside.")
    cell_x: float | None = Field(description="x of the cell's centre (raster CRS), null when outside.")
    cell_y: float | None = Field(description="y of the cell's centre (raster CRS), null when outside.")
    values: list[float | None] = Field(
        description="Per requested band: raw * scale + offset; null where nodata or outside."
    )
    raw: list[float | None] = Field(
        description="Per requested band: the stored value; null where nodata or outside."
    )


class SampleResult(_Model):
    """Values of a raster at points, with the cell each point fell in."""

    path: str = Field(description="Workspace-relative file name.")
    bands: list[int] = Field(description="Band numbers sampled, in the order of each point's values.")
    scales: list[float] = Field(description="Declared scale of each sampled band (1 when none).")
    offsets: list[float] = Field(description="Declared offset of each sampled band (0 when none).")
    units: list[str | None] = Field(description="Declared unit of each sampled band, null when unset.")
    points: list[SampledPoint] = Field(description="One entry per requested point, in request order.")
    outside_count: int = Field(description="Points outside the raster (every value null).")
    note: str = Field(description="How points were located and values read, in one sentence.")


class TransformOperation(_Model):
    """A coordinate operation PROJ knows between two CRSs."""

    name: str = Field(description="PROJ's description of the operation, e.g. 'NAD27 to NAD83 (1)'.")
    accuracy_m: float | None = Field(
        description="Accuracy in metres as the EPSG database states it (0 for a pure conversion); null "
        "when unknown."
    )
    ballpark: bool = Field(
        description="True when no real datum shift was available: PROJ took the two datums as the same "
        "(errors of tens to hundreds of metres)."
    )
    missing_grids: list[str] = Field(description="Grid files the operation needs that are not installed.")


class TransformResult(_Model):
    """Transformed coordinates and the operation that produced them."""

    points: list[tuple[float, float] | None] = Field(
        description="(x, y) in dst_crs, x first (easting or longitude), in request order; null for a point "
        "PROJ could not transform (outside the projection's domain or the grid's extent)."
    )
    failed: int = Field(description="How many points are null.")
    operation: TransformOperation = Field(description="The operation used for every point.")
    covers_points: bool = Field(
        description="True when the operation's area of use contains every point; false means it was used "
        "beyond the area its accuracy is stated for."
    )
    better_unavailable: list[TransformOperation] = Field(
        description="More accurate operations for these points (or some of them) that PROJ knows but cannot "
        "run here because a grid is missing (grids are never downloaded), best first, at most 5."
    )
    note: str = Field(description="What the agent should know about this result, in a sentence or two.")


AreaMethod = Literal["ellipsoidal_quadrangle", "geodesic_cells"]


class ValueArea(_Model):
    """The ground area of the cells holding one value."""

    value: float = Field(description="The cell value.")
    cells: int = Field(description="How many valid cells hold it.")
    area_m2: float = Field(description="Their ground area on the ellipsoid, in square metres.")
    area_ha: float = Field(description="The same area in hectares (area_m2 / 10,000).")


class RasterArea(_Model):
    """Ground area per value of one band, on the ellipsoid of the raster's CRS."""

    path: str = Field(description="Workspace-relative file name.")
    band: int = Field(description="Band number, 1-based.")
    ellipsoid: str = Field(description="Ellipsoid the areas are measured on, e.g. 'WGS 84'.")
    areas: list[ValueArea] = Field(
        description="One entry per value found, sorted by value; with values given, one per requested value "
        "in request order, even with 0 cells."
    )
    total_cells: int = Field(
        description="Valid cells counted (only the requested values, when values is set)."
    )
    total_area_m2: float = Field(description="Their ground area in square metres.")
    nodata_cells: int = Field(description="Cells excluded: nodata value, mask/alpha, NaN or ±Inf.")
    method: AreaMethod = Field(
        description="How each cell's ground area was found. 'ellipsoidal_quadrangle': rows are parallels and "
        "columns meridians (geographic, "
        "Mercator, other normal cylindrical grids), each row's cell area is exact on the ellipsoid; "
        "'geodesic_cells': other projections, each cell's corners taken to latitude/longitude and the "
        "geodesic area measured (on a lattice of cells for large rasters, see method_note)."
    )
    method_note: str = Field(description="How the areas were computed and how exact they are.")
