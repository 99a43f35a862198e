"""Workflow states on disk: bound to the principal that started them, authenticated, expiring, out of
reach of the path policy; and a ``requires`` step's justification is the record the gate looks up."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from llmc_mcp.errors import LlmcError, NotFound, PathRefused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.invoke import invoke
from llmc_mcp.operations.workflows.engine import Engine
from llmc_mcp.operations.workflows.service import LocalWorkflows
from llmc_mcp.operations.workflows.state import WorkflowState
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.sessions import principal
from llmc_mcp.workspace import Workspace

ALICE, BOB = principal("http-alice"), principal("http-bob")


@pytest.fixture
def engine(workspace: Workspace) -> Engine:
    gate = Gate(JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="")
    return Engine(workspace, gate, face="code", ttl_seconds=3600)


def test_another_principal_holding_the_id_gets_not_found(engine: Engine) -> None:
    """Guards against one HTTP client reading or answering another's run with a leaked id."""
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    with pytest.raises(NotFound, match="started by another session"):
        engine.state(run.state_id, BOB)
    with pytest.raises(NotFound):
        engine.submit(run.state_id, ["a"], None, BOB)
    assert engine.state(run.state_id, ALICE).step == "decompose"


def test_an_expired_state_is_not_found_and_swept(engine: Engine) -> None:
    """Guards against runs kept (and answerable) forever, and their files piling up."""
    now = time.time()
    expired = WorkflowState(
        principal=ALICE, definition={}, inputs={}, saved={}, step=None, created=now - 10, updated=now - 10,
        expires=now - 1,
    )  # fmt: skip
    state_id = engine.states.create(expired)
    with pytest.raises(NotFound):
        engine.state(state_id, ALICE)
    assert engine.states.sweep() == 1
    assert list(engine.states.folder.glob("*.json")) == []


def test_an_edited_state_file_is_not_a_state(engine: Engine) -> None:
    """Guards against a state forged by whoever can write the workspace (a worker) being run."""
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    (path,) = engine.states.folder.glob("*.json")
    document = json.loads(path.read_text())
    document["state"]["saved"] = {"parts": ["planted"]}
    path.write_text(json.dumps(document))
    with pytest.raises(NotFound):
        engine.state(run.state_id, ALICE)


def test_the_state_file_neither_is_named_by_nor_holds_the_id(engine: Engine) -> None:
    """Guards against a listing of the folder (workers can read the workspace) handing out usable ids."""
    run = engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    (path,) = engine.states.folder.glob("*.json")
    secret = run.state_id.removeprefix("wf-")
    assert secret not in path.name and secret not in path.read_text()


def test_state_files_are_out_of_reach_of_the_path_policy(engine: Engine, workspace: Workspace) -> None:
    """Guards against agent code reading a state through an operation's path argument."""
    engine.start("chain_of_thought", {"problem": "p"}, ALICE)
    (path,) = engine.states.folder.glob("*.json")
    with pytest.raises(PathRefused, match="reserved for the server"):
        workspace.input_path(workspace.relative(path))


