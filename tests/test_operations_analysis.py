"""raster.calc and raster.sample, specified on rasters built here whose answers are worked out on paper.

Each test's docstring names the mistake it guards against. The last tests go through both faces
(classic tools and execute_code) with the SDK's in-process client.
"""

from __future__ import annotations

import importlib
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

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, PathRefused, Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured
from tests.rasters import NORTH_UP, write

CALC = get_operation("raster.calc")
SAMPLE = get_operation("raster.sample")
calc_module = importlib.import_module("llmc_mcp.operations.raster.calc")  # the package exports the Operation
H, W = 30, 40


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def linear() -> np.ndarray:
    """a[r, c] = 100 r + c: every cell's value says where it is."""
    rows, cols = np.mgrid[0:H, 0:W]
    return (100 * rows + cols).astype("int32")


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of 7 x 11 cells, so a 30 x 40 raster is computed in 24 windows with ragged edges."""
    monkeypatch.setattr(calc_module, "WINDOW_ROWS", 7)
    monkeypatch.setattr(calc_module, "WINDOW_COLS", 11)


# --- raster.calc ------------------------------------------------------------------------------------


def test_calc_linear_plus_constant_is_right_in_every_cell(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against windows written at the wrong offset or edges dropped: a + 2*b = 100 r + c + 20."""
    write(workspace_dir / "a.tif", linear())
    write(workspace_dir / "b.tif", np.full((H, W), 10, "uint8"))
    inputs = [{"name": "a", "path": "a.tif"}, {"name": "b", "path": "b.tif"}]
    result = call(CALC, ctx, expression="a + 2*b", inputs=inputs, dst="out/sum.tif")
    got = read(workspace_dir / "out/sum.tif")
    np.testing.assert_array_equal(got, linear() + 20)
    assert (result.valid_count, result.nodata_count) == (H * W, 0)
    assert result.output.dtypes == ["float32"] and result.output.crs.epsg == 32618
    assert result.output.transform == tuple(NORTH_UP)[:6] and result.output.compression == "DEFLATE"


