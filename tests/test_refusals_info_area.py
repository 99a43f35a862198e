"""A sidecar's numbers are never passed off as the file's; deliberate refusals have their own kind; areas
on the ellipsoid and on the grid's plane, both labelled (issue 19, items 4 and 5; DD-MCP-071).

The sidecar fixture: a 20 x 20 GeoTIFF of 10 m cells at (500000, 5030000) in UTM 33N, whose .aux.xml
says 20 m cells at (600000, 5040000). Width x height x cell area is 400 x 100 = 40,000 m² by the file
and 400 x 400 = 160,000 m² by the sidecar: both are right readings of two sources, neither is *the*
raster's.

The area fixtures are worked on paper: UTM is conformal with scale k0 = 0.9996 on its central meridian
(easting 500000), so a 10 m grid cell there covers 100 / k0² = 100.080 m² of ellipsoid, and a 20 x 20
raster 40,000 / k0² = 40,032.02 m², against the 40,000 m² of its plane.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from affine import Affine
from mcp import Client
from pyproj import Geod, Transformer

from llmc_mcp.config import Settings
from llmc_mcp.errors import Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured
from tests.rasters import write

INFO = get_operation("raster.info")
AREA = get_operation("raster.area")
CALC = get_operation("raster.calc")

FILE_OWN = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 5_030_000.0)
SIDECAR = Affine(20.0, 0.0, 600_000.0, 0.0, -20.0, 5_040_000.0)
FILE_SAYS = "cell 10 m at (500000, 5030000) in EPSG:32633"
SIDECAR_SAYS = "cell 20 m at (600000, 5040000) in EPSG:32633"
N = 20
K0 = 0.9996
US_FOOT = 1200 / 3937
"""The US survey foot in metres, by its definition (1 m = 39.37 in)."""


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def twenty(path: Path, *, transform: Affine = FILE_OWN, crs: str = "EPSG:32633") -> Path:
    """20 x 20 cells: value 1 in the top 5 rows (100 cells), 2 in the other 15 (300 cells)."""
    data = np.full((N, N), 2, "uint8")
    data[:5] = 1
    return write(path, data, transform=transform, crs=crs)


@pytest.fixture
def overridden(workspace_dir: Path) -> str:
    twenty(workspace_dir / "own.tif")
    gt = ", ".join(f"{v:.1f}" for v in SIDECAR.to_gdal())
    (workspace_dir / "own.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{gt}</GeoTransform></PAMDataset>"
    )
    return "own.tif"


# --- raster.info: both readings, neither silently ----------------------------------------------------


def test_info_without_a_choice_has_no_top_level_grid(ctx: OperationContext, overridden: str) -> None:
    """Guards against the sidecar's transform reported as *the* transform, so that width x height x res
    gives 160,000 m² where the file itself says 40,000."""
    info = call(INFO, ctx, path=overridden)
    assert (info.crs, info.transform, info.bounds, info.res) == (None, None, None, None)


def test_info_without_a_choice_names_the_conflict_and_the_way_out(
    ctx: OperationContext, overridden: str
) -> None:
    """Guards against null fields with no reason given: the conflict names both sides and the argument."""
    text = call(INFO, ctx, path=overridden).georeferencing_conflict
    assert f"The file itself says {FILE_SAYS}; its sidecar 'own.tif.aux.xml' says {SIDECAR_SAYS}." in text
    assert "georeferencing='file' or 'sidecar'" in text


def test_info_reports_each_reading_under_its_own_key(ctx: OperationContext, overridden: str) -> None:
    """Guards against one reading labelled as the other: by the file 20 x 20 x 10 m x 10 m = 40,000 m²
    from (500000, 5029800) to (500200, 5030000); by the sidecar 20 x 20 x 20 m x 20 m = 160,000 m² from
    (600000, 5039600) to (600400, 5040000)."""
    info = call(INFO, ctx, path=overridden)
    own, side = info.file_georeferencing, info.sidecar_georeferencing
    assert info.width * info.height * own.res[0] * own.res[1] == 40_000.0
    assert info.width * info.height * side.res[0] * side.res[1] == 160_000.0
    assert (own.bounds.left, own.bounds.bottom, own.bounds.right, own.bounds.top) == (
        500_000.0, 5_029_800.0, 500_200.0, 5_030_000.0,
    )  # fmt: skip
    assert (side.bounds.left, side.bounds.bottom, side.bounds.right, side.bounds.top) == (
        600_000.0, 5_039_600.0, 600_400.0, 5_040_000.0,
    )  # fmt: skip
    assert own.crs.epsg == side.crs.epsg == 32633


def test_info_follows_the_file_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against the argument accepted but the sidecar still reported at the top level."""
    info = call(INFO, ctx, path=overridden, georeferencing="file")
    assert info.transform == tuple(FILE_OWN)[:6]
    assert (info.res, info.bounds) == (info.file_georeferencing.res, info.file_georeferencing.bounds)
    assert "are the file's own, as georeferencing='file' asked" in info.georeferencing_conflict


