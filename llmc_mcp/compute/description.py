"""A raster as results describe it: :func:`describe` is what every operation that writes a raster
returns for it, the fields ``raster.info`` gives a file with one georeferencing, so every face sees
one shape of raster description (DD-MCP-046, DD-MCP-071)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from affine import Affine
from rasterio.crs import CRS as RioCRS
from rasterio.io import DatasetReader

from llmc_mcp.compute.context import ComputeContext
from llmc_mcp.compute.models import Bounds, CrsRef, GeoreferencingReading, RasterInfo
from llmc_mcp.compute.scaling import scales_offsets
from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.gdal.datasets import Georeferencing, describe_georeferencing, georeferencing_of
from llmc_mcp.gdal.remote_datasets import dataset_location, remote_size, shown_dataset

MAX_TAGS = 50


MAX_TAG_CHARS = 500


def describe(ctx: ComputeContext, ds: DatasetReader, include_wkt: bool) -> RasterInfo:
    """The RasterInfo of an open dataset as GDAL reads it, from its header.

    For a file an operation wrote and opened with conflicting georeferencing refused, so it has one.
    """
    found = georeferencing_of(ds, Path(ds.name))
    grid = georeferencing_reading(ds.transform, ds.crs, ds.width, ds.height, include_wkt)
    return RasterInfo(**raster_header(ctx, ds, found), **dict(grid))


def raster_header(ctx: ComputeContext, ds: DatasetReader, found: Georeferencing) -> dict[str, Any]:
    """Every field of a raster's description but its grid (crs, transform, bounds, res)."""
    structure = ds.tags(ns="IMAGE_STRUCTURE")
    tags, truncated = _bounded_tags(ds.tags())
    scales, offsets = scales_offsets(ds, ds.indexes)
    return {
        "path": shown_dataset(ctx, ds),
        "driver": ds.driver,
        "width": ds.width,
        "height": ds.height,
        "count": ds.count,
        "dtypes": list(ds.dtypes),
        "nodata": [None if v is None else float(v) for v in ds.nodatavals],
        "mask_flags": [[flag.name for flag in flags] for flags in ds.mask_flag_enums],
        "block_shapes": [(int(h), int(w)) for h, w in ds.block_shapes],
        "compression": structure.get("COMPRESSION"),
        "interleave": structure.get("INTERLEAVE"),
        "layout": structure.get("LAYOUT"),
        "overviews": [ds.overviews(i) for i in ds.indexes],
        "descriptions": list(ds.descriptions),
        "scales": scales,
        "offsets": offsets,
        "units": [u or None for u in ds.units],
        "registration": _registration(ds.tags().get("AREA_OR_POINT")),
        "colorinterp": [ci.name for ci in ds.colorinterp],
        "tags": tags,
        "tags_truncated": truncated,
        "file_size_bytes": _file_size(ds),
        "georeferencing": found.source,
        "georeferencing_note": _georeferencing_note(ctx, found),
    }


def _file_size(ds: DatasetReader) -> int:
    location = dataset_location(ds)
    return location.stat().st_size if isinstance(location, Path) else remote_size(ds)


def georeferencing_reading(
    t: Affine, crs: RioCRS | None, width: int, height: int, include_wkt: bool
) -> GeoreferencingReading:
    """One source's georeferencing; corners go through the full transform so a rotated grid still gets
    its true bounds, and the cell size is the length of a column's and a row's step (GDAL's res)."""
    corners = [t @ (col, row) for col, row in ((0, 0), (width, 0), (0, height), (width, height))]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return GeoreferencingReading(
        crs=_crs_ref(crs, include_wkt),
        transform=(t.a, t.b, t.c, t.d, t.e, t.f),
        bounds=Bounds(left=min(xs), bottom=min(ys), right=max(xs), top=max(ys)),
        res=(math.hypot(t.a, t.d), math.hypot(t.b, t.e)),
    )


def _georeferencing_note(ctx: ComputeContext, found: Georeferencing) -> str:
    """The georeferencing's source in words: the sidecar's name, and both sides when they disagree."""
    sidecar = None if found.sidecar is None else ctx.workspace.relative(found.sidecar)
    followed = describe_georeferencing(found.transform, found.crs)
    if found.overridden:
        note = (
            f"The file itself says {describe_georeferencing(found.file_transform, found.file_crs)}; its "
            f"sidecar '{sidecar}' says {followed}, and GDAL (so QGIS and most tools) follows the sidecar. "
            "Operations that depend on positions refuse until given georeferencing='file' or 'sidecar'."
        )
    elif found.source == "none":
        note = "The raster has no georeferencing: coordinates are pixel numbers."
    elif sidecar is not None:
        note = f"Georeferencing comes from the sidecar '{sidecar}' ({followed}); the file holds none itself."
    else:
        note = f"Georeferencing comes from the file itself ({followed})."
    return note


def _registration(value: str | None) -> Literal["Area", "Point"] | None:
    """GDAL's AREA_OR_POINT, in its two spellings; anything else is reported as unknown."""
    if value is not None and value.lower() in ("area", "point"):
        return "Area" if value.lower() == "area" else "Point"
    return None


def _crs_ref(crs: RioCRS | None, include_wkt: bool) -> CrsRef | None:
    if crs is None:
        return None
    parsed = parse_crs(crs.to_wkt())
    # Strict (100%) identification, as crs.info does: rasterio's to_epsg() accepts 70% matches and
    # named a WGS84-ellipsoid UTM definition EPSG:3450 (JAD2001, Jamaica), a different datum.
    epsg, _ = identify(parsed)
    return CrsRef(epsg=epsg, name=parsed.name, wkt=parsed.to_wkt() if include_wkt else None)


def _bounded_tags(tags: dict[str, str]) -> tuple[dict[str, str], bool]:
    kept = dict(list(tags.items())[:MAX_TAGS])
    truncated = len(kept) < len(tags)
    for key, value in kept.items():
        if len(value) > MAX_TAG_CHARS:
            kept[key] = value[:MAX_TAG_CHARS]
            truncated = True
    return kept, truncated
