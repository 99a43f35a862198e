"""``stac.search`` and ``stac.item``: STAC items from an API the operator allows, typed and bounded.

pystac-client does the STAC semantics (conformance, the search link, paging by ``next`` links) and
this process's transport does every byte of network (:class:`TransportStacIO`): each URL the client
follows, the landing page's search link and every ``next`` link included, is checked against the
allowlist where the network is (the server), never taken on the API's word. Headers a link asks for
are dropped (credentials are the operator's alone), and a catalog href that is not a URL is refused,
never opened as a local file.

Signed asset hrefs keep their query strings in results, so that an agent can pass one back to a
raster operation; messages and provenance show URLs redacted, and nothing here logs a URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any
from urllib.parse import urlencode, urljoin, urlsplit

import pystac
from pydantic import AfterValidator, BeforeValidator, Field
from pystac.link import Link
from pystac_client import Client
from pystac_client.errors import ClientTypeError
from pystac_client.stac_api_io import StacApiIO
from pystac_client.warnings import ignore as ignore_client_warnings

from llmc_mcp.errors import InvalidArgument, LlmcError, PathRefused
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.stac.models import (
    QueryTerm,
    StacAsset,
    StacBand,
    StacItem,
    StacSearchResult,
)
from llmc_mcp.remote.access import remote_access
from llmc_mcp.remote.allowlist import looks_remote, redact
from llmc_mcp.remote.transport import RemoteError

MAX_ITEMS = 200
"""Items one search returns at most: a page of results an agent reads, not a bulk export."""
MAX_PAGES = 10
"""Pages one search fetches at most, so an API whose ``next`` links never end still stops."""
MAX_LIMIT = 100
MAX_ASSETS = 64
MAX_BANDS = 64
MAX_ROLES = 8
MAX_ID_CHARS = 256
MAX_TEXT_CHARS = 200
MAX_HREF_CHARS = 4096
_CRS_CODE = re.compile(r"^[A-Za-z]+:[A-Za-z0-9._-]{1,32}$")
_NO_QUERY = (
    " The API does not declare the query extension, so it may have ignored query: check the items' "
    "properties (cloud_cover) yourself."
)
_NARROW = (
    "narrow the search: a smaller bbox, a shorter datetime range, the collections you need, or a query "
    "(e.g. [{'property': 'eo:cloud_cover', 'op': 'lt', 'value': 20}])"
)


class TransportStacIO(StacApiIO):
    """pystac-client's I/O, every request sent through this process's remote transport."""

    def __init__(self) -> None:
        super().__init__(max_retries=None)  # retries are the transport's

    def request(
        self,
        href: str,
        method: str | None = None,
        headers: dict[str, str] | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> str:
        method = (method or "GET").upper()
        if method == "GET":
            href = _with_query(href, parameters)
            body = None
        elif method == "POST":
            body = parameters or {}
        else:
            raise RemoteError(
                f"the STAC API asked for an HTTP {method[:16]} request; only GET and POST are sent."
            )
        data = remote_access().transport.document(href, method, body)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise RemoteError(f"'{redact(href)}' did not answer UTF-8 JSON.", fix=_FIX_API) from None

    def read_text(self, source: Any, *args: Any, **kwargs: Any) -> str:
        """A link (its method and body, then :meth:`request`) or a URL with a search's method and
        parameters; anything else would be a local file, and is refused."""
        if isinstance(source, Link):
            return super().read_text(source, *args, **kwargs)
        return self.request(_url_only(str(source)), *args, **kwargs)

    def read_text_from_href(self, href: str) -> str:
        return self.request(_url_only(href))

    def write_text_to_href(self, href: str, *args: Any, **kwargs: Any) -> None:
        raise PathRefused("STAC catalogs are read-only here.", fix=_FIX_API)


def _url_only(href: str) -> str:
    if not looks_remote(href):
        raise PathRefused(
            f"the STAC catalog links to '{redact(href)[:200]}', which is not a URL; catalogs are read only "
            "from allowed URLs.",
            fix=_FIX_API,
        )
    return href


_FIX_API = "Pass the root URL of a STAC API (its landing page), under a prefix this server allows."


def _with_query(href: str, parameters: Mapping[str, Any] | None) -> str:
    """A GET's parameters in its URL (after any the href already has, as requests would put them)."""
    pairs = {k: v for k, v in (parameters or {}).items() if v is not None}
    if not pairs:
        return href
    return f"{href}{'&' if urlsplit(href).query else '?'}{urlencode(pairs)}"


