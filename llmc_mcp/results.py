"""The base of every result model an operation or a record returns.

Results are part of the public contract: the faces render them as JSON and the stubs show their
fields to agents, so every field carries a description and holds plain data only (no rasterio or
pyproj objects). Floats that can be NaN (nodata, statistics of float rasters) serialize as the
string ``"NaN"`` rather than breaking strict JSON parsers, and a result never changes once made.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ResultModel(BaseModel):
    """A frozen pydantic model whose NaN and infinite floats serialize as strings."""

    model_config = ConfigDict(ser_json_inf_nan="strings", frozen=True)
