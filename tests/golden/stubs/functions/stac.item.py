from typing import TypedDict
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
def item(
    url: str,  # URL of one STAC item (the href of a search result's item, or an API's .../collections/<collection>/items/<id>), under a prefix this server allows.
) -> StacItem:
    """Read one STAC item by its URL, typed as stac.search returns items.
    Errors: PathRefused (url not allowed); InvalidArgument (the document is not a STAC item); RemoteError (the server failed or the document is over the size limit).
    """
    ...
