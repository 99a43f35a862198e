"""crs.info, checked against pyproj's own answers for the same definitions."""

from __future__ import annotations

from typing import Any

import pytest
from pyproj import CRS

from llmc_mcp.crs_text import MAX_CRS_CHARS, clear_cache, parse_crs
from llmc_mcp.errors import CrsError, InvalidArgument
from llmc_mcp.operations import crs
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.reflection.specs import normalize_crs, normalize_subject


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


# normalize_crs: the gate's cache keys and choice.method comparison read CRS text under the same rules.

BOUND_PROJ = "+proj=longlat +ellps=GRS80 +towgs84=1,2,3 +type=crs"


@pytest.mark.parametrize("text", ["EPSG:4326", "epsg:4326", " EPSG:4326 ", CRS.from_epsg(4326).to_wkt()])
def test_normalize_crs_names_an_exact_authority_definition_by_its_code(text: str):
    assert normalize_crs(text) == "EPSG:4326"


def test_normalize_crs_keeps_a_non_epsg_authority_and_gives_wkt2_otherwise():
    assert normalize_crs("ESRI:54009") == "ESRI:54009"
    custom = normalize_crs("+proj=moll +lon_0=10 +datum=WGS84 +units=m +type=crs")
    assert custom.startswith("PROJCRS[")
    assert CRS.from_wkt(custom).equals(CRS.from_proj4("+proj=moll +lon_0=10 +datum=WGS84 +units=m"))


def test_normalize_crs_of_a_towgs84_definition_skips_the_slow_authority_search(
    monkeypatch: pytest.MonkeyPatch,
):
    """PROJ's 100%-confidence authority search takes ~20 s on this bound CRS; a bound CRS never matches.

    Checked by refusing the search itself, not by timing the call: a wall-clock bound fails on a
    loaded machine and proves little on a fast one.
    """

    def slow_search(self: CRS, *args: Any, **kwargs: Any) -> list[Any]:
        raise AssertionError("the authority search ran on a bound CRS")

    monkeypatch.setattr(CRS, "list_authority", slow_search)
    clear_cache()
    normalized = normalize_crs(BOUND_PROJ)
    assert normalized.startswith("BOUNDCRS[")
    assert CRS.from_wkt(normalized).equals(CRS.from_user_input(BOUND_PROJ))


def test_normalize_crs_refuses_proj_init_files():
    with pytest.raises(CrsError, match="init") as caught:
        normalize_crs("+init=epsg:4326")
    assert "EPSG:4326" in caught.value.fix


def test_normalize_crs_refuses_an_over_long_definition_without_echoing_it():
    with pytest.raises(CrsError, match="characters long") as caught:
        normalize_crs("EPSG:4326" + " " * 10 + "x" * (MAX_CRS_CHARS + 1), "dst_crs")
    assert str(caught.value).startswith("dst_crs is ")
    assert len(str(caught.value)) < 1000
    assert caught.value.fix


def test_normalize_crs_refuses_a_lone_surrogate():
    with pytest.raises(CrsError, match="not valid Unicode"):
        normalize_crs("EPSG:4326\udbff")


def test_crs_choice_normalization_refuses_what_the_operations_refuse():
    for text in ("+init=epsg:4326", "x" * (MAX_CRS_CHARS + 1)):
        with pytest.raises(CrsError):
            normalize_subject("crs_datum", text)


@pytest.mark.parametrize(
    "text",
    [
        "+proj=longlat +ellps=GRS80 +nadgrids=/etc/passwd +type=crs",
        "+proj=longlat +ellps=GRS80 +geoidgrids=@../outside.gtx +type=crs",
        'GEOGCRS["x",PARAMETERFILE["Latitude and longitude difference file","/etc/passwd"]]',
    ],
)
def test_grid_files_named_by_path_are_refused_before_proj_opens_them(text: str) -> None:
    with pytest.raises(CrsError, match="grid files given by path"):
        parse_crs(text)
