"""--min-confidence: a justification below the minimum needs the user's approval (MCP elicitation).

The user is the SDK ``Client``'s real elicitation callback; the server's request goes mid-call on the
handshake era and through the retried call on the 2026-07-28 era. Each test's docstring names the
mistake it guards against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import ElicitResult

from llmc_mcp.config import Settings
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for, structured, text
from tests.test_reflection_sampling import CODE, REPROJECT, Model

pytestmark = pytest.mark.anyio
ERAS = ["auto", "legacy"]


class User:
    """Answers every review the same way and keeps what it was shown."""

    def __init__(self, approve: bool, action: str = "accept"):
        self.approve, self.action = approve, action
        self.shown: list[str] = []

    async def __call__(self, ctx: Any, params: Any) -> ElicitResult:
        self.shown.append(params.message)
        content = (
            {"approve": self.approve, "comment": "checked the extent"} if self.action == "accept" else None
        )
        return ElicitResult(action=self.action, content=content)


def low(hint: dict[str, Any]) -> dict[str, Any]:
    return {**justification_for(hint), "confidence": "low"}


def records(workspace_dir: Path) -> list[Any]:
    return list(JustificationStore(Workspace(workspace_dir).preflight_dir).records())


async def persist_all(client: Client, justify: Any = low) -> list[Any]:
    hints = structured(await client.call_tool("raster_reproject", REPROJECT))["reflection_required"]
    return [
        await client.call_tool(
            "persist_justification", {"hash": h["hash"], "domain": h["domain"], "justification": justify(h)}
        )
        for h in hints
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_an_approved_low_confidence_justification_is_stored_with_the_review(
    classic_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against a weak justification stored without the person's approval it needed."""
    user = User(approve=True)
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    async with Client(build_server(settings), mode=era, elicitation_callback=user) as client:
        assert all(not r.is_error for r in await persist_all(client))
        assert not (await client.call_tool("raster_reproject", REPROJECT)).is_error
    assert {r.review["action"] for r in records(workspace_dir)} == {"approved"}
    assert {r.review["comment"] for r in records(workspace_dir)} == {"checked the extent"}
    assert "raster.reproject" in user.shown[0] and "low confidence" in user.shown[0]


