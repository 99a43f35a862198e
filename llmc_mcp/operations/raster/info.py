"""``raster.info``: what a raster file is, from its header alone.

Its fields are those :func:`~llmc_mcp.compute.description.describe` gives every raster an operation
writes. ``raster.info`` alone meets files whose sidecar overrides their georeferencing, and reports
both readings (DD-MCP-046, DD-MCP-071).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from llmc_mcp.compute.description import georeferencing_reading, raster_header
from llmc_mcp.compute.models import GeoreferencingReading
from llmc_mcp.gdal.datasets import Georeferencing, describe_georeferencing, georeferencing_of, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import RasterFileInfo


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
        found = georeferencing_of(ds, Path(ds.name))
        top: GeoreferencingReading | None = georeferencing_reading(
            ds.transform, ds.crs, ds.width, ds.height, include_wkt
        )
        conflict = file_reading = sidecar_reading = None
        if found.overridden:
            assert found.file_transform is not None
            file_reading = georeferencing_reading(
                found.file_transform, found.file_crs, ds.width, ds.height, include_wkt
            )
            sidecar_reading = top
            top = {"file": file_reading, "sidecar": sidecar_reading, None: None}[georeferencing]
            conflict = _georeferencing_conflict(ctx, found, georeferencing)
        grid = {"crs": None, "transform": None, "bounds": None, "res": None} if top is None else dict(top)
        return RasterFileInfo(
            **raster_header(ctx, ds, found),
            **grid,
            georeferencing_conflict=conflict,
            file_georeferencing=file_reading,
            sidecar_georeferencing=sidecar_reading,
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
