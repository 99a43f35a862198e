"""``raster.zonal_stats``: statistics of one band per zone, polygons (exact coverage) or a zone raster.

Polygon zones go to exactextract (DD-MCP-039), which computes the exact fraction of each cell a polygon
covers and weights every statistic by it. The raster is cut into chunks along cell boundaries, each
cell in exactly one; exactextract runs on each chunk with the polygons that reach it
(:mod:`.zonal_exactextract`: objects, never names: the chunk read through the dataset
:func:`open_for_read` checked, masks, NaN and scale/offset as in ``raster.stats``, and the polygons
:func:`read_polygons` read and transformed), and the zones' partials are merged here in the chunks'
order (:mod:`.zonal_accumulators`). A raster of zone ids is summarised in row bands of the two rasters:
every cell counts fully, and the statistics follow exactextract's definitions so both kinds of zones
agree. Either way the pieces are pure and picklable, so they run on any engine (the local one, Dask
workers) with the same answer to the bit, and memory follows the piece, not the raster or the zone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.grid_checks import is_rotated
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.polygons import EXTENSIONS, Polygons, read_polygons
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.errors import InvalidArgument, RasterError, Refused
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import (
    GeoreferencingChoice,
    ZonalStat,
    ZonalStatsResult,
    ZoneStatistics,
)
from llmc_mcp.operations.raster.stats import CHUNK_PIXELS, check_bands, windows
from llmc_mcp.operations.raster.zonal_accumulators import CoverageMoments, Distribution, Moments, ZonePartial
from llmc_mcp.operations.raster.zonal_exactextract import Chunk, PolygonChunk

MAX_CELLS_IN_MEMORY = 4_000_000
"""Cells exactextract may hold for one polygon (~32 MB of float64 values plus as many coverage
fractions; its default, 30 M, would take ~500 MB for one large zone). A chunk never holds more, so no
polygon's window is split within a chunk."""


_DISTRIBUTION = frozenset({"median", "majority", "minority", "variety"})

_STAT_MEANINGS = (
    "count: valid cells, each weighted by the fraction of it inside the zone (a cell half inside counts "
    "0.5); sum: values times those fractions; mean: sum / count; min, max: over cells touching the "
    "zone; stdev: population standard deviation, coverage-weighted; median: coverage-weighted median "
    "over the zone's distinct values (exactextract's weighted quantile); majority, minority: the value "
    "covering the most / least area; variety: the number of distinct values."
)


@operation("raster", read_only=True, inputs=("path", "zones"))
def zonal_stats(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster to summarise.")],
    zones: Annotated[
        str,
        Field(
            description="Workspace-relative zones: polygons in a GeoPackage (.gpkg), GeoJSON (.geojson) or "
            "Shapefile (.shp), in any CRS; or an integer raster of zone ids on exactly the grid of path."
        ),
    ],
    stats: Annotated[
        list[ZonalStat],
        Field(
            description="Statistics per zone: mean, min, max, count, sum, median, stdev, majority, "
            "minority, variety."
        ),
    ] = ["mean", "min", "max", "count"],  # noqa: B006  # the stub shows it; validation copies it
    band: Annotated[int, Field(description="Band of path to summarise, 1-based.")] = 1,
    zone_field: Annotated[
        str | None,
        Field(description="Attribute of the polygons that names each zone; default: the feature index."),
    ] = None,
    layer: Annotated[
        str | None,
        Field(description="Layer of a multi-layer polygon file (GeoPackage); required when it has several."),
    ] = None,
    physical: Annotated[
        bool,
        Field(
            description="Apply the band's declared scale/offset (raw * scale + offset) before summarising; "
            "False summarises stored values."
        ),
    ] = True,
    georeferencing: GeoreferencingChoice = None,
) -> ZonalStatsResult:
    """Statistics of a band per zone, with exact fractional cell coverage for polygon zones.

    Polygon zones: each cell counts by the fraction of it inside the polygon (exactextract), so a polygon
    covering half a cell gives count 0.5; zones in another CRS are transformed to the raster's first and
    ``transformation`` says how (PROJ's operation and accuracy). Lines and points are refused: they cover
    no area. A raster of zone ids (its first band) must be an integer raster on exactly the grid of
    ``path`` (raster.align it first otherwise); each of its cells counts fully and its nodata cells belong
    to no zone. Cells that are nodata in ``path`` (nodata value, mask, alpha, NaN/±Inf) are left out
    everywhere; a zone without valid cells reports count 0 and null for the rest, but when no polygon
    overlaps the raster at all the call is refused (both extents given). Values are physical
    (declared scale and offset applied) unless ``physical=False``; ``physical`` in the result says which.
    Statistics: count, sum, mean, min, max, stdev, median, majority, minority, variety (see ``method``).
    Memory follows one chunk of the raster (polygons, read a chunk at a time) or stays flat (zone raster).

    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, an empty or repeated
    stats list, zone_field or layer with a zone raster, too many zones or vertices; refused for zones
    with no area (lines, points, empty or collapsed polygons), a layer with no features, polygons of
    which none overlaps the raster, a zone raster whose every cell is nodata or on another grid, or a
    sidecar overriding the georeferencing of path or of a zone raster (pass georeferencing: it
    applies to both); path_refused for a vector format beyond the three or a sidecar leading out;
    raster_error for a rotated raster, a zone raster with non-integer ids or a raster without CRS
    with polygon zones; crs_error when the zones' CRS cannot be transformed.
    """
    wanted = _check_stats(stats)
    vector = Path(zones).suffix.lower() in EXTENSIONS
    if not vector and (zone_field is not None or layer is not None):
        given = "zone_field" if zone_field is not None else "layer"
        raise InvalidArgument(
            f"{given} applies to polygon zones; '{zones}' is taken as a raster of zone ids (its extension "
            f"is none of {', '.join(sorted(EXTENSIONS))}).",
            fix=f"Leave {given} out for a zone raster: its cell values are the zone ids.",
        )
    choice: GeoreferencingPolicy = georeferencing or "refuse"
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing=choice) as ds:
        shown = shown_dataset(ctx, ds)
        check_bands(ds, [band], shown)
        scale, offset = scale_offset(ds, band)
        applied = physical and (scale, offset) != (1.0, 0.0)
        linear = (scale, offset) if applied else None
        if vector:
            return _polygon_zones(
                ctx, ds, shown, zones, band, wanted, zone_field, layer, linear, physical, choice
            )
        return _raster_zones(ctx, ds, shown, zones, band, wanted, linear, physical, choice)


