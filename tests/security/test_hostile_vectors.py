"""Hostile vector inputs: zone and mask files that try to make pyogrio's GDAL read or fetch what the path
policy never saw, or exhaust the process.

pyogrio ships a GDAL of its own, which the raster hardening of ``gdal_env`` does not reach; these tests
pin down that :mod:`llmc_mcp.compute.polygons` hardens it (three drivers, no network) and that every
file of a vector input passes the policy. Secrets live in a folder outside the workspace, URLs point at
a local HTTP server that records every request: a case passes only when it is refused with an error
naming the problem, no secret reaches the answer and the server saw nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import shapely
from rasterio.crs import CRS
from rasterio.transform import from_origin

from llmc_mcp.compute import polygons
from llmc_mcp.compute.polygons import (
    VECTOR_DRIVERS,
    hardened_pyogrio,
    pyogrio_registered_drivers,
    read_polygons,
)
from llmc_mcp.errors import InvalidArgument, LlmcError, PathRefused
from llmc_mcp.gdal.environment import disable_network
from llmc_mcp.operations import OperationContext
from tests.security.sink import Sink

SECRET = "LLMC-VECTOR-SECRET-4e2b"
UTM = CRS.from_epsg(32631)


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.server.shutdown()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace holding a valid secret shapefile and GeoJSON."""
    folder = tmp_path / "outside"
    folder.mkdir()
    write_vector(folder / "secret.shp", [shapely.box(0, 0, 10, 10)], name=SECRET)
    write_vector(folder / "secret.geojson", [shapely.box(0, 0, 10, 10)], name=SECRET)
    return folder


def write_vector(path: Path, geometries: list[Any], *, name: str = "zone", layer: str | None = None) -> None:
    pyogrio = hardened_pyogrio()
    driver = polygons.EXTENSIONS[path.suffix]
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(np.asarray(geometries, dtype=object)),
        [np.array([name] * len(geometries), dtype=object)],
        ["name"],
        layer=layer,
        driver=driver,
        geometry_type="Unknown",
        crs="EPSG:32631",
        append=path.exists(),
    )


def read(ctx: OperationContext, name: str, **kwargs: Any) -> polygons.Polygons:
    return read_polygons(ctx, name, argument="zones", target_crs=UTM, **kwargs)


def assert_refused(
    ctx: OperationContext, name: str, error: type[LlmcError], *words: str, **kwargs: Any
) -> LlmcError:
    with pytest.raises(error) as caught:
        read(ctx, name, **kwargs)
    text = str(caught.value) + (caught.value.fix or "")
    assert SECRET not in text
    assert str(ctx.workspace.root) not in text
    for word in words:
        assert word in text
    return caught.value


def test_pyogrio_gdal_keeps_only_the_three_vector_drivers() -> None:
    """pyogrio's own GDAL registers ~60 vector drivers (OGR VRT, WFS, OAPIF, CSV...) that gdal_env's
    deregistration, acting on rasterio's library, never touches; only three may remain."""
    assert pyogrio_registered_drivers() == VECTOR_DRIVERS
    assert set(hardened_pyogrio().list_drivers()) == VECTOR_DRIVERS


def test_pyogrio_gdal_sends_every_request_to_the_dead_proxy() -> None:
    """Config options set on rasterio's GDAL do not reach pyogrio's: without its own, a URL in a vector
    file would be fetched."""
    pyogrio = hardened_pyogrio()
    assert pyogrio.get_gdal_config_option("GDAL_HTTP_PROXY") == "http://127.0.0.1:9"
    assert pyogrio.get_gdal_config_option("PROJ_NETWORK") is False


def test_rasterio_hardening_still_works_once_pyogrio_gdal_is_loaded() -> None:
    """With two GDAL libraries mapped, deregistering rasterio's drivers must pick rasterio's, not fail
    ('expected one loaded GDAL library') or act on pyogrio's."""
    hardened_pyogrio()
    disable_network()
    assert pyogrio_registered_drivers() == VECTOR_DRIVERS


