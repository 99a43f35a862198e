"""Degenerate inputs, run through every operation of the catalog: a right answer or a named refusal.

Issue 19, item 7. Each operation of :data:`llmc_mcp.operations.CATALOG` is called, through the same
pipeline as every face (:func:`invoke`: validate, check, gate, run), with each degenerate input its
parameters can take: an empty vector layer, a polygon of zero area and one outside the raster (as
GeoPackage and GeoJSON), points outside the raster, an all-nodata raster, a 1 x 1 raster and a raster
whose every value is equal. Each call must return a result (checked against the answer worked out on
paper where there is one) or raise an ``LlmcError`` of a named kind with a fix, leaving no output or
temporary file; any other exception is what an agent sees as ``internal_error`` and fails.

Arguments come from each operation's signature, so an operation added later is covered by itself:
a raster input gets the degenerate raster, a polygon input (its description names GeoPackage) the
degenerate layer, a list of ``(x, y)`` points the points; a required parameter of any other kind must
have a row in :data:`ARGUMENTS`, and the test says so when it has none.

Rasters are uint8 on 10 m cells from (500000, 4500000) in UTM 18N, with values that are ESRI D8
codes, so that the flow-routing operations read them as flow directions and get past their type
check: all-nodata is 4 x 4 cells of 247 (the D8 nodata value, declared); the 1 x 1 raster holds 0; the
constant raster is 5 x 5 cells of 0 (a flat DEM; as D8, every cell a pit). A float32 raster of 4 x 4
NaN, with no nodata declared (NaN is nodata everywhere), takes the float paths. The vector and point
cases use an ordinary 4 x 4 raster: three rows draining south (4) onto a bottom row of outlets (0).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import shapely
from mcp import Client

from llmc_mcp.compute.polygons import hardened_pyogrio
from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument, LlmcError, Refused
from llmc_mcp.operations import CATALOG, Operation, OperationContext
from llmc_mcp.operations.invoke import invoke
from llmc_mcp.reflection.gate import Gate, ReflectionRequired
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for, structured
from tests.rasters import NORTH_UP, write

UTM = "EPSG:32618"
X0, Y0, CELL = NORTH_UP.c, NORTH_UP.f, NORTH_UP.a
D8_NODATA = 247
INSIDE_POINT = (X0 + CELL / 2, Y0 - CELL / 2)
"""The centre of cell (0, 0), which every raster here has."""
OUTSIDE_POINTS = [(X0 - CELL / 2, Y0 - CELL / 2), (X0 - 100_000.0, Y0 - 100_000.0)]
"""Half a cell west of the grid's first cell, and 100 km south-west of it."""


# --- the inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One degenerate input: what it is, and which kind of parameter takes it."""

    id: str
    kind: typing.Literal["raster", "vector", "points"]
    file: str | None = None


RASTER_CASES = (
    Case("all-nodata-raster", "raster", "all_nodata.tif"),
    Case("1x1-raster", "raster", "one_cell.tif"),
    Case("constant-raster", "raster", "constant.tif"),
    Case("all-nan-raster", "raster", "all_nan.tif"),
)
VECTOR_CASES = tuple(
    Case(f"{what}-{suffix}", "vector", f"{what}.{suffix}")
    for what in ("empty-layer", "zero-area-polygon", "polygon-outside")
    for suffix in ("gpkg", "geojson")
)
POINT_CASES = (Case("points-outside", "points"),)
CASES = RASTER_CASES + VECTOR_CASES + POINT_CASES

ORDINARY = "ordinary.tif"
COVERING = "covering.geojson"
"""A polygon covering every raster here: the zones or mask of a raster case."""


def write_layer(path: Path, geometries: list[Any]) -> None:
    """A one-layer polygon file in UTM 18N with a 'name' field: zero features still have the schema."""
    driver = {".gpkg": "GPKG", ".geojson": "GeoJSON"}[path.suffix]
    hardened_pyogrio().raw.write(
        str(path),
        shapely.to_wkb(np.asarray(geometries, dtype=object)) if geometries else np.array([], dtype=object),
        [np.array([f"z{i}" for i in range(len(geometries))], dtype=object)],
        ["name"],
        driver=driver,
        geometry_type="Polygon",
        crs=UTM,
    )


