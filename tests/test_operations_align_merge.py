"""raster.align and raster.merge, specified on rasters built here whose answers are worked out on paper.

Each test's docstring names the mistake it guards against. The gate tests drive the real gate (a
store, issued hints, persisted justifications); the last tests go through both faces of a real
server (classic tools, and execute_code in code mode).
"""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.reflection.gate import Gate, ReflectionRequired
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, structured

ALIGN = get_operation("raster.align")
MERGE = get_operation("raster.merge")
REPROJECT = get_operation("raster.reproject")
UTM = "EPSG:32618"
ORIGIN = (500_000.0, 4_500_000.0)


def grid(cell: float, col: float = 0, row: float = 0) -> Affine:
    """North-up, ``cell`` metres, its top-left corner ``col``/``row`` cells of 10 m from ORIGIN."""
    return Affine(cell, 0.0, ORIGIN[0] + 10 * col, 0.0, -cell, ORIGIN[1] - 10 * row)


def write(
    path: Path,
    data: np.ndarray,
    transform: Affine,
    *,
    crs: str = UTM,
    nodata: float | None = None,
    colormap: bool = False,
) -> Path:
    data = data if data.ndim == 3 else data[None]
    count, height, width = data.shape
    profile = {
        "driver": "GTiff", "width": width, "height": height, "count": count, "dtype": data.dtype.name,
        "crs": crs, "transform": transform, "nodata": nodata, "tiled": True, "blockxsize": 16,
        "blockysize": 16,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)
        if colormap:
            ds.write_colormap(1, {i: (20 * i, 255 - 20 * i, 0, 255) for i in range(10)})
    return path


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read(1)


def halves(workspace: Path, dtype: str = "int16", nodata: float | None = -1) -> None:
    """a.tif: 1 over columns 0-9; b.tif: 3 over columns 5-14 (10 m cells, 4 rows): they share 5-9."""
    write(workspace / "a.tif", np.full((4, 10), 1, dtype), grid(10), nodata=nodata)
    write(workspace / "b.tif", np.full((4, 10), 3, dtype), grid(10, col=5), nodata=nodata)


@pytest.fixture
def gate(workspace_dir: Path) -> Gate:
    return Gate(
        JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="persist"
    )


def asked(gate: Gate, op: Any, ctx: OperationContext, **args: Any) -> list[tuple[str, dict[str, Any]]]:
    validated = op.validate(args)
    return [(h.domain, h.prompt_args) for h in gate.check(op, validated, facts=op.check(ctx, validated))]


def justify(gate: Gate, op: Any, ctx: OperationContext, **args: Any) -> None:
    validated = op.validate(args)
    for hint in gate.check(op, validated, facts=op.check(ctx, validated)):
        gate.persist(hint.hash, hint.domain, justification_for(hint.model_dump()))


# --- raster.align -----------------------------------------------------------------------------------