def _as_list(value: Any) -> Any:
    """A single collection or id as a list of one: agents write ``collections="sentinel-2-l2a"``."""
    return [value] if isinstance(value, str) else value


def _query_from_mapping(value: Any) -> Any:
    """Accept the query extension's own shape, ``{"eo:cloud_cover": {"lt": 20}}``, besides the list of
    terms; the published schema is the list (a map is an open object strict converters refuse)."""
    if isinstance(value, Mapping):
        terms = []
        for prop, conditions in value.items():
            if not isinstance(conditions, Mapping):
                return value
            terms += [{"property": prop, "op": op, "value": v} for op, v in conditions.items()]
        return terms
    return value


def _as_plain(value: list[QueryTerm] | None) -> list[dict[str, Any]] | None:
    """Validated terms as plain dicts: arguments cross the worker channel as JSON."""
    return None if value is None else [term.model_dump() for term in value]


@operation("stac", read_only=True)
def search(
    ctx: OperationContext,
    url: Annotated[
        str,
        Field(description="STAC API root URL (landing page), under an allowed prefix."),
    ],
    collections: Annotated[
        list[str] | None,
        BeforeValidator(_as_list),
        Field(description="Collection ids, e.g. ['sentinel-2-l2a']; default: all."),
    ] = None,
    bbox: Annotated[
        tuple[float, float, float, float] | None,
        Field(description="Box (west, south, east, north) in degrees, WGS 84 longitude first."),
    ] = None,
    datetime: Annotated[
        str | None,
        Field(description="RFC 3339 instant or range: '2024-06-01/2024-06-30', '2024-06-01/..' (open end)."),
    ] = None,
    query: Annotated[
        list[QueryTerm] | None,
        BeforeValidator(_query_from_mapping),
        AfterValidator(_as_plain),
        Field(
            description="Conditions that must all hold (query extension): [{'property': 'eo:cloud_cover', "
            "'op': 'lt', 'value': 20}]; {'eo:cloud_cover': {'lt': 20}} works too."
        ),
    ] = None,
    ids: Annotated[
        list[str] | None, BeforeValidator(_as_list), Field(description="Item ids; default: any.")
    ] = None,
    limit: Annotated[
        int, Field(ge=1, le=MAX_LIMIT, description=f"Items per page asked of the API (1-{MAX_LIMIT}).")
    ] = 20,
    max_items: Annotated[
        int, Field(ge=1, le=MAX_ITEMS, description=f"Items returned at most (1-{MAX_ITEMS}).")
    ] = 50,
) -> StacSearchResult:
    """Search a STAC API for items (scenes) by collection, place (bbox), time and properties.

    Returns typed items: id, collection, datetime, bbox, crs ('EPSG:32633' from proj:epsg or
    proj:code), cloud_cover and assets by name, each with its absolute href, media type, roles and
    bands. An asset with ``readable: true`` is under a URL prefix this server allows: pass its href as
    the path of any raster operation, e.g. ``raster.info(path=item["assets"]["red"]["href"])``.
    ``readable: false`` says why it would be refused (``refused_because``); the search itself does
    not fail for it. Signed hrefs keep their query strings here, so they can be used; messages and
    provenance show them redacted.

    Bounds: at most ``max_items`` items (200 at most) and 10 pages of ``limit`` items. When more
    match, ``truncated`` is true, ``matched`` says how many the API counts (when it does) and
    ``note`` says how to narrow the search (smaller bbox, shorter datetime range, collections, a
    query). Every request, the API's own links to further pages included, goes through the server's
    allowlist; a link that leaves it stops the search with PathRefused.

    Errors: PathRefused (URL not allowed); InvalidArgument (no item search); RemoteError (the API
    failed or refused the terms).
    """
    root = remote_access().check(url, "url")
    client = _open(url)
    try:
        with ignore_client_warnings():  # what they say reaches the agent in the note
            found = client.search(
                method=_method(client),
                collections=collections,
                bbox=list(bbox) if bbox is not None else None,
                datetime=datetime,
                query=_query_extension(query),
                ids=ids,
                limit=min(limit, max_items),
            )
    except ValueError as exc:  # pystac-client's own checks of datetime, bbox
        raise InvalidArgument(
            f"stac.search: {str(exc)[:300]}", fix="See read_stubs('stac.search')."
        ) from None
    items: list[StacItem] = []
    matched: int | None = None
    pages = 0
    more = False
    for page, url_of_page in _pages(found):
        pages += 1
        if pages == 1:
            matched = _matched(page)
        features = [f for f in page.get("features") or [] if isinstance(f, Mapping)]
        room = max_items - len(items)
        items += [_item(f, url_of_page) for f in features[:room]]
        has_next = _next_href(page) is not None
        if len(items) >= max_items:
            more = len(features) > room or has_next
            break
        if pages >= MAX_PAGES:
            more = has_next
            break
    if matched is not None and matched > len(items):
        more = True
    return StacSearchResult(
        items=items,
        returned=len(items),
        matched=matched,
        truncated=more,
        pages=pages,
        note=_note(items, matched, more, pages, max_items, root.redacted)
        + (_NO_QUERY if query and not client.conforms_to("QUERY") else ""),
    )


