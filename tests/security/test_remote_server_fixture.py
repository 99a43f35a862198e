"""The local server the remote-read tests stand on (issue 25) does what they assume: exact ranges,
pinned versions, unfollowed redirects, a trickle that cannot hang a test, a paging STAC API, and COGs
whose every value a test can state."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import rasterio
from rasterio.windows import Window

from tests.remote_server import (
    Flaky,
    HugeLength,
    RangeServer,
    Redirect,
    Trickle,
    expected_window,
    make_cog,
    stac_api,
    stac_item,
)

CONTENT = bytes(range(256)) * 8


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body, from a client that follows nothing and raises on nothing."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


@pytest.fixture
def server() -> Any:
    with RangeServer() as running:
        running.files["cogs/a.bin"] = CONTENT
        yield running


def test_a_range_answer_is_exact_and_counted(server: RangeServer) -> None:
    """Guards against an off-by-one in the inclusive range, a wrong Content-Range, or counters that miss
    a request: the benchmarks and request-count tests read them."""
    status, headers, body = _get(server.url("cogs/a.bin"), {"Range": "bytes=10-19"})
    assert (status, body) == (206, CONTENT[10:20])
    assert headers["Content-Range"] == f"bytes 10-19/{len(CONTENT)}"
    assert headers["Content-Length"] == "10"
    assert headers["ETag"] == server.etag("cogs/a.bin")
    assert server.requests == [("GET", "cogs/a.bin", "bytes=10-19")]
    assert server.bytes_sent == 10


def test_a_multi_range_or_unsatisfiable_range_is_refused(server: RangeServer) -> None:
    """Guards against a whole-file 200 hiding a malformed request: the product never sends these."""
    for asked in ("bytes=0-1,5-6", f"bytes={len(CONTENT)}-"):
        status, headers, _ = _get(server.url("cogs/a.bin"), {"Range": asked})
        assert status == 416
        assert headers["Content-Range"] == f"bytes */{len(CONTENT)}"


def test_an_if_match_on_a_replaced_file_gets_412(server: RangeServer) -> None:
    """Guards against the file-changed-mid-read tests passing because the server ignored If-Match."""
    old = server.etag("cogs/a.bin")
    server.replace("cogs/a.bin", CONTENT[::-1])
    assert server.etag("cogs/a.bin") != old
    status, _, _ = _get(server.url("cogs/a.bin"), {"Range": "bytes=0-9", "If-Match": old})
    assert status == 412
    status, _, body = _get(
        server.url("cogs/a.bin"), {"Range": "bytes=0-9", "If-Match": server.etag("cogs/a.bin")}
    )
    assert (status, body) == (206, CONTENT[::-1][:10])


def test_a_redirect_is_answered_not_followed(server: RangeServer) -> None:
    """Guards against the server resolving a redirect itself, which would hide whether the product
    checks the target against its allowlist."""
    server.behaviours["cogs/a.bin"] = Redirect("http://elsewhere.invalid/x.tif", status=307)
    status, headers, body = _get(server.url("cogs/a.bin"))
    assert (status, headers["Location"], body) == (307, "http://elsewhere.invalid/x.tif", b"")
    assert [path for _, path, _ in server.requests] == ["cogs/a.bin"]


def test_a_flaky_path_fails_then_serves(server: RangeServer) -> None:
    """Guards against retry tests passing on a server that never failed, or never recovered."""
    server.behaviours["cogs/a.bin"] = Flaky(failures=2, status=503)
    statuses = [_get(server.url("cogs/a.bin"))[0] for _ in range(3)]
    assert statuses == [503, 503, 200]


def test_a_huge_length_is_declared_but_not_sent(server: RangeServer) -> None:
    """Guards against the memory-bound tests sending what they declare (the test would then need a
    terabyte): the body ends early, with the connection."""
    server.behaviours["cogs/a.bin"] = HugeLength(declared=10**12, sent=1024)
    parts = urllib.parse.urlsplit(server.url("cogs/a.bin"))
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    conn.request("GET", parts.path, headers={"Range": "bytes=0-99"})
    response = conn.getresponse()
    assert response.status == 206
    assert response.getheader("Content-Length") == str(10**12)
    assert response.getheader("Content-Range") == f"bytes 0-{10**12 - 1}/{10**12}"
    received = b""
    while chunk := response.read(4096):  # in pieces: one read() would allocate the declared terabyte
        received += chunk
    conn.close()
    assert len(received) == 1024


def test_a_trickling_answer_ends_when_the_server_stops() -> None:
    """Guards against a slow-server test hanging the suite: stopping the server cuts the body short.
    The bound is generous (the trickle alone would take hours), so it is not a timing assertion."""
    server = RangeServer().start()
    server.files["slow.bin"] = CONTENT * 100
    server.behaviours["slow.bin"] = Trickle(bytes_per_second=5)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/slow.bin")
    response = conn.getresponse()
    assert response.read(1) == CONTENT[:1]
    began = time.monotonic()
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    stopper.join(timeout=5)
    conn.close()
    assert not stopper.is_alive()
    assert time.monotonic() - began < 5


def _stac(server: RangeServer, **options: Any) -> str:
    items = [
        stac_item(
            f"scene-{day:02d}",
            datetime=f"2024-05-{day:02d}T10:00:00Z",
            bbox=(10.0 + day, 45.0, 10.5 + day, 45.5),
            epsg=32633,
            assets={"data": {"href": server.url(f"cogs/{day}.tif"), "type": "image/tiff", "roles": ["data"]}},
        )
        for day in range(1, 6)
    ]
    return stac_api(server, items=items, **options)


def test_stac_search_pages_with_next_links_by_get_and_post(server: RangeServer) -> None:
    """Guards against a paging test that never pages: GET follows an href with the token, POST a next
    link carrying method POST and the body with the token, and the last page has no next link."""
    root = _stac(server)
    landing = _get_json(root)
    assert "https://api.stacspec.org/v1.0.0/item-search" in landing["conformsTo"]
    search = server.url("stac/search")
    seen, url = [], f"{search}?limit=2"
    while url:
        page = _get_json(url)
        seen += [feature["id"] for feature in page["features"]]
        url = next((link["href"] for link in page["links"] if link["rel"] == "next"), None)
    assert seen == [f"scene-{day:02d}" for day in range(1, 6)]
    first = _post_json(search, {"limit": 3, "collections": ["demo"]})
    (link,) = [link for link in first["links"] if link["rel"] == "next"]
    assert (link["method"], link["body"]) == ("POST", {"limit": 3, "collections": ["demo"], "token": "3"})
    last = _post_json(link["href"], link["body"])
    assert [f["id"] for f in last["features"]] == ["scene-04", "scene-05"]
    assert not [link for link in last["links"] if link["rel"] == "next"]


def test_stac_search_filters_by_bbox_and_datetime(server: RangeServer) -> None:
    """Guards against filters that are ignored, which would let an allowlist test pass on any item."""
    _stac(server)
    search = server.url("stac/search")
    by_box = _get_json(f"{search}?bbox=12.2,45.1,13.2,45.2")
    assert [f["id"] for f in by_box["features"]] == ["scene-02", "scene-03"]
    cases = {
        "2024-05-03T10:00:00Z": ["scene-03"],
        "2024-05-02T00:00:00Z/2024-05-03T23:00:00Z": ["scene-02", "scene-03"],
        "../2024-05-01T10:00:00Z": ["scene-01"],
        "2024-05-05T00:00:00Z/..": ["scene-05"],
    }
    for when, expected in cases.items():
        page = _post_json(search, {"datetime": when})
        assert [f["id"] for f in page["features"]] == expected, when
    with pytest.raises(urllib.error.HTTPError) as caught:
        _get_json(f"{search}?bbox=1,2,3")
    assert caught.value.code == 400


def test_an_endless_stac_search_always_has_a_next_page(server: RangeServer) -> None:
    """Guards against the pages-forever test ending on its own: every page links on, with new ids."""
    _stac(server, endless=True)
    url, ids = server.url("stac/search?limit=5"), set()
    for _ in range(4):
        page = _get_json(url)
        ids |= {f["id"] for f in page["features"]}
        url = next(link["href"] for link in page["links"] if link["rel"] == "next")
    assert len(ids) == 20


def test_pystac_client_searches_the_static_api(server: RangeServer) -> None:
    """Guards against an API that only this module's own client understands: pystac-client, which the
    product's STAC semantics follow, pages through it by POST."""
    pystac_client = pytest.importorskip("pystac_client")
    client = pystac_client.Client.open(_stac(server))
    found = client.search(collections=["demo"], bbox=[11, 45, 13.9, 46], limit=2, method="POST")
    assert [item.id for item in found.items()] == ["scene-01", "scene-02", "scene-03"]


