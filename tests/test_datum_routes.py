"""Datum routes: the operation chosen for data is the most accurate that covers it, a ballpark only when
nothing else exists, and the provenance record names the pipeline the warp applied (issue 19, items 2-3).

Expected coordinates come from EPSG's published definitions written out as PROJ pipelines here, not
from the code under test: Monte Mario (Rome) counts longitudes from Rome (12°27'08.4" E of Greenwich);
"Monte Mario to WGS 84 (4)" is a seven-parameter Helmert (position vector) on the International 1924
ellipsoid; "Monte Mario to WGS 84 (1)" (Sardinia), "NTF to WGS 84 (1)", "NAD27 to WGS 84 (6)" (CONUS)
and "NAD27 to WGS 84 (2)" (Central America) are geocentric translations. A ballpark between Monte
Mario (Rome) and WGS 84 only moves the meridian, which puts Piedmont about 74 m off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyproj
import pytest
import rasterio
from affine import Affine
from mcp import Client
from pyproj import Geod, Transformer

from llmc_mcp.cli.main import main
from llmc_mcp.config import Settings
from llmc_mcp.operations import crs, raster
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.provenance.conformance import problems
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, structured, text
from tests.rasters import write

pytestmark = pytest.mark.anyio

ROME = 12 + 27 / 60 + 8.4 / 3600
"""EPSG:8906, the Rome meridian, in degrees east of Greenwich."""
PARIS_GRAD = 2.5969213
"""EPSG:8903, the Paris meridian, in grads east of Greenwich."""
GEOD = Geod(ellps="WGS84")


def helmert(ellps: str, params: str) -> Transformer:
    """Longitude/latitude in degrees on ``ellps`` to WGS 84, through a Helmert in geocentric space."""
    return Transformer.from_pipeline(
        "+proj=pipeline +step +proj=unitconvert +xy_in=deg +xy_out=rad +step +proj=push +v_3 "
        f"+step +proj=cart +ellps={ellps} +step +proj=helmert {params} +step +inv +proj=cart +ellps=WGS84 "
        "+step +proj=pop +v_3 +step +proj=unitconvert +xy_in=rad +xy_out=deg"
    )


MONTE_MARIO_4 = helmert(
    "intl", "+x=-104.1 +y=-49.1 +z=-9.9 +rx=0.971 +ry=-2.917 +rz=0.714 +s=-11.68 +convention=position_vector"
)
MONTE_MARIO_SARDINIA = helmert("intl", "+x=-225 +y=-65 +z=9")
NTF_1 = helmert("clrk80ign", "+x=-168 +y=-60 +z=320")
NAD27_CONUS = helmert("clrk66", "+x=-8 +y=159 +z=175")
NAD27_CENTRAL_AMERICA = helmert("clrk66", "+x=0 +y=125 +z=194")


def metres(a: tuple[float, float], b: tuple[float, float]) -> float:
    return float(GEOD.inv(a[0], a[1], b[0], b[1])[2])


def transform(ctx: OperationContext, points: list[tuple[float, float]], src: str, dst: str) -> Any:
    return crs.transform.run(ctx, crs.transform.validate({"points": points, "src_crs": src, "dst_crs": dst}))


def test_monte_mario_rome_in_piedmont_goes_through_monte_mario_not_a_ballpark(ctx: OperationContext):
    """Guards against the 74 m ballpark PROJ returns when its only precise operation (Sardinia's)
    does not cover the points: Rome -> Greenwich meridian (exact), then Monte Mario to WGS 84 (4)."""
    result = transform(ctx, [(8.0 - ROME, 45.5)], "EPSG:4806", "EPSG:4326")
    expected = MONTE_MARIO_4.transform(8.0, 45.5)
    assert result.operation.ballpark is False
    assert result.operation.accuracy_m == 4.0
    assert result.operation.name == "Monte Mario (Rome) to Monte Mario (1) + Monte Mario to WGS 84 (4)"
    assert result.points[0][1] == pytest.approx(45.500663, abs=1e-6)
    assert metres(result.points[0], expected) < 0.5
    assert metres(result.points[0], (8.0, 45.5)) > 50  # where the ballpark would have put it
    assert "'Monte Mario' (EPSG:4265)" in result.note


def test_monte_mario_rome_in_sardinia_takes_the_most_accurate_covering_operation(ctx: OperationContext):
    """Guards against PROJ's first candidate kept because it covers the points: Sardinia's own
    operation (44 m) covers them, but the route through Monte Mario with Monte Mario to WGS 84 (4)
    covers them too, to 4 m."""
    result = transform(ctx, [(9.0 - ROME, 40.0)], "EPSG:4806", "EPSG:4326")
    assert result.operation.name == "Monte Mario (Rome) to Monte Mario (1) + Monte Mario to WGS 84 (4)"
    assert result.operation.accuracy_m == 4.0
    assert result.covers_points is True
    assert metres(result.points[0], MONTE_MARIO_4.transform(9.0, 40.0)) < 0.5
    assert metres(result.points[0], MONTE_MARIO_SARDINIA.transform(9.0, 40.0)) > 1.0


def test_monte_mario_rome_across_sardinia_and_piedmont_takes_the_route_covering_both(ctx: OperationContext):
    """Guards against an operation used where only some points are in its area: Sardinia's covers
    one of these two points, the Italy-wide route both."""
    points = [(9.0 - ROME, 40.0), (8.0 - ROME, 45.5)]
    result = transform(ctx, points, "EPSG:4806", "EPSG:4326")
    assert result.operation.name.endswith("Monte Mario to WGS 84 (4)")
    assert result.covers_points is True
    assert metres(result.points[1], MONTE_MARIO_4.transform(8.0, 45.5)) < 0.5


def test_ntf_paris_in_france_shifts_the_meridian_then_the_datum(ctx: OperationContext):
    """Guards against a datum counted from Paris in grads being placed 2.34 degrees off, or shifted as
    if it were WGS 84: NTF (Paris) -> NTF (exact), then NTF to WGS 84 (1); its grid is not installed."""
    grid = Path(pyproj.datadir.get_data_dir()) / "fr_ign_ntf_r93.tif"
    assert not grid.exists(), "the NTF grid is installed here: the 1 m grid operation would be expected"
    result = transform(ctx, [(0.0, 54.0)], "EPSG:4807", "EPSG:4326")
    lon, lat = PARIS_GRAD * 0.9, 54.0 * 0.9  # grads to degrees
    assert result.operation.ballpark is False
    assert result.operation.accuracy_m == 2.0
    assert metres(result.points[0], NTF_1.transform(lon, lat)) < 0.01


def test_nad27_inside_conus_uses_the_best_available_shift_and_names_the_missing_grid(ctx: OperationContext):
    """Guards against a less accurate shift than one installed here, and against silence about the grid."""
    result = transform(ctx, [(-100.0, 40.0)], "EPSG:4267", "EPSG:4326")
    assert result.operation.name == "NAD27 to WGS 84 (6)"
    assert result.operation.accuracy_m == 7.0
    assert metres(result.points[0], NAD27_CONUS.transform(-100.0, 40.0)) < 0.01
    assert any("us_noaa_conus.tif" in op.missing_grids for op in result.better_unavailable)


def test_nad27_outside_the_grids_coverage_uses_the_regional_shift(ctx: OperationContext):
    """Guards against the CONUS grid or CONUS parameters being applied in Guatemala."""
    result = transform(ctx, [(-90.5, 14.6)], "EPSG:4267", "EPSG:4326")
    assert result.operation.name == "NAD27 to WGS 84 (2)"
    assert result.better_unavailable == []
    assert metres(result.points[0], NAD27_CENTRAL_AMERICA.transform(-90.5, 14.6)) < 0.01


def test_only_a_ballpark_exists_so_its_accuracy_is_unknown_and_the_note_says_why(ctx: OperationContext):
    """Guards against a ballpark passed off as a result of stated accuracy: no operation from Monte
    Mario (Rome), or its Greenwich twin, reaches WGS 84 in Germany."""
    result = transform(ctx, [(10.0 - ROME, 50.0)], "EPSG:4806", "EPSG:4326")
    assert result.operation.ballpark is True
    assert result.operation.accuracy_m is None
    assert result.points[0] == pytest.approx((10.0, 50.0), abs=1e-9)  # the meridian alone
    assert "neither directly nor through 'Monte Mario' (EPSG:4265)" in result.note
    assert "accuracy is unknown" in result.note


PIEDMONT = Affine(0.0005, 0.0, 8.0 - ROME, 0.0, -0.0005, 45.51)
"""Cells of 0.0005 degree (about 39 x 56 m) from 8.0 E (Greenwich), 45.51 N, in Monte Mario (Rome)."""
MARK = (12, 14)
"""(row, col) of the one cell whose value is 1."""


def marked_raster(path: Path) -> Path:
    data = np.zeros((1, 30, 30), dtype="uint8")
    data[0, MARK[0], MARK[1]] = 1
    return write(path, data, transform=PIEDMONT, nodata=255, crs="EPSG:4806")


def mark_in_wgs84() -> tuple[float, float]:
    """The marked cell's centre in WGS 84 through the precise route, worked out from EPSG's parameters."""
    x, y = PIEDMONT @ (MARK[1] + 0.5, MARK[0] + 0.5)
    return MONTE_MARIO_4.transform(x + ROME, y)


def marked_centre(path: Path) -> tuple[float, float]:
    with rasterio.open(path) as out:
        rows, cols = np.nonzero(out.read(1) == 1)
        x, y = out.transform @ (cols.mean() + 0.5, rows.mean() + 0.5)
    return float(x), float(y)


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


@pytest.fixture
async def client(classic_settings: Settings):
    async with Client(build_server(classic_settings)) as c:
        yield c


async def reproject_justified(client: Client, args: dict[str, Any]) -> None:
    """raster.reproject through the server, its decisions justified, so it writes a signed record."""
    hints = structured(await client.call_tool("raster_reproject", args))["reflection_required"]
    for hint in hints:
        answer = {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)}
        assert not (await client.call_tool("persist_justification", answer)).is_error
    result = await client.call_tool("raster_reproject", args)
    assert not result.is_error, text(result)


def record_of(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}.provenance.json").read_text(encoding="utf-8"))


def test_reprojection_from_monte_mario_rome_places_cells_by_the_precise_route(
    ctx: OperationContext, workspace_dir: Path
):
    """Guards against GDAL's own choice (the 74 m ballpark) being used for the warp while crs.transform
    names the route: the marked cell must land where the route puts it (output cells are ~9 x 11 m)."""
    marked_raster(workspace_dir / "mm.tif")
    call(raster.reproject, ctx, src="mm.tif", dst="mm_4326.tif", dst_crs="EPSG:4326", resolution=0.0001)
    centre = marked_centre(workspace_dir / "mm_4326.tif")
    assert metres(centre, mark_in_wgs84()) < 15
    ballpark = PIEDMONT @ (MARK[1] + 0.5, MARK[0] + 0.5)
    assert metres(centre, (ballpark[0] + ROME, ballpark[1])) > 50


async def test_reprojection_records_the_pipeline_it_applied(client: Client, workspace_dir: Path):
    """Guards against a record that recomputes (or leaves out) the operation: it names the route the
    warp applied, its accuracy, no ballpark, and that every point checked was in its area of use."""
    marked_raster(workspace_dir / "mm.tif")
    await reproject_justified(client, {"src": "mm.tif", "dst": "mm_4326.tif", "dst_crs": "EPSG:4326"})
    record = record_of(workspace_dir / "mm_4326.tif")
    assert problems(record) == []
    applied = record["crs_decisions"]["transformation"]
    assert "pm=rome" in applied["pipeline"] and "x=-104.1" in applied["pipeline"]
    assert applied["accuracy_m"] == 4.0
    assert applied["is_ballpark"] is False
    assert applied["x-llmc:operation"] == "Monte Mario (Rome) to Monte Mario (1) + Monte Mario to WGS 84 (4)"
    assert applied["x-llmc:route"] == "'Monte Mario' (EPSG:4265)"
    assert applied["x-llmc:outside_area_of_use"]["share"] == 0.0
    assert applied["x-llmc:outside_area_of_use"]["points_checked"] > 400
    # The pipeline is in the CRSs' own axis order (latitude first for both), as GDAL applies it.
    lat, lon = Transformer.from_pipeline(applied["pipeline"]).transform(45.5, 8.0 - ROME)
    assert metres((lon, lat), MONTE_MARIO_4.transform(8.0, 45.5)) < 0.01


async def test_a_reprojection_that_changes_datum_records_proj_s_operation(
    client: Client, workspace_dir: Path
):
    """Guards against the record of UTM 18N (WGS 84) -> Conus Albers (NAD83) saying "pipeline
    unavailable" with no accuracy, where crs.transform names NAD83 to WGS 84 (1), 4 m."""
    write(workspace_dir / "utm.tif", np.ones((1, 8, 8), dtype="float32"))
    await reproject_justified(client, {"src": "utm.tif", "dst": "albers.tif", "dst_crs": "EPSG:5070"})
    applied = record_of(workspace_dir / "albers.tif")["crs_decisions"]["transformation"]
    assert applied["pipeline"].startswith("proj=pipeline") and "proj=aea" in applied["pipeline"]
    assert applied["accuracy_m"] == 4.0
    assert "NAD83 to WGS 84 (1)" in applied["x-llmc:operation"]


def test_align_onto_a_wgs84_grid_places_cells_by_the_precise_route(
    ctx: OperationContext, workspace_dir: Path
):
    """Guards against align, which shares reproject's warp, falling back to GDAL's ballpark."""
    marked_raster(workspace_dir / "mm.tif")
    like = Affine(0.0001, 0.0, 7.995, 0.0, -0.0001, 45.512)
    write(workspace_dir / "like.tif", np.zeros((1, 200, 200), dtype="uint8"), transform=like, crs="EPSG:4326")
    call(raster.align, ctx, src="mm.tif", like="like.tif", dst="aligned.tif")
    assert metres(marked_centre(workspace_dir / "aligned.tif"), mark_in_wgs84()) < 15


def test_a_clip_box_in_wgs84_is_placed_on_a_monte_mario_rome_raster_by_the_precise_route(
    ctx: OperationContext, workspace_dir: Path
):
    """Guards against a box given in another CRS moved by a ballpark: the box's corners in the raster's
    CRS are the inverse route's (Monte Mario to WGS 84 (4) undone, then the meridian)."""
    marked_raster(workspace_dir / "mm.tif")
    box = (8.002, 45.497, 8.008, 45.503)
    result = call(raster.clip, ctx, src="mm.tif", dst="clipped.tif", bounds=box, bounds_crs="EPSG:4326")
    inverse = MONTE_MARIO_4.transform
    corners = [inverse(x, y, direction="INVERSE") for x, y in ((8.002, 45.497), (8.008, 45.503))]
    expected = (corners[0][0] - ROME, corners[0][1], corners[1][0] - ROME, corners[1][1])
    got = result.bounds
    assert (got.left, got.bottom, got.right, got.top) == pytest.approx(expected, abs=2e-6)  # ~0.2 m
    assert "Monte Mario to WGS 84 (4)" in result.transformation


PARENT_RECORD_DECISION = {
    "analysis_crs": "EPSG:5070",
    "reason": "equal-area for the statistics",
    "source_crs": "EPSG:32618",
    "target_crs": "EPSG:5070",
    "transformation": {
        "pipeline": "unavailable until proj_trans is called",
        "accuracy_m": None,
        "is_ballpark": False,
    },
}
"""The decision as the parent commit recorded a 32618 -> 5070 reprojection."""

RECORD = {
    "spec_version": "1.0.0-draft.3",
    "operation": "raster.reproject",
    "parameters": {"dst_crs": "EPSG:5070"},
    "inputs": [{"path": "utm.tif", "sha256": "0" * 64, "crs": "EPSG:32618"}],
    "engine": {"name": "llmc-mcp", "version": "1"},
    "verification": [{"name": "crs_present", "passed": True, "detail": "the output declares EPSG:5070"}],
    "started_at": "2026-11-28T00:00:00Z",
    "finished_at": "2026-11-28T00:00:01Z",
}


@pytest.mark.parametrize(
    "transformation",
    [
        PARENT_RECORD_DECISION["transformation"],
        {"pipeline": None, "accuracy_m": 4.0, "is_ballpark": False},
        None,
    ],
    ids=["placeholder", "null", "missing"],
)
def test_a_datum_changing_decision_without_its_pipeline_does_not_conform(transformation: Any):
    """Guards against a record that says the datum changed but not how (the parent's records passed)."""
    decision = {k: v for k, v in PARENT_RECORD_DECISION.items() if k != "transformation"}
    if transformation is not None:
        decision["transformation"] = transformation
    found = problems({**RECORD, "crs_decisions": decision})
    assert any("pipeline" in problem and "different datums" in problem for problem in found), found


def test_a_decision_on_one_datum_needs_no_pipeline():
    """Guards against flagging what has no datum shift to name (WGS 84 UTM -> WGS 84 geographic)."""
    decision = {**PARENT_RECORD_DECISION, "target_crs": "EPSG:4326", "analysis_crs": "EPSG:4326"}
    del decision["transformation"]
    assert problems({**RECORD, "crs_decisions": decision}) == []


def test_provenance_validate_rejects_the_parent_shaped_record(
    workspace_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
):
    """Guards against the command line's check differing from the writer's: it must flag the record.

    (Not named *.provenance.json: the suite's own sweep would flag it too, rightly.)"""
    path = workspace_dir / "parent_record.json"
    path.write_text(json.dumps({**RECORD, "crs_decisions": PARENT_RECORD_DECISION}), encoding="utf-8")
    monkeypatch.chdir(workspace_dir)
    assert main(["provenance", "validate", str(path)]) == 1
    assert "different datums" in capsys.readouterr().out