@operation("stac", read_only=True)
def item(
    ctx: OperationContext,
    url: Annotated[
        str,
        Field(
            description="URL of one STAC item (the href of a search result's item, or an API's "
            ".../collections/<collection>/items/<id>), under a prefix this server allows."
        ),
    ],
) -> StacItem:
    """Read one STAC item by its URL, typed as stac.search returns items.

    Use it for an item whose URL you have (``item["href"]`` of a search result, a link from a
    catalog). Its assets say which hrefs this server can read (``readable``) and why not
    (``refused_because``); pass a readable href to any raster operation as its path. Signed hrefs keep
    their query strings here; messages and provenance show them redacted.

    Errors: PathRefused (url not allowed); InvalidArgument (the document is not a STAC item);
    RemoteError (the server failed or the document is over the size limit).
    """
    remote_access().check(url, "url")
    document = _json(TransportStacIO().request(url), url)
    if not isinstance(document, Mapping) or document.get("type") != "Feature":
        raise InvalidArgument(
            f"url: '{redact(url)}' is not a STAC item (a GeoJSON Feature).",
            fix="Pass an item's URL; stac.search finds items and gives their href.",
        )
    return _item(document, url)


# --- the client --------------------------------------------------------------------------------


def _open(url: str) -> Client:
    """The API's client: its landing page read through the transport, item search required."""
    try:
        with ignore_client_warnings():  # a landing page without conformsTo is refused below
            client = Client.open(url, stac_io=TransportStacIO())
    except LlmcError:
        raise
    except (pystac.STACError, ClientTypeError, ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(
            f"url: '{redact(url)}' is not a STAC API landing page ({type(exc).__name__}: {str(exc)[:200]}).",
            fix=_FIX_API,
        ) from None
    if not client.conforms_to("ITEM_SEARCH"):
        raise InvalidArgument(
            f"url: '{redact(url)}' is a STAC catalog without item search (its conformsTo does not list "
            "STAC API item-search).",
            fix="Pass the root URL of a STAC API that offers /search; a static catalog is not searched here.",
        )
    return client


def _method(client: Client) -> str:
    """POST when the API offers it (filters travel as JSON, with no URL length limit), else GET."""
    methods = {
        str(link.extra_fields.get("method") or "GET").upper() for link in client.links if link.rel == "search"
    }
    return "POST" if "POST" in methods else "GET"


def _query_extension(terms: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if not terms:
        return None
    query: dict[str, dict[str, Any]] = {}
    for term in terms:
        query.setdefault(term["property"], {})[term["op"]] = term["value"]
    return query


def _pages(found: Any) -> Iterator[tuple[Mapping[str, Any], str]]:
    """The search's pages with the URL each came from (relative asset hrefs resolve against it)."""
    url = found.url
    pages = found.pages_as_dicts()
    while True:
        try:
            page = next(pages)
        except StopIteration:
            return
        except (ValueError, AttributeError):  # not JSON, or JSON that is not an object
            raise RemoteError(f"'{redact(url)}' answered a search with something else than a page.") from None
        yield page, url
        url = _next_href(page) or url


def _next_href(page: Mapping[str, Any]) -> str | None:
    for link in page.get("links") or []:
        if isinstance(link, Mapping) and link.get("rel") == "next" and isinstance(link.get("href"), str):
            return str(link["href"])
    return None


def _matched(page: Mapping[str, Any]) -> int | None:
    value = page.get("numberMatched")
    if value is None and isinstance(page.get("context"), Mapping):
        value = page["context"].get("matched")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _json(text: str, url: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise RemoteError(f"'{redact(url)}' did not answer JSON.", fix=_FIX_API) from None


def _note(
    items: list[StacItem], matched: int | None, more: bool, pages: int, max_items: int, root: str
) -> str:
    if more:
        counted = f"{matched} items match; " if matched is not None else "More items match; "
        stopped = (
            f"the search stopped after {pages} pages"
            if pages >= MAX_PAGES and len(items) < max_items
            else f"the first {len(items)} are returned"
        )
        return f"{counted}{stopped} (truncated). To see the ones you need, {_NARROW}."
    if not items:
        return (
            f"No items matched at {root}. Widen bbox or datetime, or check the collection ids (the API "
            "lists them at <url>/collections)."
        )
    readable = sum(a.readable for i in items for a in i.assets.values())
    return (
        f"{len(items)} items, all that match. {readable} asset hrefs are readable here: pass one as the "
        "path of a raster operation (raster.info(path=href))."
    )


# --- items, bounded ----------------------------------------------------------------------------


def _item(feature: Mapping[str, Any], base: str) -> StacItem:
    """A STAC item (a hostile dict of any size) as the fields an agent uses, every string capped."""
    properties = feature.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    own = _self_href(feature, base)
    at = own or base
    assets = feature.get("assets")
    assets = assets if isinstance(assets, Mapping) else {}
    kept = list(assets.items())[:MAX_ASSETS]
    return StacItem(
        id=_text(feature.get("id"), MAX_ID_CHARS) or "",
        collection=_text(feature.get("collection"), MAX_ID_CHARS),
        href=own,
        datetime=_text(properties.get("datetime"), 64),
        start_datetime=_text(properties.get("start_datetime"), 64),
        end_datetime=_text(properties.get("end_datetime"), 64),
        bbox=_bbox(feature.get("bbox")),
        crs=_crs(properties),
        cloud_cover=_number(properties.get("eo:cloud_cover")),
        assets={
            str(name)[:MAX_TEXT_CHARS]: _asset(asset, at)
            for name, asset in kept
            if isinstance(asset, Mapping) and isinstance(asset.get("href"), str)
        },
        assets_dropped=max(0, len(assets) - MAX_ASSETS),
    )


def _self_href(feature: Mapping[str, Any], base: str) -> str | None:
    for link in feature.get("links") or []:
        if isinstance(link, Mapping) and link.get("rel") == "self" and isinstance(link.get("href"), str):
            return _absolute(link["href"], base)
    return None


def _absolute(href: str, base: str) -> str:
    """``href`` resolved against ``base`` (the item's URL), capped; a resolution that fails keeps it
    as given (the allowlist then says why it is not readable)."""
    href = href[:MAX_HREF_CHARS]
    try:
        return urljoin(base, href)[:MAX_HREF_CHARS]
    except ValueError:
        return href


def _asset(asset: Mapping[str, Any], base: str) -> StacAsset:
    href = _absolute(str(asset["href"]), base)
    try:
        remote_access().allowlist.check(href, "href", via="a STAC asset")
        refused = None
    except PathRefused as exc:
        refused = str(exc.message)[:400]
    roles = asset.get("roles")
    return StacAsset(
        href=href,
        type=_text(asset.get("type"), MAX_TEXT_CHARS),
        roles=[r[:64] for r in roles[:MAX_ROLES] if isinstance(r, str)] if isinstance(roles, list) else [],
        title=_text(asset.get("title"), MAX_TEXT_CHARS),
        bands=_bands(asset),
        readable=refused is None,
        refused_because=refused,
    )


def _bands(asset: Mapping[str, Any]) -> list[StacBand]:
    """eo:bands (STAC 1.0) or bands (1.1, whose eo fields are prefixed)."""
    listed = asset.get("eo:bands")
    if not isinstance(listed, list):
        listed = asset.get("bands")
    if not isinstance(listed, list):
        return []
    return [
        StacBand(
            name=_text(band.get("name"), MAX_TEXT_CHARS),
            common_name=_text(band.get("common_name", band.get("eo:common_name")), 64),
            center_wavelength=_number(band.get("center_wavelength", band.get("eo:center_wavelength"))),
        )
        for band in listed[:MAX_BANDS]
        if isinstance(band, Mapping)
    ]


def _crs(properties: Mapping[str, Any]) -> str | None:
    epsg = properties.get("proj:epsg")
    if isinstance(epsg, int) and not isinstance(epsg, bool) and 0 < epsg < 10**7:
        return f"EPSG:{epsg}"
    code = properties.get("proj:code")
    return code if isinstance(code, str) and _CRS_CODE.match(code) else None


def _bbox(value: Any) -> list[float] | None:
    if isinstance(value, list) and len(value) in (4, 6) and all(_number(v) is not None for v in value):
        numbers = [float(v) for v in value]
        return numbers[:2] + numbers[3:5] if len(numbers) == 6 else numbers  # 3D: drop the heights
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None