def test_info_follows_the_sidecar_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against 'sidecar' read as 'no choice' (null) or as the file."""
    info = call(INFO, ctx, path=overridden, georeferencing="sidecar")
    assert info.transform == tuple(SIDECAR)[:6]
    assert info.res == (20.0, 20.0)
    assert info.crs.epsg == 32633


def test_info_of_a_file_without_a_conflict_is_unchanged_by_the_argument(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the new fields or the argument changing the description of an ordinary file."""
    twenty(workspace_dir / "plain.tif")
    plain = call(INFO, ctx, path="plain.tif")
    assert plain.transform == tuple(FILE_OWN)[:6] and plain.res == (10.0, 10.0)
    assert (plain.georeferencing_conflict, plain.file_georeferencing, plain.sidecar_georeferencing) == (
        None, None, None,
    )  # fmt: skip
    assert call(INFO, ctx, path="plain.tif", georeferencing="sidecar") == plain


# --- the refused kind ---------------------------------------------------------------------------------


def test_inputs_on_different_grids_are_refused_not_invalid(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a deliberate refusal reported as a malformed argument: the call is well formed,
    the files readable, but cell (r, c) of one is 10 m away from cell (r, c) of the other."""
    twenty(workspace_dir / "a.tif")
    twenty(workspace_dir / "b.tif", transform=FILE_OWN @ Affine.translation(1, 0))
    inputs = [{"name": "a", "path": "a.tif"}, {"name": "b", "path": "b.tif"}]
    with pytest.raises(Refused) as caught:
        call(CALC, ctx, expression="a + b", inputs=inputs, dst="x.tif")
    assert caught.value.to_dict()["type"] == "refused"


@pytest.mark.anyio
async def test_classic_mode_reports_a_refusal_as_type_refused(workspace_dir: Path, overridden: str) -> None:
    """Guards against the classic face flattening the kind (to raster_error or a generic error)."""
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        result = await client.call_tool("raster_area", {"path": overridden})
    assert result.is_error and structured(result)["type"] == "refused"


@pytest.mark.anyio
async def test_code_mode_reports_a_refusal_as_e_type_and_error_type_refused(
    workspace_dir: Path, overridden: str
) -> None:
    """Guards against the sandbox knowing another name for the kind: e.type inside the cell and
    execute_code's error.type for an uncaught one are both 'refused'."""
    caught = "try:\n    raster.area('own.tif')\nexcept ApiError as e:\n    kind = e.type\nkind"
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        inside = structured(await client.call_tool("execute_code", {"code": caught}))
        uncaught = structured(await client.call_tool("execute_code", {"code": "raster.area('own.tif')"}))
    assert inside["result"] == "refused"
    assert uncaught["error"]["type"] == "refused"


# --- raster.area: ellipsoid and plane -----------------------------------------------------------------


def test_planar_area_of_a_utm_grid_is_cells_times_cell_area(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the plane's area missing or taken from the ellipsoid: 400 cells of 10 m x 10 m are
    40,000 m², 100 of them (value 1) 10,000 and 300 (value 2) 30,000, exactly."""
    twenty(workspace_dir / "utm.tif")
    result = call(AREA, ctx, path="utm.tif")
    assert (result.planar_cell_m2, result.total_planar_area_m2) == (100.0, 40_000.0)
    assert [(a.value, a.planar_area_m2) for a in result.areas] == [(1.0, 10_000.0), (2.0, 30_000.0)]


def test_a_utm_grid_reports_its_ground_area_beside_its_planar_area(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against one figure standing for both: the ground area is measured independently, as the
    geodesic area on WGS 84 of the raster's outline through every cell corner, and on paper as
    40,000 / k0² = 40,032.02 m² (UTM's areal scale on its central meridian is k0²); the planar area
    beside it is the grid's 40,000 m²."""
    twenty(workspace_dir / "utm.tif")
    result = call(AREA, ctx, path="utm.tif")
    steps = np.arange(N + 1, dtype="float64")
    edge = np.concatenate([
        np.stack([steps, np.zeros(N + 1)], 1), np.stack([np.full(N, N), steps[1:]], 1),
        np.stack([steps[::-1][1:], np.full(N, N)], 1), np.stack([np.zeros(N - 1), steps[::-1][1:-1]], 1),
    ])  # fmt: skip
    x, y = FILE_OWN @ (edge[:, 0], edge[:, 1])
    lon, lat = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True).transform(x, y)
    geodesic, _ = Geod(ellps="WGS84").polygon_area_perimeter(lon, lat)
    assert result.total_area_m2 == pytest.approx(abs(geodesic), rel=1e-9)
    assert result.total_area_m2 == pytest.approx(40_000 / K0**2, rel=1e-7)
    assert result.total_planar_area_m2 == 40_000.0


def test_the_note_gives_the_ratio_of_plane_to_ground(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against two unlabelled figures: the note says which to use when and how far apart they
    are here, k0² = 0.99920016, printed to 6 significant digits."""
    twenty(workspace_dir / "utm.tif")
    note = call(AREA, ctx, path="utm.tif").note
    assert "area_m2 is the ground area on the WGS 84 ellipsoid" in note and "planar_area_m2" in note
    assert "Here the planar total is 0.9992 times the ground total." in note


def test_planar_area_in_us_survey_feet_is_converted_to_square_metres(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against square feet reported as square metres (10.76 times too much): 400 cells of
    100 ft x 100 ft in EPSG:2263 are 4,000,000 ft² = 4e6 x (1200/3937)² = 371,613.6 m²."""
    twenty(
        workspace_dir / "ny.tif", transform=Affine(100.0, 0, 980_000.0, 0, -100.0, 200_000.0), crs="EPSG:2263"
    )
    result = call(AREA, ctx, path="ny.tif")
    assert result.total_planar_area_m2 == pytest.approx(4e6 * US_FOOT**2, rel=1e-12)
    assert result.areas[0].planar_area_m2 == pytest.approx(1e6 * US_FOOT**2, rel=1e-12)


def test_a_geographic_grid_has_no_planar_area(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against degrees² passed off as square metres: a geographic CRS has no plane."""
    twenty(workspace_dir / "geo.tif", transform=Affine(0.001, 0, 15.0, 0, -0.001, 45.0), crs="EPSG:4326")
    result = call(AREA, ctx, path="geo.tif")
    assert (result.planar_cell_m2, result.total_planar_area_m2) == (None, None)
    assert [a.planar_area_m2 for a in result.areas] == [None, None]
    assert result.total_area_m2 > 0
    assert "a geographic CRS has no plane, so there is no planar area" in result.note
