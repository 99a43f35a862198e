"""Reflection in band: on a client that can sample, a gated call completes in the agent's one call.

The host's model is a sampling callback of the SDK's real ``Client`` that answers from the question
it is sent (it reads the value to justify from it), so the whole path is real: the worker's gate
request, the server's ``sampling/createMessage`` mid-call, validation, the store, and the operation
continuing. Each test's docstring names the mistake it guards against.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, InputRequiredResult, TextContent

from llmc_mcp.config import Settings
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for, structured

pytestmark = pytest.mark.anyio

CODE = "raster.reproject('RGB.byte.tif', 'rgb_4326.tif', 'EPSG:4326', resampling='bilinear')['crs']['epsg']"
REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}


class Model:
    """A host model: answers each question with a justification for the value it asks about."""

    def __init__(self, *, invalid_first: int = 0, delay: float = 0.0):
        self.questions: list[str] = []
        self.invalid_first = invalid_first
        self.delay = delay

    async def __call__(self, ctx: Any, params: Any) -> CreateMessageResult:
        text = params.messages[0].content.text
        self.questions.append(text)
        await anyio.sleep(self.delay)
        if len(self.questions) <= self.invalid_first:
            answer = '{"intent": "x"}'
        else:
            subject = re.search(r'Set choice.method to "(.+?)" exactly', text).group(1)
            answer = "Here it is:\n" + json.dumps(justification_for({"prompt_args": {"x": subject}}))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=answer), model="fake-7b"
        )


def records(workspace_dir: Path) -> list[Any]:
    return list(JustificationStore(Workspace(workspace_dir).preflight_dir).records())


ERAS = ["auto", "legacy"]
"""The 2026-07-28 era (questions ride an InputRequiredResult and the client's retry resumes the paused
call) and the handshake era (``sampling/createMessage`` sent mid-call)."""


@pytest.mark.parametrize("era", ERAS)
async def test_a_gated_reprojection_completes_in_one_execute_code_call(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against a miss surfaced to an agent whose host could have answered it in band."""
    model = Model()
    async with Client(build_server(code_settings), mode=era, sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["ok"], result
    assert result["result"] == 4326
    assert len(model.questions) == 2  # the CRS and the resampling decisions
    assert {r.domain: r.answered_by for r in records(workspace_dir)} == {
        "crs_datum": "sampling: fake-7b",
        "resampling": "sampling: fake-7b",
    }
    assert (workspace_dir / "rgb_4326.tif").is_file()


async def test_the_question_describes_the_data_the_decision_is_about(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a model asked about resampling in general instead of this raster."""
    model = Model()
    async with Client(build_server(code_settings), mode="legacy", sampling_callback=model) as client:
        await client.call_tool("execute_code", {"code": CODE})
    question = model.questions[0]
    assert "src 'RGB.byte.tif': 791 x 718 cells, 3 band(s) of uint8, EPSG:32618" in question
    assert "Operation: raster.reproject" in question


async def test_a_classic_tool_call_completes_in_one_call(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against in-band reflection working in one face only."""
    model = Model()
    async with Client(build_server(classic_settings), mode="legacy", sampling_callback=model) as client:
        result = await client.call_tool("raster_reproject", REPROJECT)
    assert not result.is_error, result.content
    assert structured(result)["crs"]["epsg"] == 4326 and len(model.questions) == 2


@pytest.mark.parametrize("era", ERAS)
async def test_an_invalid_answer_gets_one_retry_that_shows_every_error(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against a retry that does not say what was wrong, or giving up after one bad answer."""
    model = Model(invalid_first=1)
    async with Client(build_server(code_settings), mode=era, sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["ok"], result
    retry = model.questions[1]
    assert "Your previous answer was refused" in retry and "alternatives" in retry and "choice" in retry


@pytest.mark.parametrize("era", ERAS)
async def test_two_invalid_answers_fall_back_to_hints_with_the_reason(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against an invalid sampled justification being stored, or a silent fallback."""
    model = Model(invalid_first=100)
    async with Client(build_server(code_settings), mode=era, sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert not result["ok"] and result["error"]["type"] == "reflection_required"
    for hint in result["reflection_required"]:
        assert "failed validation" in hint["fallback"]
    assert records(workspace_dir) == [] and not (workspace_dir / "rgb_4326.tif").exists()
    assert len(model.questions) == 4  # two decisions, two attempts each


async def test_the_hints_setting_never_samples(code_settings: Settings, workspace_dir: Path) -> None:
    """Guards against --reflection hints being accepted and ignored."""
    model = Model()
    settings = code_settings.model_copy(update={"reflection": "hints"})
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["error"]["type"] == "reflection_required" and model.questions == []
    assert all(hint.get("fallback") is None for hint in result["reflection_required"])


async def test_the_sampling_setting_on_a_client_that_cannot_sample_says_why(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against hints that do not say sampling was wanted and impossible."""
    settings = code_settings.model_copy(update={"reflection": "sampling"})
    async with Client(build_server(settings), mode="legacy") as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert "did not declare sampling" in result["reflection_required"][0]["fallback"]


async def test_a_slow_model_does_not_spend_the_agents_wall_clock(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a call killed by --exec-timeout while the host's model was thinking."""
    model = Model(delay=4.5)
    settings = code_settings.model_copy(update={"exec_timeout": 8.0})
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["ok"], result  # 9 s of sampling inside an 8 s wall clock


async def test_a_model_that_does_not_answer_in_time_falls_back_to_hints(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a hung host model hanging the call forever."""
    model = Model(delay=5.0)
    settings = code_settings.model_copy(update={"sampling_timeout": 0.5})
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert "did not answer within 0.5 s" in result["reflection_required"][0]["fallback"]


async def test_code_before_the_miss_runs_once_when_the_call_resumes(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against resuming a paused call by running the agent's code again from the top.

    On the 2026-07-28 era the client answers the question by retrying the call; side effects before
    the gated operation (here an append to a session variable) must happen once.
    """
    async with Client(build_server(code_settings), sampling_callback=Model()) as client:
        await client.call_tool("execute_code", {"code": "seen = []"})
        code = f"seen.append(1)\n{CODE}\nlen(seen)"
        result = structured(await client.call_tool("execute_code", {"code": code}))
    assert result["ok"] and result["result"] == 1, result


async def test_a_retry_naming_a_call_the_server_does_not_hold_is_refused(code_settings: Settings) -> None:
    """Guards against a forged request_state resuming (or starting) anything."""
    async with Client(build_server(code_settings), sampling_callback=Model()) as client:
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "execute_code", {"code": CODE}, request_state="forged", input_responses={}
            )


async def test_a_retry_with_other_arguments_does_not_resume_the_paused_call(code_settings: Settings) -> None:
    """Guards against a paused call resumed by a retry that asks for something else."""
    async with Client(build_server(code_settings), sampling_callback=Model()) as client:
        paused = await client.session.call_tool("execute_code", {"code": CODE}, allow_input_required=True)
        assert isinstance(paused, InputRequiredResult) and paused.input_requests
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool(
                "execute_code", {"code": "1 + 1"}, request_state=paused.request_state, input_responses={}
            )


async def test_a_sampled_justification_is_shown_as_such_in_reports_and_provenance(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a report or an output's record that credits the agent with the model's reasoning."""
    async with Client(build_server(code_settings), mode="legacy", sampling_callback=Model()) as client:
        await client.call_tool("execute_code", {"code": CODE})
        reported = structured(await client.call_tool("execute_code", {"code": "reflection.report()"}))[
            "result"
        ]
    assert {entry["answered_by"] for entry in reported} == {"sampling: fake-7b"}
    record = json.loads((workspace_dir / "rgb_4326.tif.provenance.json").read_text())
    assert {j["answered_by"] for j in record["x-llmc:justifications"]} == {"sampling: fake-7b"}


class Cancelling(Model):
    """A host model that never answers: the client cancels the call while the server waits on it."""

    def __init__(self) -> None:
        super().__init__(delay=600.0)
        self.asked = anyio.Event()

    async def __call__(self, ctx: Any, params: Any) -> CreateMessageResult:
        self.asked.set()
        return await super().__call__(ctx, params)


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_cancelled_while_the_server_samples_stops_and_leaves_nothing(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against a worker left waiting on a question nobody will answer, or half a decision
    stored, when the client cancels during sampling; the session goes on serving."""
    model = Cancelling()
    async with Client(build_server(code_settings), mode=era, sampling_callback=model) as client:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "execute_code", {"code": CODE})
            with anyio.fail_after(60):
                await model.asked.wait()
            tasks.cancel_scope.cancel()
        after = structured(await client.call_tool("execute_code", {"code": "1 + 1"}))
    assert after["ok"] and after["result"] == 2
    assert records(workspace_dir) == []
    assert not (workspace_dir / "rgb_4326.tif").exists()
    assert not list(workspace_dir.glob("*.partial-*")) and not list(workspace_dir.glob(".rgb_4326*"))
