"""Result models and vocabulary of the ``raster`` namespace."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmc_mcp.compute.models import AreaMethod, Bounds, GeoreferencingReading, RasterHeader, RasterInfo
from llmc_mcp.results import ResultModel

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


class RasterFileInfo(RasterHeader):
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


class Histogram(ResultModel):
    """Counts of valid pixels in equal-width bins over [min, max]; the last bin includes max."""

    edges: list[float] = Field(description="Bin edges, one more than the counts.")
    counts: list[int] = Field(description="Valid pixels in each bin.")


class RawStats(ResultModel):
    """The stored-value statistics beside physical ones: what the file holds before scale and offset."""

    min: float | None = Field(description="Smallest valid stored value.")
    max: float | None = Field(description="Largest valid stored value.")
    mean: float | None = Field(description="Mean of valid stored values.")
    std: float | None = Field(description="Population standard deviation of valid stored values.")
    percentiles: dict[str, float] = Field(
        description="Requested percentiles of stored values, keyed like 'p50'."
    )


class BandStats(ResultModel):
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


class RasterStats(ResultModel):
    """Per-band statistics of a raster and how they were computed."""

    path: str = Field(description="Workspace-relative file name.")
    bands: list[BandStats] = Field(description="One entry per requested band, in request order.")
    approx: bool = Field(description="True when computed from decimated pixels, not every pixel.")
    method: str = Field(description="How pixels were read and how percentiles were derived.")


class CalcInput(BaseModel):
    """One name of a ``raster.calc`` expression: which band of which file it stands for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The name the expression uses, e.g. 'nir': a Python identifier.")
    path: str = Field(description="Workspace-relative raster file.")
    band: int = Field(1, description="Band number, 1-based (default 1).")


class CalcInputUsed(ResultModel):
    """What one expression name was bound to, and how its values were turned into numbers."""

    name: str = Field(description="The expression's name for this band.")
    path: str = Field(description="Workspace-relative raster file.")
    band: int = Field(description="Band number, 1-based.")
    dtype: str = Field(description="The band's stored data type, e.g. 'uint16'.")
    nodata: float | None = Field(description="The band's nodata value (NaN possible), null when unset.")
    scale: float = Field(description="The band's declared scale (1 when none is declared).")
    offset: float = Field(description="The band's declared offset (0 when none is declared).")
    applied: bool = Field(description="True when value = raw * scale + offset was used in the expression.")


class CalcResult(ResultModel):
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


class CalcStatsResult(ResultModel):
    """The statistics of a ``raster.calc`` expression that was never written, and how each input was read."""

    expression: str = Field(description="The expression as evaluated.")
    physical: bool = Field(description="True when each input's scale and offset were applied first.")
    inputs: list[CalcInputUsed] = Field(description="Each name of the expression, in the order given.")
    dtype: str = Field(description="The type the values were cast to before they were counted.")
    stats: BandStats = Field(
        description="As raster.stats reports a band of the file raster.calc would write."
    )
    method: str = Field(description="How the values were computed, read and counted.")
    note: str = Field(description="How values were computed (scale/offset, precision, nodata).")


class SampledPoint(ResultModel):
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


class SampleResult(ResultModel):
    """Values of a raster at points, with the cell each point fell in."""

    path: str = Field(description="Workspace-relative file name.")
    bands: list[int] = Field(description="Band numbers sampled, in the order of each point's values.")
    scales: list[float] = Field(description="Declared scale of each sampled band (1 when none).")
    offsets: list[float] = Field(description="Declared offset of each sampled band (0 when none).")
    units: list[str | None] = Field(description="Declared unit of each sampled band, null when unset.")
    points: list[SampledPoint] = Field(description="One entry per requested point, in request order.")
    outside_count: int = Field(description="Points outside the raster (every value null).")
    note: str = Field(description="How points were located and values read, in one sentence.")


class ValueArea(ResultModel):
    """The area of the cells holding one value: on the ellipsoid, and on the raster's projected plane."""

    value: float = Field(description="The cell value.")
    cells: int = Field(description="How many valid cells hold it.")
    area_m2: float = Field(description="Their ground area on the ellipsoid, in square metres.")
    area_ha: float = Field(description="The same area in hectares (area_m2 / 10,000).")
    planar_area_m2: float | None = Field(
        description="Their area on the plane of the raster's projected CRS (cells times the cell's area "
        "there, converted to square metres from the CRS's unit); null for a geographic CRS."
    )


class RasterArea(ResultModel):
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


class ReclassRuleCount(ResultModel):
    """One rule as applied, with the cells it matched."""

    value: float | None = Field(description="The value matched, or null for a range rule.")
    min: float | None = Field(description="Range start (inclusive), null when open or a value rule.")
    max: float | None = Field(description="Range end (exclusive), null when open or a value rule.")
    to: int = Field(description="The class it writes.")
    cells: int = Field(description="Cells this rule matched.")


class ClassCount(ResultModel):
    """How many output cells hold one class."""

    value: int = Field(description="The class.")
    cells: int = Field(description="Output cells holding it.")


class ReclassifyResult(ResultModel):
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


class ClipWindow(ResultModel):
    """A rectangle of source pixels."""

    col_off: int = Field(description="First source column, 0-based.")
    row_off: int = Field(description="First source row, 0-based.")
    width: int = Field(description="Columns.")
    height: int = Field(description="Rows.")


class ClipResult(ResultModel):
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


OutputGeoTiff = Annotated[
    str,
    Field(description="Workspace-relative output GeoTIFF (.tif/.tiff); only an earlier output is replaced."),
]
"""The ``dst`` of every raster write, described once so that their schemas say the same."""


MergeMethod = Literal["first", "last", "min", "max", "mean", "sum", "count"]
"""How ``raster.merge`` combines a cell several sources cover (nodata never takes part)."""


class MergeSource(ResultModel):
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


class MergeResult(ResultModel):
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


class RasterPreview(ResultModel):
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


ZonalStat = Literal[
    "mean", "min", "max", "count", "sum", "median", "stdev", "majority", "minority", "variety"
]  # fmt: skip


class ZoneStatistics(ResultModel):
    """The statistics of one zone."""

    zone: int | float | str | None = Field(
        description="The zone: its zone_field value, else its feature index (0-based, file order) for "
        "polygon zones; its id for a raster of zone ids."
    )
    stats: dict[str, float | None] = Field(
        description="Each requested statistic by name; null when the zone holds no valid cell (outside "
        "the raster, or all nodata). count is 0 then."
    )


class ZonalStatsResult(ResultModel):
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
