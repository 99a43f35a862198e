"""Workflows through real MCP clients, in both faces: every built-in walked to the end, the call
next_action spells made exactly as given, restarts in the middle, and justifications that a workflow
stored turning the later gated operation into a cache hit.

The scripted agent below answers each step; where a step tells it to run an operation it runs it
(through the same client) before answering, as a model would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from mcp import Client
from rasterio.transform import from_origin

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import stdio_params, structured

pytestmark = pytest.mark.anyio

FACES = ["code", "classic"]


def justification(method: str) -> dict[str, Any]:
    """A justification that passes the gate's checks for ``method`` (words of its own, no prompt text)."""
    return {
        "intent": "Measure each class of this raster by its true ground area.",
        "alternatives": [{"method": "keep the source grid", "why_not": "Its cells differ in ground area."}],
        "choice": {
            "method": method,
            "rationale": "It keeps what this analysis depends on.",
            "tradeoffs": "Cells are resampled once.",
        },
        "confidence": "medium",
    }


@pytest.fixture
def classes_tif(workspace_dir: Path) -> str:
    """20 x 20 cells of 0.01 degree at the equator, class 1 in the west half and 2 in the east, with a
    colour table (so the gate scopes resampling decisions to categorical data)."""
    data = np.ones((20, 20), dtype="uint8")
    data[:, 10:] = 2
    profile = {"driver": "GTiff", "width": 20, "height": 20, "count": 1, "dtype": "uint8", "crs": "EPSG:4326"}
    with rasterio.open(
        workspace_dir / "classes.tif", "w", transform=from_origin(10, 0.1, 0.01, 0.01), **profile
    ) as ds:
        ds.write(data, 1)
        ds.write_colormap(1, {1: (0, 128, 0, 255), 2: (255, 255, 0, 255)})
    return "classes.tif"


@pytest.fixture
def valley_dem(workspace_dir: Path) -> str:
    """A V-shaped valley, 21 x 21 cells of 30 m in UTM 33N: z = 10 |col - 10| + (20 - row) + 100, so the
    channel is column 10 and falls 1 m per cell southwards; every side cell drains straight to it."""
    rows, cols = np.mgrid[0:21, 0:21]
    z = (10.0 * np.abs(cols - 10) + (20 - rows) + 100).astype("float32")
    profile = {
        "driver": "GTiff",
        "width": 21,
        "height": 21,
        "count": 1,
        "dtype": "float32",
        "crs": "EPSG:32633",
    }
    with rasterio.open(
        workspace_dir / "dem.tif",
        "w",
        transform=from_origin(500000, 5000630, 30, 30),
        nodata=-9999,
        **profile,
    ) as ds:
        ds.write(z, 1)
    return "dem.tif"


class Agent:
    """Drives one face: makes next_action's call as given, and runs operations the steps ask for."""

    def __init__(self, client: Client, face: str):
        self.client = client
        self.face = face

    async def op(self, qualname: str, **args: Any) -> dict[str, Any]:
        """Run a catalog operation; a reflection miss fails the test (the workflow should prevent it)."""
        if self.face == "code":
            result = structured(
                await self.client.call_tool("execute_code", {"code": f"{qualname}(**{args!r})"})
            )
            assert result["ok"], result["error"]
            return result["result"]
        result = await self.client.call_tool(qualname.replace(".", "_"), args)
        assert not result.is_error, structured(result)
        return structured(result)

    async def start(self, name: str, **inputs: str) -> dict[str, Any]:
        if self.face == "code":
            code = f"p = workflows.start({name!r}, **{inputs!r})\np"
            result = structured(await self.client.call_tool("execute_code", {"code": code}))
            assert result["ok"], result["error"]
            return result["result"]
        pairs = [{"name": k, "value": v} for k, v in inputs.items()]
        result = await self.client.call_tool("workflow_start", {"name": name, "inputs": pairs})
        assert not result.is_error, structured(result)
        return structured(result)

    async def answer(self, progress: dict[str, Any], answer: Any) -> dict[str, Any]:
        """Submit with exactly the call next_action names; returns the result, or the error."""
        action = progress["next_action"]
        if self.face == "code":
            code = f"answer = {answer!r}\np = {action}\np"
            result = structured(await self.client.call_tool("execute_code", {"code": code}))
            return result["result"] if result["ok"] else result["error"]
        arguments = {**action["arguments"], "answer": answer}
        result = await self.client.call_tool(action["tool"], arguments)
        return structured(result)


