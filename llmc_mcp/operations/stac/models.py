"""Result models and argument vocabulary of the ``stac`` namespace.

A STAC document is hostile input of any size: these models keep only what an agent uses to choose
and read a raster, every string and list capped (:mod:`.search` does the capping).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmc_mcp.results import ResultModel

QueryOp = Literal["eq", "neq", "lt", "lte", "gt", "gte", "in"]
"""The query extension's comparisons an agent filters scenes with (its string matches are left out:
the published list is read on every search stub)."""


class QueryTerm(BaseModel):
    """One condition of the STAC API query extension: ``property op value``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    property: str = Field(description="An item property, e.g. 'eo:cloud_cover'.")
    op: QueryOp = Field(description="The comparison.")
    value: bool | float | str | list[float] | list[str] = Field(description="A list for 'in'.")


class StacBand(ResultModel):
    name: str | None = Field(description="Band name as the item gives it, e.g. 'B04'.")
    common_name: str | None = Field(description="Common name, e.g. 'red', 'nir', 'swir16'.")
    center_wavelength: float | None = Field(description="Centre wavelength, micrometres.")


class StacAsset(ResultModel):
    """One file of an item, and whether this server can read it."""

    href: str = Field(
        description="Absolute URL of the file (relative hrefs are resolved against the item). A signed "
        "URL keeps its query string, so it can be passed on as it is."
    )
    type: str | None = Field(
        description="Media type, e.g. 'image/tiff; application=geotiff; profile=cloud-optimized'."
    )
    roles: list[str] = Field(description="Roles, e.g. ['data'], ['thumbnail'], ['metadata'].")
    title: str | None = Field(description="Title, when the item gives one.")
    bands: list[StacBand] = Field(description="Bands (eo:bands, or STAC 1.1 bands); empty when not given.")
    readable: bool = Field(
        description="True when href is under a URL prefix this server allows: pass it as the path of any "
        "raster operation (raster.info(path=href)). False: it would be refused (see refused_because)."
    )
    refused_because: str | None = Field(description="Why href is not readable here; null when it is.")


class StacItem(ResultModel):
    """One STAC item: where and when it is, its CRS and its files."""

    id: str = Field(description="Item id.")
    collection: str | None = Field(description="Collection id.")
    href: str | None = Field(description="The item's own URL (its self link), for stac.item; null if none.")
    datetime: str | None = Field(description="Nominal time (RFC 3339); null when only a range is given.")
    start_datetime: str | None = Field(description="Start of the time range, when the item has one.")
    end_datetime: str | None = Field(description="End of the time range, when the item has one.")
    bbox: list[float] | None = Field(description="[west, south, east, north] in degrees (WGS 84).")
    crs: str | None = Field(
        description="CRS of the data ('EPSG:32633') from proj:epsg or proj:code; "
        "null when the item does not say."
    )
    cloud_cover: float | None = Field(description="eo:cloud_cover, percent, when given.")
    assets: dict[str, StacAsset] = Field(description="Files by asset name (at most 64).")
    assets_dropped: int = Field(description="Assets left out beyond the 64 kept (0 normally).")


class StacSearchResult(ResultModel):
    """The items a search found, and whether there were more."""

    items: list[StacItem] = Field(description="Matching items, in the API's order.")
    returned: int = Field(description="How many items are in items.")
    matched: int | None = Field(
        description="How many items the API says match (numberMatched / context.matched); null if it "
        "does not say."
    )
    truncated: bool = Field(description="True when more items match than were returned.")
    pages: int = Field(description="Pages fetched from the API.")
    note: str = Field(
        description="What to do next: how to narrow a truncated search, or to widen an empty one."
    )
