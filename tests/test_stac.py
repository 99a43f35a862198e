"""STAC search where the catalog lives: typed items from an allowed API, bounded, every request through
the transport (so through the server's allowlist), and asset hrefs that go straight to raster work.

A loopback STAC API (``tests/remote_server.py``: ``stac_api``, ``stac_item``, ``make_cog``) serves the
catalog and a COG. Operations run in this process with the server's own client
(:class:`~llmc_mcp.remote.fetcher.Fetcher`); the last tests go through a real server, where agent code
in a confined worker reaches the API through the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, PathRefused
from llmc_mcp.operations import raster, stac
from llmc_mcp.operations.catalog import Operation, OperationContext
from llmc_mcp.remote.access import RemoteAccess, configure
from llmc_mcp.remote.allowlist import Allowlist
from llmc_mcp.remote.fetcher import Fetcher
from llmc_mcp.remote.transport import RemoteLimits
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import code_settings, execute, structured
from tests.remote_server import CONFORMANCE, GEOJSON, RangeServer, make_cog, stac_api, stac_item

ELSEWHERE = "https://elsewhere.example.com/scenes/thumb.png"
SCENES = 25
"""Items of the main API: one a day from 2024-06-01, each a degree of longitude east of the last."""


def scene(n: int, server: RangeServer) -> dict[str, Any]:
    return stac_item(
        f"s{n:02d}",
        datetime=f"2024-06-{n + 1:02d}",
        bbox=(n, 45, n + 1, 46),
        epsg=32633,
        assets={
            "red": {
                "href": server.url("cogs/a.tif"), "type": "image/tiff; application=geotiff",
                "roles": ["data"],
                "eo:bands": [{"name": "B04", "common_name": "red", "center_wavelength": 0.665}],
            },
            "thumbnail": {"href": ELSEWHERE, "type": "image/png", "roles": ["thumbnail"]},
        },
    )  # fmt: skip


@pytest.fixture(scope="module")
def served() -> Iterator[RangeServer]:
    with RangeServer() as server:
        server.files["cogs/a.tif"] = make_cog(None, width=256, height=256, blocksize=256)
        stac_api(
            server, items=[scene(n, server) for n in range(SCENES)], root="apis/stac/", collection="demo"
        )
        stac_api(server, items=[scene(0, server)], root="apis/endless/", endless=True)
        yield server
    configure(None)


def allowed(server: RangeServer) -> list[str]:
    """The APIs' parent and the COGs' folder (a prefix allows its folder and everything below it)."""
    return [server.base + "apis/", server.base + "cogs/"]


@pytest.fixture
def remote(served: RangeServer) -> Iterator[RangeServer]:
    fetcher = Fetcher(Allowlist(allowed(served)), RemoteLimits(timeout=5, retries=0))
    configure(RemoteAccess(fetcher.allowlist, fetcher))
    served.reset_counters()
    yield served
    configure(None)
    fetcher.close()


@pytest.fixture
def ctx(tmp_path: Path) -> OperationContext:
    return OperationContext(Workspace(tmp_path), 1, None)


def call(op: Operation, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def paths_requested(server: RangeServer) -> list[str]:
    return [path for _method, path, _range in server.requests]


def odd_api(server: RangeServer, search_href: str, page: dict[str, Any] | None = None) -> str:
    """An API under ``odd/`` whose search link is ``search_href`` and whose search answers ``page``."""
    root = server.url("apis/odd/")
    server.json_routes["apis/odd/"] = lambda method, query, body: (200, {
        "type": "Catalog", "stac_version": "1.0.0", "id": "odd", "description": "odd",
        "conformsTo": CONFORMANCE,
        "links": [
            {"rel": "self", "href": root},
            {"rel": "search", "href": search_href, "type": GEOJSON, "method": "GET"},
        ],
    })  # fmt: skip
    server.json_routes["apis/odd/search"] = lambda method, query, body: (200, page or {})
    return root


# --- search -------------------------------------------------------------------------------------


def test_a_search_returns_typed_items_filtered_by_bbox_datetime_and_collections(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against filters that never reach the API (all items back) or items left as raw dicts."""
    found = call(
        stac.search, ctx, url=remote.url("apis/stac/"), collections="demo", bbox=(2.5, 45, 6.5, 46),
        datetime="2024-06-04/2024-06-30",
    )  # fmt: skip
    assert [item.id for item in found.items] == ["s03", "s04", "s05", "s06"]
    first = found.items[0]
    assert (first.collection, first.crs, first.bbox) == ("demo", "EPSG:32633", [3.0, 45.0, 4.0, 46.0])
    assert first.datetime == "2024-06-04T00:00:00Z"
    red = first.assets["red"]
    assert red.href == remote.url("cogs/a.tif") and red.roles == ["data"]
    assert [(b.name, b.common_name, b.center_wavelength) for b in red.bands] == [("B04", "red", 0.665)]
    assert (found.truncated, found.matched, found.returned) == (False, 4, 4)