@pytest.fixture(scope="module")
def workspace_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace for the whole module, holding every degenerate input (they are only read)."""
    folder = tmp_path_factory.mktemp("degenerate")
    write(folder / "all_nodata.tif", np.full((4, 4), D8_NODATA, "uint8"), nodata=D8_NODATA)
    write(folder / "one_cell.tif", np.zeros((1, 1), "uint8"))
    write(folder / "constant.tif", np.zeros((5, 5), "uint8"))
    write(folder / "all_nan.tif", np.full((4, 4), np.nan, "float32"))
    ordinary = np.full((4, 4), 4, "uint8")
    ordinary[-1] = 0
    write(folder / ORDINARY, ordinary)
    flat = shapely.Polygon([(X0, Y0 - 5), (X0 + 20, Y0 - 5), (X0 + 40, Y0 - 5), (X0, Y0 - 5)])
    far = shapely.box(X0 + 100_000, Y0 + 100_000, X0 + 100_100, Y0 + 100_100)
    for suffix in ("gpkg", "geojson"):
        write_layer(folder / f"empty-layer.{suffix}", [])
        write_layer(folder / f"zero-area-polygon.{suffix}", [flat])
        write_layer(folder / f"polygon-outside.{suffix}", [far])
    write_layer(folder / COVERING, [shapely.box(X0, Y0 - 100, X0 + 100, Y0)])
    return folder


@pytest.fixture(scope="module")
def context(workspace_root: Path) -> OperationContext:
    return OperationContext(Workspace(workspace_root), num_threads=1)


@pytest.fixture(scope="module")
def gate(workspace_root: Path) -> Gate:
    store = JustificationStore(workspace_root / ".preflight")
    return Gate(store, PromptLibrary.default(), next_action="persist")


# --- arguments from the signature ------------------------------------------------------------------


@dataclass(frozen=True)
class WithRaster:
    """A parameter that names rasters in a structure of its own: built around the raster of the case."""

    build: Callable[[str], Any]


ARGUMENTS: dict[str, dict[str, Any]] = {
    "raster.reproject": {"dst_crs": "EPSG:4326"},
    "raster.calc": {"expression": "a + 1", "inputs": WithRaster(lambda path: [{"name": "a", "path": path}])},
    "raster.calc_stats": {
        "expression": "a + 1",
        "inputs": WithRaster(lambda path: [{"name": "a", "path": path}]),
    },
    "raster.merge": {"sources": WithRaster(lambda path: [path])},
    "raster.reclassify": {"rules": [{"max": 1, "to": 1}, {"min": 1, "to": 2}]},
    "crs.transform": {"src_crs": UTM, "dst_crs": "EPSG:4326"},
    "hydrology.streams": {"threshold": 2},
}
"""Values for the required parameters that are neither raster, polygon nor point inputs."""

POINTS = list[tuple[float, float]]


def _plain(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def raster_parameters(op: Operation) -> list[str]:
    table = ARGUMENTS.get(op.qualname, {})
    named = [n for n in op.inputs if n not in polygon_parameters(op)]
    return named + [n for n, v in table.items() if isinstance(v, WithRaster)]


def polygon_parameters(op: Operation) -> list[str]:
    return [n for n in op.inputs if "GeoPackage" in op.parameter_description(n)]


def point_parameters(op: Operation) -> list[str]:
    return [n for n in op.signature.parameters if _plain(op.hints[n]) == POINTS]


def applies(op: Operation, case: Case) -> bool:
    return bool(
        {"raster": raster_parameters, "vector": polygon_parameters, "points": point_parameters}[case.kind](op)
    )


def arguments(op: Operation, case: Case) -> dict[str, Any]:
    """The call of ``op`` on ``case``: the degenerate input where it fits, ordinary values elsewhere."""
    raster = case.file if case.kind == "raster" else ORDINARY
    polygons = case.file if case.kind == "vector" else COVERING
    points = OUTSIDE_POINTS if case.kind == "points" else [INSIDE_POINT]
    table = ARGUMENTS.get(op.qualname, {})
    args: dict[str, Any] = {}
    for name, parameter in op.signature.parameters.items():
        required = parameter.default is parameter.empty and parameter.kind is not parameter.VAR_KEYWORD
        if name in op.outputs:
            args[name] = f"{op.namespace}-{op.name}-{case.id}.tif"
        elif name in polygon_parameters(op):
            args[name] = polygons
        elif name in point_parameters(op):
            args[name] = points
        elif isinstance(table.get(name), WithRaster):
            args[name] = table[name].build(raster)
        elif name in table:
            args[name] = table[name]
        elif name in op.inputs and required:
            args[name] = raster
        elif required:
            pytest.fail(
                f"{op.qualname}: the required parameter {name!r} is no raster, polygon or point input and "
                "has no row in ARGUMENTS; add one so that degenerate inputs reach the operation."
            )
    return args


HYDROLOGY_PROCESS = pytest.mark.xdist_group("degenerate-hydrology")
"""The hydrology calls run in one process of a parallel run: the first compiles pyflwdir's numba
kernels in the process (seconds, 14 s under load; the later calls take milliseconds), and dealt out one
by one each process compiled them again."""


def _one_process(op: Operation) -> list[pytest.MarkDecorator]:
    return [HYDROLOGY_PROCESS] if op.namespace == "hydrology" else []


def params() -> Iterator[Any]:
    """Every operation with every case it can take; one skip, with the reason, for one that takes none."""
    made: set[tuple[str, str]] = set()
    for op in CATALOG:
        cases = [case for case in CASES if applies(op, case)]
        if not cases:
            yield pytest.param(
                op,
                None,
                id=f"{op.qualname}-no-degenerate-input",
                marks=pytest.mark.skip(reason=f"{op.qualname} takes no raster, polygon layer or points"),
            )
        for case in cases:
            made.add((op.qualname, case.id))
            yield pytest.param(op, case, id=f"{op.qualname}-{case.id}", marks=_one_process(op))
    unmade = sorted(set(KNOWN) - made)
    if unmade:  # a worked answer for a renamed operation or case would silently never be checked
        raise LookupError(f"KNOWN has answers for calls that are not made: {unmade}")


# --- the answers worked out on paper ---------------------------------------------------------------


def _band(root: Path, result: Any) -> np.ma.MaskedArray:
    with rasterio.open(root / result.output.path) as ds:
        return ds.read(1, masked=True)


def _constant_stats(result: Any, root: Path) -> None:
    band = result.bands[0]
    assert (band.min, band.max, band.mean, band.std, band.valid_count) == (0, 0, 0, 0, 25)


def _all_nodata_stats(result: Any, root: Path) -> None:
    band = result.bands[0]
    assert (band.valid_count, band.nodata_count, band.min, band.max, band.mean) == (0, 16, None, None, None)


def _one_cell_area(result: Any, root: Path) -> None:
    # On UTM's central meridian (x = 500000) the scale factor is k0 = 0.9996: a 10 m x 10 m grid cell
    # is 100 / k0^2 m2 on the ellipsoid.
    assert [(a.value, a.cells) for a in result.areas] == [(0, 1)]
    assert result.areas[0].area_m2 == pytest.approx(100 / 0.9996**2, rel=1e-6)


def _all_nodata_area(result: Any, root: Path) -> None:
    assert (result.areas, result.total_cells, result.total_area_m2, result.nodata_cells) == ([], 0, 0, 16)


def _nodata_sample(result: Any, root: Path) -> None:
    assert [p.values for p in result.points] == [[None]] and result.outside_count == 0


def _outside_samples(result: Any, root: Path) -> None:
    assert [p.values for p in result.points] == [[None], [None]] and result.outside_count == 2


def _zone_of(count: float, value: float | None) -> Callable[[Any, Path], None]:
    def check(result: Any, root: Path) -> None:
        assert [dict(z.stats) for z in result.results] == [
            {"mean": value, "min": value, "max": value, "count": count}
        ]

    return check


def _clip_keeps(cells: int) -> Callable[[Any, Path], None]:
    def check(result: Any, root: Path) -> None:
        assert (result.inside_cells, result.outside_cells) == (cells, 0)

    return check


def _flat_slope(result: Any, root: Path) -> None:
    # Horn's gradient of a flat surface is 0; the border has no 3 x 3 window and is nodata.
    slope = _band(root, result)
    assert slope.mask[[0, -1], :].all() and slope.mask[:, [0, -1]].all()
    assert (slope[1:-1, 1:-1] == 0).all() and slope[1:-1, 1:-1].count() == 9


def _calc_of_constant(result: Any, root: Path) -> None:
    assert (result.valid_count, result.nodata_count) == (25, 0)
    assert (_band(root, result) == 1).all()


def _calc_stats_of_constant(result: Any, root: Path) -> None:
    stats = result.stats
    assert (stats.min, stats.max, stats.mean, stats.std, stats.valid_count) == (1, 1, 1, 0, 25)
    assert set(stats.percentiles.values()) == {1.0}


def _calc_stats_of_nothing(result: Any, root: Path) -> None:
    stats = result.stats
    assert (stats.valid_count, stats.nodata_count, stats.min, stats.max, stats.mean) == (
        0,
        16,
        None,
        None,
        None,
    )


def _reclassify_constant(result: Any, root: Path) -> None:
    assert [(r.to, r.cells) for r in result.rules] == [(1, 25), (2, 0)] and result.unmatched_cells == 0


def _pits_accumulate_themselves(result: Any, root: Path) -> None:
    # Every cell holds 0 (drains nowhere): each accumulates itself alone.
    assert result.max_value == 1 and (_band(root, result) == 1).all()


def _pit_is_its_own_catchment(result: Any, root: Path) -> None:
    assert [(p.row, p.col, p.cells, p.accumulation_cells) for p in result.points] == [(0, 0, 1, 1)]


KNOWN: dict[tuple[str, str], Callable[[Any, Path], None]] = {
    ("raster.stats", "constant-raster"): _constant_stats,
    ("raster.stats", "all-nodata-raster"): _all_nodata_stats,
    ("raster.stats", "all-nan-raster"): _all_nodata_stats,
    ("raster.area", "1x1-raster"): _one_cell_area,
    ("raster.area", "all-nodata-raster"): _all_nodata_area,
    ("raster.sample", "all-nodata-raster"): _nodata_sample,
    ("raster.sample", "points-outside"): _outside_samples,
    ("raster.zonal_stats", "constant-raster"): _zone_of(25.0, 0.0),
    ("raster.zonal_stats", "1x1-raster"): _zone_of(1.0, 0.0),
    ("raster.zonal_stats", "all-nodata-raster"): _zone_of(0.0, None),
    ("raster.clip", "constant-raster"): _clip_keeps(25),
    ("raster.clip", "1x1-raster"): _clip_keeps(1),
    ("raster.calc", "constant-raster"): _calc_of_constant,
    ("raster.calc_stats", "constant-raster"): _calc_stats_of_constant,
    ("raster.calc_stats", "all-nodata-raster"): _calc_stats_of_nothing,
    ("raster.calc_stats", "all-nan-raster"): _calc_stats_of_nothing,
    ("raster.reclassify", "constant-raster"): _reclassify_constant,
    ("terrain.slope", "constant-raster"): _flat_slope,
    ("hydrology.flow_accumulation", "constant-raster"): _pits_accumulate_themselves,
    ("hydrology.watershed", "constant-raster"): _pit_is_its_own_catchment,
}
"""Calls whose right answer is known on paper; every other call must only be an answer or a refusal."""


# --- the test --------------------------------------------------------------------------------------


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def call(op: Operation, context: OperationContext, gate: Gate, args: dict[str, Any]) -> Any:
    """The operation through the faces' pipeline; a gate miss is answered once, as an agent would."""
    try:
        return invoke(op, context, gate, args)
    except ReflectionRequired as miss:
        for hint in miss.hints:
            gate.persist(hint.hash, hint.domain, justification_for(hint.model_dump()))
    return invoke(op, context, gate, args)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize(("op", "case"), list(params()))