@pytest.mark.parametrize(
    "name",
    [
        "/vsicurl/http://127.0.0.1:9/zones.geojson",
        "/vsizip/zones.zip/zones.shp",
        "http://127.0.0.1:9/zones.geojson",
        "GPKG:zones.gpkg:layer",
        "../outside/secret.shp",
    ],
)
def test_vsi_prefixes_urls_and_connection_strings_are_refused_before_gdal(
    ctx: OperationContext, name: str
) -> None:
    """A name GDAL would resolve itself (a /vsi file system, a URL, a driver prefix) never reaches it."""
    assert_refused(ctx, name, PathRefused)


@pytest.mark.parametrize("name", ["zones.vrt", "zones.kml", "zones.csv", "zones.zip", "zones.tif"])
def test_formats_beyond_the_three_are_refused_naming_the_allowed_ones(
    ctx: OperationContext, workspace_dir: Path, name: str
) -> None:
    """OGR VRT, KML, CSV and archives can name other files or hide what they hold."""
    (workspace_dir / name).write_text("x")
    assert_refused(ctx, name, PathRefused, "GeoPackage (.gpkg)", "GeoJSON", "Shapefile (.shp)")


def test_a_dbf_linked_out_of_the_workspace_is_refused(
    ctx: OperationContext, workspace_dir: Path, outside: Path
) -> None:
    """The shapefile's attributes (zone names) would be read from a file the policy never saw."""
    write_vector(workspace_dir / "zones.shp", [shapely.box(0, 0, 10, 10)])
    (workspace_dir / "zones.dbf").unlink()
    (workspace_dir / "zones.dbf").symlink_to(outside / "secret.dbf")
    assert_refused(ctx, "zones.shp", PathRefused, "zones.dbf", field="name")


def test_a_sidecar_that_is_a_folder_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """A sidecar must be a regular file; a folder named like one hides what GDAL would do with it."""
    write_vector(workspace_dir / "zones.shp", [shapely.box(0, 0, 10, 10)])
    (workspace_dir / "zones.cpg").unlink()
    (workspace_dir / "zones.cpg").mkdir()
    assert_refused(ctx, "zones.shp", PathRefused, "zones.cpg")


