"""Where georeferencing comes from, and a sidecar that overrides the file's own (DD-MCP-046).

GDAL takes a GeoTIFF's geotransform from ``<name>.aux.xml`` before the file's own tags, and from a
world file when the file has none. The fixture here holds 10 m cells at (500000, 5030000) in its tags
and an .aux.xml saying 20 m cells at (600000, 5040000): every answer that depends on positions is
worked out on paper for both, and must either refuse naming both or follow the side it is told to.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from pyproj import Geod, Transformer
from rasterio.errors import NotGeoreferencedWarning

from llmc_mcp.config import Settings
from llmc_mcp.errors import Refused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured

INFO = get_operation("raster.info")
SAMPLE = get_operation("raster.sample")
AREA = get_operation("raster.area")
CALC = get_operation("raster.calc")
CONVERT = get_operation("raster.convert")
STATS = get_operation("raster.stats")

FILE_OWN = Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 5_030_000.0)
SIDECAR = Affine(20.0, 0.0, 600_000.0, 0.0, -20.0, 5_040_000.0)
FILE_SAYS = "cell 10 m at (500000, 5030000) in EPSG:32633"
SIDECAR_SAYS = "cell 20 m at (600000, 5040000) in EPSG:32633"
ROWS, COLS = 3, 4
K0 = 0.9996
"""UTM's scale on its central meridian (easting 500000): a 10 m grid cell there is 10 / k0 m on the ground."""


def call(op: Any, ctx: OperationContext, **args: Any) -> Any:
    return op.run(ctx, op.validate(args))


def values() -> np.ndarray:
    """v[r, c] = 10 r + c: the value says which cell a point landed in."""
    rows, cols = np.mgrid[0:ROWS, 0:COLS]
    return (10 * rows + cols).astype("float32")


def write_tiff(path: Path, *, georeferenced: bool) -> None:
    profile: dict[str, Any] = {
        "driver": "GTiff", "width": COLS, "height": ROWS, "count": 1, "dtype": "float32",
    }  # fmt: skip
    if georeferenced:
        profile.update(crs="EPSG:32633", transform=FILE_OWN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)  # the point of the world-file fixture
        with rasterio.open(path, "w", **profile) as ds:
            ds.write(values()[None])


@pytest.fixture
def overridden(workspace_dir: Path) -> str:
    """'own.tif' says 10 m at (500000, 5030000); its .aux.xml says 20 m at (600000, 5040000)."""
    write_tiff(workspace_dir / "own.tif", georeferenced=True)
    gt = ", ".join(f"{v:.1f}" for v in SIDECAR.to_gdal())
    (workspace_dir / "own.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{gt}</GeoTransform></PAMDataset>"
    )
    return "own.tif"


@pytest.fixture
def world_file_only(workspace_dir: Path) -> str:
    """'plain.tif' has no georeferencing of its own; 'plain.tfw' places it at 10 m from (500000, 5030000).

    A world file names the centre of the top-left cell: (500005, 5029995)."""
    write_tiff(workspace_dir / "plain.tif", georeferenced=False)
    (workspace_dir / "plain.tfw").write_text("10\n0\n0\n-10\n500005\n5029995\n")
    return "plain.tif"


def centre(transform: Affine, row: int, col: int) -> tuple[float, float]:
    return transform @ (col + 0.5, row + 0.5)


# --- raster.info ------------------------------------------------------------------------------------


def test_info_reports_both_georeferencings_and_that_the_sidecar_overrides(
    ctx: OperationContext, overridden: str
) -> None:
    """Guards against info showing only GDAL's pick: the agent must see that GDAL follows the .aux.xml,
    what the file itself says, and each side's transform under its own name."""
    info = call(INFO, ctx, path=overridden)
    assert info.sidecar_georeferencing.transform == (20.0, 0.0, 600_000.0, 0.0, -20.0, 5_040_000.0)
    assert info.file_georeferencing.transform == (10.0, 0.0, 500_000.0, 0.0, -10.0, 5_030_000.0)
    assert info.georeferencing == "aux.xml"
    note = info.georeferencing_note
    assert f"The file itself says {FILE_SAYS}; its sidecar 'own.tif.aux.xml' says {SIDECAR_SAYS}" in note


