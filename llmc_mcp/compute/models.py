"""Result models and vocabulary shared by more than one namespace: a written raster as results
describe it (:class:`RasterInfo`), its bounds and CRS, GeoTIFF compressions, and ellipsoids."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmc_mcp.gdal.datasets import GeoreferencingSource
from llmc_mcp.results import ResultModel

Compression = Literal[
    "NONE", "DEFLATE", "LZW", "ZSTD", "PACKBITS", "JPEG", "WEBP", "LERC", "LERC_DEFLATE", "LERC_ZSTD"
]
"""GeoTIFF/COG compressions. JPEG, WEBP and LERC* can change pixel values."""


class CrsRef(ResultModel):
    """A raster's CRS, short: enough to compare and to pass on as ``dst_crs``."""

    epsg: int | None = Field(description="EPSG code when the CRS is exactly an EPSG definition, else null.")
    name: str = Field(description="Human-readable CRS name, e.g. 'WGS 84 / UTM zone 18N'.")
    wkt: str | None = Field(None, description="WKT2 definition; only filled when asked for (include_wkt).")


class Bounds(ResultModel):
    """An axis-aligned extent in the units of the raster's CRS."""

    left: float = Field(description="Minimum x (west edge).")
    bottom: float = Field(description="Minimum y (south edge).")
    right: float = Field(description="Maximum x (east edge).")
    top: float = Field(description="Maximum y (north edge).")


class RasterHeader(ResultModel):
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


class RasterInfo(RasterHeader):
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


class Ellipsoid(ResultModel):
    name: str = Field(description="Ellipsoid name, e.g. 'WGS 84'.")
    semi_major_m: float = Field(description="Semi-major axis in metres.")
    inverse_flattening: float = Field(description="Inverse flattening (0 for a sphere).")


AreaMethod = Literal["ellipsoidal_quadrangle", "geodesic_cells"]


class GeoreferencingReading(ResultModel):
    """One reading of a raster's georeferencing: where one source (the file, or a sidecar) places it."""

    crs: CrsRef | None = Field(description="CRS this source gives, or null when it gives none.")
    transform: tuple[float, float, float, float, float, float] = Field(
        description="The geotransform this source gives, in the order of the top-level transform."
    )
    bounds: Bounds = Field(description="Extent of the pixels under this reading, in its CRS units.")
    res: tuple[float, float] = Field(description="Pixel size under this reading: x then y, in its CRS units.")