def test_every_file_of_a_shapefile_is_reported_as_part_of_the_input(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """The .shx, .dbf, .prj and .cpg are read with the .shp; they are named so that nothing is hidden."""
    write_vector(workspace_dir / "zones.shp", [shapely.box(0, 0, 10, 10)])
    polygons = read(ctx, "zones.shp")
    assert set(polygons.files) == {f"zones.{ext}" for ext in ("shp", "shx", "dbf", "prj", "cpg")}


def test_an_ogr_vrt_renamed_geojson_is_not_followed(
    ctx: OperationContext, workspace_dir: Path, outside: Path
) -> None:
    """An OGR VRT names any file (or URL) as its source; renamed .geojson it must not be opened as one."""
    (workspace_dir / "zones.geojson").write_text(
        f'<OGRVRTDataSource><OGRVRTLayer name="secret"><SrcDataSource>{outside / "secret.shp"}'
        "</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
    )
    assert_refused(ctx, "zones.geojson", InvalidArgument, "not a vector file")


def test_a_geojson_whose_crs_links_to_a_url_fetches_nothing(
    ctx: OperationContext, workspace_dir: Path, sink: Sink
) -> None:
    """GeoJSON 2008 allowed a 'link' CRS: a URL GDAL could fetch to learn the CRS."""
    document = {
        "type": "FeatureCollection",
        "crs": {"type": "link", "properties": {"href": sink.url("crs.wkt"), "type": "ogcwkt"}},
        "features": [
            {"type": "Feature", "properties": {"name": sink.url("attr")},
             "geometry": json.loads(shapely.to_geojson(shapely.box(0, 0, 10, 10)))},
        ],
    }  # fmt: skip
    (workspace_dir / "zones.geojson").write_text(json.dumps(document))
    polygons = read(ctx, "zones.geojson", field="name")
    assert polygons.values == [sink.url("attr")]  # an attribute that looks like a URL is only text
    assert sink.requests == []


def test_a_geojson_whose_crs_names_a_file_outside_does_not_read_it(
    ctx: OperationContext, workspace_dir: Path, outside: Path
) -> None:
    """A named CRS is parsed by PROJ/GDAL's SetFromUserInput, which can read a file by its path; the CRS
    in that file (Web Mercator here) must not become the zones' CRS."""
    (outside / "crs.wkt").write_text(rasterio.crs.CRS.from_epsg(3857).to_wkt())
    document = {
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": str(outside / "crs.wkt")}},
        "features": [
            {"type": "Feature", "properties": {},
             "geometry": json.loads(shapely.to_geojson(shapely.box(0, 0, 1, 1)))},
        ],
    }  # fmt: skip
    (workspace_dir / "zones.geojson").write_text(json.dumps(document))
    # GDAL cannot parse the name without the file, so it falls back to GeoJSON's default CRS.
    assert read(ctx, "zones.geojson").source_crs == "EPSG:4326"


def test_a_file_holding_only_a_url_is_not_fetched(
    ctx: OperationContext, workspace_dir: Path, sink: Sink
) -> None:
    """The GeoJSON driver fetches a URL given as its name; given as the file's content it must not."""
    (workspace_dir / "zones.geojson").write_text(sink.url("zones.geojson"))
    assert_refused(ctx, "zones.geojson", InvalidArgument, "not a vector file")
    assert sink.requests == []


def test_a_geopackage_renamed_geojson_is_refused(ctx: OperationContext, workspace_dir: Path) -> None:
    """The extension promises one format and GDAL picks another by content: say so rather than guess."""
    write_vector(workspace_dir / "real.gpkg", [shapely.box(0, 0, 10, 10)])
    (workspace_dir / "real.gpkg").rename(workspace_dir / "zones.geojson")
    assert_refused(ctx, "zones.geojson", PathRefused, "GPKG")


def test_a_geopackage_with_a_view_over_an_outside_file_does_not_read_it(
    ctx: OperationContext, workspace_dir: Path, outside: Path
) -> None:
    """SQLite's VirtualOGR module (GDAL's) opens any file named in a table's definition; a GeoPackage
    carrying one in its schema must not hand the secret shapefile's rows to the agent."""
    import sqlite3

    path = workspace_dir / "zones.gpkg"
    write_vector(path, [shapely.box(0, 0, 10, 10)], layer="zones")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA writable_schema=ON")
        db.execute(
            "INSERT INTO sqlite_master(type, name, tbl_name, rootpage, sql) VALUES "
            "('table', 'leak', 'leak', 0, ?)",
            (f"CREATE VIRTUAL TABLE leak USING VirtualOGR('{outside / 'secret.shp'}')",),
        )
        db.execute(
            "INSERT INTO gpkg_contents(table_name, data_type, identifier, srs_id) "
            "VALUES ('leak', 'features', 'leak', 32631)"
        )
        db.execute("INSERT INTO gpkg_geometry_columns VALUES ('leak', 'GEOMETRY', 'POLYGON', 32631, 0, 0)")
    assert_refused(ctx, "zones.gpkg", InvalidArgument, "VirtualOGR", layer="leak", field="name")


def test_a_raster_renamed_gpkg_is_not_a_vector(ctx: OperationContext, workspace_dir: Path) -> None:
    """A GeoTIFF is not zones; the error says which formats are."""
    with rasterio.open(
        workspace_dir / "zones.gpkg", "w", driver="GTiff", width=4, height=4, count=1, dtype="uint8",
        crs="EPSG:32631", transform=from_origin(0, 4, 1, 1),
    ) as dst:  # fmt: skip
        dst.write(np.ones((1, 4, 4), dtype="uint8"))
    assert_refused(ctx, "zones.gpkg", InvalidArgument, "not a vector file", "GeoPackage")


def test_garbage_named_geojson_is_not_a_vector(ctx: OperationContext, workspace_dir: Path) -> None:
    """Broken input is an error naming the file and the formats, not a crash or an empty result."""
    (workspace_dir / "zones.geojson").write_bytes(b"\x00\x01{not json")
    assert_refused(ctx, "zones.geojson", InvalidArgument, "zones.geojson", "not a vector file")


def test_the_number_of_features_is_capped(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of millions of features would exhaust the worker; it is refused once one more than the cap
    is read (the cap is lowered here so the fixture stays small)."""
    monkeypatch.setattr(polygons, "MAX_FEATURES", 100)
    write_vector(workspace_dir / "zones.gpkg", [shapely.box(i, 0, i + 1, 1) for i in range(101)])
    assert_refused(ctx, "zones.gpkg", InvalidArgument, "more than 100 features", "raster of zone ids")


def test_the_number_of_vertices_is_capped(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One feature can carry millions of vertices; the total is bounded whatever the feature count."""
    monkeypatch.setattr(polygons, "MAX_VERTICES", 50)
    circle = shapely.Point(0, 0).buffer(10, quad_segs=16)  # 65 vertices
    write_vector(workspace_dir / "zones.gpkg", [circle])
    assert_refused(ctx, "zones.gpkg", InvalidArgument, "65 vertices", "Simplify")


# --------------------------------------------------------------------------- through a worker


def _utm_raster(path: Path) -> None:
    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "uint8",
               "crs": "EPSG:32631", "transform": from_origin(0, 8, 1, 1)}  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.ones((1, 8, 8), dtype="uint8"))


