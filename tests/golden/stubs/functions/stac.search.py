from typing import Literal, TypedDict
class QueryTerm(TypedDict):
    property: str
    op: Literal['eq', 'neq', 'lt', 'lte', 'gt', 'gte', 'in']
    value: bool | float | str | list[float] | list[str]  # A list for 'in'
class StacBand(TypedDict):
    name: str | None
    common_name: str | None
    center_wavelength: float | None
class StacAsset(TypedDict):
    href: str
    type: str | None
    roles: list[str]
    title: str | None
    bands: list[StacBand]
    readable: bool
    refused_because: str | None
class StacItem(TypedDict):
    id: str
    collection: str | None
    href: str | None  # The item's own URL (its self link)
    datetime: str | None  # Nominal time (RFC 3339)
    start_datetime: str | None
    end_datetime: str | None
    bbox: list[float] | None
    crs: str | None  # CRS of the data ('EPSG:32633') from proj:epsg or proj:code
    cloud_cover: float | None
    assets: dict[str, StacAsset]  # Files by asset name (at most 64)
    assets_dropped: int  # Assets left out beyond the 64 kept (0 normally)
class StacSearchResult(TypedDict):
    items: list[StacItem]
    returned: int
    matched: int | None
    truncated: bool
    pages: int
    note: str
def search(
    url: str,  # STAC API root URL (landing page), under an allowed prefix.
    collections: list[str] | None = None,  # Collection ids, e.g. ['sentinel-2-l2a']; default: all.
    bbox: tuple[float, float, float, float] | None = None,  # Box (west, south, east, north) in degrees, WGS 84 longitude first.
    datetime: str | None = None,  # RFC 3339 instant or range: '2024-06-01/2024-06-30', '2024-06-01/..' (open end).
    query: list[QueryTerm] | None = None,  # Conditions that must all hold (query extension): [{'property': 'eo:cloud_cover', 'op': 'lt', 'value': 20}]; {'eo:cloud_cover': {'lt': 20}} works too.
    ids: list[str] | None = None,  # Item ids; default: any.
    limit: int = 20,  # Items per page asked of the API (1-100).
    max_items: int = 50,  # Items returned at most (1-200).
) -> StacSearchResult:
    """Search a STAC API for items (scenes) by collection, place (bbox), time and properties.
    Errors: PathRefused (URL not allowed); InvalidArgument (no item search); RemoteError (the API failed or refused the terms).
    """
    ...