def test_info_says_the_file_itself_when_there_is_no_sidecar(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a source reported for every file as if sidecars were the rule."""
    write_tiff(workspace_dir / "alone.tif", georeferenced=True)
    info = call(INFO, ctx, path="alone.tif")
    assert info.georeferencing == "file"
    assert info.georeferencing_note == f"Georeferencing comes from the file itself ({FILE_SAYS})."


def test_an_agreeing_sidecar_is_not_an_override(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against refusing every file GDAL wrote statistics or the same geotransform beside: an
    .aux.xml that repeats the file's georeferencing changes nothing."""
    write_tiff(workspace_dir / "same.tif", georeferenced=True)
    gt = ", ".join(f"{v:.1f}" for v in FILE_OWN.to_gdal())
    (workspace_dir / "same.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{gt}</GeoTransform></PAMDataset>"
    )
    assert call(INFO, ctx, path="same.tif").georeferencing == "file"
    point = call(SAMPLE, ctx, path="same.tif", points=[[500_015.0, 5_029_985.0]]).points[0]
    assert (point.row, point.col, point.values) == (1, 1, [11.0])


def test_info_reports_a_world_file_as_the_only_georeferencing(
    ctx: OperationContext, world_file_only: str
) -> None:
    """Guards against a world file taken for the file's own georeferencing (or for an override): the
    TIFF holds none, so the .tfw is its source and nothing disagrees."""
    info = call(INFO, ctx, path=world_file_only)
    assert info.georeferencing == "world file"
    assert info.georeferencing_note == (
        "Georeferencing comes from the sidecar 'plain.tfw' (cell 10 at (500000, 5030000) in no CRS); "
        "the file holds none itself."
    )
    assert info.transform == (10.0, 0.0, 500_000.0, 0.0, -10.0, 5_030_000.0)


def test_a_statistics_only_aux_xml_is_not_named_as_the_source(
    ctx: OperationContext, workspace_dir: Path, world_file_only: str
) -> None:
    """Guards against naming the .aux.xml GDAL wrote statistics into as the source, when the world
    file beside it is what places the raster."""
    (workspace_dir / "plain.tif.aux.xml").write_text(
        '<PAMDataset><PAMRasterBand band="1"><Metadata><MDI key="STATISTICS_MEAN">11.5</MDI></Metadata>'
        "</PAMRasterBand></PAMDataset>"
    )
    info = call(INFO, ctx, path=world_file_only)
    assert (info.georeferencing, info.transform[2], info.transform[5]) == (
        "world file",
        500_000.0,
        5_030_000.0,
    )


# --- refusals ---------------------------------------------------------------------------------------


def test_sample_refuses_an_overriding_sidecar_naming_both(ctx: OperationContext, overridden: str) -> None:
    """Guards against sampling at the sidecar's positions silently (what GDAL would do): the value at
    (500015, 5029985) is 11 by the file and outside the raster by the sidecar."""
    with pytest.raises(Refused) as caught:
        call(SAMPLE, ctx, path=overridden, points=[[500_015.0, 5_029_985.0]])
    text = f"{caught.value.message} {caught.value.fix}"
    assert FILE_SAYS in text and SIDECAR_SAYS in text and "'own.tif.aux.xml'" in text
    assert "georeferencing='file'" in text and "georeferencing='sidecar'" in text


def test_area_refuses_an_overriding_sidecar_naming_both(ctx: OperationContext, overridden: str) -> None:
    """Guards against a ground area computed on 20 m cells (4 times the file's) without a word."""
    with pytest.raises(
        Refused, match=r"cell 10 m at \(500000, 5030000\).*cell 20 m at \(600000, 5040000\)"
    ):
        call(AREA, ctx, path=overridden)


def test_calc_refuses_an_input_with_an_overriding_sidecar(
    ctx: OperationContext, workspace_dir: Path, overridden: str
) -> None:
    """Guards against band math whose output takes one side's grid silently."""
    with pytest.raises(Refused, match=r"own\.tif\.aux\.xml"):
        call(CALC, ctx, expression="a * 2", inputs=[{"name": "a", "path": overridden}], dst="x.tif")
    assert not (workspace_dir / "x.tif").exists()


def test_stats_does_not_refuse_an_overriding_sidecar(ctx: OperationContext, overridden: str) -> None:
    """Guards against refusing what does not depend on positions: the mean of 0..23 (10 r + c) is 11.5."""
    assert call(STATS, ctx, path=overridden).bands[0].mean == 11.5


# --- an explicit choice -----------------------------------------------------------------------------


def test_sample_follows_the_file_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against 'file' accepted but the sidecar still followed: (500015, 5029985) is row 1,
    column 1 (value 11) of the 10 m grid, whose centre it is."""
    point = call(
        SAMPLE, ctx, path=overridden, points=[[500_015.0, 5_029_985.0]], georeferencing="file"
    ).points[0]
    assert (point.row, point.col, point.values, point.cell_x, point.cell_y) == (
        1,
        1,
        [11.0],
        500_015.0,
        5_029_985.0,
    )


def test_following_the_file_still_reads_the_rest_of_the_sidecar(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against 'file' dropping the whole .aux.xml: its nodata value (11 here) must still make
    cell (1, 1) nodata, as it does under 'sidecar'; only the georeferencing changes side."""
    write_tiff(workspace_dir / "nd.tif", georeferenced=True)
    gt = ", ".join(f"{v:.1f}" for v in SIDECAR.to_gdal())
    (workspace_dir / "nd.tif.aux.xml").write_text(
        f"<PAMDataset><GeoTransform>{gt}</GeoTransform>"
        '<PAMRasterBand band="1"><NoDataValue>11</NoDataValue></PAMRasterBand></PAMDataset>'
    )
    by_file = call(SAMPLE, ctx, path="nd.tif", points=[[500_015.0, 5_029_985.0]], georeferencing="file")
    by_sidecar = call(SAMPLE, ctx, path="nd.tif", points=[[600_030.0, 5_039_970.0]], georeferencing="sidecar")
    assert [(p.row, p.col, p.values) for p in (*by_file.points, *by_sidecar.points)] == [(1, 1, [None])] * 2


def test_sample_follows_the_sidecar_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against 'sidecar' ignored: (600030, 5039950) is column 1.5, row 2.5 of the 20 m grid,
    so cell (2, 1), value 21, centred at (600030, 5039950)."""
    point = call(
        SAMPLE, ctx, path=overridden, points=[[600_030.0, 5_039_950.0]], georeferencing="sidecar"
    ).points[0]
    assert (point.row, point.col, point.values, point.cell_x, point.cell_y) == (
        2,
        1,
        [21.0],
        600_030.0,
        5_039_950.0,
    )


def test_area_follows_the_file_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against the 20 m cells of the sidecar measured after 'file': 12 cells of 10 m on UTM's
    central meridian are 12 * (10 / 0.9996)^2 m^2 on the ground."""
    result = call(AREA, ctx, path=overridden, georeferencing="file")
    assert result.total_area_m2 == pytest.approx(12 * (10 / K0) ** 2, rel=1e-9)


def test_area_follows_the_sidecar_when_told(ctx: OperationContext, overridden: str) -> None:
    """Guards against 'sidecar' measuring the file's grid: the 80 m x 60 m block at (600000, 5040000),
    as a geodesic polygon of its corners."""
    result = call(AREA, ctx, path=overridden, georeferencing="sidecar")
    to_lonlat = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True)
    corners = [SIDECAR @ (c, r) for c, r in ((0, 0), (COLS, 0), (COLS, ROWS), (0, ROWS))]
    lons, lats = to_lonlat.transform([x for x, _ in corners], [y for _, y in corners])
    expected = abs(Geod(ellps="WGS84").polygon_area_perimeter(lons, lats)[0])
    assert result.total_area_m2 == pytest.approx(expected, rel=1e-6)