def _check_stats(stats: list[ZonalStat]) -> list[ZonalStat]:
    if not stats:
        raise InvalidArgument(
            "stats is empty.", fix="Ask for at least one statistic, e.g. ['mean', 'count']."
        )
    if len(set(stats)) != len(stats):
        raise InvalidArgument(
            f"stats {list(stats)} names a statistic twice.", fix="List each statistic once."
        )
    return list(stats)


def _check_north_up(ds: DatasetReader, shown: str) -> None:
    if is_rotated(ds.transform):
        raise RasterError(
            f"path: '{shown}' has a rotated grid; cell coverage by polygons is computed on north-up grids.",
            fix="raster.reproject it onto a north-up grid (same CRS) first.",
        )


# ---------------------------------------------------------------------------------------- polygons


def _polygon_zones(
    ctx: OperationContext,
    ds: DatasetReader,
    shown: str,
    zones: str,
    band: int,
    wanted: list[ZonalStat],
    zone_field: str | None,
    layer: str | None,
    linear: tuple[float, float] | None,
    physical: bool,
    choice: GeoreferencingPolicy,
) -> ZonalStatsResult:
    import shapely

    _check_north_up(ds, shown)
    if ds.crs is None:
        raise RasterError(
            f"path: '{shown}' has no CRS, so polygons cannot be placed on it.",
            fix="Give the raster its CRS (raster.convert can't invent one: re-create it with the CRS), or "
            "pass a raster of zone ids on its grid.",
        )
    polygons = read_polygons(ctx, zones, argument="zones", target_crs=ds.crs, layer=layer, field=zone_field)
    _check_zones_meet(ds, shown, zones, polygons)
    source = SourceRaster.of(ctx, ds, "path", choice)
    piece = PolygonChunk(
        source,
        source.context,
        band,
        linear,
        tuple(shapely.to_wkb(np.asarray(polygons.geometries, dtype=object)).tolist()),
        extremes=bool({"min", "max"} & set(wanted)),
        spread="stdev" in wanted,
        distribution=bool(_DISTRIBUTION & set(wanted)),
        max_cells=MAX_CELLS_IN_MEMORY,
    )
    moments = CoverageMoments(len(polygons.geometries))
    distribution = Distribution(majority_to_largest=True) if piece.distribution else None
    for _, part in ctx.engine.map(_chunks(ds, polygons.geometries), piece):
        moments.add(part)
        if distribution is not None and part.pairs is not None:
            distribution.add(part.pairs)
    # exactextract gives a median in the type of the values it reads (the band's, float64 once scaled).
    kind = np.dtype(np.float64) if linear is not None else np.dtype(ds.dtypes[band - 1])
    results: list[ZoneStatistics] = []
    for index in range(len(polygons.geometries)):
        figures = moments.figures(index)
        if distribution is not None:
            figures.update(distribution.figures(index))
        if figures.get("median") is not None:
            figures["median"] = float(np.asarray(figures["median"]).astype(kind))
        zone = index if polygons.values is None else polygons.values[index]
        results.append(ZoneStatistics(zone=zone, stats={s: _number(figures.get(s)) for s in wanted}))
    method = (
        "Polygon zones, exact cell coverage (exactextract, chunk by chunk of the raster, partials merged). "
        + _STAT_MEANINGS
        + " "
        + _excluded(linear, physical, ds, band)
    )
    if polygons.repaired:
        method += f" {polygons.repaired} invalid polygon(s) were repaired with make_valid before use."
    return ZonalStatsResult(
        path=shown,
        band=band,
        zones=polygons.files[0],
        zones_kind="polygons",
        layer=polygons.layer,
        zone_field=zone_field,
        stats=wanted,
        results=results,
        physical=linear is not None,
        scale=scale_offset(ds, band)[0],
        offset=scale_offset(ds, band)[1],
        zones_crs=polygons.source_crs,
        transformation=polygons.transformation,
        repaired_zones=polygons.repaired,
        method=method,
    )


