"""Provenance records beside every output, the manifest format's rules, and lineage by content.

The records follow the open provenance manifest format (spec/manifest-v1.md of manifest-spec, draft
3). Each test's docstring names the mistake it guards against. Outputs are written through a real
server (the classic face, the path both faces share), so the records are those agents get.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from mcp import Client
from pyproj import Transformer

from llmc_mcp.config import Settings
from llmc_mcp.provenance.conformance import SPEC_VERSION, problems
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, structured, text

pytestmark = pytest.mark.anyio

REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_of(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}.provenance.json").read_text())


def constant(path: Path, value: float) -> Path:
    profile = {
        "driver": "GTiff", "width": 8, "height": 6, "count": 1, "dtype": "float32", "crs": "EPSG:32618",
        "transform": Affine(10.0, 0.0, 500_000.0, 0.0, -10.0, 4_500_000.0),
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.full((1, 6, 8), value, dtype="float32"))
    return path


async def calc(client: Client, expression: str, inputs: dict[str, str], dst: str) -> dict[str, Any]:
    args = {"expression": expression, "inputs": {k: {"path": v} for k, v in inputs.items()}, "dst": dst}
    result = await client.call_tool("raster_calc", args)
    assert not result.is_error, text(result)
    return structured(result)


async def reproject_justified(client: Client, args: dict[str, Any]) -> None:
    hints = structured(await client.call_tool("raster_reproject", args))["reflection_required"]
    for hint in hints:
        answer = {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)}
        assert not (await client.call_tool("persist_justification", answer)).is_error
    result = await client.call_tool("raster_reproject", args)
    assert not result.is_error, text(result)


@pytest.fixture
async def client(classic_settings: Settings):
    async with Client(build_server(classic_settings)) as c:
        yield c


async def test_a_written_output_has_a_conforming_record_of_its_bytes_and_inputs(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a record that describes other bytes than those beside it, or leaves out an input.

    The output's and each input's SHA-256 are of the files' bytes, computed here independently.
    """
    constant(workspace_dir / "a.tif", 2.0)
    constant(workspace_dir / "b.tif", 3.0)
    await calc(client, "a * b", {"a": "a.tif", "b": "b.tif"}, "ab.tif")
    record = record_of(workspace_dir / "ab.tif")
    assert problems(record) == []
    assert record["spec_version"] == SPEC_VERSION and record["operation"] == "raster.calc"
    assert record["output"] == {
        "path": "ab.tif",
        "sha256": sha256(workspace_dir / "ab.tif"),
        "crs": "EPSG:32618",
    }
    assert {(i["path"], i["sha256"], i["crs"]) for i in record["inputs"]} == {
        ("a.tif", sha256(workspace_dir / "a.tif"), "EPSG:32618"),
        ("b.tif", sha256(workspace_dir / "b.tif"), "EPSG:32618"),
    }
    assert record["parameters"]["expression"] == "a * b"


async def test_the_engine_names_the_libraries_behind_the_numbers(client: Client, workspace_dir: Path) -> None:
    """Guards against an engine without versions: a record nobody can reproduce, only imitate."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "a1.tif")
    engine = record_of(workspace_dir / "a1.tif")["engine"]
    assert engine["name"] == "llmc-mcp" and engine["version"]
    assert {"GDAL", "PROJ", "rasterio", "pyproj", "numexpr"} <= set(engine["x-llmc:libraries"])
    assert engine["x-llmc:libraries"]["GDAL"] == rasterio.__gdal_version__


async def test_a_justified_reprojection_records_the_crs_decision_with_its_reason(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a record that names the target CRS and loses why it was chosen.

    The reason is the gate's justification; the transformation is the one the warp applied between
    the two CRSs (same datum here: WGS 84 UTM to WGS 84, so not a ballpark).
    """
    await reproject_justified(client, REPROJECT)
    record = record_of(workspace_dir / "rgb_4326.tif")
    assert problems(record) == []
    decision = record["crs_decisions"]
    justification = justification_for({"prompt_args": {"dst_crs": "EPSG:4326"}})
    assert decision["analysis_crs"] == decision["target_crs"] == "EPSG:4326"
    assert decision["source_crs"] == "EPSG:32618"
    assert justification["choice"]["rationale"] in decision["reason"]
    assert decision["transformation"]["is_ballpark"] is False
    assert "inv proj=utm zone=18" in decision["transformation"]["pipeline"]
    domains = {j["domain"] for j in record["x-llmc:justifications"]}
    assert domains == {"crs_datum", "resampling"}
    checks = {c["name"]: c for c in record["verification"]}
    assert checks["crs_present"]["passed"] and checks["crs_matches"]["passed"]