async def walk(
    agent: Agent, progress: dict[str, Any], answers: dict[str, Callable[..., Any]]
) -> dict[str, Any]:
    """Answer step after step (an answer may be a coroutine function that runs operations first)."""
    while not progress["complete"]:
        produce = answers[progress["step"]]
        value = produce(progress)
        if hasattr(value, "__await__"):
            value = await value
        progress = await agent.answer(progress, value)
        assert "type" not in progress, progress
    return progress


@pytest.mark.parametrize("face", FACES)
async def test_chain_of_thought_runs_each_part_in_its_own_step(workspace_dir: Path, face: str) -> None:
    """Guards against a foreach step asked once (or its answers lost) instead of once per part, and the
    synthesis not seeing every saved analysis."""
    seen: list[str] = []

    def analyse(progress: dict[str, Any]) -> str:
        seen.append(progress["instruction"])
        return f"analysis {progress['item']} of {progress['items']}"

    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        first = await agent.start("chain_of_thought", problem="Why is the sky blue?")
        assert (first["step"], first["step_index"], first["total_steps"]) == ("decompose", 1, 3)
        synthesis: list[str] = []

        def synthesize(progress: dict[str, Any]) -> str:
            synthesis.append(progress["instruction"])
            return "Rayleigh scattering, weighted by the eye."

        done = await walk(
            agent,
            first,
            {
                "decompose": lambda p: ["scattering", "eye sensitivity"],
                "analyse": analyse,
                "synthesize": synthesize,
            },
        )
    assert len(seen) == 2
    assert "Analyse this part alone, thoroughly: scattering" in seen[0]
    assert "Analyse this part alone, thoroughly: eye sensitivity" in seen[1]
    assert "- analysis 1 of 2\n- analysis 2 of 2\n" in synthesis[0]
    assert done["results"] == {
        "parts": ["scattering", "eye sensitivity"],
        "analyses": ["analysis 1 of 2", "analysis 2 of 2"],
        "conclusion": "Rayleigh scattering, weighted by the eye.",
    }