def test_a_degenerate_input_gets_an_answer_or_a_named_refusal(
    op: Operation, case: Case, context: OperationContext, gate: Gate, workspace_root: Path
) -> None:
    """Guards against an internal error (ValueError, IndexError, ZeroDivisionError, a numpy warning),
    a wrong answer where the right one is known, a refusal without a fix or that does not name the
    degenerate file (or point), and a refusal that leaves a half-written output or a temporary file. A
    polygon layer with no feature, a polygon of no area, or polygons that all miss the raster leave
    nothing to compute: those must be refused, never answered with an empty list."""
    args = arguments(op, case)
    before = _files(workspace_root)
    try:
        result = call(op, context, gate, args)
    except LlmcError as refused:
        assert type(refused) is not LlmcError and refused.kind != "internal_error", refused
        assert refused.fix, f"{op.qualname} refused without a fix: {refused.message}"
        if case.file is not None:
            assert case.file in refused.message, refused.message
        if case.kind == "vector":
            assert refused.kind == Refused.kind, refused
        if case.kind == "points":  # the point, as given: 4499995, not 4.5e+06
            assert f"{OUTSIDE_POINTS[0][1]:.10g}" in refused.message, refused.message
        after = _files(workspace_root)
        assert after - before == set(), f"left behind: {sorted(after - before)}"
        return
    assert case.kind != "vector", f"{op.qualname} answered on {case.file}: {result}"
    assert not any(".partial-" in name for name in _files(workspace_root))
    check = KNOWN.get((op.qualname, case.id))
    if check is not None:
        check(result, workspace_root)