@pytest.mark.parametrize("era", ERAS)
async def test_a_declined_justification_leaves_nothing_written(
    classic_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against a decision the user refused being stored anyway (or half stored)."""
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    async with Client(build_server(settings), mode=era, elicitation_callback=User(approve=False)) as client:
        results = await persist_all(client)
    assert all(r.is_error and structured(r)["type"] == "review_declined" for r in results)
    assert records(workspace_dir) == []


async def test_a_dismissed_form_is_a_decline(classic_settings: Settings, workspace_dir: Path) -> None:
    """Guards against reading a closed form (no answer) as consent."""
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    user = User(approve=True, action="cancel")
    async with Client(build_server(settings), mode="legacy", elicitation_callback=user) as client:
        results = await persist_all(client)
    assert all(structured(r)["type"] == "review_declined" for r in results) and records(workspace_dir) == []


async def test_without_elicitation_the_refusal_says_how_to_proceed(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a weak justification slipping through on a client that cannot ask its user."""
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    async with Client(build_server(settings), mode="legacy") as client:
        results = await persist_all(client)
    error = structured(results[0])
    assert error["type"] == "review_required" and "--min-confidence" in error["fix"]
    assert records(workspace_dir) == []


async def test_a_justification_at_the_minimum_asks_no_one(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against asking the user about every decision, confident or not."""
    user = User(approve=True)
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    async with Client(build_server(settings), mode="legacy", elicitation_callback=user) as client:
        results = await persist_all(client, justification_for)  # "medium"
    assert all(not r.is_error for r in results) and user.shown == []


@pytest.mark.parametrize("era", ERAS)
async def test_code_mode_persist_is_reviewed_in_the_same_call(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against reflection.persist in code mode bypassing the review the classic tool gets."""
    settings = code_settings.model_copy(update={"min_confidence": "high"})
    user = User(approve=True)
    first = CODE.replace("['crs']['epsg']", "")
    code = (
        f"try:\n    {first}\nexcept reflection.ReflectionRequired as e:\n    hints = e.hints\n"
        "for h in hints:\n"
        "    j = {'intent': 'Overlay on a web map that expects WGS 84 degrees.', 'alternatives': "
        "[{'method': 'keep the source grid', 'why_not': 'The viewer needs degrees.'}], "
        "'choice': {'method': list(h['prompt_args'].values())[0], "
        "'rationale': 'It matches the viewer grid.', "
        "'tradeoffs': 'Pixels are resampled once.'}, 'confidence': 'medium'}\n"
        "    reflection.persist(h['hash'], h['domain'], j)\n"
        f"{CODE}"
    )
    async with Client(build_server(settings), mode=era, elicitation_callback=user) as client:
        result = structured(await client.call_tool("execute_code", {"code": code}))
    assert result["ok"] and result["result"] == 4326, result
    assert len(user.shown) == 2 and {r.review["action"] for r in records(workspace_dir)} == {"approved"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_sampled_justification_below_the_minimum_is_reviewed_too(
    code_settings: Settings, workspace_dir: Path, era: str
) -> None:
    """Guards against the host's model being trusted where the agent would need a person's approval."""
    settings = code_settings.model_copy(update={"min_confidence": "high"})
    user = User(approve=True)
    async with Client(
        build_server(settings), mode=era, sampling_callback=Model(), elicitation_callback=user
    ) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["ok"], result
    assert {(r.answered_by, r.review["action"]) for r in records(workspace_dir)} == {
        ("sampling: fake-7b", "approved")
    }


async def test_a_declined_sampled_justification_falls_back_to_hints(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a sampled decision the user refused running the operation anyway."""
    settings = code_settings.model_copy(update={"min_confidence": "high"})
    async with Client(
        build_server(settings),
        mode="legacy",
        sampling_callback=Model(),
        elicitation_callback=User(approve=False),
    ) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["error"]["type"] == "reflection_required", text
    assert "did not approve" in result["reflection_required"][0]["fallback"]
    assert records(workspace_dir) == []


async def start_area_statistics(client: Client, workspace_dir: Path) -> dict[str, Any]:
    """The built-in area_statistics workflow, answered up to its CRS step (classic face): the goal
    needs a new grid."""
    started = await client.call_tool(
        "workflow_start",
        {
            "name": "area_statistics",
            "inputs": [
                {"name": "raster", "value": "RGB.byte.tif"},
                {"name": "goal", "value": "area in EPSG:6933"},
                {"name": "output", "value": "ea.tif"},
            ],
        },
    )
    progress = structured(started)
    action = progress["next_action"]
    answer = {**action["arguments"], "answer": "EPSG:32618, 30 m cells, three uint8 bands of reflectance."}
    grid = structured(await client.call_tool(action["tool"], answer))
    action = grid["next_action"]
    return structured(await client.call_tool(action["tool"], {**action["arguments"], "answer": "new grid"}))


@pytest.mark.parametrize("approve", [True, False])
async def test_a_workflow_steps_weak_justification_is_reviewed_before_it_is_stored(
    classic_settings: Settings, workspace_dir: Path, approve: bool
) -> None:
    """Guards against a workflow's requires step storing what the gate's own paths would have reviewed."""
    settings = classic_settings.model_copy(update={"min_confidence": "medium"})
    user = User(approve=approve)
    async with Client(build_server(settings), mode="legacy", elicitation_callback=user) as client:
        crs_step = await start_area_statistics(client, workspace_dir)
        assert crs_step["step"] == "crs", crs_step
        action = crs_step["next_action"]
        answer = low({"prompt_args": {"dst_crs": "EPSG:6933"}})
        answered = structured(
            await client.call_tool(action["tool"], {**action["arguments"], "answer": answer})
        )
    assert len(user.shown) == 1 and "EPSG:6933" in user.shown[0]
    if approve:
        assert answered["step"] == "resampling"
        assert [r.review["action"] for r in records(workspace_dir)] == ["approved"]
    else:
        assert answered["type"] == "review_declined" and records(workspace_dir) == []
