"""raster.reclassify and raster.clip, specified on rasters built here whose answers are worked out on paper.

Each test's docstring names the mistake it guards against. The last tests go through both faces
(classic tools and execute_code) with the SDK's in-process client.
"""

from __future__ import annotations

import importlib
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from pyproj import Transformer

from llmc_mcp.compute.output import data_kind
from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured
from tests.rasters import NORTH_UP, write

RECLASSIFY = get_operation("raster.reclassify")
CLIP = get_operation("raster.clip")
reclassify_module = importlib.import_module("llmc_mcp.operations.raster.reclassify")
clip_cells_module = importlib.import_module("llmc_mcp.operations.raster.clip_cells")
SOUTH_UP = Affine(10.0, 0.0, 500_000.0, 0.0, 10.0, 4_499_700.0)
"""The same 40 x 30 footprint as NORTH_UP, rows stored from the south: row r is NORTH_UP's row 29 - r."""
H, W = 30, 40
METRE = Affine(1.0, 0.0, 500_000.0, 0.0, -1.0, 4_500_010.0)
"""A 10 x 10 grid of 1 m cells, for polygons whose cells are counted by hand."""


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def linear() -> np.ndarray:
    """a[r, c] = 100 r + c: every cell's value says where it is."""
    rows, cols = np.mgrid[0:H, 0:W]
    return (100 * rows + cols).astype("int32")


def write_polygons(path: Path, rings: list[list[tuple[float, float]]], crs: str = "EPSG:32618") -> Path:
    """A GeoJSON of one polygon feature per ring, in ``crs`` (named in the file's crs member)."""
    features = [
        {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [ring]}}
        for ring in rings
    ]
    urn = "urn:ogc:def:crs:" + crs.replace(":", "::")
    path.write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "crs": {"type": "name", "properties": {"name": urn}},
                "features": features,
            }
        )
    )
    return path


DIAMOND = [
    (500_005.0, 4_500_002.4),
    (500_007.6, 4_500_005.0),
    (500_005.0, 4_500_007.6),
    (500_002.4, 4_500_005.0),
]
"""|x - 5| + |y - 5| <= 2.6 on METRE's grid (coordinates relative to its corner at (500000, 4500000))."""


def diamond_cells(all_touched: bool) -> np.ndarray:
    """The cells of METRE's grid inside DIAMOND, on paper.

    Centre rule: the centre (c + 0.5, 10 - r - 0.5) has |dx| + |dy| <= 2.6: the 4 cells at (0.5, 0.5) and
    the 8 at (0.5, 1.5) from the centre, 12. Touched: the cell's nearest point to (5, 5) is within 2.6,
    i.e. its distances kx + ky (whole cells) <= 2: 6 per quadrant, 24. None lies on the boundary.
    """
    rows, cols = np.mgrid[0:10, 0:10]
    if not all_touched:
        return np.abs(cols + 0.5 - 5) + np.abs(10 - rows - 0.5 - 5) <= 2.6
    kx = np.maximum(np.maximum(cols - 5, 4 - cols), 0)
    ky = np.maximum(np.maximum((9 - rows) - 5, 4 - (9 - rows)), 0)
    return kx + ky < 2.6


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of 7 x 11 (reclassify) and 3 x 4 (clip) cells, so edges are ragged and seams many."""
    monkeypatch.setattr(reclassify_module, "WINDOW_ROWS", 7)
    monkeypatch.setattr(reclassify_module, "WINDOW_COLS", 11)
    monkeypatch.setattr(clip_cells_module, "WINDOW_ROWS", 3)
    monkeypatch.setattr(clip_cells_module, "WINDOW_COLS", 4)


def read_out(path: Path) -> tuple[np.ndarray, np.ndarray, Affine, dict[str, Any]]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.read_masks(1) > 0, ds.transform, ds.profile


# --- raster.reclassify -------------------------------------------------------------------------------


RANGES = [{"min": 0, "max": 1020, "to": 1}, {"min": 1020, "max": 2500, "to": 2}, {"min": 2500, "to": 3}]


def test_reclassify_linear_raster_by_ranges_counts_every_class(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against windows written at the wrong offset and wrong counts. On a = 100 r + c (30 x 40):
    [0, 1020) holds rows 0-9 and row 10's columns 0-19: 420 cells; [1020, 2500) row 10's columns 20-39
    and rows 11-24: 580; [2500, inf) rows 25-29: 200."""
    write(workspace_dir / "a.tif", linear())
    result = call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=RANGES)
    rows, cols = np.mgrid[0:H, 0:W]
    values = 100 * rows + cols
    expected = np.where(values < 1020, 1, np.where(values < 2500, 2, 3))
    out, _, transform, profile = read_out(workspace_dir / "c.tif")
    assert np.array_equal(out, expected) and transform == NORTH_UP
    assert [r.cells for r in result.rules] == [420, 580, 200]
    assert [(c.value, c.cells) for c in result.classes] == [(1, 420), (2, 580), (3, 200)]
    assert (result.unmatched_cells, result.nodata_cells, profile["dtype"]) == (0, 0, "uint8")


