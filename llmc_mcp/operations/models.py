"""Result models and closed vocabularies of the raster, CRS and files operations.

These models are part of the public contract: the faces render them as JSON
and the stubs show their fields to agents, so every field carries a
description and holds plain data only (no rasterio or pyproj objects). Floats
that can be NaN (nodata, statistics of float rasters) serialize as the
string ``"NaN"`` rather than breaking strict JSON parsers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmc_mcp.gdal.datasets import GeoreferencingSource
from llmc_mcp.geodesy.description import TransformOperation

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


class GeoreferencingReading(_Model):
    """One reading of a raster's georeferencing: where one source (the file, or a sidecar) places it."""

    crs: CrsRef | None = Field(description="CRS this source gives, or null when it gives none.")
    transform: tuple[float, float, float, float, float, float] = Field(
        description="The geotransform this source gives, in the order of the top-level transform."
    )
    bounds: Bounds = Field(description="Extent of the pixels under this reading, in its CRS units.")
    res: tuple[float, float] = Field(description="Pixel size under this reading: x then y, in its CRS units.")


class _RasterHeader(_Model):
    """What a raster file is; the grid fields are null only where the file's georeferencing is in conflict."""

    path: str = Field(description="Workspace-relative file name.")
    driver: str = Field(
        description="GDAL driver that read the file, e.g. 'GTiff' (a COG reads as 'GTiff': see layout)."
    )
    width: int = Field(description="Number of columns (pixels).")
    height: int = Field(description="Number of rows (pixels).")
    count: int = Field(description="Number of bands.")
    dtypes: list[str] = Field(description="Data type of each band, e.g. 'uint8', 'float32'.")
    crs: CrsRef | None = Field(
        description="Coordinate reference system, or null when the file has none or when its georeferencing "
        "is in conflict (see georeferencing_conflict)."
    )
    transform: tuple[float, float, float, float, float, float] | None = Field(
        description="Affine geotransform (a, b, c, d, e, f): x = a*col + b*row + c, y = d*col + e*row + f. "
        "b and d are non-zero for rotated or sheared grids. Null when the georeferencing is in conflict "
        "and no side was chosen."
    )
    bounds: Bounds | None = Field(
        description="Extent covered by the pixels in CRS units (rotated grids: the envelope of the corners); "
        "null when the georeferencing is in conflict and no side was chosen."
    )
    res: tuple[float, float] | None = Field(
        description="Pixel size (x, y) in CRS units, both positive; null when the georeferencing is in "
        "conflict and no side was chosen."
    )
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
    georeferencing: GeoreferencingSource = Field(
        description="Where GDAL takes transform and crs from when it opens the file: 'file' (its own tags or "
        "header), a sidecar ('aux.xml', 'world file' such as .tfw/.wld, 'tab file') or 'none'."
    )
    georeferencing_note: str = Field(
        description="The source in words, naming the sidecar file; when the sidecar overrides the file's "
        "own georeferencing, both (positions then refuse unless given georeferencing='file'/'sidecar')."
    )


class RasterInfo(_RasterHeader):
    """What a raster file is: grid, georeferencing, layout, encoding and metadata.

    What operations return for the file they wrote, which has one georeferencing.
    """

    crs: CrsRef | None = Field(description="Coordinate reference system, or null when the file has none.")
    transform: tuple[float, float, float, float, float, float] = Field(
        description="Affine geotransform (a, b, c, d, e, f): x = a*col + b*row + c, y = d*col + e*row + f. "
        "b and d are non-zero for rotated or sheared grids."
    )
    bounds: Bounds = Field(
        description="Extent covered by the pixels in CRS units (rotated grids: the envelope of the corners)."
    )
    res: tuple[float, float] = Field(description="Pixel size (x, y) in CRS units, both positive.")