@HYDROLOGY_PROCESS
def test_a_grid_draining_only_in_loops_is_refused_as_a_loop(context: OperationContext) -> None:
    """Guards against an internal error when no cell drains nowhere: two cells pointing at each other
    (1 east, 16 west) have no outlet, which pyflwdir rejects before the loop check could name it."""
    write(context.workspace.root / "loop.tif", np.array([[1, 16]], dtype="uint8"))
    op = next(o for o in CATALOG if o.qualname == "hydrology.flow_accumulation")
    with pytest.raises(InvalidArgument, match=r"2 cells of 'loop\.tif' drain into a loop"):
        op.run(context, op.validate({"flow_dir": "loop.tif", "dst": "loop-acc.tif"}))


def test_a_zone_raster_without_any_zone_is_refused(context: OperationContext) -> None:
    """Guards against an empty list of results, silently, for a zone raster whose every cell is nodata:
    the raster case of a layer with no features."""
    write(context.workspace.root / "no-zones.tif", np.full((4, 4), -1, "int16"), nodata=-1)
    op = next(o for o in CATALOG if o.qualname == "raster.zonal_stats")
    with pytest.raises(Refused, match=r"every cell of 'no-zones\.tif' is nodata") as refused:
        op.run(context, op.validate({"path": ORDINARY, "zones": "no-zones.tif"}))
    assert refused.value.fix


# --- through the classic face ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_classic_face_names_each_degenerate_input(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against the three failures of the issue, as an agent saw them: clip with a polygon file
    of no features was an internal error without a fix, zonal statistics on it an empty list, and a
    flow accumulation of an all-nodata grid an internal error."""
    write_layer(workspace_dir / "empty.gpkg", [])
    write(workspace_dir / "nothing.tif", np.full((4, 4), D8_NODATA, "uint8"), nodata=D8_NODATA)
    calls = [
        ("raster_clip", {"src": "RGB.byte.tif", "dst": "clipped.tif", "mask": "empty.gpkg"}),
        ("raster_zonal_stats", {"path": "RGB.byte.tif", "zones": "empty.gpkg"}),
        ("hydrology_flow_accumulation", {"flow_dir": "nothing.tif", "dst": "acc.tif"}),
    ]
    async with Client(build_server(classic_settings)) as client:
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            assert result.is_error, f"{tool}: {json.dumps(structured(result))[:300]}"
            error = structured(result)
            assert error["type"] == Refused.kind and error["fix"], error
    assert not (workspace_dir / "clipped.tif").exists() and not (workspace_dir / "acc.tif").exists()