def test_a_value_on_a_boundary_goes_to_the_range_it_starts(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against closed ranges or a lost boundary: with [0, 10) -> 1 and [10, 20) -> 2, 10.0 is 2,
    9.999 is 1, 20.0 matches neither range but the value rule 20 -> 3, and 19.999 is 2."""
    write(workspace_dir / "f.tif", np.array([[9.999, 10.0, 19.999, 20.0]], dtype="float64"))
    rules = [{"min": 0, "max": 10, "to": 1}, {"min": 10, "max": 20, "to": 2}, {"value": 20, "to": 3}]
    call(RECLASSIFY, ctx, src="f.tif", dst="c.tif", rules=rules)
    assert read_out(workspace_dir / "c.tif")[0].tolist() == [[1, 2, 2, 3]]


def test_source_nodata_stays_nodata_and_unmatched_cells_are_nodata_without_default(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against nodata cells reclassified as values (-9999 falls in an open range) and unmatched
    cells keeping their old value: with default null both are nodata (255), with default 9 only
    the source nodata cell is."""
    write(workspace_dir / "n.tif", np.array([[-9999, 1, 5, 7]], dtype="int16"), nodata=-9999)
    rules = [{"max": 3, "to": 1}, {"value": 5, "to": 2}]
    without = call(RECLASSIFY, ctx, src="n.tif", dst="a.tif", rules=rules)
    with_default = call(RECLASSIFY, ctx, src="n.tif", dst="b.tif", rules=rules, default=9)
    assert read_out(workspace_dir / "a.tif")[0].tolist() == [[255, 1, 2, 255]]
    assert read_out(workspace_dir / "b.tif")[0].tolist() == [[255, 1, 2, 9]]
    assert (without.nodata, without.unmatched_cells, without.nodata_cells) == (255, 1, 2)
    assert [(c.value, c.cells) for c in with_default.classes] == [(1, 1), (2, 1), (9, 1)]
    assert with_default.nodata_cells == 1


@pytest.mark.parametrize(
    ("rules", "named"),
    [
        ([{"min": 0, "max": 10, "to": 1}, {"min": 5, "max": 15, "to": 2}], ("rule 0", "rule 1")),
        ([{"min": 0, "max": 10, "to": 1}, {"value": 5, "to": 2}], ("rule 0", "rule 1")),
        ([{"value": 5, "to": 1}, {"value": 7, "to": 2}, {"value": 5, "to": 3}], ("rule 0", "rule 2")),
        ([{"min": 20, "to": 1}, {"max": 0, "to": 2}, {"min": -5, "max": 30, "to": 3}], ("rule 1", "rule 2")),
    ],
)
def test_overlapping_rules_are_refused_naming_both(
    ctx: OperationContext, workspace_dir: Path, rules: list[dict[str, Any]], named: tuple[str, str]
) -> None:
    """Guards against the first (or last) of two matching rules silently winning."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match="overlap") as caught:
        call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=rules)
    assert all(name in str(caught.value) for name in named)
    assert not (workspace_dir / "c.tif").exists()


def test_touching_ranges_and_a_value_at_a_range_end_do_not_overlap(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an overlap check that treats max as inclusive: [0, 10), [10, 20) and the value
    20 are disjoint, and so are (-inf, 0) and [0, inf)."""
    write(workspace_dir / "a.tif", linear())
    rules = [{"min": 0, "max": 10, "to": 1}, {"min": 10, "max": 20, "to": 2}, {"value": 20, "to": 3}]
    assert [r.cells for r in call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=rules).rules] == [
        10,
        10,
        1,
    ]
    both = [{"max": 0, "to": 1}, {"min": 0, "to": 2}]
    assert [r.cells for r in call(RECLASSIFY, ctx, src="a.tif", dst="d.tif", rules=both).rules] == [0, H * W]