async def test_a_replaced_output_gets_the_new_record_not_the_old_one(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a record that outlives the bytes it described when the output is rewritten."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "out.tif")
    await calc(client, "a * 10", {"a": "a.tif"}, "out.tif")
    record = record_of(workspace_dir / "out.tif")
    assert record["parameters"]["expression"] == "a * 10"
    assert record["output"]["sha256"] == sha256(workspace_dir / "out.tif")


async def test_removing_an_output_removes_its_record(client: Client, workspace_dir: Path) -> None:
    """Guards against an orphan record claiming bytes that no longer exist beside it."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "out.tif")
    result = await client.call_tool("files_remove", {"path": "out.tif"})
    assert not result.is_error, text(result)
    assert not (workspace_dir / "out.tif.provenance.json").exists()


async def test_a_refused_write_leaves_neither_output_nor_record(client: Client, workspace_dir: Path) -> None:
    """Guards against a record of an output that was never written."""
    constant(workspace_dir / "a.tif", 2.0)
    result = await client.call_tool(
        "raster_calc",
        {
            "expression": "a + 1",
            "inputs": {"a": {"path": "a.tif"}},
            "dst": "out.tif",
            "dtype": "uint8",
            "nodata": -1,
        },
    )
    assert result.is_error
    assert not list(workspace_dir.glob("out.tif*")) and not list(workspace_dir.glob(".out.tif*"))


async def test_lineage_walks_a_three_step_chain_back_to_its_originals(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a lineage that follows names instead of bytes, or stops after one step.

    a, b -> ab (calc) -> ab_4326 (reproject) -> final (calc): the walk from final reaches a and b.
    """
    constant(workspace_dir / "a.tif", 2.0)
    constant(workspace_dir / "b.tif", 3.0)
    await calc(client, "a * b", {"a": "a.tif", "b": "b.tif"}, "ab.tif")
    await reproject_justified(client, {**REPROJECT, "src": "ab.tif", "dst": "ab_4326.tif"})
    await calc(client, "x + 1", {"x": "ab_4326.tif"}, "final.tif")
    result = await client.call_tool("provenance_lineage", {"path": "final.tif"})
    assert not result.is_error, text(result)
    walked = structured(result)
    assert [s["operation"] for s in walked["steps"]] == ["raster.calc", "raster.reproject", "raster.calc"]
    assert [s["path"] for s in walked["steps"]] == ["final.tif", "ab_4326.tif", "ab.tif"]
    assert sorted(walked["originals"]) == ["a.tif", "b.tif"] and walked["stops"] == []


async def test_lineage_follows_bytes_so_a_renamed_copy_is_traced(client: Client, workspace_dir: Path) -> None:
    """Guards against lineage keyed on file names: a copied output is the same bytes, the same history."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "out.tif")
    (workspace_dir / "copy.tif").write_bytes((workspace_dir / "out.tif").read_bytes())
    walked = structured(await client.call_tool("provenance_lineage", {"path": "copy.tif"}))
    assert walked["steps"][0]["record"] == "out.tif.provenance.json"
    assert walked["originals"] == ["a.tif"]


async def test_lineage_walks_past_a_byte_identical_copy_to_the_originals(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a walk keyed on digests alone, which confuses a record with its own input.

    RGB.byte.tif -> eq.tif (convert) -> eq_copy.tif (convert, the same bytes). eq_copy's record names
    eq.tif, whose digest eq_copy's record also claims: the walk must take eq.tif's own record next and
    reach RGB.byte.tif, not stop after one step with no originals.
    """
    options = {"driver": "GTiff", "compress": "DEFLATE"}
    for src, dst in (("RGB.byte.tif", "eq.tif"), ("eq.tif", "eq_copy.tif")):
        result = await client.call_tool("raster_convert", {"src": src, "dst": dst, **options})
        assert not result.is_error, text(result)
    assert sha256(workspace_dir / "eq.tif") == sha256(workspace_dir / "eq_copy.tif")
    walked = structured(await client.call_tool("provenance_lineage", {"path": "eq_copy.tif"}))
    assert [(s["path"], s["record"]) for s in walked["steps"]] == [
        ("eq_copy.tif", "eq_copy.tif.provenance.json"),
        ("eq.tif", "eq.tif.provenance.json"),
    ]
    assert walked["originals"] == ["RGB.byte.tif"] and walked["stops"] == []


async def test_lineage_stops_at_an_input_edited_since_and_says_so(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a lineage that vouches for an input whose bytes are no longer those used."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "out.tif")
    constant(workspace_dir / "a.tif", 5.0)
    walked = structured(await client.call_tool("provenance_lineage", {"path": "out.tif"}))
    assert walked["originals"] == []
    assert walked["stops"][0]["path"] == "a.tif" and "changed since" in walked["stops"][0]["reason"]


async def test_lineage_ignores_a_record_that_does_not_conform(client: Client, workspace_dir: Path) -> None:
    """Guards against believing any JSON that claims a file's digest (a planted record)."""
    constant(workspace_dir / "a.tif", 2.0)
    forged = {
        "operation": "raster.calc",
        "output": {"path": "a.tif", "sha256": sha256(workspace_dir / "a.tif")},
    }
    (workspace_dir / "a.tif.provenance.json").write_text(json.dumps(forged))
    walked = structured(await client.call_tool("provenance_lineage", {"path": "a.tif"}))
    assert walked["steps"] == [] and walked["originals"] == ["a.tif"]
    assert walked["ignored_records"] == ["a.tif.provenance.json"]
    # Planted on purpose: it must not fail the run's check that every record written conforms.
    (workspace_dir / "a.tif.provenance.json").unlink()


# The format's rules, on records built here (what the specification's conformance cases test).

VALID: dict[str, Any] = {
    "spec_version": "1.0.0-draft.3",
    "operation": "raster.calc",
    "parameters": {},
    "inputs": [{"path": "a.tif", "sha256": "0" * 64, "crs": "EPSG:32618"}],
    "engine": {"name": "llmc-mcp", "version": "0.1.0"},
    "verification": [{"name": "crs_present", "passed": True, "detail": "EPSG:32618"}],
    "started_at": "2026-11-23T10:00:00.5Z",
    "finished_at": "2026-11-23T10:00:01Z",
}


def test_a_complete_record_conforms() -> None:
    """Guards against a validator that refuses what the format allows (fractional seconds, null CRS)."""
    record = {**VALID, "inputs": [{"path": "a.tif", "sha256": "0" * 64, "crs": None}], "x-other:field": 1}
    assert problems(record) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"spec_version": "2.0.0"}, "spec_version"),
        ({"inputs": [{"path": "data\\a.tif", "sha256": "0" * 64}]}, "backslash"),
        ({"inputs": [{"path": "a.tif", "sha256": "A" * 64}]}, "lowercase hex"),
        ({"inputs": [{"path": "a.tif", "sha256": "0" * 63}]}, "64"),
        ({"verification": []}, "at least one"),
        ({"engine": {"name": "llmc-mcp"}}, "engine.version"),
        ({"finished_at": "2026-11-23T09:59:59Z"}, "precedes"),
        ({"finished_at": "2026-11-23T10:00:01+01:00"}, "UTC"),
        ({"verification": [{"name": "check_1", "passed": True, "detail": "x"}]}, "core check name"),
        ({"verification": [{"name": "crs_present", "passed": True}]}, "detail"),
        ({"output": {"path": "o.tif", "sha256": "0" * 10}}, "output.sha256"),
        ({"crs_decisions": {"analysis_crs": 4326}}, "analysis_crs"),
        ({"crs_decisions": {"transformation": {"accuracy_m": True}}}, "accuracy_m"),
    ],
)
def test_each_rule_of_the_format_is_enforced(change: dict[str, Any], named: str) -> None:
    """Guards against a validator that lets a non-conforming record through (so our tests would too)."""
    found = problems({**VALID, **change})
    assert any(named in problem for problem in found), found


