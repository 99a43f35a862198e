"""A local HTTP server for the remote-read tests (issue 25): byte ranges, ETags, hostile answers, and
the cloud-optimized GeoTIFFs and static STAC API it serves.

The product reads COGs with single-range GETs pinned by ``If-Match`` and follows redirects itself, so
this server answers exactly what it is asked and never follows anything. Hostile behaviours are opt-in
per path; every slow answer watches a stop event and ``stop()`` closes open connections, so a test
that leaves a trickling client behind still stops its server in well under a second. Only the
standard library serves; numpy and rasterio build the rasters. No internet is touched.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import http.server
import json
import mimetypes
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from affine import Affine
from rasterio.enums import Resampling

JsonRoute = Callable[[str, dict[str, str], "dict[str, Any] | None"], tuple[int, Any]]
"""``(method, query, body) -> (status, document)``; the body is the parsed JSON of a POST, else None."""


@dataclass(frozen=True)
class Redirect:
    """Answer ``status`` with this ``Location`` (absolute or relative) and no body."""

    location: str
    status: int = 302


@dataclass(frozen=True)
class Trickle:
    """A correct header, then the body one byte at a time: a server too slow to wait for."""

    bytes_per_second: float = 20.0


@dataclass(frozen=True)
class HugeLength:
    """Declare ``declared`` bytes (Content-Length, and the Content-Range total for a 206), send ``sent``
    bytes, then close: a server that would fill the reader's memory if believed."""

    declared: int = 10**12
    sent: int = 4096


@dataclass(frozen=True)
class IgnoreRange:
    """Answer 200 with the whole file whatever Range was asked: a server without range support."""


@dataclass(frozen=True)
class Status:
    """Always answer this status with a tiny body."""

    code: int


@dataclass
class Flaky:
    """Fail the first ``failures`` requests with ``status``, then serve normally."""

    failures: int
    status: int = 503
    failed: int = field(default=0, init=False)  # counted under the server's lock


Behaviour = Redirect | Trickle | HugeLength | IgnoreRange | Status | Flaky


def etag_of(data: bytes) -> str:
    """The strong ETag the server sends for this content: the quoted SHA-1, so any change changes it."""
    return f'"{hashlib.sha1(data).hexdigest()}"'


def parse_range(header: str, total: int) -> tuple[int, int] | None:
    """The inclusive ``(first, last)`` of a single ``bytes=`` range, or None when it cannot be served.

    Strict on purpose: a multi-range or malformed header is refused (416) rather than ignored, since the
    product never sends one and a test should see the mistake rather than a silent whole file."""
    unit, _, spec = header.partition("=")
    first, dash, last = spec.strip().partition("-")
    if unit.strip().lower() != "bytes" or "," in spec or not dash:
        return None
    try:
        if not first.strip():  # a suffix range: the last N bytes
            count = int(last)
            return (max(0, total - count), total - 1) if count > 0 and total else None
        start = int(first)
        end = int(last) if last.strip() else total - 1
    except ValueError:
        return None
    if start >= total or end < start:
        return None
    return start, min(end, total - 1)


def _if_match(header: str, etag: str) -> bool:
    """Strong comparison (RFC 9110 13.1.1): a weak tag never matches, ``*`` matches any existing file."""
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag in tags


class _HTTPServer(http.server.ThreadingHTTPServer):
    owner: RangeServer