@pytest.mark.parametrize(
    ("rule", "trap"),
    [
        ({"value": math.nan, "to": 1}, "value=nan"),
        ({"min": 0, "max": math.inf, "to": 1}, "max=inf"),
        ({"min": 5, "max": 5, "to": 1}, "empty range"),
        ({"value": 3, "min": 0, "to": 1}, "both value and min/max"),
        ({"to": 1}, "match every cell"),
    ],
)
def test_malformed_rules_are_refused(
    ctx: OperationContext, workspace_dir: Path, rule: dict[str, Any], trap: str
) -> None:
    """Guards against NaN (which no cell equals), infinite or empty bounds, or a catch-all rule being
    accepted and matching nothing or everything."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match=trap):
        call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=[rule])


def test_output_dtype_is_the_smallest_holding_the_classes_and_a_free_nodata(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against classes wrapping around in a too-small type, or nodata equal to a class: classes
    0..254 fit uint8 with nodata 255; 0..255 leave uint8 no free value (uint16, 65535); a class of -1
    needs int16 (nodata -32768)."""
    write(workspace_dir / "a.tif", linear())
    cases = [
        (list(range(255)), "uint8", 255),
        (list(range(256)), "uint16", 65535),
        ([-1, 4], "int16", -32768),
    ]
    for i, (classes, dtype, nodata) in enumerate(cases):
        rules = [{"value": float(k), "to": k} for k in classes]
        result = call(RECLASSIFY, ctx, src="a.tif", dst=f"c{i}.tif", rules=rules)
        assert (result.dtype, result.nodata) == (dtype, nodata)
        assert read_out(workspace_dir / f"c{i}.tif")[3]["nodata"] == nodata


def test_a_class_the_requested_dtype_cannot_hold_is_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against class 300 written into uint8 (it would read as 44), and a nodata that is a class."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match="cannot hold the classes"):
        call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=[{"value": 1, "to": 300}], dtype="uint8")
    with pytest.raises(InvalidArgument, match="nodata=1 is also a class"):
        call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=[{"value": 1, "to": 1}], nodata=1)