def test_a_missing_required_field_is_named() -> None:
    """Guards against records without parameters: 'none' and 'not recorded' cannot be told apart."""
    record = {k: v for k, v in VALID.items() if k != "parameters"}
    assert problems(record) == ["`parameters` is required"]


async def test_a_run_that_fails_while_writing_leaves_a_record_of_the_failure(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against an audit trail that loses the failures it should document (the format keeps them).

    corrupt.tif opens (its header is sound) and fails while its pixels are copied: no output, and
    ``<dst>.provenance.json`` says what was asked, what was read and why nothing was written.
    """
    result = await client.call_tool("raster_convert", {"src": "corrupt.tif", "dst": "bad.tif"})
    assert result.is_error and structured(result)["type"] == "raster_error"
    assert not (workspace_dir / "bad.tif").exists()
    record = record_of(workspace_dir / "bad.tif")
    assert problems(record) == [] and "output" not in record
    assert record["x-llmc:outcome"] == "failed" and record["verification"][0]["passed"] is False
    assert "bad.tif was not written" in record["verification"][0]["detail"]
    assert record["inputs"][0]["path"] == "corrupt.tif"


async def test_a_failed_rewrite_keeps_the_record_of_the_output_that_stands(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a failed rewrite replacing the record of the bytes still beside it."""
    constant(workspace_dir / "a.tif", 2.0)
    await calc(client, "a + 1", {"a": "a.tif"}, "out.tif")
    before = (workspace_dir / "out.tif.provenance.json").read_bytes()
    assert (await client.call_tool("raster_convert", {"src": "corrupt.tif", "dst": "out.tif"})).is_error
    assert (workspace_dir / "out.tif.provenance.json").read_bytes() == before


async def test_a_vector_mask_is_an_input_of_the_record_with_its_layer(
    client: Client, workspace_dir: Path
) -> None:
    """Guards against a record that lists the rasters read and forgets the polygons that cut them."""
    constant(workspace_dir / "a.tif", 2.0)
    to_lonlat = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True)
    ring = [
        to_lonlat.transform(x, y)
        for x, y in [(500_000, 4_499_950), (500_040, 4_499_950), (500_040, 4_500_000), (500_000, 4_500_000)]
    ]
    ring.append(ring[0])
    polygon = {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [ring]}}
    mask = workspace_dir / "zone.geojson"
    mask.write_text(json.dumps({"type": "FeatureCollection", "features": [polygon]}))
    result = await client.call_tool("raster_clip", {"src": "a.tif", "dst": "cut.tif", "mask": "zone.geojson"})
    assert not result.is_error, text(result)
    inputs = {item["path"]: item for item in record_of(workspace_dir / "cut.tif")["inputs"]}
    assert set(inputs) == {"a.tif", "zone.geojson"}
    assert inputs["zone.geojson"]["sha256"] == sha256(mask) and inputs["zone.geojson"]["crs"] == "EPSG:4326"
    assert inputs["zone.geojson"]["layer"]