class _Handler(http.server.BaseHTTPRequestHandler):
    """One connection; keep-alive (HTTP/1.1) so a pooled client makes one connection, as it would remotely."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle's algorithm against the
        # client's delayed ACK stalls every answer ~40 ms, swamping the latency a benchmark injects.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: test output shows failures, not every request."""

    def do_GET(self) -> None:
        try:
            self._answer()
        except ConnectionError:  # the client hung up mid-answer: what hostile-server tests provoke
            self.close_connection = True

    do_HEAD = do_POST = do_GET

    def _answer(self) -> None:
        owner = self.server.owner
        parts = urllib.parse.urlsplit(self.path)
        key = urllib.parse.unquote(parts.path).lstrip("/")
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        owner._record(self.command, key, self.headers.get("Range"), parts.query, dict(self.headers))
        if owner.latency:
            owner._stopping.wait(owner.latency)
        behaviour = owner.behaviours.get(key)
        if isinstance(behaviour, Flaky) and owner._fail_once(behaviour):
            self._tiny(behaviour.status)
        elif isinstance(behaviour, Status):
            self._tiny(behaviour.code)
        elif isinstance(behaviour, Redirect):
            self._send(behaviour.status, {"Location": behaviour.location}, b"")
        elif key in owner.json_routes:
            self._json(owner.json_routes[key], query, raw, behaviour)
        elif key in owner.files:
            self._file(key, behaviour)
        else:
            self._tiny(404)

    def _file(self, key: str, behaviour: Behaviour | None) -> None:
        owner = self.server.owner
        data = owner.files[key]
        etag = owner.etag(key)
        headers = {
            "ETag": etag,
            "Last-Modified": formatdate(owner._modified_at(key), usegmt=True),
            "Accept-Ranges": "bytes",
            "Content-Type": mimetypes.guess_type(key)[0] or "application/octet-stream",
        }
        if_match = self.headers.get("If-Match")
        if if_match is not None and not _if_match(if_match, etag):
            self._tiny(412, headers)
            return
        asked = self.headers.get("Range")
        if asked is None or isinstance(behaviour, IgnoreRange):
            self._send(200, headers, data, behaviour)
            return
        span = parse_range(asked, len(data))
        if span is None:
            self._tiny(416, {**headers, "Content-Range": f"bytes */{len(data)}"})
            return
        start, end = span
        if isinstance(behaviour, HugeLength):
            end, total, body = start + behaviour.declared - 1, start + behaviour.declared, data[start:]
        else:
            total, body = len(data), data[start : end + 1]
        headers["Content-Range"] = f"bytes {start}-{end}/{total}"
        self._send(206, headers, body, behaviour)

    def _json(self, route: JsonRoute, query: dict[str, str], raw: bytes, behaviour: Behaviour | None) -> None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            status, doc = 400, {"code": "BadRequest", "description": "the body is not JSON"}
        else:
            status, doc = route(self.command, query, body)
        geojson = isinstance(doc, dict) and doc.get("type") == "FeatureCollection"
        kind = "application/geo+json" if geojson else "application/json"
        self._send(status, {"Content-Type": kind}, json.dumps(doc).encode(), behaviour)

    def _tiny(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        body = f"{status} {self.responses.get(status, ('',))[0]}\n".encode()
        self._send(status, {**(headers or {}), "Content-Type": "text/plain"}, body)

    def _send(
        self, status: int, headers: Mapping[str, str], body: bytes, behaviour: Behaviour | None = None
    ) -> None:
        huge = behaviour if isinstance(behaviour, HugeLength) else None
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(huge.declared if huge else len(body)))
        if huge:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if huge:
            self.close_connection = True  # the declared length is a lie: only closing ends the body
            self._write(body[: huge.sent].ljust(huge.sent, b"\0"))
        elif isinstance(behaviour, Trickle):
            self._trickle(body, behaviour.bytes_per_second)
        elif body:
            self._write(body)

    def _trickle(self, body: bytes, bytes_per_second: float) -> None:
        stopping = self.server.owner._stopping
        for index in range(len(body)):
            if stopping.is_set():  # the server is stopping: cut the body short rather than hang
                self.close_connection = True
                return
            self._write(body[index : index + 1])  # a hung-up client raises here (caught in do_GET)
            stopping.wait(1 / bytes_per_second)

    def _write(self, chunk: bytes) -> None:
        owner = self.server.owner
        owner._count(len(chunk))  # before the write: a client holding the bytes must find them counted
        try:
            self.wfile.write(chunk)
        except ConnectionError:
            owner._count(-len(chunk))
            raise