def test_a_cog_window_equals_expected_window(tmp_path: Path) -> None:
    """Guards against a test stating values the raster does not hold: any window of the gradient
    equals ``expected_window``, and the file is a tiled COG with overviews."""
    path = tmp_path / "a.tif"
    content = make_cog(path, width=300, height=200, dtype="uint8", blocksize=64)
    assert path.read_bytes() == content
    with rasterio.open(path) as ds:
        window = ds.read(1, window=Window(col_off=70, row_off=130, width=50, height=40))
        assert ds.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"
        assert ds.block_shapes == [(64, 64)]
        assert ds.overviews(1) == [2, 4, 8]
    assert (window == expected_window(300, "uint8", 130, 70, 40, 50)).all()


def test_a_cog_keeps_a_planted_tag_domain(tmp_path: Path) -> None:
    """Guards against the hostile-metadata tests planting nothing: a non-default domain survives."""
    path = tmp_path / "planted.tif"
    make_cog(path, width=100, height=100, blocksize=32, tags={"OVERVIEWS": {"OVERVIEW_FILE": "/etc/passwd"}})
    with rasterio.open(path) as ds:
        assert ds.tags(ns="OVERVIEWS") == {"OVERVIEW_FILE": "/etc/passwd"}
        assert (ds.read(1) == expected_window(100, "uint16", 0, 0, 100, 100)).all()