@pytest.mark.parametrize("face", FACES)
async def test_area_statistics_stores_both_justifications_so_the_reprojection_runs_without_a_miss(
    workspace_dir: Path, classes_tif: str, face: str
) -> None:
    """Guards against a workflow justification stored under other decision args than the gate derives
    (data kind, purpose, normalized CRS): the reprojection would then ask again."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        first = await agent.start(
            "area_statistics",
            raster=classes_tif,
            goal="deliver the classes in EPSG:6933 with the area of each",
            output="out/ea.tif",
        )

        async def reproject(progress: dict[str, Any]) -> str:
            # Exactly the call the instruction names; the agent's Agent.op fails on any reflection miss.
            info = await agent.op(
                "raster.reproject",
                src=classes_tif,
                dst="out/ea.tif",
                dst_crs="epsg:6933",
                resampling="nearest",
            )
            return f"EPSG:{info['crs']['epsg']}, {info['width']} x {info['height']}"

        async def measure(progress: dict[str, Any]) -> str:
            area = await agent.op("raster.area", path="out/ea.tif")
            return json.dumps(area)[:2000]

        done = await walk(
            agent,
            first,
            {
                "inspect": lambda p: (
                    "EPSG:4326, 0.01 degree cells, uint8 classes 1 and 2 with a colour table."
                ),
                "grid": lambda p: "new grid",
                "crs": lambda p: justification("EPSG:6933"),
                "resampling": lambda p: justification("nearest"),
                "reproject": reproject,
                "measure_new_grid": measure,
                "report": lambda p: "Two classes of equal area.",
            },
        )
    assert done["results"]["reprojected"].startswith("EPSG:6933, ")
    with rasterio.open(workspace_dir / "out" / "ea.tif") as ds:
        assert ds.crs.to_epsg() == 6933
        assert sorted(set(np.unique(ds.read(1, masked=True).compressed()).tolist())) == [1, 2]
    records = sorted((workspace_dir / ".preflight" / "justifications").rglob("*.json"))
    assert [r.parent.name for r in records].count("crs_datum") == 1
    assert [r.parent.name for r in records].count("resampling") == 1
    stored = json.loads(next(r for r in records if r.parent.name == "resampling").read_text())
    assert stored["prompt_args"] == {"method": "nearest", "data": "categorical", "purpose": "warping"}


@pytest.mark.parametrize("face", FACES)
async def test_area_statistics_measures_on_the_native_grid_when_the_goal_needs_no_new_grid(
    workspace_dir: Path, classes_tif: str, face: str
) -> None:
    """Guards against a workflow that warps for no reason: areas of categorical data measured after a
    reprojection to an equal-area CRS differ from the ground areas raster.area gives on the native
    grid (any CRS). Answered 'native', the run measures the raster itself, asks no CRS or resampling
    question, stores no justification and writes no copy."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        first = await agent.start(
            "area_statistics", raster=classes_tif, goal="area of each class", output="out/ea.tif"
        )
        asked: list[str] = []

        async def measure(progress: dict[str, Any]) -> str:
            assert f"raster.area(path='{classes_tif}')" in progress["instruction"]
            return json.dumps(await agent.op("raster.area", path=classes_tif))[:2000]

        def answer(step: str, value: Any) -> Callable[[dict[str, Any]], Any]:
            def produce(progress: dict[str, Any]) -> Any:
                asked.append(step)
                return value(progress) if callable(value) else value

            return produce

        done = await walk(
            agent,
            first,
            {
                "inspect": answer("inspect", "EPSG:4326, 0.01 degree cells, uint8 classes 1 and 2."),
                "grid": answer("grid", "native"),
                "measure": answer("measure", measure),
                "report": answer("report", "Two classes of equal area."),
            },
        )
        native = await agent.op("raster.area", path=classes_tif)
    assert asked == ["inspect", "grid", "measure", "report"]
    assert json.loads(done["results"]["measurements"]) == native
    assert not (workspace_dir / "out").exists()
    assert not list((workspace_dir / ".preflight").rglob("justifications/*/*.json"))


@pytest.mark.parametrize("face", FACES)
async def test_watershed_delineation_stores_three_hydrology_justifications_and_delineates(
    workspace_dir: Path, valley_dem: str, face: str
) -> None:
    """Guards against hydrology justifications stored for other args than the operations derive
    (max_depth 'none', threshold as a float, its units): condition, flow_direction and streams would
    each ask again."""
    outlet = [[500000 + 10.5 * 30, 5000630 - 20.5 * 30]]
    # Routing compiles pyflwdir's numba kernels in each new worker: seconds on a loaded machine.
    settings = Settings(mode=face, workspace=workspace_dir, exec_timeout=600)
    async with Client(build_server(settings)) as client:
        agent = Agent(client, face)
        first = await agent.start(
            "watershed_delineation", dem=valley_dem, pour_points=json.dumps(outlet), output_dir="out/basin"
        )

        async def condition(progress: dict[str, Any]) -> str:
            result = await agent.op(
                "hydrology.condition", dem=valley_dem, dst="out/basin/conditioned.tif", method="fill"
            )
            return json.dumps(result)[:500]

        async def flow(progress: dict[str, Any]) -> str:
            await agent.op(
                "hydrology.flow_direction",
                dem="out/basin/conditioned.tif",
                dst="out/basin/flow_dir.tif",
                routing="d8",
            )
            result = await agent.op(
                "hydrology.flow_accumulation",
                flow_dir="out/basin/flow_dir.tif",
                dst="out/basin/accumulation.tif",
            )
            return json.dumps(result)[:500]

        async def delineate(progress: dict[str, Any]) -> str:
            await agent.op(
                "hydrology.streams",
                accumulation="out/basin/accumulation.tif",
                dst="out/basin/streams.tif",
                threshold=5,
                threshold_units="cells",
            )
            result = await agent.op(
                "hydrology.watershed",
                flow_dir="out/basin/flow_dir.tif",
                pour_points=outlet,
                dst="out/basin/ws.tif",
            )
            return json.dumps({"points": result["points"]})

        done = await walk(
            agent,
            first,
            {
                "inspect": lambda p: "UTM 33N, 30 m cells, one valley draining south along column 10.",
                "conditioning": lambda p: justification("fill"),
                "condition": condition,
                "routing": lambda p: justification("d8"),
                "flow": flow,
                "threshold": lambda p: justification("5"),
                "delineate": delineate,
                "report": lambda p: "One basin.",
            },
        )
    assert done["complete"]
    records = sorted((workspace_dir / ".preflight" / "justifications" / "hydrology").glob("*.json"))
    args = sorted(json.dumps(json.loads(r.read_text())["prompt_args"], sort_keys=True) for r in records)
    assert args == [
        '{"max_depth": "none", "method": "fill"}',
        '{"routing": "d8"}',
        '{"threshold": "5.0", "units": "cells"}',
    ]
    # The outlet (row 20, column 10) is the DEM's lowest cell and every other cell has a lower neighbour
    # nearer to it (z falls towards column 10 and towards row 20): the whole grid is its basin.
    (basin,) = json.loads(done["results"]["basins"])["points"]
    assert (basin["row"], basin["col"], basin["cells"]) == (20, 10, 21 * 21)