class RangeServer:
    """Files from ``files`` (``"cogs/a.tif" -> bytes``) and JSON from ``json_routes`` on 127.0.0.1,
    with per-path hostile ``behaviours``, a per-answer ``latency`` and thread-safe counters."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.behaviours: dict[str, Behaviour] = {}
        self.json_routes: dict[str, JsonRoute] = {}
        self.latency = 0.0
        """Seconds slept before each answer (a benchmark's simulated round trip)."""
        self._lock = threading.Lock()
        self._requests: list[tuple[str, str, str | None]] = []
        self._queries: list[str] = []
        self._etags: dict[str, tuple[bytes, str]] = {}
        self._headers: list[dict[str, str]] = []
        self._pending: dict[str, tuple[int, bytes]] = {}
        self._bytes_sent = 0
        self._modified: dict[str, float] = {}
        self._started_at = time.time()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> RangeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RangeServer:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        # A short poll interval so stop() returns promptly; shutdown() waits for the next poll.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut trickling answers short and close every open connection."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # idle keep-alive connections would otherwise linger
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=1)
        self._httpd = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return self._httpd.server_address[1]

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT/``, with the trailing slash."""
        return f"http://127.0.0.1:{self.port}/"

    def url(self, path: str) -> str:
        return self.base + path.lstrip("/")

    def etag(self, path: str) -> str:
        """The ETag the server sends for ``path`` now."""
        data = self.files[path]
        with self._lock:
            known = self._etags.get(path)
        if known is not None and known[0] is data:
            return known[1]
        # Hashed once per content: a benchmark's 500 MiB file would otherwise cost a second a request.
        etag = etag_of(data)
        with self._lock:
            self._etags[path] = (data, etag)
        return etag

    def replace(self, path: str, data: bytes) -> None:
        """New content for ``path``: its ETag changes, and its Last-Modified moves at least a second on
        (HTTP dates have one-second resolution, so a change within the second must still show)."""
        with self._lock:
            previous = self._modified.get(path, self._started_at)
            self.files[path] = bytes(data)
            self._modified[path] = max(time.time(), previous + 1)

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        """``(method, path, Range header or None)`` of every request so far, path without the query."""
        with self._lock:
            return list(self._requests)

    @property
    def bytes_sent(self) -> int:
        """Body bytes sent so far (headers not counted); counted as each write starts, so a client
        that has read a body always finds it counted."""
        with self._lock:
            return self._bytes_sent

    def reset_counters(self) -> None:
        with self._lock:
            self._requests.clear()
            self._queries.clear()
            self._headers.clear()
            self._bytes_sent = 0

    def _record(
        self,
        method: str,
        path: str,
        asked: str | None,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self._requests.append((method, path, asked))
            self._queries.append(query)
            self._headers.append(headers or {})
            pending = self._pending.get(path)
            if pending is not None:
                left, data = pending
                self._pending[path] = (left - 1, data)
        if pending is not None and pending[0] <= 1:
            del self._pending[path]
            self.replace(path, data)

    def replace_after(self, path: str, requests: int, data: bytes) -> None:
        """Replace ``path`` with ``data`` once ``requests`` more requests for it have arrived (the
        request that makes the count is answered with the new content): a file changed mid-read."""
        with self._lock:
            self._pending[path] = (requests + 1, bytes(data))

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every request so far, in order (what a signed request carried)."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def query_strings(self) -> list[str]:
        """The raw query string of every request so far (what a signed URL sent), in order."""
        with self._lock:
            return list(self._queries)

    def _count(self, sent: int) -> None:
        with self._lock:
            self._bytes_sent += sent

    def _fail_once(self, flaky: Flaky) -> bool:
        with self._lock:
            if flaky.failed >= flaky.failures:
                return False
            flaky.failed += 1
            return True

    def _modified_at(self, path: str) -> float:
        with self._lock:
            return self._modified.get(path, self._started_at)

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


# --- Cloud-optimized GeoTIFFs -------------------------------------------------------------------


def _modulus(dtype: np.dtype) -> int:
    """Integers wrap at their width; floats at the last integer their mantissa holds exactly."""
    if dtype.kind == "f":
        return 2 ** (np.finfo(dtype).nmant + 1)
    return 2 ** (8 * dtype.itemsize)


def expected_window(width: int, dtype: str, row_off: int, col_off: int, h: int, w: int) -> np.ndarray:
    """The "gradient" fill of ``make_cog`` in a window: ``(row * width + col) mod`` the dtype's range,
    wrapped into the dtype (a signed type reads the wrapped value), so a test can state any window."""
    kind = np.dtype(dtype)
    rows = np.arange(row_off, row_off + h, dtype=np.uint64)[:, None]
    cols = np.arange(col_off, col_off + w, dtype=np.uint64)[None, :]
    values = (rows * np.uint64(width) + cols) % np.uint64(_modulus(kind))
    return values.astype(kind)


def _overview_factors(width: int, height: int, blocksize: int) -> list[int]:
    """The levels GDAL's COG driver makes: halve until the image fits in one block."""
    factors, factor = [], 2
    while max(width, height) / (factor // 2) > blocksize:
        factors.append(factor)
        factor *= 2
    return factors


def make_cog(
    path: Path | str | None,
    *,
    width: int,
    height: int,
    dtype: str = "uint16",
    crs: str = "EPSG:32633",
    origin: tuple[float, float] = (500_000, 5_000_000),
    cell: float = 10,
    blocksize: int = 512,
    overviews: bool = True,
    fill: str | np.ndarray = "gradient",
    tags: Mapping[str, Mapping[str, str]] | None = None,
) -> bytes:
    """The bytes of a one-band, deflate-compressed COG (also written to ``path`` when given).

    ``fill`` is "gradient" (see ``expected_window``) or a ``(height, width)`` array. ``origin`` is the
    north-west corner. ``tags`` is ``{domain: {key: value}}``, ``""`` the default domain. GDAL's COG
    driver keeps only the default domain, so a file with any other domain (a planted ``OVERVIEWS``
    item) is written as a tiled, deflated GTiff with internal overviews instead: same blocks, but the
    overviews sit after the full-resolution data rather than before it."""
    if isinstance(fill, str) and fill != "gradient":
        raise ValueError(f"unknown fill {fill!r}")
    data = expected_window(width, dtype, 0, 0, height, width) if isinstance(fill, str) else fill
    profile: dict[str, Any] = {
        "width": width, "height": height, "count": 1, "dtype": dtype, "crs": crs,
        "transform": Affine(cell, 0, origin[0], 0, -cell, origin[1]), "compress": "deflate",
    }  # fmt: skip
    domains = dict(tags or {})
    plain = set(domains) <= {""}
    if plain:
        profile |= {"driver": "COG", "blocksize": blocksize, "overview_resampling": "nearest"}
        profile["overviews"] = "auto" if overviews else "none"
    else:
        profile |= {"driver": "GTiff", "tiled": True, "blockxsize": blocksize, "blockysize": blocksize}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cog.tif"
        with rasterio.open(out, "w", **profile) as ds:
            ds.write(np.asarray(data, dtype=dtype), 1)
            for domain, items in domains.items():
                ds.update_tags(ns=domain or None, **items)
            if not plain and overviews and (factors := _overview_factors(width, height, blocksize)):
                ds.build_overviews(factors, Resampling.nearest)
        content = out.read_bytes()
    if path is not None:
        Path(path).write_bytes(content)
    return content


# --- A static STAC API --------------------------------------------------------------------------

CONFORMANCE = [
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0/collections",
    "https://api.stacspec.org/v1.0.0/ogcapi-features",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
]
PROJECTION = "https://stac-extensions.github.io/projection/v1.1.0/schema.json"
EO = "https://stac-extensions.github.io/eo/v1.1.0/schema.json"
GEOJSON = "application/geo+json"


def _rfc3339(value: str | dt.datetime) -> str:
    when = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def stac_item(
    id: str,
    *,
    datetime: str | dt.datetime,
    bbox: tuple[float, float, float, float],
    epsg: int,
    assets: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """A STAC 1.0 item: geometry the bbox (lon/lat) polygon, ``proj:epsg`` with the projection extension
    (and the eo extension when an asset lists ``eo:bands``). ``stac_api`` adds collection and links."""
    west, south, east, north = bbox
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    extensions = [PROJECTION]
    if any("eo:bands" in asset for asset in assets.values()):
        extensions.append(EO)
    return {
        "type": "Feature", "stac_version": "1.0.0", "stac_extensions": extensions, "id": id,
        "geometry": {"type": "Polygon", "coordinates": [ring]}, "bbox": [west, south, east, north],
        "properties": {"datetime": _rfc3339(datetime), "proj:epsg": epsg},
        "links": [], "assets": {name: dict(asset) for name, asset in assets.items()},
    }  # fmt: skip


class _BadRequest(ValueError):
    pass


def _interval(text: str) -> tuple[dt.datetime | None, dt.datetime | None]:
    """A STAC ``datetime`` parameter: an instant, or ``a/b`` with ``..`` (or nothing) for an open end."""

    def when(part: str) -> dt.datetime | None:
        if part in ("", ".."):
            return None
        try:
            return dt.datetime.fromisoformat(_rfc3339(part))
        except ValueError as exc:
            raise _BadRequest(f"not an RFC 3339 datetime: {part!r}") from exc

    if "/" not in text:
        instant = when(text)
        if instant is None:
            raise _BadRequest("an instant cannot be open")
        return instant, instant
    first, last = text.split("/", 1)
    return when(first), when(last)


def _search_terms(method: str, query: dict[str, str], body: dict[str, Any] | None) -> dict[str, Any]:
    """GET's comma-separated strings and POST's JSON lists, as one set of terms."""
    if method == "POST":
        return dict(body or {})
    terms: dict[str, Any] = dict(query)
    for name in ("collections", "ids", "bbox"):
        if name in terms:
            terms[name] = [part for part in terms[name].split(",") if part]
    return terms


def _matches(item: dict[str, Any], terms: dict[str, Any]) -> bool:
    if "collections" in terms and item.get("collection") not in terms["collections"]:
        return False
    if "ids" in terms and item["id"] not in terms["ids"]:
        return False
    if "bbox" in terms:
        try:
            west, south, east, north = (float(value) for value in terms["bbox"])
        except (TypeError, ValueError) as exc:
            raise _BadRequest("bbox is four numbers: west, south, east, north") from exc
        i_west, i_south, i_east, i_north = item["bbox"]
        if i_west > east or i_east < west or i_south > north or i_north < south:
            return False
    if terms.get("datetime"):
        start, end = _interval(str(terms["datetime"]))
        when = dt.datetime.fromisoformat(item["properties"]["datetime"])
        if (start and when < start) or (end and when > end):
            return False
    return True


def stac_api(
    server: RangeServer,
    *,
    items: list[dict[str, Any]],
    root: str = "stac/",
    collection: str = "demo",
    endless: bool = False,
) -> str:
    """Register a static STAC API on ``server`` and return its root URL.

    Routes under ``root``: the landing page, ``collections``, ``collections/<id>``,
    ``collections/<id>/items`` and ``.../items/<item>``, and ``search`` (GET and POST: ``collections``,
    ``bbox``, ``datetime``, ``ids``, ``limit`` (default 10), paged by ``token`` behind a ``next`` link;
    a POST's next link carries method POST and the body with the token, as item-search specifies).
    ``endless``: every search page has a next link, its items renamed ``<id>~<page>`` each page."""
    root = root.strip("/") + "/"
    href = server.url
    items = [{**item, "collection": collection} for item in items]
    coll_url = href(f"{root}collections/{collection}")
    for item in items:
        item["links"] = [
            {"rel": "self", "href": f"{coll_url}/items/{item['id']}", "type": GEOJSON},
            {"rel": "root", "href": href(root), "type": "application/json"},
            {"rel": "parent", "href": coll_url, "type": "application/json"},
            {"rel": "collection", "href": coll_url, "type": "application/json"},
        ]  # fmt: skip
    server.json_routes[root] = lambda method, query, body: (200, _landing(href, root, collection))
    coll = _collection(href, root, collection, items)
    server.json_routes[f"{root}collections"] = lambda method, query, body: (
        200, {"collections": [coll], "links": [{"rel": "self", "href": href(f"{root}collections")}]},
    )  # fmt: skip
    server.json_routes[f"{root}collections/{collection}"] = lambda method, query, body: (200, coll)
    for item in items:
        path = f"{root}collections/{collection}/items/{item['id']}"
        server.json_routes[path] = lambda method, query, body, item=item: (200, item)

    def search(path: str, fixed: dict[str, Any]) -> JsonRoute:
        def route(method: str, query: dict[str, str], body: dict[str, Any] | None) -> tuple[int, Any]:
            try:
                return 200, _page(href(path), href(root), method, query, body, fixed, items, endless)
            except _BadRequest as exc:
                return 400, {"code": "BadRequest", "description": str(exc)}

        return route

    server.json_routes[f"{root}search"] = search(f"{root}search", {})
    items_path = f"{root}collections/{collection}/items"
    server.json_routes[items_path] = search(items_path, {"collections": [collection]})
    return href(root)


def _landing(href: Callable[[str], str], root: str, collection: str) -> dict[str, Any]:
    return {
        "type": "Catalog", "stac_version": "1.0.0", "id": "llmc-test-stac",
        "description": "A static STAC API served by tests/remote_server.py", "conformsTo": CONFORMANCE,
        "links": [
            {"rel": "self", "href": href(root), "type": "application/json"},
            {"rel": "root", "href": href(root), "type": "application/json"},
            {"rel": "data", "href": href(f"{root}collections"), "type": "application/json"},
            {"rel": "child", "href": href(f"{root}collections/{collection}"), "type": "application/json"},
            {"rel": "search", "href": href(f"{root}search"), "type": GEOJSON, "method": "GET"},
            {"rel": "search", "href": href(f"{root}search"), "type": GEOJSON, "method": "POST"},
        ],
    }  # fmt: skip


def _collection(
    href: Callable[[str], str], root: str, collection: str, items: list[dict[str, Any]]
) -> dict[str, Any]:
    """The collection, its extent the union of its items' (a world-wide, open one when it has none)."""
    boxes = [item["bbox"] for item in items] or [[-180, -90, 180, 90]]
    times = sorted(item["properties"]["datetime"] for item in items) or [None]
    west, south, east, north = zip(*boxes, strict=True)
    bbox = [min(west), min(south), max(east), max(north)]
    return {
        "type": "Collection", "stac_version": "1.0.0", "id": collection, "license": "proprietary",
        "description": f"The {collection} collection of a test STAC API",
        "extent": {"spatial": {"bbox": [bbox]}, "temporal": {"interval": [[times[0], times[-1]]]}},
        "links": [
            {"rel": "self", "href": href(f"{root}collections/{collection}"), "type": "application/json"},
            {"rel": "root", "href": href(root), "type": "application/json"},
            {"rel": "parent", "href": href(root), "type": "application/json"},
            {"rel": "items", "href": href(f"{root}collections/{collection}/items"), "type": GEOJSON},
        ],
    }  # fmt: skip


def _page(
    url: str,
    root_url: str,
    method: str,
    query: dict[str, str],
    body: dict[str, Any] | None,
    fixed: dict[str, Any],
    items: list[dict[str, Any]],
    endless: bool,
) -> dict[str, Any]:
    """One page of search results; the token is the offset of the page (its number when endless)."""
    terms = {**_search_terms(method, query, body), **fixed}
    try:
        limit = int(terms.get("limit", 10))
        offset = int(terms.get("token") or 0)
    except ValueError as exc:
        raise _BadRequest("limit and token are integers") from exc
    if limit < 1 or offset < 0:
        raise _BadRequest("limit is at least 1 and token is not negative")
    matched = [item for item in items if _matches(item, terms)]
    if endless:
        features = [{**item, "id": f"{item['id']}~{offset}"} for item in matched[:limit]]
        following: int | None = offset + 1
    else:
        features = matched[offset : offset + limit]
        following = offset + limit if offset + limit < len(matched) else None
    links: list[dict[str, Any]] = [{"rel": "root", "href": root_url, "type": "application/json"}]
    if following is not None:
        if method == "POST":
            links.append({
                "rel": "next", "href": url, "type": GEOJSON, "method": "POST",
                "body": {**(body or {}), "token": str(following)}, "merge": False,
            })  # fmt: skip
        else:
            next_query = urllib.parse.urlencode({**query, "token": str(following)})
            links.append({"rel": "next", "href": f"{url}?{next_query}", "type": GEOJSON, "method": "GET"})
    return {
        "type": "FeatureCollection", "features": features, "links": links,
        "numberReturned": len(features), **({} if endless else {"numberMatched": len(matched)}),
    }  # fmt: skip
