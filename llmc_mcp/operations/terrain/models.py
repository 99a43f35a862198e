"""Result models and vocabulary of the ``terrain`` namespace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmc_mcp.compute.models import RasterInfo
from llmc_mcp.results import ResultModel

ZFactorSource = Literal["argument", "band_unit", "crs_vertical_unit", "horizontal_unit", "assumed_metres"]


GroundSpacing = Literal["projected", "geographic_per_row"]


class TerrainResult(ResultModel):
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
