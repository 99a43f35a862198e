"""``raster.info``: what a raster file is, from its header alone.

:func:`describe` is what ``raster.reproject``, ``raster.convert`` and the other operations that write
a raster return for it: the fields ``raster.info`` gives a file with one georeferencing, so every
face sees one shape of raster description. ``raster.info`` alone meets files whose sidecar overrides
their georeferencing, and reports both readings (DD-MCP-046, DD-MCP-071).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from affine import Affine
from pydantic import Field
from rasterio.crs import CRS as RioCRS
from rasterio.io import DatasetReader

from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.gdal.datasets import Georeferencing, describe_georeferencing, georeferencing_of, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.models import Bounds, CrsRef, GeoreferencingReading, RasterFileInfo, RasterInfo

MAX_TAGS = 50
MAX_TAG_CHARS = 500


@operation("raster", read_only=True, inputs=("path",))
def info(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file, e.g. 'data/dem.tif'.")],
    include_wkt: Annotated[bool, Field(description="Also return the CRS as WKT2 (long).")] = False,
    georeferencing: Annotated[
        Literal["file", "sidecar"] | None,
        Field(
            description="Side the top-level crs, transform, bounds and res follow if a .aux.xml overrides "
            "the file's own georeferencing; null: neither (both are reported apart)."
        ),
    ] = None,
) -> RasterFileInfo:
    """Describe a raster: size, bands, data types, CRS, grid, nodata, layout, overviews and metadata.

    A Cloud Optimized GeoTIFF is read by the GTiff driver, so ``driver`` says 'GTiff' and ``layout``
    says 'COG' (GDAL's IMAGE_STRUCTURE metadata).

    Reads the header only, never pixels, so it is cheap on a file of any size and works on files
    whose pixel data is damaged. The CRS is reported by EPSG code where the file's CRS is one
    (``crs.epsg``), else by name; ask for ``include_wkt`` to get the full definition. ``transform``
    is the affine geotransform: non-zero b/d mean a rotated grid, which some tools ignore.
    ``mask_flags`` say where validity comes from (nodata value, internal mask or alpha band).
    ``scales``/``offsets`` turn stored values into physical ones (raw * scale + offset: raster.calc
    and raster.sample apply them), ``units`` name them; ``registration`` is AREA_OR_POINT.
    Metadata tags are capped at 50 keys and 500 characters per value (``tags_truncated``).
    ``georeferencing`` says where GDAL takes transform and crs from: the file itself or a sidecar
    (``<name>.aux.xml``, a .tfw/.wld world file). When a sidecar overrides the file's own with other
    numbers, both are right readings of different sources and neither is *the* georeferencing:
    ``georeferencing_conflict`` names the conflict, ``file_georeferencing`` and
    ``sidecar_georeferencing`` hold each reading (crs, transform, bounds, res), and the top-level
    crs, transform, bounds and res are null unless the ``georeferencing`` argument ('file' or
    'sidecar') picks one. Operations that depend on positions refuse such a file until given the
    same argument.

    Errors (ApiError, by e.type): not_found if the file does not exist, raster_error if it is not a
    raster GDAL can read.
    """
    # Never refused for a disagreeing sidecar: this is where an agent sees both sides.
    with gdal_env(ctx), open_for_read(ctx, path, "path", georeferencing="unchecked") as ds:
        file = Path(ds.name)
        found = georeferencing_of(ds, file)
        top: GeoreferencingReading | None = _reading(ds.transform, ds.crs, ds.width, ds.height, include_wkt)
        conflict = file_reading = sidecar_reading = None
        if found.overridden:
            assert found.file_transform is not None
            file_reading = _reading(found.file_transform, found.file_crs, ds.width, ds.height, include_wkt)
            sidecar_reading = top
            top = {"file": file_reading, "sidecar": sidecar_reading, None: None}[georeferencing]
            conflict = _georeferencing_conflict(ctx, found, georeferencing)
        grid = {"crs": None, "transform": None, "bounds": None, "res": None} if top is None else dict(top)
        return RasterFileInfo(
            **_header(ctx, ds, found),
            **grid,
            georeferencing_conflict=conflict,
            file_georeferencing=file_reading,
            sidecar_georeferencing=sidecar_reading,
        )


def describe(ctx: OperationContext, ds: DatasetReader, include_wkt: bool) -> RasterInfo:
    """The RasterInfo of an open dataset as GDAL reads it, from its header.

    For a file an operation wrote and opened with conflicting georeferencing refused, so it has one.
    """
    found = georeferencing_of(ds, Path(ds.name))
    grid = _reading(ds.transform, ds.crs, ds.width, ds.height, include_wkt)
    return RasterInfo(**_header(ctx, ds, found), **dict(grid))


def _header(ctx: OperationContext, ds: DatasetReader, found: Georeferencing) -> dict[str, Any]:
    """Every field of a raster's description but its grid (crs, transform, bounds, res)."""
    file = Path(ds.name)
    structure = ds.tags(ns="IMAGE_STRUCTURE")
    tags, truncated = _bounded_tags(ds.tags())
    return {
        "path": ctx.workspace.relative(file),
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
        "scales": [1.0 if v is None else float(v) for v in ds.scales],
        "offsets": [0.0 if v is None else float(v) for v in ds.offsets],
        "units": [u or None for u in ds.units],
        "registration": _registration(ds.tags().get("AREA_OR_POINT")),
        "colorinterp": [ci.name for ci in ds.colorinterp],
        "tags": tags,
        "tags_truncated": truncated,
        "file_size_bytes": file.stat().st_size,
        "georeferencing": found.source,
        "georeferencing_note": _georeferencing_note(ctx, found),
    }


def _reading(
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


def _georeferencing_conflict(
    ctx: OperationContext, found: Georeferencing, chosen: Literal["file", "sidecar"] | None
) -> str:
    """The two readings in words, and which one the top-level fields hold."""
    assert found.sidecar is not None
    own = describe_georeferencing(found.file_transform, found.file_crs)
    other = describe_georeferencing(found.transform, found.crs)
    sidecar = ctx.workspace.relative(found.sidecar)
    text = f"The file itself says {own}; its sidecar '{sidecar}' says {other}. "
    if chosen is None:
        return text + (
            "Neither is the raster's georeferencing, so crs, transform, bounds and res are null: pass "
            "georeferencing='file' or 'sidecar' to choose (file_georeferencing and sidecar_georeferencing "
            "hold both)."
        )
    side = "file's own" if chosen == "file" else "sidecar's"
    return text + f"crs, transform, bounds and res are the {side}, as georeferencing='{chosen}' asked."


def _georeferencing_note(ctx: OperationContext, found: Georeferencing) -> str:
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