@pytest.mark.parametrize("face", FACES)
async def test_delivery_format_with_a_lossy_choice_takes_the_loss_check_branch(
    workspace_dir: Path, face: str
) -> None:
    """Guards against a branch condition that never holds (the lossy delivery skipping its check) and
    a lossy compression justified in the workflow still asking when the conversion runs."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        first = await agent.start(
            "delivery_format", raster="RGB.byte.tif", purpose="a basemap in a web viewer", output="d/rgb.tif"
        )
        steps: list[str] = []

        async def convert(progress: dict[str, Any]) -> str:
            info = await agent.op("raster.convert", src="RGB.byte.tif", dst="d/rgb.tif", compress="JPEG")
            return f"{info['compression']}"

        def note(answer: str) -> Callable[[dict[str, Any]], str]:
            def produce(progress: dict[str, Any]) -> str:
                steps.append(progress["step"])
                return answer

            return produce

        done = await walk(
            agent,
            first,
            {
                "inspect": note("Three uint8 bands, nodata 0, 791 x 718, display only."),
                "compression": lambda p: justification("JPEG"),
                "convert": convert,
                "check_loss": note("Means moved by under one level; fine for display."),
                "summary": note("A JPEG-compressed GeoTIFF for display."),
            },
        )
    assert steps == ["inspect", "check_loss", "summary"]
    assert done["results"]["converted"].split()[-1] == "JPEG"  # GDAL reports RGB JPEG as "YCBCR JPEG"


@pytest.mark.parametrize("face", FACES)
async def test_delivery_format_with_a_lossless_choice_skips_the_loss_check(
    workspace_dir: Path, face: str
) -> None:
    """Guards against a lossless choice refused for having no decision to store, or sent to the check."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        progress = await agent.start(
            "delivery_format", raster="shade.tif", purpose="elevation analysis", output="d/shade.tif"
        )
        progress = await agent.answer(progress, "One uint8 band; exact values matter.")
        progress = await agent.answer(progress, justification("DEFLATE"))
        assert progress["step"] == "convert"
        progress = await agent.answer(progress, "Written losslessly.")
    assert progress["step"] == "summary"
    assert not list((workspace_dir / ".preflight").rglob("format_selection/*.json"))