def _chunks(ds: DatasetReader, geometries: list[Any]) -> list[Chunk]:
    """Windows of the raster along cell boundaries, each with the polygons whose bounding boxes meet it.

    A window holds at most CHUNK_PIXELS cells and never more than exactextract may hold for one polygon
    (MAX_CELLS_IN_MEMORY), so memory follows the window, however large a zone; windows no polygon
    reaches are not read.
    """
    import shapely

    tree = shapely.STRtree(geometries)
    chunks = []
    for window in windows(ds, min(CHUNK_PIXELS, MAX_CELLS_IN_MEMORY)):
        left, bottom, right, top = ds.window_bounds(window)
        box = shapely.box(min(left, right), min(bottom, top), max(left, right), max(bottom, top))
        hits = np.sort(tree.query(box))
        if hits.size:
            chunks.append((window, hits))
    return chunks


def _check_zones_meet(ds: DatasetReader, shown: str, zones: str, polygons: Polygons) -> None:
    """Refuse zones of which none overlaps the raster.

    Each would get count 0 and null for the rest: true, but when every zone misses, the zones are in
    another place than the raster (a file whose CRS is wrong, x and y swapped, another raster), and a
    list of empty zones would hide that. One zone outside among others keeps its count 0.
    """
    import shapely

    left, bottom, right, top = ds.bounds
    footprint = shapely.box(min(left, right), min(bottom, top), max(left, right), max(bottom, top))
    geometries = np.asarray(polygons.geometries, dtype=object)
    if shapely.intersects(geometries, footprint).any():
        return
    spread = ", ".join(f"{v:.10g}" for v in shapely.total_bounds(geometries))
    moved = "" if polygons.transformation is None else f", transformed from {polygons.source_crs}"
    raise Refused(
        f"zones: no polygon of layer '{polygons.layer}' of '{zones}' overlaps '{shown}': the zones span "
        f"({spread}) and the raster covers ({left:.10g}, {bottom:.10g}, {right:.10g}, {top:.10g}) in the "
        f"raster's CRS{moved}.",
        fix="Pass zones drawn on this raster's area; if they are, the zones file's CRS is wrong (or x and y "
        "are swapped): rewrite it with its true CRS (ogr2ogr -a_srs).",
    )


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _excluded(linear: tuple[float, float] | None, physical: bool, ds: DatasetReader, band: int) -> str:
    text = "Nodata values, mask/alpha-masked cells and NaN/±Inf are excluded."
    scale, offset = scale_offset(ds, band)
    if linear is not None:
        text += f" Physical values: raw * {scale:g} + {offset:g} (the band's declared scale and offset)."
    elif not physical and (scale, offset) != (1.0, 0.0):
        text += f" physical=False: stored values, although the band declares raw * {scale:g} + {offset:g}."
    return text


# ------------------------------------------------------------------------------------ zone raster