def test_calc_with_file_writes_the_file_grid(
    ctx: OperationContext, workspace_dir: Path, overridden: str
) -> None:
    """Guards against GDAL reading the .aux.xml anyway: the output's grid is the file's own, exactly."""
    result = call(
        CALC,
        ctx,
        expression="a * 2",
        inputs=[{"name": "a", "path": overridden}],
        dst="x.tif",
        georeferencing="file",
    )
    assert result.output.transform == tuple(FILE_OWN)[:6]
    with rasterio.open(workspace_dir / "x.tif") as ds:
        np.testing.assert_array_equal(ds.read(1), values() * 2)


def test_convert_copies_the_chosen_georeferencing(ctx: OperationContext, overridden: str) -> None:
    """Guards against a copy that carries the other side's grid: 'file' writes the file's, 'sidecar'
    the sidecar's, into the new file's own tags."""
    as_file = call(CONVERT, ctx, src=overridden, dst="f.tif", georeferencing="file")
    as_sidecar = call(CONVERT, ctx, src=overridden, dst="s.tif", georeferencing="sidecar")
    assert as_file.transform == tuple(FILE_OWN)[:6] and as_file.georeferencing == "file"
    assert as_sidecar.transform == tuple(SIDECAR)[:6] and as_sidecar.georeferencing == "file"