@pytest.mark.anyio
async def test_a_worker_hardens_pyogrio_gdal_too(workspace_dir: Path, outside: Path, sink: Sink) -> None:
    """The worker is where agent code runs, and it loads pyogrio's GDAL only when zones are first read:
    there too an OGR VRT renamed .geojson must find no VRT driver, and a 'link' CRS no network."""
    from mcp import Client

    from llmc_mcp.config import Settings
    from llmc_mcp.server.app import build_server
    from tests.mcp_helpers import structured

    _utm_raster(workspace_dir / "v.tif")
    (workspace_dir / "vrt.geojson").write_text(
        f'<OGRVRTDataSource><OGRVRTLayer name="secret"><SrcDataSource>{outside / "secret.shp"}'
        "</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
    )
    document = {
        "type": "FeatureCollection",
        "crs": {"type": "link", "properties": {"href": sink.url("crs.wkt"), "type": "ogcwkt"}},
        "features": [
            {"type": "Feature", "properties": {},
             "geometry": json.loads(shapely.to_geojson(shapely.box(0, 0, 4, 4)))},
        ],
    }  # fmt: skip
    (workspace_dir / "link.geojson").write_text(json.dumps(document))
    code = (
        "out = []\n"
        "for name in ['vrt.geojson', 'link.geojson']:\n"
        "    try:\n"
        "        out.append(raster.zonal_stats('v.tif', name, stats=['count'])['results'][0]['stats'])\n"
        "    except ApiError as e:\n"
        "        out.append(e.type + ': ' + e.message)\n"
        "out"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=120, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    refused, linked = answer["result"]
    assert refused.startswith("invalid_argument") and "not a vector file" in refused
    assert SECRET not in json.dumps(answer)
    # The link is ignored (GeoJSON's default CRS, EPSG:4326): the zone lies far from this UTM raster,
    # and zones that all miss it are refused.
    assert linked.startswith("refused: zones: no polygon") and "from EPSG:4326" in linked
    assert sink.requests == []


def test_a_ring_geos_cannot_read_is_refused_naming_the_feature(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """GDAL reads rings GEOS refuses (two points); the error names the feature instead of a GEOS
    exception escaping."""
    square = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}
    two_points = {"type": "Polygon", "coordinates": [[[0, 0], [10, 0]]]}
    document = {
        "type": "FeatureCollection",
        "features": [{"type": "Feature", "properties": {}, "geometry": g} for g in (square, two_points)],
    }
    (workspace_dir / "zones.geojson").write_text(json.dumps(document))
    assert_refused(ctx, "zones.geojson", InvalidArgument, "feature 1 has a geometry GEOS cannot read")