def test_calc_works_in_float64_so_unsigned_differences_do_not_wrap(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against uint8 arithmetic in the stored type: 10 - 20 must be -10, not 246."""
    write(workspace_dir / "a.tif", np.full((H, W), 10, "uint8"))
    write(workspace_dir / "b.tif", np.full((H, W), 20, "uint8"))
    inputs = {"a": {"path": "a.tif"}, "b": {"path": "b.tif"}}  # the mapping form
    call(CALC, ctx, expression="a - b", inputs=inputs, dst="d.tif", dtype="int16", nodata=-32768)
    np.testing.assert_array_equal(read(workspace_dir / "d.tif"), np.full((H, W), -10))


def test_calc_of_float32_bands_works_in_float64_and_rounds_once(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against float32 bands evaluated in float32 (each step rounded to float32) once their
    values reach numexpr without a float64 copy: a = float32(3.0000002) = 3.0000002384185791015625,
    so a*a - b*b with b = 3 is 1.430511474609375e-06 + 5.684e-14 in float64, stored as the float32
    nearest, 1.4305115e-06; in float32 a*a rounds to 9.0000019 first and the result would be
    1.9073486e-06."""
    write(workspace_dir / "a.tif", np.full((H, W), 3.0000002, "float32"))
    write(workspace_dir / "b.tif", np.full((H, W), 3.0, "float32"))
    inputs = [{"name": "a", "path": "a.tif"}, {"name": "b", "path": "b.tif"}]
    call(CALC, ctx, expression="a*a - b*b", inputs=inputs, dst="square.tif")
    a = float(np.float32(3.0000002))
    exact = np.float32(a * a - 9.0)
    assert exact == np.float32(1.4305115e-06)
    assert (np.float32(3.0000002) * np.float32(3.0000002) - np.float32(9.0)) != exact
    np.testing.assert_array_equal(read(workspace_dir / "square.tif"), np.full((H, W), exact))


def _reflectance(workspace_dir: Path) -> None:
    """Sentinel-2-like bands: physical = raw * 0.0001 - 0.1; nir raw 6000 (0.5), red raw 2000 (0.1)."""
    bands = np.stack([np.full((H, W), 2000, "uint16"), np.full((H, W), 6000, "uint16")])
    write(workspace_dir / "s2.tif", bands, scales=(0.0001, 0.0001), offsets=(-0.1, -0.1))


NDVI_INPUTS = [{"name": "red", "path": "s2.tif", "band": 1}, {"name": "nir", "path": "s2.tif", "band": 2}]


def test_calc_ndvi_from_scaled_reflectance_applies_scale_and_offset(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against NDVI from stored counts: (0.5 - 0.1) / (0.5 + 0.1) = 2/3, not (6000-2000)/8000."""
    _reflectance(workspace_dir)
    result = call(CALC, ctx, expression="(nir - red) / (nir + red)", inputs=NDVI_INPUTS, dst="ndvi.tif")
    np.testing.assert_allclose(read(workspace_dir / "ndvi.tif"), 2 / 3, rtol=1e-6)
    assert result.physical is True and all(i.applied for i in result.inputs)
    assert [(i.scale, i.offset) for i in result.inputs] == [(0.0001, -0.1)] * 2
    assert "applied" in result.note and "nir = raw * 0.0001 + -0.1" in result.note


def test_calc_physical_false_uses_stored_values_and_flags_it(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a silent raw-count index: physical=False gives 0.5 here and the result says why."""
    _reflectance(workspace_dir)
    result = call(
        CALC, ctx, expression="(nir - red) / (nir + red)", inputs=NDVI_INPUTS, dst="raw.tif", physical=False
    )
    np.testing.assert_allclose(read(workspace_dir / "raw.tif"), 0.5, rtol=1e-6)
    assert result.physical is False and not any(i.applied for i in result.inputs)
    assert "not in physical units" in result.note


def test_nodata_in_any_input_is_nodata_out(
    ctx: OperationContext, workspace_dir: Path, small_windows: None
) -> None:
    """Guards against nodata values entering the arithmetic (0 + 1 = 1 looks like data) or a mask
    or NaN being ignored; and against x/0 being written as inf."""
    a = np.full((H, W), 5, "int16")
    a[2, 3] = -1  # nodata value of a
    b = np.full((H, W), 1.0, "float32")
    b[4, 5] = np.nan  # NaN in a float input
    b[6, 7] = 0.0  # a / b = inf: not a number to keep
    write(workspace_dir / "a.tif", a, nodata=-1)
    write(workspace_dir / "b.tif", b)
    inputs = [{"name": "a", "path": "a.tif"}, {"name": "b", "path": "b.tif"}]
    result = call(CALC, ctx, expression="a / b", inputs=inputs, dst="q.tif")
    got = read(workspace_dir / "q.tif")
    expected = np.full((H, W), 5.0)
    expected[2, 3] = expected[4, 5] = expected[6, 7] = np.nan
    np.testing.assert_array_equal(got, expected)
    assert result.nodata_count == 3 and result.valid_count == H * W - 3 and math.isnan(result.nodata)
    with rasterio.open(workspace_dir / "q.tif") as ds:
        assert math.isnan(ds.nodata)


def test_calc_refuses_inputs_on_different_grids_naming_align(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against cell-by-cell math on rasters whose cells are different places (one cell shifted,
    another CRS, another size): the refusal must say to align first."""
    write(workspace_dir / "a.tif", linear())
    write(workspace_dir / "shifted.tif", linear(), transform=NORTH_UP @ Affine.translation(1, 0))
    write(workspace_dir / "other_crs.tif", linear(), crs="EPSG:32617")
    write(workspace_dir / "smaller.tif", linear()[:-1])
    for other, what in (("shifted.tif", "transform"), ("other_crs.tif", "CRS"), ("smaller.tif", "size")):
        inputs = [{"name": "a", "path": "a.tif"}, {"name": "b", "path": other}]
        with pytest.raises(Refused, match="not on one grid") as caught:
            call(CALC, ctx, expression="a + b", inputs=inputs, dst="x.tif")
        assert what in caught.value.message and "raster.align" in (caught.value.fix or "")
    assert not (workspace_dir / "x.tif").exists()


FORBIDDEN = [
    "__import__('os').system('touch pwned')",
    "a.real",
    "(lambda: a)()",
    "open('pwned', 'w')",
    "foo(a)",
    "a + b",
    "a[0]",
    "a if a > 0 else 0",
    "(a > 0) and (a < 5)",
    "0 < a < 5",
    "sum(a)",
    "'text' + a",
    "sqrt",
]


@pytest.mark.parametrize("expression", FORBIDDEN)
def test_forbidden_expressions_are_refused_without_evaluation(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch, expression: str
) -> None:
    """Guards against an expression reaching numexpr (which evals its text) or Python before the
    allowlist refused it; the refusal lists what is allowed."""

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("evaluated")

    monkeypatch.setattr(calc_module.numexpr, "evaluate", never)
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument) as caught:
        call(CALC, ctx, expression=expression, inputs=[{"name": "a", "path": "a.tif"}], dst="x.tif")
    assert "Allowed: the input names (a)" in caught.value.message and "where" in caught.value.message
    assert not (workspace_dir / "pwned").exists() and not (workspace_dir / "x.tif").exists()


def test_integer_powers_of_constants_cannot_hang_the_worker(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against numexpr folding 9**9**9 in Python integers (it never finishes)."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match="cannot be evaluated"):
        call(CALC, ctx, expression="a + 9**9**9", inputs=[{"name": "a", "path": "a.tif"}], dst="x.tif")


def test_where_and_functions_compute_as_on_paper(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against the allowlist refusing what it lists: where, comparisons, & and sqrt."""
    write(workspace_dir / "a.tif", linear())
    expression = "where((a >= 100) & (a < 200), sqrt(a - 100), -1)"
    call(CALC, ctx, expression=expression, inputs=[{"name": "a", "path": "a.tif"}], dst="w.tif")
    a = linear().astype(float)
    expected = np.where((a >= 100) & (a < 200), np.sqrt(np.clip(a - 100, 0, None)), -1)
    np.testing.assert_allclose(read(workspace_dir / "w.tif"), expected, rtol=1e-6)


def test_a_result_beyond_float32_is_nodata_not_infinity(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a value finite in float64 (1e39) written to float32 as infinity and counted valid."""
    write(workspace_dir / "a.tif", linear())
    expression = "where(a < 100, a * 1e37, a)"
    call(CALC, ctx, expression=expression, inputs=[{"name": "a", "path": "a.tif"}], dst="big.tif")
    out = read(workspace_dir / "big.tif")
    a = linear().astype(float)
    overflow = (a < 100) & (a * 1e37 > np.finfo(np.float32).max)
    assert overflow.any() and not np.isinf(out).any()
    assert np.isnan(out[overflow]).all()


def test_integer_outputs_need_nodata_and_refuse_a_result_equal_to_it(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an integer output whose nodata cells cannot be told from computed zeros, and
    against a computed value silently read back as nodata."""
    write(workspace_dir / "a.tif", linear())
    inputs = [{"name": "a", "path": "a.tif"}]
    with pytest.raises(InvalidArgument, match="needs a nodata value"):
        call(CALC, ctx, expression="a > 50", inputs=inputs, dst="x.tif", dtype="uint8")
    with pytest.raises(InvalidArgument, match="computed to 0"):
        call(CALC, ctx, expression="a > 50", inputs=inputs, dst="x.tif", dtype="uint8", nodata=0)
    assert not (workspace_dir / "x.tif").exists()
    call(CALC, ctx, expression="a > 50", inputs=inputs, dst="x.tif", dtype="uint8", nodata=255)
    np.testing.assert_array_equal(read(workspace_dir / "x.tif"), (linear() > 50).astype("uint8"))


def test_an_input_nodata_cell_computing_to_the_output_nodata_is_not_a_collision(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the collision check seeing cells that are nodata anyway: a's nodata 0 gives
    a - 1 = -1, the output's nodata, but that cell is nodata in the input, so nothing collides; every
    other cell is 5 - 1 = 4."""
    a = np.full((H, W), 5, "uint8")
    a[3, 4] = 0
    write(workspace_dir / "a.tif", a, nodata=0)
    result = call(
        CALC, ctx, expression="a - 1", inputs=[{"name": "a", "path": "a.tif"}], dst="x.tif", dtype="int16",
        nodata=-1,
    )  # fmt: skip
    expected = np.full((H, W), 4, "int16")
    expected[3, 4] = -1
    np.testing.assert_array_equal(read(workspace_dir / "x.tif"), expected)
    assert (result.valid_count, result.nodata_count) == (H * W - 1, 1)


def test_calc_refuses_to_overwrite_an_input(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a write that destroys the file it reads."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match="same file as the input"):
        call(CALC, ctx, expression="a * 2", inputs=[{"name": "a", "path": "a.tif"}], dst="a.tif")


def test_calc_memory_does_not_grow_with_the_raster(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against reading whole rasters: 2048 x 2048 float32 inputs (32 MiB each as float64) in
    256 x 512 windows must peak well below one of them (the write's read-back takes 8 MiB chunks)."""
    monkeypatch.setattr(calc_module, "WINDOW_ROWS", 256)
    monkeypatch.setattr(calc_module, "WINDOW_COLS", 512)
    big = np.ones((2048, 2048), "float32")
    write(workspace_dir / "p.tif", big, block=256)
    write(workspace_dir / "q.tif", big, block=256)
    inputs = [{"name": "p", "path": "p.tif"}, {"name": "q", "path": "q.tif"}]
    tracemalloc.start()
    try:
        call(CALC, ctx, expression="p + q", inputs=inputs, dst="pq.tif")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024
    assert float(read(workspace_dir / "pq.tif").min()) == 2.0


# --- raster.sample ----------------------------------------------------------------------------------


def centre(transform: Affine, row: int, col: int) -> tuple[float, float]:
    return transform @ (col + 0.5, row + 0.5)


def test_sample_north_up_and_south_up_agree(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against hand arithmetic that assumes a negative y pixel size: the same data stored
    south-up (row 0 at the south edge, positive pixel height) must give the same value at each point."""
    data = linear()
    write(workspace_dir / "north.tif", data)
    south = Affine(10.0, 0.0, 500_000.0, 0.0, 10.0, 4_500_000.0 - 10.0 * H)
    write(workspace_dir / "south.tif", data[::-1].copy(), transform=south)
    rng = np.random.default_rng(7)
    points = [
        [500_000 + rng.uniform(0.1, 9.9) + 10 * c, 4_500_000 - rng.uniform(0.1, 9.9) - 10 * r]
        for r, c in [(0, 0), (3, 5), (29, 39), (17, 2), (0, 39), (29, 0)]
    ]
    north_result = call(SAMPLE, ctx, path="north.tif", points=points)
    south_result = call(SAMPLE, ctx, path="south.tif", points=points)
    expected = [float(data[r, c]) for r, c in [(0, 0), (3, 5), (29, 39), (17, 2), (0, 39), (29, 0)]]
    assert [p.raw[0] for p in north_result.points] == expected
    assert [p.raw[0] for p in south_result.points] == expected
    for n, s in zip(north_result.points, south_result.points, strict=True):
        assert (n.cell_x, n.cell_y) == pytest.approx((s.cell_x, s.cell_y))
        assert s.row == H - 1 - n.row and s.col == n.col


def test_point_registered_raster_gives_the_cell_whose_centre_the_point_is(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a half-cell shift added by hand for AREA_OR_POINT=Point: GDAL already reports
    the corner; the file's own tie point (the centre of cell 0, 0) must sample cell 0, 0."""
    write(workspace_dir / "point.tif", linear(), tags={"AREA_OR_POINT": "Point"})
    with rasterio.Env(GTIFF_POINT_GEO_IGNORE=True), rasterio.open(workspace_dir / "point.tif") as ds:
        as_stored = ds.transform  # origin = centre of the first cell, by the Point convention
    assert (as_stored.c, as_stored.f) == (NORTH_UP.c + 5.0, NORTH_UP.f - 5.0)
    cells = [(0, 0), (4, 9), (29, 39)]
    points = [list(as_stored @ (c, r)) for r, c in cells]
    result = call(SAMPLE, ctx, path="point.tif", points=points)
    assert [(p.row, p.col) for p in result.points] == cells
    assert [p.raw[0] for p in result.points] == [float(linear()[r, c]) for r, c in cells]
    assert [v for p in result.points for v in (p.cell_x, p.cell_y)] == pytest.approx(
        [v for p in points for v in p]
    )


def test_outside_and_nodata_points_are_none_and_scale_offset_are_applied_with_raw_beside(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a nodata value or a point off the raster reported as a number, and against
    values returned raw when the band declares a scale and offset (or physical without the raw)."""
    data = np.full((H, W), 250, "uint16")
    data[1, 1] = 0
    write(workspace_dir / "t.tif", data, nodata=0, scales=(0.02,), offsets=(200.0,))
    points = [
        list(centre(NORTH_UP, 0, 0)),
        list(centre(NORTH_UP, 1, 1)),
        [0.0, 0.0],
        [499_999.0, 4_499_999.0],
    ]
    result = call(SAMPLE, ctx, path="t.tif", points=points)
    first, on_nodata, far, just_outside = result.points
    assert (first.values, first.raw) == ([pytest.approx(205.0)], [250.0])
    assert (on_nodata.values, on_nodata.raw, on_nodata.row) == ([None], [None], 1)
    for p in (far, just_outside):
        assert (p.values, p.raw, p.row, p.col, p.cell_x) == ([None], [None], None, None, None)
    assert result.outside_count == 2 and (result.scales, result.offsets) == ([0.02], [200.0])


def test_points_in_another_crs_are_transformed(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against lon/lat points read as metres (or latitude first): cell centres given in
    EPSG:4326 (longitude first) land in their cells of a UTM raster."""
    write(workspace_dir / "utm.tif", linear())
    cells = [(0, 0), (12, 20), (29, 39)]
    to_lonlat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    points = [list(to_lonlat.transform(*centre(NORTH_UP, r, c))) for r, c in cells]
    result = call(SAMPLE, ctx, path="utm.tif", points=points, crs="EPSG:4326")
    assert [(p.row, p.col) for p in result.points] == cells
    assert [p.x for p in result.points] == [p[0] for p in points]


def test_sample_caps_the_number_of_points(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an unbounded answer: more than 100,000 points is refused, naming the split."""
    write(workspace_dir / "a.tif", linear())
    with pytest.raises(InvalidArgument, match="at most 100,000") as caught:
        call(SAMPLE, ctx, path="a.tif", points=[[0.0, 0.0]] * 100_001)
    assert "Split" in (caught.value.fix or "")


def test_many_points_are_read_block_by_block(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against one read per point: 5,000 points on a 30 x 40 raster of 16 x 16 blocks need at
    most 6 reads (one per block), and every value is still the right cell's."""
    write(workspace_dir / "a.tif", linear())
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(0, H, 5000), rng.integers(0, W, 5000)
    points = [list(centre(NORTH_UP, int(r), int(c))) for r, c in zip(rows, cols, strict=True)]
    reads = []
    original = rasterio.io.DatasetReader.read

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(kwargs.get("window"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(rasterio.io.DatasetReader, "read", counting)
    result = call(SAMPLE, ctx, path="a.tif", points=points)
    assert 1 <= len(reads) <= 6
    assert [p.raw[0] for p in result.points] == [
        float(linear()[r, c]) for r, c in zip(rows, cols, strict=True)
    ]


# --- both faces -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_tools_calc_and_sample(workspace_dir: Path) -> None:
    """Guards against the operations missing from the classic face, or nested inputs not crossing
    the worker channel (they travel as JSON)."""
    _reflectance(workspace_dir)
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        done = structured(
            await client.call_tool(
                "raster_calc",
                {"expression": "(nir - red) / (nir + red)", "inputs": NDVI_INPUTS, "dst": "ndvi.tif"},
            )
        )
        sampled = structured(
            await client.call_tool(
                "raster_sample", {"path": "ndvi.tif", "points": [list(centre(NORTH_UP, 2, 3))]}
            )
        )
        refused = await client.call_tool(
            "raster_calc", {"expression": "__import__('os')", "inputs": NDVI_INPUTS, "dst": "x.tif"}
        )
    assert done["physical"] is True and done["output"]["path"] == "ndvi.tif"
    assert sampled["points"][0]["values"][0] == pytest.approx(2 / 3, rel=1e-6)
    assert refused.is_error and "invalid_argument" in refused.content[0].text


@pytest.mark.anyio
async def test_code_mode_calc_and_sample(workspace_dir: Path) -> None:
    """Guards against the stubs' functions and the sandbox bindings disagreeing with the catalog:
    the mapping form of inputs and a sample in another CRS from agent code."""
    _reflectance(workspace_dir)
    lon, lat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True).transform(
        *centre(NORTH_UP, 5, 6)
    )
    code = (
        "out = raster.calc('(nir - red) / (nir + red)', {'red': {'path': 's2.tif', 'band': 1}, "
        "'nir': {'path': 's2.tif', 'band': 2}}, 'ndvi.tif')\n"
        f"s = raster.sample('ndvi.tif', [[{lon!r}, {lat!r}]], crs='EPSG:4326')\n"
        "[out['physical'], s['points'][0]['row'], s['points'][0]['col'], s['points'][0]['values'][0]]"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    physical, row, col, value = answer["result"]
    assert (physical, row, col) == (True, 5, 6) and value == pytest.approx(2 / 3, rel=1e-6)


def test_calc_and_sample_refuse_a_raster_whose_metadata_points_at_another_file(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an input opened without the hostile-file checks: an OVERVIEW_FILE naming
    /etc/passwd makes GDAL read it by itself, so both operations must refuse before any pixel."""
    write(workspace_dir / "a.tif", linear())
    with rasterio.open(workspace_dir / "hostile.tif", "w", **_profile(workspace_dir / "a.tif")) as ds:
        ds.write(linear()[None])
        ds.update_tags(ns="OVERVIEWS", OVERVIEW_FILE="/etc/passwd")
    inputs = [{"name": "a", "path": "a.tif"}, {"name": "h", "path": "hostile.tif"}]
    with pytest.raises(PathRefused, match="OVERVIEW_FILE"):
        call(CALC, ctx, expression="a + h", inputs=inputs, dst="x.tif")
    with pytest.raises(PathRefused, match="OVERVIEW_FILE"):
        call(SAMPLE, ctx, path="hostile.tif", points=[[500_005.0, 4_499_995.0]])
    assert not (workspace_dir / "x.tif").exists()


def _profile(path: Path) -> dict[str, Any]:
    with rasterio.open(path) as ds:
        return dict(ds.profile)


# --- raster.info: the facts calc and sample rely on -------------------------------------------------


def test_info_reports_scale_offset_unit_description_and_registration(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an agent computing with stored counts because nothing told it the band is
    scaled, or placing point-registered values half a cell off because nothing said 'Point'."""
    _reflectance(workspace_dir)
    with rasterio.open(workspace_dir / "s2.tif", "r+") as ds:
        ds.units = ("reflectance", "reflectance")
        ds.set_band_description(2, "nir")
    write(workspace_dir / "point.tif", linear(), tags={"AREA_OR_POINT": "Point"})
    scaled = call(get_operation("raster.info"), ctx, path="s2.tif")
    assert (scaled.scales, scaled.offsets) == ([0.0001, 0.0001], [-0.1, -0.1])
    assert scaled.units == ["reflectance", "reflectance"] and scaled.descriptions == [None, "nir"]
    assert scaled.registration == "Area"
    plain = call(get_operation("raster.info"), ctx, path="point.tif")
    assert (plain.scales, plain.offsets, plain.units, plain.registration) == ([1.0], [0.0], [None], "Point")


# --- raster.stats: physical values with the raw beside them -----------------------------------------


def test_stats_apply_scale_and_offset_with_the_raw_statistics_beside(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against statistics of stored counts read as physical values: raw 0..99 (each value 12
    times) with scale 0.5 and offset 10 has physical min 10, max 59.5, mean 34.75, std |0.5| * raw std,
    median 34.75; the raw figures stay beside them, and physical=False gives the raw ones alone."""
    raw = np.repeat(np.arange(100, dtype="uint16"), 12).reshape(H, W)
    write(workspace_dir / "t.tif", raw, scales=(0.5,), offsets=(10.0,))
    stats = get_operation("raster.stats")
    band = call(stats, ctx, path="t.tif", percentiles=[50, 90], histogram_bins=4).bands[0]
    assert (band.min, band.max, band.mean) == (10.0, 59.5, pytest.approx(34.75))
    assert band.std == pytest.approx(0.5 * float(raw.std()))
    assert band.percentiles == {
        "p50": pytest.approx(34.75),
        "p90": pytest.approx(10 + 0.5 * np.percentile(raw, 90)),
    }
    assert band.histogram is not None and band.histogram.edges[0] == 10.0 and band.histogram.edges[-1] == 59.5
    assert (band.scale, band.offset) == (0.5, 10.0) and band.raw is not None
    assert (band.raw.min, band.raw.max, band.raw.mean) == (0.0, 99.0, pytest.approx(49.5))
    assert band.raw.percentiles["p50"] == pytest.approx(49.5)
    result = call(stats, ctx, path="t.tif", percentiles=[50], physical=False)
    assert (result.bands[0].min, result.bands[0].max, result.bands[0].raw) == (0.0, 99.0, None)
    assert "physical=False" in result.method


def test_stats_with_a_negative_scale_swap_min_and_max_and_mirror_percentiles(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against mapping min to min and p10 to p10 through a decreasing scale: with scale -1 and
    offset 100, physical min is 100 - raw max and physical p10 is 100 - raw p90."""
    raw = np.repeat(np.arange(100, dtype="int16"), 12).reshape(H, W)
    write(workspace_dir / "n.tif", raw, scales=(-1.0,), offsets=(100.0,))
    band = call(get_operation("raster.stats"), ctx, path="n.tif", percentiles=[10]).bands[0]
    assert (band.min, band.max) == (1.0, 100.0)
    assert band.percentiles == {"p10": pytest.approx(100 - np.percentile(raw, 90))}
    assert band.raw is not None and band.raw.percentiles == {"p10": pytest.approx(np.percentile(raw, 10))}