def test_a_requires_step_makes_the_gated_call_a_cache_hit(workspace: Workspace) -> None:
    """Guards against the workflow storing a record under a key the gate does not look up: the crs and
    resampling steps of area_statistics must leave nothing for the gate to ask."""
    data = np.ones((8, 8), dtype="float32")
    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "float32", "crs": "EPSG:4326"}
    with rasterio.open(workspace.root / "t.tif", "w", transform=from_origin(0, 1, 0.1, 0.1), **profile) as ds:
        ds.write(data, 1)
    ctx = OperationContext(workspace, workflows=LocalWorkflows(workspace))
    gate = Gate(JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="")
    reproject = get_operation("raster.reproject")
    args = reproject.validate(
        {"src": "t.tif", "dst": "o.tif", "dst_crs": "EPSG:6933", "resampling": "bilinear"}
    )
    facts = reproject.check(ctx, args)
    assert facts == {"data": "continuous"}
    assert [h.domain for h in gate.check(reproject, args, facts=facts)] == ["crs_datum", "resampling"]

    def submit(progress: dict, answer: object) -> dict:
        raw = {"state_id": progress["state_id"], "answer": answer, "step": progress["step"]}
        return invoke(get_operation("workflows.submit"), ctx, gate, raw).model_dump(mode="json")

    progress = invoke(
        get_operation("workflows.start"), ctx, gate,
        {"name": "area_statistics", "inputs": {"raster": "t.tif", "goal": "mean in 6933", "output": "o.tif"}},
    ).model_dump(mode="json")  # fmt: skip
    progress = submit(progress, "Geographic, float32 measurements.")
    progress = submit(progress, "new grid")
    for method in ("epsg:6933", "bilinear"):
        progress = submit(
            progress,
            {
                "intent": "Compare the mean value of measurements over true ground areas.",
                "alternatives": [{"method": "keep the source grid", "why_not": "Its cells differ in area."}],
                "choice": {"method": method, "rationale": "It suits continuous values here.",
                           "tradeoffs": "Some smoothing happens."},
                "confidence": "high",
            },
        )  # fmt: skip
    assert progress["step"] == "reproject"
    assert gate.check(reproject, args, facts=facts) == []


def test_a_choice_the_operation_refuses_is_reported_with_the_justifications_own_errors(
    workspace: Workspace,
) -> None:
    """Guards against one round trip per problem: JPEG on float data (raster.convert refuses it) and a
    justification missing its confidence come back together, and nothing is saved."""
    ctx = OperationContext(workspace, workflows=LocalWorkflows(workspace))
    gate = Gate(JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="")
    start = {
        "name": "delivery_format",
        "inputs": {"raster": "float_nan.tif", "purpose": "x", "output": "d.tif"},
    }
    progress = invoke(get_operation("workflows.start"), ctx, gate, start)
    submit = get_operation("workflows.submit")
    progress = invoke(submit, ctx, gate, {"state_id": progress.state_id, "answer": "Float32 data."})
    answer = {
        "intent": "A small file for a quick look in a viewer.",
        "alternatives": [{"method": "DEFLATE", "why_not": "The files stay too large."}],
        "choice": {
            "method": "JPEG",
            "rationale": "Smallest files for display use.",
            "tradeoffs": "Values change.",
        },
    }
    with pytest.raises(LlmcError) as caught:
        invoke(submit, ctx, gate, {"state_id": progress.state_id, "answer": answer})
    errors = caught.value.details["errors"]
    assert caught.value.kind == "answer_invalid"
    assert errors[0] == "confidence: Field required"
    assert errors[1].startswith("raster.convert refuses these arguments: ") and "JPEG" in errors[1]
    after = invoke(get_operation("workflows.state"), ctx, gate, {"state_id": progress.state_id})
    assert (after.step, after.results) == ("compression", None)
    assert not list(workspace.preflight_dir.rglob("format_selection/*.json"))


def test_an_answer_the_next_instruction_cannot_read_is_refused(engine: Engine, workspace: Workspace) -> None:
    """Guards against saving an answer and then failing to write the next step (a field it lacks): the
    run would be stuck on a step no one can be shown."""
    folder = workspace.root / ".llmc" / "workflows"
    folder.mkdir(parents=True)
    (folder / "pick.yaml").write_text(
        "name: pick\ndescription: Pick a site, then describe it.\nsteps:\n"
        "  - {id: choose, instruction: 'Pick a site as {name, lat}.', answer: any, save: site}\n"
        "  - {id: describe, instruction: 'Describe ${site.name}.', complete: true}\n"
    )
    run = engine.start("pick", {}, ALICE)
    with pytest.raises(LlmcError, match="site has no field 'name'") as caught:
        engine.submit(run.state_id, {"lat": 45.0}, "choose", ALICE)
    assert caught.value.kind == "answer_invalid"
    assert engine.state(run.state_id, ALICE).step == "choose"
    assert (
        engine.submit(run.state_id, {"name": "Col", "lat": 45.0}, "choose", ALICE).instruction
        == "Describe Col."
    )