def test_a_search_pages_through_next_links_up_to_max_items(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against stopping at the first page, or reading pages past the items asked for."""
    found = call(stac.search, ctx, url=remote.url("apis/stac/"), limit=10, max_items=SCENES)
    assert [item.id for item in found.items] == [f"s{n:02d}" for n in range(SCENES)]
    assert (found.pages, found.truncated) == (3, False)
    assert paths_requested(remote).count("apis/stac/search") == 3


def test_more_matches_than_max_items_are_truncated_with_a_note_on_narrowing(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a search that silently returns a part of what matched (issue 25: say so, and how
    to narrow it)."""
    found = call(stac.search, ctx, url=remote.url("apis/stac/"), limit=10, max_items=15)
    assert (found.returned, found.matched, found.truncated) == (15, SCENES, True)
    assert paths_requested(remote).count("apis/stac/search") == 2
    assert "bbox" in found.note and "datetime" in found.note and "query" in found.note


def test_next_links_that_never_end_stop_at_the_page_bound(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against an API whose pages never end keeping a call (and the server) busy forever."""
    found = call(stac.search, ctx, url=remote.url("apis/endless/"), limit=1, max_items=200)
    assert found.pages == 10 and found.returned == 10 and found.truncated
    assert found.matched is None and "stopped after 10 pages" in found.note
    assert paths_requested(remote).count("apis/endless/search") == 10


def test_an_asset_off_the_allowlist_is_unreadable_with_the_reason_not_an_error(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against one foreign href failing a whole search, or being offered as readable."""
    thumbnail = call(stac.search, ctx, url=remote.url("apis/stac/"), ids=["s00"]).items[0].assets["thumbnail"]
    assert thumbnail.href == ELSEWHERE and not thumbnail.readable
    assert "not under an allowed prefix" in (thumbnail.refused_because or "")
    assert all(path != "scenes/thumb.png" for path in paths_requested(remote))


def test_a_readable_asset_href_opens_with_raster_info(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against an href that says readable but that raster operations cannot open as given."""
    red = call(stac.search, ctx, url=remote.url("apis/stac/"), ids=["s00"]).items[0].assets["red"]
    assert red.readable and red.refused_because is None
    assert call(raster.info, ctx, path=red.href).width == 256


def test_both_query_forms_reach_the_api_as_the_query_extension(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a query that is accepted here and never sent (the API would return everything)."""
    bodies: list[Any] = []
    fetcher = Fetcher(Allowlist(allowed(remote)))

    class Spy:
        def document(self, url: str, method: str = "GET", body: Any = None) -> bytes:
            bodies.append(body)
            return fetcher.document(url, method, body)  # type: ignore[arg-type]

    configure(RemoteAccess(fetcher.allowlist, Spy()))  # type: ignore[arg-type]
    try:
        listed = [{"property": "eo:cloud_cover", "op": "lt", "value": 20}]
        call(stac.search, ctx, url=remote.url("apis/stac/"), query=listed, max_items=1)
        call(
            stac.search, ctx, url=remote.url("apis/stac/"), query={"eo:cloud_cover": {"lt": 20}}, max_items=1
        )
    finally:
        fetcher.close()
    sent = [body["query"] for body in bodies if body]
    assert sent == [{"eo:cloud_cover": {"lt": 20}}] * 2


# --- refusals -----------------------------------------------------------------------------------


def test_a_catalog_root_off_the_allowlist_is_refused_before_any_request(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against reaching a URL to find out whether it may be reached."""
    with pytest.raises(PathRefused, match="not under an allowed prefix"):
        call(stac.search, ctx, url=remote.url("private/stac/"))
    assert remote.requests == []


def test_nothing_is_read_when_the_operator_allowed_no_url(served: RangeServer, ctx: OperationContext) -> None:
    """Guards against STAC search being on by default: the refusal names the operator's flag."""
    configure(None)
    served.reset_counters()
    with pytest.raises(PathRefused, match="--allow-remote"):
        call(stac.search, ctx, url=served.url("apis/stac/"))
    with pytest.raises(PathRefused, match="--allow-remote"):
        call(stac.item, ctx, url=served.url("apis/stac/collections/demo/items/s00"))
    assert served.requests == []


def test_a_next_link_off_the_allowlist_is_refused_where_the_network_is(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against following the API's word: a page's next link to another prefix is checked by the
    transport (the server, in production), not trusted because the first page was allowed."""
    page = {
        "type": "FeatureCollection", "features": [scene(0, remote)],
        "links": [{"rel": "next", "href": remote.url("private/search?token=1"), "method": "GET"}],
    }  # fmt: skip
    root = odd_api(remote, remote.url("apis/odd/search"), page)
    with pytest.raises(PathRefused, match="private/search"):
        call(stac.search, ctx, url=root)
    assert "private/search" not in paths_requested(remote)


def test_a_catalog_link_to_a_local_file_is_refused(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against a landing page that sends the client to read a file of the server's machine."""
    root = odd_api(remote, "file:///etc/passwd")
    with pytest.raises(PathRefused):
        call(stac.search, ctx, url=root)


def test_a_catalog_without_item_search_is_an_invalid_argument_naming_the_fix(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against a static catalog failing with pystac-client's internals instead of what to pass."""
    remote.json_routes["apis/odd/"] = lambda method, query, body: (200, {
        "type": "Catalog", "stac_version": "1.0.0", "id": "static", "description": "static", "links": [],
    })  # fmt: skip
    with pytest.raises(InvalidArgument, match="without item search") as raised:
        call(stac.search, ctx, url=remote.url("apis/odd/"))
    assert raised.value.fix and "STAC API" in raised.value.fix


# --- one item -----------------------------------------------------------------------------------


def test_an_item_by_url_resolves_relative_hrefs_and_reads_stac_1_1_fields(
    remote: RangeServer, ctx: OperationContext
) -> None:
    """Guards against relative hrefs left unusable, and STAC 1.1 items (proj:code, bands) losing their
    CRS and bands."""
    document = {
        "type": "Feature", "stac_version": "1.1.0", "id": "new", "collection": "demo", "bbox": [0, 45, 1, 46],
        "geometry": None, "links": [{"rel": "self", "href": remote.url("apis/odd/items/new")}],
        "properties": {
            "datetime": None, "start_datetime": "2024-06-01T00:00:00Z",
            "end_datetime": "2024-06-02T00:00:00Z", "proj:code": "EPSG:32633", "eo:cloud_cover": 7,
        },
        "assets": {
            "red": {"href": "../../../cogs/a.tif", "bands": [{"name": "B04", "eo:common_name": "red"}]},
        },
    }  # fmt: skip
    remote.json_routes["apis/odd/items/new"] = lambda method, query, body: (200, document)
    item = call(stac.item, ctx, url=remote.url("apis/odd/items/new"))
    assert (item.crs, item.datetime, item.start_datetime, item.cloud_cover) == (
        "EPSG:32633",
        None,
        "2024-06-01T00:00:00Z",
        7.0,
    )
    red = item.assets["red"]
    assert red.href == remote.url("cogs/a.tif") and red.readable
    assert [(b.name, b.common_name) for b in red.bands] == [("B04", "red")]


def test_a_hostile_item_is_kept_within_its_bounds(remote: RangeServer, ctx: OperationContext) -> None:
    """Guards against one document filling a result: ids, titles and the number of assets are capped."""
    document = {
        "type": "Feature", "id": "x" * 10_000, "bbox": [0, 45, 1, 46], "properties": {"datetime": None},
        "links": [],
        "assets": {f"a{n}": {"href": remote.url("cogs/a.tif"), "title": "t" * 1000} for n in range(100)},
    }  # fmt: skip
    remote.json_routes["apis/odd/items/big"] = lambda method, query, body: (200, document)
    item = call(stac.item, ctx, url=remote.url("apis/odd/items/big"))
    assert len(item.id) == 256 and len(item.assets) == 64 and item.assets_dropped == 36
    assert max(len(a.title or "") for a in item.assets.values()) == 200


# --- through a real server ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_agent_code_searches_then_reads_an_asset_through_the_server(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against STAC search that works only in the server's process: the session worker has no
    network, so the search pages and the raster's bytes all come through its requests to the server."""
    configure(None)
    served.reset_counters()
    code = f"""
found = stac.search({json.dumps(served.url("apis/stac/"))}, bbox=(0.5, 45, 1.5, 46),
                    datetime="2024-06-01/2024-06-30")
href = found["items"][0]["assets"]["red"]["href"]
[item["id"] for item in found["items"]], raster.info(path=href)["width"]
"""
    settings = code_settings(tmp_path, allow_remote=tuple(allowed(served)))
    async with Client(build_server(settings)) as client:
        answer = await execute(client, code)
    assert answer["ok"], answer
    assert answer["result"] == [["s00", "s01"], 256]
    assert {"apis/stac/", "apis/stac/search", "cogs/a.tif"} <= set(paths_requested(served))


@pytest.mark.anyio
async def test_classic_stac_results_conform_to_their_output_schemas(
    tmp_path: Path, served: RangeServer
) -> None:
    """Guards against declared output schemas that the results break (a host's typed code would fail)."""
    configure(None)
    settings = Settings(mode="classic", workspace=tmp_path, allow_remote=tuple(allowed(served)))
    async with Client(build_server(settings)) as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        found = structured(
            await client.call_tool("stac_search", {"url": served.url("apis/stac/"), "max_items": 2})
        )
        item = structured(await client.call_tool("stac_item", {"url": found["items"][0]["href"]}))
    jsonschema.Draft202012Validator(schemas["stac_search"]).validate(found)
    jsonschema.Draft202012Validator(schemas["stac_item"]).validate(item)
    assert found["truncated"] and item["id"] == "s00"