# --- a world file alone -----------------------------------------------------------------------------


def test_sample_uses_a_world_file_without_refusing(ctx: OperationContext, world_file_only: str) -> None:
    """Guards against a world file treated as an override (refused) or ignored (pixel coordinates): the
    .tfw places cell (1, 1) at (500010..500020, 5029980..5029990), value 11."""
    point = call(SAMPLE, ctx, path=world_file_only, points=[[500_015.0, 5_029_985.0]]).points[0]
    assert (point.row, point.col, point.values, point.cell_x, point.cell_y) == (
        1,
        1,
        [11.0],
        500_015.0,
        5_029_985.0,
    )


# --- both faces -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_classic_face_refuses_then_follows_the_choice(workspace_dir: Path, overridden: str) -> None:
    """Guards against the choice argument missing from the classic tool, or the refusal not reaching it."""
    point = [[500_015.0, 5_029_985.0]]
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        refused = await client.call_tool("raster_sample", {"path": overridden, "points": point})
        chosen = structured(
            await client.call_tool(
                "raster_sample", {"path": overridden, "points": point, "georeferencing": "file"}
            )
        )
        info = structured(await client.call_tool("raster_info", {"path": overridden}))
    assert refused.is_error and '"type": "refused"' in refused.content[0].text
    assert FILE_SAYS in refused.content[0].text and SIDECAR_SAYS in refused.content[0].text
    assert chosen["points"][0]["values"] == [11.0]
    assert info["georeferencing"] == "aux.xml"


@pytest.mark.anyio
async def test_code_mode_refuses_then_follows_the_choice(workspace_dir: Path, overridden: str) -> None:
    """Guards against the stubs and sandbox bindings lacking the argument: the same call from agent
    code first raises an ApiError naming both sides, then follows the sidecar when told."""
    code = (
        "try:\n"
        "    raster.sample('own.tif', [[600030.0, 5039950.0]])\n"
        "    refused = ''\n"
        "except ApiError as e:\n"
        "    refused = e.type + ': ' + str(e)\n"
        "s = raster.sample('own.tif', [[600030.0, 5039950.0]], georeferencing='sidecar')\n"
        "[refused, s['points'][0]['values'][0], raster.info('world.byte.tif')['georeferencing']]"
    )
    settings = Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["ok"], answer
    refused, value, source = answer["result"]
    assert refused.startswith("refused: ") and FILE_SAYS in refused and SIDECAR_SAYS in refused
    assert (value, source) == (21.0, "file")
