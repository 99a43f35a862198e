from typing import Literal, TypedDict
ZonalStat = Literal['mean', 'min', 'max', 'count', 'sum', 'median', 'stdev', 'majority', 'minority', 'variety']
class ZoneStatistics(TypedDict):
    zone: int | float | str | None
    stats: dict[str, float | None]
class ZonalStatsResult(TypedDict):
    path: str
    band: int
    zones: str
    zones_kind: Literal['polygons', 'raster']  # 'polygons' (a vector file
    layer: str | None
    zone_field: str | None
    stats: list[ZonalStat]
    results: list[ZoneStatistics]
    physical: bool  # True when the band's declared scale/offset were applied
    scale: float  # The band's declared scale (1 when none)
    offset: float  # The band's declared offset (0 when none)
    zones_crs: str | None  # The polygons' CRS as the file declares it
    transformation: str | None  # How the polygons were transformed to the raster's CRS
    repaired_zones: int  # Invalid polygons (self-intersections...) repaired with make_valid before use
    method: str
def zonal_stats(
    path: str,  # Workspace-relative raster to summarise.
    zones: str,  # Workspace-relative zones: polygons in a GeoPackage (.gpkg), GeoJSON (.geojson) or Shapefile (.shp), in any CRS; or an integer raster of zone ids on exactly the grid of path.
    stats: list[ZonalStat] = ['mean', 'min', 'max', 'count'],  # Statistics per zone: mean, min, max, count, sum, median, stdev, majority, minority, variety.
    band: int = 1,  # Band of path to summarise, 1-based.
    zone_field: str | None = None,  # Attribute of the polygons that names each zone; default: the feature index.
    layer: str | None = None,  # Layer of a multi-layer polygon file (GeoPackage); required when it has several.
    physical: bool = True,  # Apply the band's declared scale/offset (raw * scale + offset) before summarising; False summarises stored values.
    georeferencing: Literal['file', 'sidecar'] | None = None,  # Side to follow if a .aux.xml overrides the georeferencing; null refuses.
) -> ZonalStatsResult:
    """Statistics of a band per zone, with exact fractional cell coverage for polygon zones.
    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, an empty or repeated stats list, zone_field or layer with a zone raster, too many zones or vertices; refused for zones with no area (lines, points, empty or collapsed polygons), a layer with no features, polygons of which none overlaps the raster, a zone raster whose every cell is nodata or on another grid, or a sidecar overriding the georeferencing of path or of a zone raster (pass georeferencing: it applies to both); path_refused for a vector format beyond the three or a sidecar leading out; raster_error for a rotated raster, a zone raster with non-integer ids or a raster without CRS with polygon zones; crs_error when the zones' CRS cannot be transformed.
    """
    ...