@pytest.mark.parametrize("face", FACES)
async def test_a_run_survives_a_server_restart_in_the_middle(workspace_dir: Path, face: str) -> None:
    """Guards against states held in memory only: a new server on the same workspace continues the run."""
    settings = Settings(mode=face, workspace=workspace_dir)
    async with Client(build_server(settings)) as client:
        agent = Agent(client, face)
        progress = await agent.start("chain_of_thought", problem="Is 91 prime?")
        progress = await agent.answer(progress, ["divisibility by 7", "divisibility by 13"])
        assert (progress["step"], progress["item"]) == ("analyse", 1)
    async with Client(build_server(settings)) as client:
        agent = Agent(client, face)
        progress = await agent.answer(progress, "91 = 7 x 13.")
        assert (progress["step"], progress["item"]) == ("analyse", 2)
        progress = await agent.answer(progress, "13 divides it.")
        done = await agent.answer(progress, "No: 91 = 7 x 13.")
    assert done["complete"] and done["results"]["analyses"] == ["91 = 7 x 13.", "13 divides it."]


@pytest.mark.parametrize("face", FACES)
async def test_a_bad_justification_gets_every_problem_and_the_same_step_again(
    workspace_dir: Path, classes_tif: str, face: str
) -> None:
    """Guards against the first problem alone being reported, or a refused answer being saved (and the
    run moving on) or its justification stored."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        progress = await agent.start("area_statistics", raster=classes_tif, goal="areas", output="o.tif")
        progress = await agent.answer(progress, "Geographic, categorical.")
        progress = await agent.answer(progress, "new grid")
        bad = justification("EPSG:6933")
        bad["intent"] = "ok"
        bad["confidence"] = "certain"
        bad["choice"]["method"] = "EPSG:3857"
        error = await agent.answer(progress, bad)
        again = await agent.answer(progress, justification("EPSG:6933"))
    assert error["type"] == "answer_invalid"
    problems = " | ".join(error["details"]["errors"])
    assert "confidence" in problems and "intent" in problems
    assert error["details"]["step"] == "crs"
    assert again["step"] == "resampling"


@pytest.mark.parametrize("face", FACES)
async def test_wrong_answer_type_is_refused_and_nothing_is_saved(workspace_dir: Path, face: str) -> None:
    """Guards against a text saved where a list is needed (the foreach over it would then break)."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        progress = await agent.start("chain_of_thought", problem="p")
        error = await agent.answer(progress, "one part only")
        again = await agent.answer(progress, ["a"])
    assert error["type"] == "answer_invalid"
    assert error["details"]["errors"] == ["answer: must be a non-empty list of texts, got text"]
    assert again["step"] == "analyse" and again["items"] == 1


@pytest.mark.parametrize("face", FACES)
async def test_a_stale_answer_is_refused_as_out_of_order(workspace_dir: Path, face: str) -> None:
    """Guards against a retried submit (the client resends after a timeout) being saved as the answer to
    the step after it."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        first = await agent.start("chain_of_thought", problem="p")
        await agent.answer(first, ["a", "b"])
        stale = await agent.answer(first, ["a", "b"])
    assert stale["type"] == "invalid_argument"
    assert "Out of order" in stale["message"] and "'analyse'" in stale["message"]


@pytest.mark.parametrize("face", FACES)
async def test_a_finished_run_takes_no_more_answers(workspace_dir: Path, face: str) -> None:
    """Guards against a complete run restarting or overwriting its results."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        progress = await agent.start("chain_of_thought", problem="p")
        progress = await agent.answer(progress, ["a"])
        progress = await agent.answer(progress, "x")
        last = dict(progress)
        done = await agent.answer(progress, "y")
        after = await agent.answer(last, "z")
    assert done["complete"]
    assert after["type"] == "invalid_argument" and "already complete" in after["message"]


@pytest.mark.parametrize("face", FACES)
async def test_an_unknown_state_id_is_not_found(workspace_dir: Path, face: str) -> None:
    """Guards against a guessed or expired id reaching some state, or failing with an internal error."""
    async with Client(build_server(Settings(mode=face, workspace=workspace_dir))) as client:
        agent = Agent(client, face)
        progress = await agent.start("chain_of_thought", problem="p")
        forged = json.loads(json.dumps(progress).replace(progress["state_id"], "wf-" + "A" * 32))
        error = await agent.answer(forged, ["a"])
    assert error["type"] == "not_found"


