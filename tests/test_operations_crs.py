"""crs.info, checked against pyproj's own answers for the same definitions."""

from __future__ import annotations

from typing import Any

import pytest
from pyproj import CRS

from llmc_mcp.errors import CrsError, InvalidArgument
from llmc_mcp.operations import crs
from llmc_mcp.operations.catalog import OperationContext


def describe(ctx: OperationContext, **args: Any) -> Any:
    return crs.info.run(ctx, crs.info.validate(args))


def test_epsg_4326_is_geographic_in_degrees_latitude_first_worldwide(ctx: OperationContext):
    result = describe(ctx, crs="EPSG:4326")
    assert (result.kind, result.units, result.epsg, result.authority) == (
        "geographic",
        "degree",
        4326,
        "EPSG:4326",
    )
    assert [a.direction for a in result.axes] == ["north", "east"]
    area = result.area_of_use
    assert (area.west, area.south, area.east, area.north) == (-180, -90, 180, 90)
    assert result.projection_method is None
    assert result.preserves == []


def test_epsg_3857_is_projected_in_metres_and_preserves_nothing_exactly(ctx: OperationContext):
    result = describe(ctx, crs="EPSG:3857")
    assert (result.kind, result.units) == ("projected", "metre")
    assert result.projection_method == CRS.from_epsg(3857).coordinate_operation.method_name
    assert result.preserves == []
    assert result.area_of_use.north == pytest.approx(CRS.from_epsg(3857).area_of_use.north)


def test_epsg_6933_ease_grid_is_equal_area(ctx: OperationContext):
    result = describe(ctx, crs="EPSG:6933")
    assert result.projection_method == "Lambert Cylindrical Equal Area"
    assert result.preserves == ["area"]
    assert (result.area_of_use.south, result.area_of_use.north) == (-86, 86)


def test_epsg_32618_utm_is_conformal_and_valid_in_its_zone(ctx: OperationContext):
    result = describe(ctx, crs="EPSG:32618")
    expected = CRS.from_epsg(32618)
    assert result.name == expected.name
    assert result.projection_method == "Transverse Mercator"
    assert result.preserves == ["conformal"]
    assert (result.area_of_use.west, result.area_of_use.east) == (-78, -72)
    assert result.datum == expected.datum.name
    assert result.ellipsoid.semi_major_m == expected.ellipsoid.semi_major_metre
    assert result.ellipsoid.inverse_flattening == pytest.approx(expected.ellipsoid.inverse_flattening)


@pytest.mark.parametrize(
    ("code", "preserves"),
    [
        ("EPSG:3035", ["area", "direction from centre"]),
        ("EPSG:5070", ["area"]),
        ("EPSG:3413", ["conformal", "direction from centre"]),
        ("EPSG:2154", ["conformal"]),
        ("EPSG:4087", ["equidistant along meridians"]),
        ("ESRI:54009", ["area"]),
        ("+proj=robin +datum=WGS84", []),
    ],
)
def test_preserves_follows_the_projection_method(ctx: OperationContext, code: str, preserves: list[str]):
    assert describe(ctx, crs=code).preserves == preserves


def test_non_epsg_authority_is_reported_without_an_epsg_code(ctx: OperationContext):
    result = describe(ctx, crs="ESRI:54009")
    assert (result.epsg, result.authority) == (None, "ESRI:54009")


def test_proj_string_without_authority_has_no_area_of_use(ctx: OperationContext):
    result = describe(ctx, crs="+proj=moll +datum=WGS84 +units=m")
    assert (result.kind, result.epsg, result.area_of_use) == ("projected", None, None)
    assert result.preserves == ["area"]


@pytest.mark.parametrize("form", ["wkt", "projjson"])
def test_wkt_and_projjson_describe_the_same_crs(ctx: OperationContext, form: str):
    source = CRS.from_epsg(6933)
    text = source.to_wkt() if form == "wkt" else source.to_json()
    result = describe(ctx, crs=text)
    assert (result.epsg, result.preserves) == (6933, ["area"])


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("EPSG:4978", "geocentric"),
        ("EPSG:5703", "vertical"),
        ("EPSG:9707", "compound"),
        ("+proj=longlat +ellps=GRS80 +towgs84=1,2,3 +type=crs", "bound"),
    ],
)
def test_kind_covers_other_crs_types(ctx: OperationContext, code: str, kind: str):
    assert describe(ctx, crs=code).kind == kind


def test_compound_crs_reports_its_horizontal_units_and_all_axes(ctx: OperationContext):
    result = describe(ctx, crs="EPSG:9707")
    assert result.units == "degree"
    assert [a.unit for a in result.axes] == ["degree", "degree", "metre"]


def test_wkt_only_on_request(ctx: OperationContext):
    assert describe(ctx, crs="EPSG:4326").wkt is None
    wkt = describe(ctx, crs="EPSG:4326", include_wkt=True).wkt
    assert CRS.from_wkt(wkt).equals(CRS.from_epsg(4326))


@pytest.mark.parametrize("text", ["EPSG:999999", "not a crs", "+proj=nonsense"])
def test_unknown_crs_is_a_crs_error_with_a_fix(ctx: OperationContext, text: str):
    with pytest.raises(CrsError, match="Unknown CRS") as caught:
        describe(ctx, crs=text)
    assert "EPSG" in caught.value.fix


def test_proj_init_files_are_refused(ctx: OperationContext):
    with pytest.raises(CrsError, match="init") as caught:
        describe(ctx, crs="+init=epsg:4326")
    assert "EPSG:4326" in caught.value.fix


def test_unknown_option_is_rejected_by_validation(ctx: OperationContext):
    with pytest.raises(InvalidArgument, match="unknown option"):
        describe(ctx, crs="EPSG:4326", verbose=True)


def test_a_huge_definition_is_refused_without_echoing_it(ctx: OperationContext):
    with pytest.raises(CrsError) as caught:
        describe(ctx, crs="x" * 1_000_000)
    assert len(str(caught.value)) < 1000


def test_an_unknown_definition_is_quoted_briefly(ctx: OperationContext):
    with pytest.raises(CrsError) as caught:
        describe(ctx, crs="y" * 5000)
    assert len(str(caught.value)) < 1000


def test_a_lone_surrogate_is_a_crs_error(ctx: OperationContext):
    with pytest.raises(CrsError, match="not valid Unicode"):
        describe(ctx, crs="EPSG:4326\udbff")