def test_align_onto_a_finer_grid_keeps_a_constant_exactly_and_takes_likes_transform(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a grid recomputed from bounds and a resolution (float drift of the origin, a
    row more or less) instead of copied: the output must be like's grid bit for bit, and a constant
    7.25 resampled bilinearly is 7.25 in every cell, to the last bit."""
    write(workspace_dir / "src.tif", np.full((10, 10), 7.25, "float32"), grid(10))
    like_transform = Affine(2.5, 0.0, ORIGIN[0] + 10.0000001, 0.0, -2.5, ORIGIN[1] - 5.0)
    write(workspace_dir / "like.tif", np.zeros((30, 32), "uint8"), like_transform)
    call(ALIGN, ctx, src="src.tif", like="like.tif", dst="out.tif", resampling="bilinear")
    with rasterio.open(workspace_dir / "out.tif") as out, rasterio.open(workspace_dir / "like.tif") as like:
        assert tuple(out.transform) == tuple(like.transform)
        assert (out.width, out.height, out.crs) == (like.width, like.height, like.crs)
        values = out.read(1)
    assert values.dtype == np.float32 and (values == np.float32(7.25)).all()


def test_align_with_nearest_keeps_category_codes_cell_for_cell(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against new values in a categorical raster: on a grid of half the cell size, output
    cell (r, c) is source cell (r // 2, c // 2), code for code, and the colour table comes along."""
    codes = np.array([[1, 5, 9, 5], [9, 1, 1, 5], [5, 5, 9, 9], [1, 9, 5, 1]], "uint8")
    write(workspace_dir / "lc.tif", codes, grid(10), colormap=True)
    write(workspace_dir / "fine.tif", np.zeros((8, 8), "uint8"), grid(5))
    call(ALIGN, ctx, src="lc.tif", like="fine.tif", dst="lc_fine.tif")
    assert (read(workspace_dir / "lc_fine.tif") == np.kron(codes, np.ones((2, 2), "uint8"))).all()
    with rasterio.open(workspace_dir / "lc_fine.tif") as out:
        assert out.colormap(1)[5] == (100, 155, 0, 255)


def test_align_into_another_crs_lands_on_likes_grid(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against align being reproject with a suggested grid: a geographic source aligned to a
    UTM raster has exactly the UTM raster's CRS, transform and size."""
    geographic = Affine(0.001, 0, -75.01, 0, -0.001, 40.66)
    write(workspace_dir / "geo.tif", np.full((20, 20), 2.0, "float32"), geographic, crs="EPSG:4326")
    write(
        workspace_dir / "utm.tif", np.zeros((12, 9), "float32"), Affine(30, 0, 499_500.0, 0, -30, 4_500_100.0)
    )
    info = call(ALIGN, ctx, src="geo.tif", like="utm.tif", dst="geo_utm.tif")
    with rasterio.open(workspace_dir / "geo_utm.tif") as out:
        assert out.crs == rasterio.crs.CRS.from_epsg(32618)
        assert tuple(out.transform)[:6] == (30.0, 0.0, 499_500.0, 0.0, -30.0, 4_500_100.0)
    assert (info.width, info.height) == (9, 12)


def test_align_leaves_likes_cells_outside_the_source_as_nodata(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against silent zeros: like's grid reaches 40 m past the source's east edge; those four
    columns of 10 m are NaN (float data without nodata gets NaN, as raster.reproject does)."""
    write(workspace_dir / "src.tif", np.full((4, 6), 5.0, "float32"), grid(10))
    write(workspace_dir / "like.tif", np.zeros((4, 10), "uint8"), grid(10))
    call(ALIGN, ctx, src="src.tif", like="like.tif", dst="out.tif")
    values = read(workspace_dir / "out.tif")
    assert (values[:, :6] == 5).all() and np.isnan(values[:, 6:]).all()


def test_align_refuses_to_write_over_like(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against destroying the reference grid: dst naming like would replace it."""
    write(workspace_dir / "src.tif", np.ones((4, 4), "float32"), grid(10))
    write(workspace_dir / "like.tif", np.ones((4, 4), "float32"), grid(5))
    with pytest.raises(InvalidArgument, match="same file as like"):
        call(ALIGN, ctx, src="src.tif", like="like.tif", dst="like.tif")


def sidecar(path: Path, transform: Affine) -> None:
    """An .aux.xml whose geotransform overrides the file's own (GDAL would follow it silently)."""
    gt = ", ".join(f"{v:.1f}" for v in transform.to_gdal())
    Path(f"{path}.aux.xml").write_text(f"<PAMDataset><GeoTransform>{gt}</GeoTransform></PAMDataset>")


def test_align_follows_neither_side_of_an_overriding_sidecar_unless_told(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against aligning onto a grid GDAL took from like's .aux.xml without saying so: refused
    by default; with georeferencing='file' the output has the file's own 5 m grid."""
    write(workspace_dir / "src.tif", np.full((4, 4), 2.0, "float32"), grid(10))
    write(workspace_dir / "like.tif", np.zeros((8, 8), "float32"), grid(5))
    sidecar(workspace_dir / "like.tif", grid(20, col=100))
    with pytest.raises(Refused, match=r"aux\.xml"):
        call(ALIGN, ctx, src="src.tif", like="like.tif", dst="a.tif")
    info = call(ALIGN, ctx, src="src.tif", like="like.tif", dst="a.tif", georeferencing="file")
    assert tuple(info.transform) == tuple(grid(5))[:6]


def test_merge_refuses_a_source_whose_sidecar_overrides_its_georeferencing(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against placing a tile where its .aux.xml says without saying so: the file and the
    sidecar put b 1 km apart, so the mosaic refuses until told which to follow."""
    halves(workspace_dir)
    sidecar(workspace_dir / "b.tif", grid(10, col=100))
    with pytest.raises(Refused, match=r"aux\.xml"):
        call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif")
    assert call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", georeferencing="file").output.width == 15


def test_align_asks_resampling_per_data_kind(gate: Gate, ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against one justification unlocking every kind of data: bilinear justified for a DEM
    must still be asked for land cover, as raster.reproject asks."""
    write(workspace_dir / "dem.tif", np.ones((4, 4), "float32"), grid(10))
    write(workspace_dir / "lc.tif", np.ones((4, 4), "uint8"), grid(10), colormap=True)
    write(workspace_dir / "like.tif", np.ones((8, 8), "uint8"), grid(5))
    justify(gate, ALIGN, ctx, src="dem.tif", like="like.tif", dst="a.tif", resampling="bilinear")
    assert asked(gate, ALIGN, ctx, src="dem.tif", like="like.tif", dst="a.tif", resampling="bilinear") == []
    assert asked(gate, ALIGN, ctx, src="lc.tif", like="like.tif", dst="b.tif", resampling="bilinear") == [
        ("resampling", {"method": "bilinear", "data": "categorical", "purpose": "warping"})
    ]


def test_align_asks_for_likes_crs_only_when_it_changes(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a CRS change slipping through align when raster.reproject would ask for it, and
    against asking for a non-choice: on src's own CRS nothing about the CRS is decided."""
    write(workspace_dir / "src.tif", np.ones((4, 4), "float32"), grid(10))
    write(workspace_dir / "same.tif", np.ones((8, 8), "float32"), grid(5))
    geographic = Affine(0.0001, 0, -75.0, 0, -0.0001, 40.65)
    write(workspace_dir / "other.tif", np.ones((8, 8), "float32"), geographic, crs="EPSG:4326")
    same = asked(gate, ALIGN, ctx, src="src.tif", like="same.tif", dst="a.tif")
    other = asked(gate, ALIGN, ctx, src="src.tif", like="other.tif", dst="b.tif")
    assert [domain for domain, _ in same] == ["resampling"]
    assert ("crs_datum", {"dst_crs": "EPSG:4326"}) in other


def test_a_target_crs_justified_for_reproject_unlocks_align_into_it(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against two records for one choice: landing in EPSG:4326 is the same decision whether
    raster.reproject or raster.align makes it, so it is justified once."""
    write(workspace_dir / "src.tif", np.ones((4, 4), "float32"), grid(10))
    write(workspace_dir / "geo.tif", np.ones((8, 8), "float32"), Affine(0.0001, 0, -75.0, 0, -0.0001, 40.65),
          crs="EPSG:4326")  # fmt: skip
    justify(gate, REPROJECT, ctx, src="src.tif", dst="r.tif", dst_crs="epsg:4326")
    assert asked(gate, ALIGN, ctx, src="src.tif", like="geo.tif", dst="a.tif") == []


# --- raster.merge: values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "left", "overlap", "right"),
    [("first", 1, 1, 3), ("last", 1, 3, 3), ("min", 1, 1, 3), ("max", 1, 3, 3), ("mean", 1, 2, 3),
     ("sum", 1, 4, 3), ("count", 1, 2, 1)],
)  # fmt: skip
def test_merge_two_half_overlapping_constants(
    ctx: OperationContext, workspace_dir: Path, method: str, left: float, overlap: float, right: float
) -> None:
    """Guards against a method combining the wrong cells: a (1, columns 0-9) and b (3, columns 5-14)
    give `left` on 0-4 where only a has data, `right` on 10-14, and the method's value on 5-9."""
    halves(workspace_dir)
    result = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method=method)
    values = read(workspace_dir / "m.tif")
    assert values.shape == (4, 15)
    assert (
        (values[:, :5] == left).all()
        and (values[:, 5:10] == overlap).all()
        and (values[:, 10:] == right).all()
    )
    assert result.overlap_cells == 20


def test_merge_reports_what_each_source_gave(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against contributions that cannot be checked: with first, a gives its 40 cells and b
    only the 20 outside the overlap; both have 40 valid cells and 20 cells overlap."""
    halves(workspace_dir)
    result = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif")
    assert [(s.footprint_cells, s.valid_cells, s.used_cells, s.resampled) for s in result.sources] == [
        (40, 40, 40, False),
        (40, 40, 20, False),
    ]


@pytest.mark.parametrize(("method", "expected"), [("first", 3), ("mean", 3), ("count", 1), ("sum", 3)])
def test_nodata_in_one_source_takes_no_part(
    ctx: OperationContext, workspace_dir: Path, method: str, expected: float
) -> None:
    """Guards against nodata counted as a value: where a is nodata inside the overlap, the cell is b's
    3 alone (first does not keep a's nodata, mean is not (nodata + 3) / 2, count is 1)."""
    a = np.full((4, 10), 1, "int16")
    a[:, 5:10] = -1
    write(workspace_dir / "a.tif", a, grid(10), nodata=-1)
    write(workspace_dir / "b.tif", np.full((4, 10), 3, "int16"), grid(10, col=5), nodata=-1)
    result = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method=method)
    assert (read(workspace_dir / "m.tif")[:, 5:10] == expected).all()
    assert result.overlap_cells == 0


def test_sum_of_no_valid_value_is_nodata_and_count_is_zero(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a gap between tiles written as a sum of 0 (a real value): columns 10-14, covered
    by no source, are NaN in the sum and 0 in the count."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1, "int16"), grid(10), nodata=-1)
    write(workspace_dir / "b.tif", np.full((4, 5), 3, "int16"), grid(10, col=15), nodata=-1)
    summed = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="s.tif", method="sum")
    call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="c.tif", method="count")
    sums, counts = read(workspace_dir / "s.tif"), read(workspace_dir / "c.tif")
    assert np.isnan(sums[:, 10:15]).all() and (sums[:, :10] == 1).all() and (sums[:, 15:] == 3).all()
    assert (counts[:, 10:15] == 0).all() and summed.nodata is not None and math.isnan(summed.nodata)


def test_integer_sources_without_nodata_leave_gaps_masked_not_zero(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against silent zeros: uint8 tiles without nodata and a gap between them; the gap's
    cells have no value (mask 0), the tiles' cells keep theirs."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1, "uint8"), grid(10))
    write(workspace_dir / "b.tif", np.full((4, 5), 3, "uint8"), grid(10, col=15))
    call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif")
    with rasterio.open(workspace_dir / "m.tif") as out:
        mask = out.read_masks(1)
        assert out.nodata is None and (mask[:, 10:15] == 0).all() and (mask[:, :10] == 255).all()


def test_merge_of_mixed_integer_types_keeps_every_value(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against casting to the first source's type: uint8 200 and int16 -300 mosaic into int16
    (numpy's common type), both values intact."""
    write(workspace_dir / "a.tif", np.full((4, 10), 200, "uint8"), grid(10), nodata=0)
    write(workspace_dir / "b.tif", np.full((4, 10), -300, "int16"), grid(10, col=10), nodata=0)
    result = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif")
    values = read(workspace_dir / "m.tif")
    assert result.output.dtypes == ["int16"]
    assert (values[:, :10] == 200).all() and (values[:, 10:] == -300).all()


def test_a_computed_value_equal_to_the_given_nodata_is_refused(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against valid cells that read as nodata: the overlap's mean is 2, and nodata=2 would
    turn it into holes, so the write fails and nothing is left under dst."""
    halves(workspace_dir)
    with pytest.raises(InvalidArgument, match="nodata"):
        call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="mean", nodata=2)
    assert not (workspace_dir / "m.tif").exists()


def test_count_refuses_a_nodata_value(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against an option silently ignored: a count has no nodata (0 means no source)."""
    halves(workspace_dir)
    with pytest.raises(InvalidArgument, match="count"):
        call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="count", nodata=0)


def test_merge_bounds_cut_the_mosaic_on_the_given_corner(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against bounds ignored or shifted: bounds over columns 2-7 of the union give a 6-column
    mosaic with its corner at column 2; with last, columns 2-4 are a's 1 and 5-7 (overlap) b's 3."""
    halves(workspace_dir)
    left, top = ORIGIN[0] + 20, ORIGIN[1]
    call(
        MERGE,
        ctx,
        sources=["a.tif", "b.tif"],
        dst="m.tif",
        method="last",
        bounds=(left, top - 40, left + 60, top),
    )
    with rasterio.open(workspace_dir / "m.tif") as out:
        assert tuple(out.transform)[:6] == (10.0, 0.0, left, 0.0, -10.0, top)
        assert out.read(1).tolist() == [[1, 1, 1, 3, 3, 3]] * 4


def test_merge_refuses_sources_on_different_crss(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a mosaic that reprojects behind the agent's back: a CRS and a resampling choice
    per source would be made unasked, so it refuses and names raster.align."""
    halves(workspace_dir)
    write(workspace_dir / "geo.tif", np.full((4, 4), 3, "int16"), Affine(0.001, 0, -75, 0, -0.001, 40.6),
          crs="EPSG:4326", nodata=-1)  # fmt: skip
    with pytest.raises(Refused, match="different CRSs") as refused:
        call(MERGE, ctx, sources=["a.tif", "geo.tif"], dst="m.tif")
    assert "raster.align" in refused.value.fix


def test_merge_refuses_sources_whose_nodata_values_differ(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against inheriting one source's nodata: b's valid 0 would read as nodata if a's 0 were
    the output's; the agent must name a value."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1, "int16"), grid(10), nodata=0)
    write(workspace_dir / "b.tif", np.zeros((4, 10), "int16"), grid(10, col=5), nodata=-1)
    with pytest.raises(InvalidArgument, match="different nodata"):
        call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif")
    call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="last", nodata=-9)
    assert (read(workspace_dir / "m.tif")[:, 5:] == 0).all()


def test_a_source_off_the_lattice_is_resampled_onto_it(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against a source 3 m off the lattice pasted as if aligned: b covers x 53-153 m, so it is
    warped with nearest: output cells 5-14 (centres 55-145 m) are b's, cell 15 (centre 155 m) is
    outside every source and stays nodata."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1, "int16"), grid(10), nodata=-1)
    write(workspace_dir / "b.tif", np.full((4, 10), 3, "int16"), grid(10, col=5.3), nodata=-1)
    result = call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="last")
    values = read(workspace_dir / "m.tif")
    assert values.shape == (4, 16)
    assert (values[:, :5] == 1).all() and (values[:, 5:15] == 3).all() and (values[:, 15] == -1).all()
    assert [s.resampled for s in result.sources] == [False, True]


def test_merge_memory_does_not_grow_with_the_raster(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against reading whole sources: two 2000x2000 sources (a 48 MB float64 mean) are
    mosaicked with under 24 MB of Python allocations at peak."""
    side = 2000
    write(workspace_dir / "a.tif", np.full((side, side), 1, "int16"), grid(10), nodata=-1)
    write(workspace_dir / "b.tif", np.full((side, side), 3, "int16"), grid(10, col=side // 2), nodata=-1)
    tracemalloc.start()
    try:
        call(MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="mean")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, peak


# --- raster.merge: the gate -------------------------------------------------------------------------


def test_overlapping_sources_ask_how_to_combine_them(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against an unjustified aggregation: with overlapping footprints the merge raises
    ReflectionRequired for the aggregation domain, scoped by method and data kind."""
    halves(workspace_dir)
    args = MERGE.validate({"sources": ["a.tif", "b.tif"], "dst": "m.tif", "method": "first"})
    with pytest.raises(ReflectionRequired) as missing:
        gate.require(MERGE, args, MERGE.check(ctx, args))
    assert [(h.domain, h.prompt_args) for h in missing.value.hints] == [
        ("aggregation", {"method": "first", "data": "integer"})
    ]


def test_sources_that_do_not_overlap_ask_nothing(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against making an agent justify a non-choice: tiles that share no cell combine nothing,
    so no method (not even mean) is asked about, and sources on one lattice resample nothing."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1, "int16"), grid(10), nodata=-1)
    write(workspace_dir / "b.tif", np.full((4, 10), 3, "int16"), grid(10, col=10), nodata=-1)
    assert asked(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="mean") == []


def test_overlap_outside_the_bounds_asks_nothing(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against asking about cells that are not written: a and b overlap on columns 5-9, but
    bounds keep columns 0-4, where a alone has data."""
    halves(workspace_dir)
    bounds = (ORIGIN[0], ORIGIN[1] - 40, ORIGIN[0] + 50, ORIGIN[1])
    assert asked(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="max", bounds=bounds) == []


def test_a_justified_aggregation_unlocks_exactly_its_method_and_data_kind(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a justification that unlocks more than it argued: mean on integer data is
    unlocked; max on the same data, and mean on continuous data, are still asked."""
    halves(workspace_dir)
    write(workspace_dir / "fa.tif", np.full((4, 10), 1, "float32"), grid(10))
    write(workspace_dir / "fb.tif", np.full((4, 10), 3, "float32"), grid(10, col=5))
    justify(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="mean")
    assert asked(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="mean") == []
    assert asked(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", method="max") == [
        ("aggregation", {"method": "max", "data": "integer"})
    ]
    assert asked(gate, MERGE, ctx, sources=["fa.tif", "fb.tif"], dst="m.tif", method="mean") == [
        ("aggregation", {"method": "mean", "data": "continuous"})
    ]


def test_a_source_off_the_lattice_also_asks_for_the_resampling(
    gate: Gate, ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a warp inside a mosaic escaping the gate that raster.reproject's faces."""
    write(workspace_dir / "a.tif", np.full((4, 10), 1.0, "float32"), grid(10))
    write(workspace_dir / "b.tif", np.full((4, 10), 3.0, "float32"), grid(7, col=20))
    assert asked(gate, MERGE, ctx, sources=["a.tif", "b.tif"], dst="m.tif", resampling="bilinear") == [
        ("resampling", {"method": "bilinear", "data": "continuous", "purpose": "warping"})
    ]


# --- both faces -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_tools_merge_and_align_through_the_gate(workspace_dir: Path) -> None:
    """Guards against the operations missing from the classic face or its gate: each call is refused
    with its hints, the justifications are persisted with persist_justification, and the retry writes
    the predicted values."""
    halves(workspace_dir)
    write(workspace_dir / "fine.tif", np.zeros((8, 30), "uint8"), grid(5))
    calls = [
        ("raster_merge", {"sources": ["a.tif", "b.tif"], "dst": "m.tif", "method": "mean"}),
        ("raster_align", {"src": "m.tif", "like": "fine.tif", "dst": "m_fine.tif"}),
    ]
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        for tool, arguments in calls:
            miss = await client.call_tool(tool, arguments)
            assert miss.is_error
            for hint in structured(miss)["reflection_required"]:
                answer = {
                    "hash": hint["hash"],
                    "domain": hint["domain"],
                    "justification": justification_for(hint),
                }
                assert not (await client.call_tool("persist_justification", answer)).is_error
            assert not (await client.call_tool(tool, arguments)).is_error
    assert (read(workspace_dir / "m.tif")[:, 5:10] == 2).all()
    assert (read(workspace_dir / "m_fine.tif")[:, 10:20] == 2).all()


@pytest.mark.anyio
async def test_code_mode_merge_and_align_through_the_gate(workspace_dir: Path) -> None:
    """Guards against the stubs' functions and sandbox bindings disagreeing with the catalog: agent
    code gets the aggregation hint, persists it with reflection.persist and reruns."""
    halves(workspace_dir)
    write(workspace_dir / "fine.tif", np.zeros((8, 30), "uint8"), grid(5))
    merge = "raster.merge(['a.tif', 'b.tif'], 'm.tif', method='sum')"
    align = "raster.align('m.tif', 'fine.tif', 'm_fine.tif')"
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        for code in (merge, align):
            miss = structured(await client.call_tool("execute_code", {"code": code}))
            hints = miss["reflection_required"]
            assert hints, miss
            persist = "\n".join(
                f"reflection.persist({h['hash']!r}, {h['domain']!r}, {justification_for(h)!r})" for h in hints
            )
            done = structured(await client.call_tool("execute_code", {"code": f"{persist}\nr = {code}\nr"}))
            assert done["ok"], done
    assert (read(workspace_dir / "m.tif")[:, 5:10] == 4).all()
    assert (read(workspace_dir / "m_fine.tif")[:, 10:20] == 4).all()