def _raster_zones(
    ctx: OperationContext,
    ds: DatasetReader,
    shown: str,
    zones: str,
    band: int,
    wanted: list[ZonalStat],
    linear: tuple[float, float] | None,
    physical: bool,
    choice: GeoreferencingPolicy,
) -> ZonalStatsResult:
    with _open_zone_raster(ctx, zones, choice) as zds:
        zones_shown = shown_dataset(ctx, zds)
        _check_zone_raster(ds, shown, zds, zones_shown)
        values = SourceRaster.of(ctx, ds, "path", choice)
        piece = ZoneRasterPiece(
            values, SourceRaster.of(ctx, zds, "zones", choice), values.context, band, linear,
            bool(_DISTRIBUTION & set(wanted)),
        )  # fmt: skip
        moments = Moments()
        distribution = Distribution() if piece.distribution else None
        for _, part in ctx.engine.map(_row_bands(ds), piece):
            moments.add(part)
            if distribution is not None and part.pairs is not None:
                distribution.add(part.pairs)
    if not moments.zones():
        raise Refused(
            f"zones: every cell of '{zones_shown}' is nodata, so it holds no zone to summarise.",
            fix="Pass the zone raster that holds the ids; check its nodata value (raster.info) if it does.",
        )
    results = []
    for zone in moments.zones():
        figures = moments.figures(zone)
        if distribution is not None:
            figures.update(distribution.figures(zone))
        results.append(ZoneStatistics(zone=int(zone), stats={s: figures.get(s) for s in wanted}))
    scale, offset = scale_offset(ds, band)
    method = (
        "Raster of zone ids on the same grid: every cell counts fully (coverage 1); cells that are nodata "
        "in the zone raster belong to no zone. "
        + _STAT_MEANINGS
        + " "
        + _excluded(linear, physical, ds, band)
    )
    return ZonalStatsResult(
        path=shown,
        band=band,
        zones=zones_shown,
        zones_kind="raster",
        layer=None,
        zone_field=None,
        stats=wanted,
        results=results,
        physical=linear is not None,
        scale=scale,
        offset=offset,
        zones_crs=None,
        transformation=None,
        repaired_zones=0,
        method=method,
    )


def _open_zone_raster(ctx: OperationContext, zones: str, choice: GeoreferencingPolicy) -> DatasetReader:
    try:
        return open_for_read(ctx, zones, "zones", georeferencing=choice)
    except RasterError as exc:
        if "is not a raster GDAL can read" not in exc.message:
            raise
        # Not a raster either: a vector format beyond the three is the likelier intent.
        raise RasterError(
            f"zones: '{zones}' is neither polygons in GeoPackage (.gpkg), GeoJSON (.geojson, .json) or "
            f"Shapefile (.shp) nor a raster of zone ids ({exc.message}).",
            fix="Convert polygons to GeoPackage or GeoJSON (e.g. ogr2ogr), or pass an integer raster of "
            "zone ids on the grid of path.",
        ) from None


def _check_zone_raster(ds: DatasetReader, shown: str, zds: DatasetReader, zones_shown: str) -> None:
    kind = np.dtype(zds.dtypes[0]).kind
    if kind not in "iu":
        raise RasterError(
            f"zones: '{zones_shown}' holds {zds.dtypes[0]} values; zone ids must be integers.",
            fix="Pass an integer raster of zone ids (raster.reclassify, or raster.calc with an integer "
            "dtype), or polygons in a .gpkg/.geojson/.shp file.",
        )
    same = (
        (zds.width, zds.height) == (ds.width, ds.height)
        and zds.crs == ds.crs
        and zds.transform.almost_equals(ds.transform, precision=1e-9 * max(abs(ds.transform.a), 1e-12))
    )
    if not same:
        raise Refused(
            f"zones: '{zones_shown}' ({zds.width} x {zds.height}, {zds.crs}, origin "
            f"({zds.transform.c:.10g}, {zds.transform.f:.10g}), cell {zds.transform.a:g}) is not on the grid "
            f"of '{shown}' ({ds.width} x {ds.height}, {ds.crs}, origin ({ds.transform.c:.10g}, "
            f"{ds.transform.f:.10g}), cell {ds.transform.a:g}).",
            fix="raster.align the zone raster onto the grid of path first, with resampling='nearest' "
            "(zone ids are categories), or pass the zones as polygons.",
        )


def _row_bands(ds: DatasetReader) -> Iterator[Window]:
    """Full-width bands of rows, ~CHUNK_PIXELS each, aligned to the file's block height."""
    block = ds.block_shapes[0][0] if ds.block_shapes else 1
    rows = max(1, CHUNK_PIXELS // max(ds.width, 1))
    rows = max(block, rows // block * block)
    for top in range(0, ds.height, rows):
        yield Window(0, top, ds.width, min(rows, ds.height - top))


@dataclass(frozen=True)
class ZoneRasterPiece:
    """What one band of rows computes, wherever the engine runs it: both rasters by their checked paths,
    the band, the scale/offset to apply and whether the zones' value distribution is wanted."""

    values: SourceRaster
    zones: SourceRaster
    ctx: PieceContext
    band: int
    linear: tuple[float, float] | None
    distribution: bool

    def __call__(self, window: Window) -> ZonePartial:
        raw, valid = read_valid(self.ctx, self.values.dataset(), self.band, window)
        ids, has_zone = read_valid(self.ctx, self.zones.dataset(), 1, window)
        ids, inside = ids[has_zone].astype(np.int64), valid[has_zone]
        values = raw[has_zone][inside].astype(np.float64)
        if self.linear is not None:
            values = values * self.linear[0] + self.linear[1]
        return ZonePartial.of(ids, ids[inside], values, self.distribution)
