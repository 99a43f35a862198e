"""Result models and vocabulary of the ``hydrology`` namespace."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from llmc_mcp.compute.models import RasterInfo
from llmc_mcp.results import ResultModel

OutputGrid = Annotated[
    str,
    Field(description="Workspace-relative output GeoTIFF (.tif); only an earlier output is replaced."),
]
"""The ``dst`` of every hydrology operation, described once so that their schemas say the same."""


ConditionMethod = Literal["fill", "fill_flats", "breach"]
"""Depression handling: 'fill' by pyflwdir (DD-MCP-052), 'fill_flats', 'breach' written here (DD-MCP-068)."""


FlowRouting = Literal["d8", "dinf", "mfd"]
"""Flow routing: 'd8' by pyflwdir (DD-MCP-052), 'dinf' and 'mfd' written here (DD-MCP-068)."""


AccumulationUnits = Literal["cells", "m2"]


ThresholdUnits = Literal["cells", "m2"]


class ConditionResult(ResultModel):
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


class FlowDirectionResult(ResultModel):
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


class FlowAccumulationResult(ResultModel):
    """What ``hydrology.flow_accumulation`` wrote."""

    output: RasterInfo = Field(description="raster.info of the accumulation grid.")
    units: str = Field(
        description="What each cell holds: 'cells' (count of cells draining through it, itself "
        "included), 'm2' (their ground area) or 'weights' (the sum of their weights)."
    )
    max_value: float = Field(description="The largest accumulation: at the outlet of the largest catchment.")
    weight_nodata_cells: int = Field(description="Cells whose weight was nodata and added nothing.")
    note: str = Field(description="What was accumulated and how areas were measured.")


class StreamsResult(ResultModel):
    """What ``hydrology.streams`` wrote."""

    output: RasterInfo = Field(
        description="raster.info of the stream grid (uint8: 1 channel, 0 not, 255 nodata)."
    )
    threshold: float = Field(description="The drainage area a channel cell reaches at least.")
    threshold_units: ThresholdUnits = Field(description="Units of the threshold, the accumulation's own.")
    stream_cells: int = Field(description="Cells marked as channel.")
    note: str = Field(description="The rule applied.")


class PourPoint(ResultModel):
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


class WatershedResult(ResultModel):
    """What ``hydrology.watershed`` wrote."""

    output: RasterInfo = Field(
        description="raster.info of the catchment grid (int32 ids; 0 none; -1 nodata)."
    )
    points: list[PourPoint] = Field(description="Each pour point, in the order given.")
    note: str = Field(description="How points were snapped and catchments nested.")