class RasterFileInfo(_RasterHeader):
    """What a raster file is: grid, georeferencing, layout, encoding and metadata.

    When a sidecar overrides the file's own georeferencing, both readings are reported apart and the
    top-level crs, transform, bounds and res are the chosen side's, or null when none was chosen.
    """

    georeferencing_conflict: str | None = Field(
        description="Null unless a sidecar overrides the georeferencing of the file with another one; then "
        "both in words, and whether the top-level crs, transform, bounds and res are null (no side "
        "chosen) or the chosen side's."
    )
    file_georeferencing: GeoreferencingReading | None = Field(
        description="With a conflict, the georeferencing of the file itself (what georeferencing='file' "
        "follows); null without one."
    )
    sidecar_georeferencing: GeoreferencingReading | None = Field(
        description="With a conflict, the georeferencing of the sidecar (what GDAL and "
        "georeferencing='sidecar' follow); null without one."
    )


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
    provenance: str | None = Field(
        None,
        description="Its provenance record ('<name>.provenance.json': how it was made, from what, why; "
        "provenance.lineage walks it), when there is one; records are not listed apart.",
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
        description="Every file deleted: the file, then its sidecars (.aux.xml, .ovr, .msk) and its record."
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
    """The area of the cells holding one value: on the ellipsoid, and on the raster's projected plane."""

    value: float = Field(description="The cell value.")
    cells: int = Field(description="How many valid cells hold it.")
    area_m2: float = Field(description="Their ground area on the ellipsoid, in square metres.")
    area_ha: float = Field(description="The same area in hectares (area_m2 / 10,000).")
    planar_area_m2: float | None = Field(
        description="Their area on the plane of the raster's projected CRS (cells times the cell's area "
        "there, converted to square metres from the CRS's unit); null for a geographic CRS."
    )


class RasterArea(_Model):
    """Area per value of one band: the ground area on the ellipsoid, and the area on the CRS's plane."""

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
    total_area_m2: float = Field(description="Their ground area on the ellipsoid, in square metres.")
    total_planar_area_m2: float | None = Field(
        description="Their area on the plane of the raster's projected CRS, in square metres; null for a "
        "geographic CRS."
    )
    planar_cell_m2: float | None = Field(
        description="One cell's area on that plane in square metres (|a*e - b*d| of the geotransform times "
        "the square of the CRS unit in metres); null for a geographic CRS."
    )
    note: str = Field(
        description="Which area to use when: the ground area for how much of the Earth the cells cover, "
        "the planar area for agreement with the grid's own numbers and with tools measuring in its CRS."
    )
    nodata_cells: int = Field(description="Cells excluded: nodata value, mask/alpha, NaN or ±Inf.")
    method: AreaMethod = Field(
        description="How each cell's ground area was found. 'ellipsoidal_quadrangle': rows are parallels and "
        "columns meridians (geographic, "
        "Mercator, other normal cylindrical grids), each row's cell area is exact on the ellipsoid; "
        "'geodesic_cells': other projections, each cell's corners taken to latitude/longitude and the "
        "geodesic area measured (on a lattice of cells for large rasters, see method_note)."
    )
    method_note: str = Field(description="How the areas were computed and how exact they are.")


class ReclassRule(BaseModel):
    """One ``raster.reclassify`` rule: a value, or a half-open range [min, max), and the class it becomes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float | None = Field(
        None,
        description="Match cells equal to this value (exactly). Excludes min/max.",
    )
    min: float | None = Field(None, description="Range start, inclusive; null for no lower end.")
    max: float | None = Field(None, description="Range end, exclusive; null for no upper end.")
    to: int = Field(description="The output class of the matching cells.")


class ReclassRuleCount(_Model):
    """One rule as applied, with the cells it matched."""

    value: float | None = Field(description="The value matched, or null for a range rule.")
    min: float | None = Field(description="Range start (inclusive), null when open or a value rule.")
    max: float | None = Field(description="Range end (exclusive), null when open or a value rule.")
    to: int = Field(description="The class it writes.")
    cells: int = Field(description="Cells this rule matched.")


class ClassCount(_Model):
    """How many output cells hold one class."""

    value: int = Field(description="The class.")
    cells: int = Field(description="Output cells holding it.")


class ReclassifyResult(_Model):
    """What ``raster.reclassify`` wrote: the classes, their cell counts, and how values were matched."""

    output: RasterInfo = Field(description="raster.info of the written file.")
    band: int = Field(description="Source band reclassified, 1-based.")
    physical: bool = Field(
        description="True when rules were matched against raw * scale + offset (the band declares them)."
    )
    scale: float = Field(description="The band's declared scale (1 when none).")
    offset: float = Field(description="The band's declared offset (0 when none).")
    dtype: str = Field(description="Output data type: the smallest holding every class and the nodata.")
    nodata: int = Field(description="Output nodata value, chosen (or given) so no class collides with it.")
    rules: list[ReclassRuleCount] = Field(description="Each rule, in the order given, with its cell count.")
    classes: list[ClassCount] = Field(description="Every class the rules and default can write, sorted.")
    unmatched_cells: int = Field(
        description="Valid cells no rule matched: written as default, or as nodata when default is null."
    )
    nodata_cells: int = Field(
        description="Output nodata cells: source nodata (value, mask, NaN) and unmatched."
    )
    note: str = Field(description="How cells were matched and what became nodata.")


ClipMaskKind = Literal["nodata", "internal_mask", "alpha"]


class ClipWindow(_Model):
    """A rectangle of source pixels."""

    col_off: int = Field(description="First source column, 0-based.")
    row_off: int = Field(description="First source row, 0-based.")
    width: int = Field(description="Columns.")
    height: int = Field(description="Rows.")


class ClipResult(_Model):
    """What ``raster.clip`` wrote and which source cells it kept."""

    output: RasterInfo = Field(description="raster.info of the written file.")
    window: ClipWindow = Field(
        description="The source pixels the output grid covers (the whole source when crop is false); "
        "output pixel (r, c) is source pixel (row_off + r, col_off + c), never resampled."
    )
    bounds: Bounds | None = Field(
        description="The box in the raster's CRS (bounds transformed, densified edges, when bounds_crs "
        "differs), null without bounds."
    )
    polygons: int = Field(description="Mask polygons used (0 without mask).")
    inside_cells: int = Field(description="Output cells inside the box/mask (their source values kept).")
    outside_cells: int = Field(description="Output cells outside, set to nodata (or masked out).")
    outside_as: ClipMaskKind = Field(
        description="How outside cells are marked: the nodata value, an internal mask (integer sources "
        "without nodata), or alpha 0 (sources with an alpha band and no nodata)."
    )
    nodata: float | None = Field(description="Output nodata value (NaN possible), null when none.")
    transformation: str | None = Field(
        description="How bounds or mask were brought into the raster's CRS, null when already in it."
    )
    note: str = Field(description="Which cells count as inside and how outside cells are marked.")


GeoreferencingChoice = Annotated[
    Literal["file", "sidecar"] | None,
    Field(description="Side to follow if a .aux.xml overrides the georeferencing; null refuses."),
]
"""The one argument by which an operation whose result depends on georeferencing picks a side."""


ZFactorSource = Literal["argument", "band_unit", "crs_vertical_unit", "horizontal_unit", "assumed_metres"]
GroundSpacing = Literal["projected", "geographic_per_row"]


class TerrainResult(_Model):
    """What a ``terrain`` operation wrote, and the units it reconciled to get there."""

    output: RasterInfo = Field(description="raster.info of the written float32 GeoTIFF.")
    measure: str = Field(description="What each cell holds, e.g. 'slope in degrees', 'aspect'.")
    z_factor: float | None = Field(
        description="Metres per elevation unit used (0.3048 for feet); null for roughness, whose values "
        "stay in the DEM's elevation units."
    )
    z_factor_source: ZFactorSource | None = Field(
        description="Where z_factor came from (null for roughness): the argument, the band's declared "
        "unit, the CRS's vertical unit, the horizontal unit of a projected CRS (elevations assumed in "
        "the same unit, as gdaldem does), or metres assumed (geographic CRS, no unit declared)."
    )
    ground_spacing: GroundSpacing = Field(
        description="How distances were measured: 'projected' is one cell size, CRS units times metres per "
        "unit; 'geographic_per_row' is each row's east-west and north-south spacing on the ellipsoid."
    )
    cell_size_m: tuple[float, float] = Field(
        description="Ground size (x, y) in metres of a middle-row cell, geographic grids: it varies by row."
    )
    flat_value: float | None = Field(
        description="aspect only: the value written where the surface is flat (no downslope direction)."
    )
    valid_cells: int = Field(description="Cells with a value.")
    nodata_cells: int = Field(
        description="NaN cells: the outer ring, and every cell whose 3x3 window holds a nodata cell."
    )
    note: str = Field(description="The formula, its source, and how units were reconciled.")


MergeMethod = Literal["first", "last", "min", "max", "mean", "sum", "count"]
"""How ``raster.merge`` combines a cell several sources cover (nodata never takes part)."""


class MergeSource(_Model):
    """One source of a mosaic: where it lands on the output grid and what it gave."""

    path: str = Field(description="Workspace-relative raster file.")
    resampled: bool = Field(
        description="True when its cells are off the mosaic's lattice (another size or a fractional "
        "offset), so it was warped onto it with the resampling method; false: copied cell for cell."
    )
    footprint_cells: int = Field(description="Output cells (per band) its extent covers.")
    valid_cells: int = Field(
        description="Cell values (all bands) it has on the output grid, nodata excluded."
    )
    used_cells: int = Field(
        description="Cell values that came from it: first/last/min/max, where it won (ties: the earlier "
        "source); mean/sum/count, every valid cell (each takes part)."
    )


class MergeResult(_Model):
    """What ``raster.merge`` wrote, and what each source contributed."""

    output: RasterInfo = Field(description="raster.info of the written file.")
    method: MergeMethod = Field(description="How overlapping cells were combined.")
    sources: list[MergeSource] = Field(
        description="Each source, in the order given (the order first/last use)."
    )
    overlap_cells: int = Field(description="Cell values (all bands) where two or more sources had a value.")
    nodata: float | None = Field(
        description="The output's nodata value; null when none (count: 0 means no source had a value; "
        "integer data without nodata: an internal mask marks the cells without a value)."
    )
    note: str = Field(description="How overlaps were combined, the output type, and how nodata was chosen.")


Stretch = Literal["percentile", "minmax", "none"]
"""How ``raster.preview`` maps values to 8-bit grey or colour levels."""

PNG_BASE64 = {"contentMediaType": "image/png", "contentEncoding": "base64"}
"""JSON Schema's own words for a field holding an image: the faces attach such fields as MCP image
content instead of pasting them into the text a model reads (``llmc_mcp.server.results``)."""


class RasterPreview(_Model):
    """A PNG quicklook of a raster and how it was drawn."""

    path: str = Field(description="Workspace-relative raster file.")
    width: int = Field(description="PNG width in pixels (at most max_size).")
    height: int = Field(description="PNG height in pixels (at most max_size).")
    source_width: int = Field(description="Raster width in pixels.")
    source_height: int = Field(description="Raster height in pixels.")
    bands: list[int] = Field(
        description="Bands drawn: one (grey or colour table) or three (red, green, blue)."
    )
    rendering: Literal["grey", "rgb", "colour_table"] = Field(
        description="'grey' or 'rgb' (stretched bands), or 'colour_table' (the band's own colours, "
        "no stretch)."
    )
    stretch: Stretch | None = Field(description="The stretch applied; null when the colour table was used.")
    limits: list[tuple[float, float]] | None = Field(
        description="Per band drawn, the values (low, high) mapped to levels 0 and 255, physical "
        "(stored * scale + offset) except for stretch 'none'; null for a colour table."
    )
    resampling: Literal["nearest", "average"] = Field(
        description="How pixels were decimated: nearest for classes (colour table, thematic, integer "
        "single band), average for measurements and RGB."
    )
    transparent_pixels: int = Field(
        description="PNG pixels with alpha 0: no valid value (nodata, mask, NaN)."
    )
    png_bytes: int = Field(description="Size of the PNG file in bytes.")
    png_base64: str = Field(
        description="The PNG, base64. Attached as image content by the faces: pass the result to show().",
        json_schema_extra=PNG_BASE64,
    )
    note: str = Field(description="How values became colours.")


WorkflowAnswerKind = Literal["text", "list", "number", "justification", "any"]
"""What a workflow step's answer must be: text, a list of texts, a number, a justification object
(``{intent, alternatives, choice, confidence}``), or any JSON value."""


class WorkflowInput(_Model):
    name: str = Field(description="Pass it to workflows.start as a keyword argument.")
    description: str


class WorkflowSummary(_Model):
    name: str
    description: str
    builtin: bool = Field(description="Shipped with llmc-mcp; false: from <workspace>/.llmc/workflows/.")
    inputs: list[WorkflowInput]
    steps: int


class WorkflowProblem(_Model):
    """Why a user workflow file was skipped (or is invalid): the file, the step, the problem."""

    file: str
    step: str | None
    problem: str


class WorkflowList(_Model):
    workflows: list[WorkflowSummary]
    skipped: list[WorkflowProblem] = Field(
        description="User definitions that failed validation and are not offered (fix and they appear)."
    )


class WorkflowStepInfo(_Model):
    id: str
    instruction: str = Field(description="The instruction template (${name} is a saved value).")
    answer: WorkflowAnswerKind
    save: str | None = Field(description="The name the answer is saved under.")
    foreach: str | None = Field(description="The saved list the step is asked once per item of.")
    requires: str | None = Field(description="'domain via operation' the answer justifies, stored for it.")
    next: list[str] = Field(description="Step ids it may go to; empty for the complete step.")
    complete: bool


class WorkflowDescription(_Model):
    name: str
    description: str
    builtin: bool
    inputs: list[WorkflowInput]
    steps: list[WorkflowStepInfo]


class ToolCall(_Model):
    """A classic-mode tool call: the tool's name and its arguments."""

    tool: str
    arguments: dict[str, str]


class WorkflowProgress(_Model):
    """One step of a running workflow to answer, or (complete) its results."""

    workflow: str
    state_id: str = Field(
        description="The handle of this run; pass it to submit. Keep it: it survives restarts."
    )
    complete: bool = Field(
        description="True once the last step is answered; results then holds every answer."
    )
    step: str | None = Field(description="The id of the step to answer now; null when complete.")
    step_index: int | None = Field(description="The step's position in the definition (1-based).")
    total_steps: int
    item: int | None = Field(description="For a step asked once per item: which item now (1-based).")
    items: int | None = Field(description="For a step asked once per item: how many items.")
    instruction: str | None = Field(description="What to do and answer now, with saved values filled in.")
    answer: WorkflowAnswerKind | None = Field(description="What the answer must be.")
    next_action: str | ToolCall | None = Field(
        description="The exact call to make next: a line of code (code mode) or a tool call (classic)."
    )
    results: dict[str, Any] | None = Field(description="When complete: every saved answer by its name.")


ConditionMethod = Literal["fill", "fill_flats", "breach"]
"""Depression handling: 'fill' by pyflwdir (DD-MCP-052), 'fill_flats', 'breach' written here (DD-MCP-068)."""
FlowRouting = Literal["d8", "dinf", "mfd"]
"""Flow routing: 'd8' by pyflwdir (DD-MCP-052), 'dinf' and 'mfd' written here (DD-MCP-068)."""
AccumulationUnits = Literal["cells", "m2"]
ThresholdUnits = Literal["cells", "m2"]


class ConditionResult(_Model):
    """What ``hydrology.condition`` wrote and how much it changed the DEM."""

    output: RasterInfo = Field(description="raster.info of the conditioned DEM (float32).")
    method: ConditionMethod = Field(description="How depressions were handled.")
    max_depth: float | None = Field(
        description="Depressions entered by a drop of at least this were kept as sinks; null: all filled."
    )
    raised_cells: int = Field(description="Cells whose elevation was raised.")
    max_raise: float = Field(description="The largest raise, in the DEM's vertical units (0 when none).")
    volume_cells: float = Field(
        description="Sum of raises over cells (vertical units x cells): the filled volume."
    )
    lowered_cells: int = Field(description="Cells whose elevation was lowered (breach channels; else 0).")
    max_lowering: float = Field(description="The deepest cut, in vertical units (0 when none).")
    note: str = Field(description="What was done and what was kept.")


class FlowDirectionResult(_Model):
    """What ``hydrology.flow_direction`` wrote."""

    output: RasterInfo = Field(
        description="raster.info of the flow direction grid (uint8 d8, float32 dinf, uint16 mfd)."
    )
    routing: FlowRouting = Field(description="The routing model.")
    encoding: str = Field(description="What each value of the output means.")
    outlet_cells: int = Field(
        description="Edge cells (of the grid or beside nodata) that drain off the data: 0."
    )
    sink_cells: int = Field(
        description="Interior cells that drain nowhere (unfilled depressions: d8 0, dinf -1, mfd 0)."
    )
    note: str = Field(description="How directions were derived.")


class FlowAccumulationResult(_Model):
    """What ``hydrology.flow_accumulation`` wrote."""

    output: RasterInfo = Field(description="raster.info of the accumulation grid.")
    units: str = Field(
        description="What each cell holds: 'cells' (count of cells draining through it, itself "
        "included), 'm2' (their ground area) or 'weights' (the sum of their weights)."
    )
    max_value: float = Field(description="The largest accumulation: at the outlet of the largest catchment.")
    weight_nodata_cells: int = Field(description="Cells whose weight was nodata and added nothing.")
    note: str = Field(description="What was accumulated and how areas were measured.")


class StreamsResult(_Model):
    """What ``hydrology.streams`` wrote."""

    output: RasterInfo = Field(
        description="raster.info of the stream grid (uint8: 1 channel, 0 not, 255 nodata)."
    )
    threshold: float = Field(description="The drainage area a channel cell reaches at least.")
    threshold_units: ThresholdUnits = Field(description="Units of the threshold, the accumulation's own.")
    stream_cells: int = Field(description="Cells marked as channel.")
    note: str = Field(description="The rule applied.")


class PourPoint(_Model):
    """One pour point: where it was given, where it was snapped, and its catchment."""

    id: int = Field(description="Catchment id in the output (1-based, in the order given).")
    x: float = Field(description="x as given.")
    y: float = Field(description="y as given.")
    row: int = Field(description="Row of the outlet cell it was snapped to.")
    col: int = Field(description="Column of the outlet cell.")
    cell_x: float = Field(description="Centre of the outlet cell, in the raster's CRS.")
    cell_y: float = Field(description="Centre of the outlet cell, in the raster's CRS.")
    snap_distance_m: float = Field(
        description="Ground distance (m) from the point to the outlet cell's centre."
    )
    accumulation_cells: int = Field(description="Cells draining through the outlet cell, itself included.")
    cells: int = Field(
        description="Cells of its catchment in the output (nested catchments exclude "
        "those of pour points upstream)."
    )
    area_m2: float = Field(description="Ground area of those cells, on the ellipsoid.")


class WatershedResult(_Model):
    """What ``hydrology.watershed`` wrote."""

    output: RasterInfo = Field(
        description="raster.info of the catchment grid (int32 ids; 0 none; -1 nodata)."
    )
    points: list[PourPoint] = Field(description="Each pour point, in the order given.")
    note: str = Field(description="How points were snapped and catchments nested.")


ZonalStat = Literal[
    "mean", "min", "max", "count", "sum", "median", "stdev", "majority", "minority", "variety"
]  # fmt: skip


class ZoneStatistics(_Model):
    """The statistics of one zone."""

    zone: int | float | str | None = Field(
        description="The zone: its zone_field value, else its feature index (0-based, file order) for "
        "polygon zones; its id for a raster of zone ids."
    )
    stats: dict[str, float | None] = Field(
        description="Each requested statistic by name; null when the zone holds no valid cell (outside "
        "the raster, or all nodata). count is 0 then."
    )


class ZonalStatsResult(_Model):
    """Statistics of one band per zone, with exact fractional cell coverage for polygon zones."""

    path: str = Field(description="Workspace-relative raster the values come from.")
    band: int = Field(description="Band number, 1-based.")
    zones: str = Field(description="Workspace-relative zones file.")
    zones_kind: Literal["polygons", "raster"] = Field(
        description="'polygons' (a vector file: cells weighted by the fraction each polygon covers) or "
        "'raster' (a raster of zone ids on the same grid: every cell counts fully)."
    )
    layer: str | None = Field(description="The layer the polygons were read from; null for a zone raster.")
    zone_field: str | None = Field(description="The attribute naming each zone; null: feature index or id.")
    stats: list[ZonalStat] = Field(description="The statistics computed, in request order.")
    results: list[ZoneStatistics] = Field(
        description="One entry per zone: in file order for polygons, by increasing id for a zone raster."
    )
    physical: bool = Field(
        description="True when the band's declared scale/offset were applied (values are raw * scale + "
        "offset); False when the values are the stored ones."
    )
    scale: float = Field(description="The band's declared scale (1 when none).")
    offset: float = Field(description="The band's declared offset (0 when none).")
    zones_crs: str | None = Field(
        description="The polygons' CRS as the file declares it; null for a zone raster."
    )
    transformation: str | None = Field(
        description="How the polygons were transformed to the raster's CRS (PROJ's operation, accuracy, "
        "ballpark warning); null when they were already in it."
    )
    repaired_zones: int = Field(
        description="Invalid polygons (self-intersections...) repaired with make_valid before use."
    )
    method: str = Field(description="How cells were weighted and counted, and what was excluded.")


class LineageStep(_Model):
    """One file made by an operation, as its provenance record tells."""

    path: str = Field(description="Workspace-relative file whose bytes the record claims.")
    sha256: str = Field(description="SHA-256 of the file's bytes.")
    record: str = Field(description="The record that claims them (usually '<path>.provenance.json').")
    operation: str = Field(description="The operation that wrote it, e.g. 'raster.reproject'.")
    finished_at: str = Field(description="When it was written (UTC).")
    inputs: list[str] = Field(description="The files it was made from, as the record names them.")


class LineageStop(_Model):
    """Where the walk back could not go on, and why."""

    path: str = Field(description="The input the record names.")
    reason: str = Field(description="Why the walk stopped there: missing, unreadable, or changed since.")


class Lineage(_Model):
    """How a file came to be: the steps back to the originals, and where the trail breaks."""

    path: str = Field(description="The file asked about.")
    sha256: str = Field(description="SHA-256 of its bytes.")
    steps: list[LineageStep] = Field(description="Every step found, the file's own first, then its inputs'.")
    originals: list[str] = Field(
        description="Files no record claims: originals, or files made outside llmc-mcp."
    )
    stops: list[LineageStop] = Field(description="Inputs the walk could not follow, with the reason.")
    ignored_records: list[str] = Field(
        description="Record files not believed: unreadable, over 1 MiB, or not conforming to the format."
    )
    unverified_records: list[str] = Field(
        default_factory=list,
        description="Conforming records this server did not sign (planted, from elsewhere, or edited "
        "since): foreign and unverified, never followed.",
    )