async def test_code_mode_next_action_is_a_line_of_code_and_classic_a_tool_call(workspace_dir: Path) -> None:
    """Guards against one face's next_action in the other (a tool call a code agent cannot run)."""
    async with Client(build_server(Settings(mode="code", workspace=workspace_dir))) as client:
        code = await Agent(client, "code").start("chain_of_thought", problem="p")
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        classic = await Agent(client, "classic").start("chain_of_thought", problem="p")
    state = code["state_id"]
    assert code["next_action"] == (
        f"workflows.submit({state!r}, answer, step='decompose')  # answer: a list of texts"
    )
    assert classic["next_action"] == {
        "tool": "workflow_submit",
        "arguments": {"state_id": classic["state_id"], "step": "decompose", "answer": "<a list of texts>"},
    }


async def test_classic_mode_lists_the_three_workflow_tools_only(workspace_dir: Path) -> None:
    """Guards against the code-mode conveniences (describe, state) growing the classic tool list."""
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert {n for n in names if n.startswith("workflow")} == {
        "workflow_list",
        "workflow_start",
        "workflow_submit",
    }


async def test_code_mode_state_describe_and_list_answer_from_the_stub_namespace(workspace_dir: Path) -> None:
    """Guards against the stub namespace missing functions the issue names (list, describe, state)."""
    code = """
p = workflows.start("chain_of_thought", problem="p")
s = workflows.state(p["state_id"])
d = workflows.describe("chain_of_thought")
names = sorted(w["name"] for w in workflows.list()["workflows"])
ids = [x["id"] for x in d["steps"]]
[s["step"], s["instruction"] == p["instruction"], ids, d["steps"][1]["foreach"], names]
"""
    async with Client(build_server(Settings(mode="code", workspace=workspace_dir))) as client:
        result = structured(await client.call_tool("execute_code", {"code": code}))
    assert result["ok"], result["error"]
    assert result["result"] == [
        "decompose",
        True,
        ["decompose", "analyse", "synthesize"],
        "parts",
        ["area_statistics", "chain_of_thought", "delivery_format", "watershed_delineation"],
    ]


USER_WORKFLOW = """\
name: field_note
description: Write a field note about a place.
inputs: [{name: place, description: Where.}]
steps:
  - {id: note, instruction: "Describe ${place}.", save: note, complete: true}
"""


async def test_a_bad_user_workflow_is_listed_as_skipped_and_the_good_ones_run(workspace_dir: Path) -> None:
    """Guards against one broken user file stopping the server or hiding the valid user workflows."""
    folder = workspace_dir / ".llmc" / "workflows"
    folder.mkdir(parents=True)
    (folder / "note.yaml").write_text(USER_WORKFLOW)
    (folder / "broken.yaml").write_text(
        USER_WORKFLOW.replace("field_note", "broken").replace("${place}", "${plac}")
    )
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        listed = structured(await client.call_tool("workflow_list", {}))
        agent = Agent(client, "classic")
        progress = await agent.start("field_note", place="the ridge")
        done = await agent.answer(progress, "Windy.")
    user = [w for w in listed["workflows"] if not w["builtin"]]
    assert [(w["name"], w["steps"]) for w in user] == [("field_note", 1)]
    assert listed["skipped"] == [
        {
            "file": "broken.yaml",
            "step": "note",
            "problem": "instruction: '${plac}' names a value no earlier step saves on every path here",
        }
    ]
    assert progress["instruction"] == "Describe the ridge."
    assert done["results"] == {"note": "Windy."}


async def test_a_run_survives_a_new_server_process(workspace_dir: Path) -> None:
    """Guards against a state bound to something one process holds (its connection key, memory): a host
    that starts a new stdio server per call must be able to finish the run."""
    progress: dict[str, Any] = {}
    for answer in (None, ["one part"], "its analysis", "the conclusion"):
        async with Client(stdio_params(workspace_dir, "--mode", "classic")) as client:
            agent = Agent(client, "classic")
            if answer is None:
                progress = await agent.start("chain_of_thought", problem="p")
            else:
                progress = await agent.answer(progress, answer)
    assert progress["complete"]
    assert progress["results"] == {
        "parts": ["one part"],
        "analyses": ["its analysis"],
        "conclusion": "the conclusion",
    }