def test_rules_see_physical_values_when_scale_and_offset_are_declared(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against rules written in physical units matched against stored counts: raw 0, 100, 200,
    300 with scale 0.01 and offset -1 are -1, 0, 1, 2, so (-inf, 0) / [0, 1.5) / [1.5, inf) give 1, 2,
    2, 3; physical=False sees 0, 100, 200, 300: 2, 3, 3, 3."""
    raw = np.array([[0, 100, 200, 300]], dtype="uint16")
    write(workspace_dir / "s.tif", raw, scales=(0.01,), offsets=(-1.0,))
    rules = [{"max": 0, "to": 1}, {"min": 0, "max": 1.5, "to": 2}, {"min": 1.5, "to": 3}]
    physical = call(RECLASSIFY, ctx, src="s.tif", dst="p.tif", rules=rules)
    stored = call(RECLASSIFY, ctx, src="s.tif", dst="r.tif", rules=rules, physical=False)
    assert read_out(workspace_dir / "p.tif")[0].tolist() == [[1, 2, 2, 3]]
    assert read_out(workspace_dir / "r.tif")[0].tolist() == [[2, 3, 3, 3]]
    assert (physical.physical, physical.scale, physical.offset, stored.physical) == (True, 0.01, -1.0, False)
    assert "physical=False" in stored.note


def test_the_band_asked_for_is_reclassified_and_a_missing_one_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against band 1 read whatever band says: band 2 holds 5 everywhere, band 1 holds 0, so
    the rule 5 -> 1 matches all 4 cells of band 2; band 3 does not exist."""
    write(workspace_dir / "b.tif", np.stack([np.zeros((2, 2), "uint8"), np.full((2, 2), 5, "uint8")]))
    result = call(RECLASSIFY, ctx, src="b.tif", dst="c.tif", rules=[{"value": 5, "to": 1}], band=2)
    assert (result.band, result.classes[0].cells, result.unmatched_cells) == (2, 4, 0)
    with pytest.raises(InvalidArgument, match="band 3 does not exist"):
        call(RECLASSIFY, ctx, src="b.tif", dst="d.tif", rules=[{"value": 5, "to": 1}], band=3)


def test_the_output_is_declared_categorical(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a class raster that a later reprojection's gate takes for integer measurements:
    the band is tagged LAYER_TYPE=thematic, so data_kind says 'categorical'."""
    write(workspace_dir / "a.tif", linear())
    call(RECLASSIFY, ctx, src="a.tif", dst="c.tif", rules=RANGES)
    with rasterio.open(workspace_dir / "c.tif") as ds:
        assert data_kind(ds) == "categorical"


# --- raster.clip: boxes ------------------------------------------------------------------------------


def test_clip_by_a_box_in_the_raster_crs_gives_exact_cells(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against an off-by-one window or a resampled grid: the box (500020, 4499800, 500100,
    4499950) on cells of 10 m from (500000, 4500000) is columns 2-9 and rows 5-19, 8 x 15 cells, with
    origin (500020, 4499950), each holding its source value 100 r + c."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    result = call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=(500_020, 4_499_800, 500_100, 4_499_950))
    out, valid, transform, _ = read_out(workspace_dir / "c.tif")
    assert transform == Affine(10.0, 0.0, 500_020.0, 0.0, -10.0, 4_499_950.0)
    assert np.array_equal(out, linear()[5:20, 2:10]) and valid.all()
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (
        2,
        5,
        8,
        15,
    )
    assert (result.inside_cells, result.outside_cells) == (120, 0)


def test_a_box_edge_inside_a_cell_keeps_the_cell_only_if_its_centre_is_inside_or_all_touched(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against snapping a box outward (or inward) regardless of all_touched: edges at 2.7 and
    10.3 columns and 4.7 and 20.3 rows keep columns 3-9 and rows 5-19 by centre, and columns 2-10 and
    rows 4-20 when every touched cell counts."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    box = (500_027, 4_499_797, 500_103, 4_499_953)
    call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=box)
    call(CLIP, ctx, src="a.tif", dst="t.tif", bounds=box, all_touched=True)
    centre, _, centre_transform, _ = read_out(workspace_dir / "c.tif")
    touched, _, touched_transform, _ = read_out(workspace_dir / "t.tif")
    assert centre_transform == Affine(10.0, 0.0, 500_030.0, 0.0, -10.0, 4_499_950.0)
    assert np.array_equal(centre, linear()[5:20, 3:10])
    assert touched_transform == Affine(10.0, 0.0, 500_020.0, 0.0, -10.0, 4_499_960.0)
    assert np.array_equal(touched, linear()[4:21, 2:11])


def test_crop_false_keeps_the_grid_and_sets_outside_cells_to_nodata(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against outside cells left with their values (or zeros): the whole 40 x 30 grid stays,
    the 120 cells of rows 5-19 and columns 2-9 keep their values, the 1080 others are -1 (nodata)."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    result = call(
        CLIP, ctx, src="a.tif", dst="c.tif", bounds=(500_020, 4_499_800, 500_100, 4_499_950), crop=False
    )
    out, _, transform, profile = read_out(workspace_dir / "c.tif")
    expected = np.full((H, W), -1, dtype="int32")
    expected[5:20, 2:10] = linear()[5:20, 2:10]
    assert transform == NORTH_UP and np.array_equal(out, expected) and profile["nodata"] == -1
    assert (result.inside_cells, result.outside_cells, result.outside_as) == (120, 1080, "nodata")


def test_a_float_source_without_nodata_gets_nan_outside(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against outside cells written as 0.0, a valid measurement: a float raster without nodata
    gets NaN (as raster.reproject does)."""
    write(workspace_dir / "f.tif", linear().astype("float32"))
    result = call(
        CLIP, ctx, src="f.tif", dst="c.tif", bounds=(500_020, 4_499_800, 500_100, 4_499_950), crop=False
    )
    out = read_out(workspace_dir / "c.tif")[0]
    assert math.isnan(result.nodata) and int(np.isnan(out).sum()) == 1080
    assert np.array_equal(out[5:20, 2:10], linear()[5:20, 2:10].astype("float32"))


def test_clip_by_a_box_in_degrees_over_a_utm_raster(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a lon/lat box used as metres, or only its corners transformed. The box is built
    from UTM points inside the raster; its bounding box in UTM is found here from 2001 points along
    each edge, and the output must be the cells whose centres fall in it."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    to_lonlat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    west, south = to_lonlat.transform(500_063.0, 4_499_764.0)
    east, north = to_lonlat.transform(500_287.0, 4_499_912.0)
    t = np.linspace(0.0, 1.0, 2001)
    lons = np.concatenate(
        [west + (east - west) * t, np.full_like(t, east), east - (east - west) * t, np.full_like(t, west)]
    )
    lats = np.concatenate(
        [
            np.full_like(t, south),
            south + (north - south) * t,
            np.full_like(t, north),
            north - (north - south) * t,
        ]
    )
    xs, ys = Transformer.from_crs("EPSG:4326", "EPSG:32618", always_xy=True).transform(lons, lats)
    first_col = math.ceil((xs.min() - 500_000) / 10 - 0.5)
    end_col = math.floor((xs.max() - 500_000) / 10 - 0.5) + 1
    first_row = math.ceil((4_500_000 - ys.max()) / 10 - 0.5)
    end_row = math.floor((4_500_000 - ys.min()) / 10 - 0.5) + 1
    result = call(
        CLIP, ctx, src="a.tif", dst="c.tif", bounds=(west, south, east, north), bounds_crs="EPSG:4326"
    )
    out, _, transform, _ = read_out(workspace_dir / "c.tif")
    assert transform == NORTH_UP @ Affine.translation(first_col, first_row)
    assert np.array_equal(out, linear()[first_row:end_row, first_col:end_col])
    assert result.bounds is not None and result.bounds.left == pytest.approx(xs.min(), abs=1e-3)
    assert result.transformation is not None and "bounds:" in result.transformation


def test_a_south_up_raster_is_clipped_to_the_same_place(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against window arithmetic that assumes a negative pixel height: the same footprint stored
    south-up gives the north-up result's rows in reverse, with origin at the box's bottom (4499800)."""
    write(workspace_dir / "n.tif", linear(), nodata=-1)
    write(workspace_dir / "s.tif", linear()[::-1].copy(), transform=SOUTH_UP, nodata=-1)
    box = (500_020, 4_499_800, 500_100, 4_499_950)
    call(CLIP, ctx, src="n.tif", dst="cn.tif", bounds=box)
    call(CLIP, ctx, src="s.tif", dst="cs.tif", bounds=box)
    north, _, _, _ = read_out(workspace_dir / "cn.tif")
    south, _, transform, _ = read_out(workspace_dir / "cs.tif")
    assert transform == Affine(10.0, 0.0, 500_020.0, 0.0, 10.0, 4_499_800.0)
    assert np.array_equal(south[::-1], north)


def test_a_box_outside_the_raster_is_refused_with_its_bounds_in_both_crs(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an empty (or whole-raster) output for a box that misses: the refusal gives the
    raster's extent in its CRS and in the box's, so the agent can see the mistake (swapped lat/lon)."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    with pytest.raises(InvalidArgument, match="miss the raster") as caught:
        call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=(40.6, -75.0, 40.7, -74.9), bounds_crs="EPSG:4326")
    message = str(caught.value)
    assert "(500000, 4499700, 500400, 4500000) in its own CRS" in message
    assert "(-75, 40.648" in message and "in EPSG:4326" in message
    assert not (workspace_dir / "c.tif").exists()


def test_a_box_on_a_rotated_grid_is_rasterized_in_the_grid_s_own_pixel_space(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a box turned into rows and columns as if the grid were north-up. Here x = 500000 +
    10 row and y = 4500000 - 10 col, so the box (500020, 4499800, 500100, 4499950) holds rows 2-9 and
    columns 5-19; the output origin is pixel (5, 2): (500020, 4499950), the same rotation kept."""
    turned = Affine(0.0, 10.0, 500_000.0, -10.0, 0.0, 4_500_000.0)
    write(workspace_dir / "r.tif", linear(), transform=turned, nodata=-1)
    result = call(CLIP, ctx, src="r.tif", dst="c.tif", bounds=(500_020, 4_499_800, 500_100, 4_499_950))
    out, valid, transform, _ = read_out(workspace_dir / "c.tif")
    assert transform == Affine(0.0, 10.0, 500_020.0, -10.0, 0.0, 4_499_950.0)
    assert np.array_equal(out, linear()[2:10, 5:20]) and valid.all()
    assert (result.inside_cells, result.outside_cells) == (120, 0)


def test_a_source_with_alpha_and_no_nodata_gets_alpha_0_outside(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against outside cells of an RGBA image left opaque (or black and opaque): the alpha band
    is 0 there, colour 0, and inside cells keep colour and alpha."""
    rgba = np.stack([np.full((H, W), v, dtype="uint8") for v in (10, 20, 30, 255)])
    with rasterio.open(
        workspace_dir / "i.tif", "w", driver="GTiff", width=W, height=H, count=4, dtype="uint8",
        crs="EPSG:32618", transform=NORTH_UP, photometric="RGB", alpha="YES",
    ) as ds:  # fmt: skip
        ds.write(rgba)
    result = call(
        CLIP, ctx, src="i.tif", dst="c.tif", bounds=(500_020, 4_499_800, 500_100, 4_499_950), crop=False
    )
    with rasterio.open(workspace_dir / "c.tif") as ds:
        out = ds.read()
        interp = ds.colorinterp
    inside = np.zeros((H, W), dtype=bool)
    inside[5:20, 2:10] = True
    assert result.outside_as == "alpha" and interp[3].name == "alpha"
    assert np.array_equal(out[:, inside], rgba[:, inside]) and not out[:, ~inside].any()


def test_a_box_between_cell_centres_is_refused_unless_all_touched(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an empty raster written for a box smaller than a cell: (500001, 4499991,
    500004, 4499994) lies inside cell (0, 0) without its centre (500005, 4499995); refused naming
    all_touched, with which it keeps exactly that cell."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    box = (500_001, 4_499_991, 500_004, 4_499_994)
    with pytest.raises(InvalidArgument, match="all_touched=True"):
        call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=box)
    result = call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=box, all_touched=True)
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (
        0,
        0,
        1,
        1,
    )
    assert read_out(workspace_dir / "c.tif")[0].tolist() == [[0]]


def test_a_sidecar_overriding_the_georeferencing_is_refused_or_followed_by_choice(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against cutting (or copying a grid) from a geotransform an .aux.xml silently replaced: the
    file says 10 m cells at (500000, 4500000), the sidecar 10 m at (600000, 4500000). Both operations
    refuse by default; with georeferencing='file' the box in the file's coordinates gives columns 2-9
    and rows 5-19; with 'sidecar' the same box misses the raster."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    moved = ", ".join(f"{v:.1f}" for v in (600_000.0, 10.0, 0.0, 4_500_000.0, 0.0, -10.0))
    (workspace_dir / "a.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{moved}</GeoTransform></PAMDataset>"
    )
    box = (500_020, 4_499_800, 500_100, 4_499_950)
    with pytest.raises(Refused, match=r"aux\.xml"):
        call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=box)
    with pytest.raises(Refused, match=r"aux\.xml"):
        call(RECLASSIFY, ctx, src="a.tif", dst="r.tif", rules=RANGES)
    call(CLIP, ctx, src="a.tif", dst="c.tif", bounds=box, georeferencing="file")
    out, _, transform, _ = read_out(workspace_dir / "c.tif")
    assert transform == Affine(10.0, 0.0, 500_020.0, 0.0, -10.0, 4_499_950.0)
    assert np.array_equal(out, linear()[5:20, 2:10])
    with pytest.raises(InvalidArgument, match="miss the raster"):
        call(CLIP, ctx, src="a.tif", dst="s.tif", bounds=box, georeferencing="sidecar")


# --- raster.clip: polygons ---------------------------------------------------------------------------


def test_all_touched_adds_exactly_the_predicted_cells_of_a_diamond(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against a different inside rule, or masks shifted at window seams: 12 cells by centre, 24
    touched (diamond_cells works both out), on the whole grid (crop=False), outside masked (an integer
    source without nodata gets an internal mask, not zeros)."""
    rows, cols = np.mgrid[0:10, 0:10]
    write(workspace_dir / "g.tif", (10 * rows + cols + 1).astype("int16"), transform=METRE, block=16)
    write_polygons(workspace_dir / "m.geojson", [[*DIAMOND, DIAMOND[0]]])
    centre = call(CLIP, ctx, src="g.tif", dst="c.tif", mask="m.geojson", crop=False)
    touched = call(CLIP, ctx, src="g.tif", dst="t.tif", mask="m.geojson", crop=False, all_touched=True)
    assert np.array_equal(read_out(workspace_dir / "c.tif")[1], diamond_cells(False))
    assert np.array_equal(read_out(workspace_dir / "t.tif")[1], diamond_cells(True))
    assert (centre.inside_cells, touched.inside_cells, centre.outside_as) == (12, 24, "internal_mask")
    assert centre.transformation is None and centre.polygons == 1
    out = read_out(workspace_dir / "t.tif")[0]
    assert np.array_equal(out[diamond_cells(True)], (10 * rows + cols + 1)[diamond_cells(True)])


def test_crop_to_polygons_is_the_smallest_window_of_inside_cells(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against cropping to the polygon's envelope instead of its cells: the diamond's envelope
    touches columns 2-7, but only columns 3-6 hold a centre (4 x 4 at (3, 3)); touched, 6 x 6 at (2, 2)."""
    write(workspace_dir / "g.tif", np.ones((10, 10), dtype="uint8"), transform=METRE)
    write_polygons(workspace_dir / "m.geojson", [[*DIAMOND, DIAMOND[0]]])
    centre = call(CLIP, ctx, src="g.tif", dst="c.tif", mask="m.geojson")
    touched = call(CLIP, ctx, src="g.tif", dst="t.tif", mask="m.geojson", all_touched=True)
    assert (centre.window.col_off, centre.window.row_off, centre.window.width, centre.window.height) == (
        3,
        3,
        4,
        4,
    )
    assert (touched.window.col_off, touched.window.row_off, touched.window.width, touched.window.height) == (
        2,
        2,
        6,
        6,
    )
    assert read_out(workspace_dir / "c.tif")[2] == METRE @ Affine.translation(3, 3)


def test_bounds_and_mask_together_keep_the_cells_inside_both(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against one of the two being ignored: the diamond cut by the box x <= 500005 keeps the 6
    of its 12 centre cells in columns 3 and 4 (rows 3-6), a 2 x 4 window."""
    write(workspace_dir / "g.tif", np.ones((10, 10), dtype="uint8"), transform=METRE)
    write_polygons(workspace_dir / "m.geojson", [[*DIAMOND, DIAMOND[0]]])
    result = call(
        CLIP, ctx, src="g.tif", dst="c.tif", mask="m.geojson", bounds=(500_000, 4_500_000, 500_005, 4_500_010)
    )
    assert (result.window.col_off, result.window.row_off, result.window.width, result.window.height) == (
        3,
        3,
        2,
        4,
    )
    assert result.inside_cells == 6 and result.polygons == 1
    assert read_out(workspace_dir / "c.tif")[1].tolist() == [
        [False, True],
        [True, True],
        [True, True],
        [False, True],
    ]


def test_mask_polygons_in_another_crs_are_transformed(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against polygon coordinates used in the wrong CRS: the diamond written in EPSG:4326 (its
    vertices transformed; edges bend by far less than a millimetre over 3 m) selects the same 12 cells."""
    write(workspace_dir / "g.tif", np.ones((10, 10), dtype="uint8"), transform=METRE)
    to_lonlat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    ring = [to_lonlat.transform(x, y) for x, y in [*DIAMOND, DIAMOND[0]]]
    write_polygons(workspace_dir / "m.geojson", [ring], crs="EPSG:4326")
    result = call(CLIP, ctx, src="g.tif", dst="c.tif", mask="m.geojson", crop=False)
    assert np.array_equal(read_out(workspace_dir / "c.tif")[1], diamond_cells(False))
    assert result.transformation is not None and "mask: layer 'm' from EPSG:4326" in result.transformation


# --- memory ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["reclassify", "clip"])
def test_memory_does_not_grow_with_the_raster(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """Guards against reading the whole raster or rasterizing the whole mask at once: a 2048 x 2048
    float32 raster (16 MiB, 32 MiB as float64) in 256 x 512 windows must peak well below it. The clip
    keeps the grid (crop=False) under a polygon covering its left half: 2048 x 1024 cells inside."""
    for module in (reclassify_module, clip_cells_module):
        monkeypatch.setattr(module, "WINDOW_ROWS", 256)
        monkeypatch.setattr(module, "WINDOW_COLS", 512)
    write(workspace_dir / "big.tif", np.ones((2048, 2048), "float32"), block=256)
    half = [
        (500_000.0, 4_479_520.0),
        (510_240.0, 4_479_520.0),
        (510_240.0, 4_500_000.0),
        (500_000.0, 4_500_000.0),
    ]
    write_polygons(workspace_dir / "half.geojson", [[*half, half[0]]])
    tracemalloc.start()
    try:
        if operation == "reclassify":
            result = call(RECLASSIFY, ctx, src="big.tif", dst="out.tif", rules=[{"value": 1, "to": 1}])
            counted = result.classes[0].cells
        else:
            result = call(CLIP, ctx, src="big.tif", dst="out.tif", mask="half.geojson", crop=False)
            counted = result.inside_cells
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024
    assert counted == (2048 * 2048 if operation == "reclassify" else 2048 * 1024)


# --- both faces --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_tools_reclassify_and_clip(workspace_dir: Path) -> None:
    """Guards against the operations missing from the classic face, or rules (nested models) not
    crossing the worker channel as JSON."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        classes = structured(
            await client.call_tool("raster_reclassify", {"src": "a.tif", "dst": "c.tif", "rules": RANGES})
        )
        clipped = structured(
            await client.call_tool(
                "raster_clip",
                {"src": "c.tif", "dst": "k.tif", "bounds": [500_020, 4_499_800, 500_100, 4_499_950]},
            )
        )
        refused = await client.call_tool("raster_clip", {"src": "a.tif", "dst": "x.tif"})
    assert [c["cells"] for c in classes["classes"]] == [420, 580, 200]
    assert (clipped["window"]["width"], clipped["window"]["height"], clipped["nodata"]) == (8, 15, 255)
    assert refused.is_error and "Neither bounds nor mask" in refused.content[0].text


@pytest.mark.anyio
async def test_code_mode_reclassify_and_clip(workspace_dir: Path) -> None:
    """Guards against the stubs and sandbox bindings disagreeing with the catalog: the mapping form of
    rules and a box in degrees from agent code."""
    write(workspace_dir / "a.tif", linear(), nodata=-1)
    to_lonlat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    west, south = to_lonlat.transform(500_001.0, 4_499_701.0)
    east, north = to_lonlat.transform(500_399.0, 4_499_999.0)
    code = (
        "r = raster.reclassify('a.tif', 'c.tif', {'0': 7, '101': 8})\n"
        f"k = raster.clip('c.tif', 'k.tif', bounds=[{west!r}, {south!r}, {east!r}, {north!r}], "
        "bounds_crs='EPSG:4326')\n"
        "[[c['value'], c['cells']] for c in r['classes']] + [r['unmatched_cells'], k['window']['width']]"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    assert answer["result"] == [[7, 1], [8, 1], H * W - 2, W]
