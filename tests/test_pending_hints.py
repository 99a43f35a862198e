"""Issued hints survive a new server process, and only issued ones count.

langchain-mcp-adapters starts a new server per tool call, so the persist of a hint arrives at a
process that never saw the miss. A hint is therefore a signed, expiring file beside the store; a
hash that no server issued (or whose file was forged, edited or expired) is still refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from llmc_mcp.errors import NotFound
from llmc_mcp.operations import get_operation
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.sessions import principal
from tests.mcp_helpers import justification_for, stdio_params, structured

REPROJECT = get_operation("raster.reproject")
ARGS = {"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}


def new_gate(workspace_dir: Path) -> Gate:
    """A gate as a fresh server process builds it: nothing in memory, the same workspace."""
    return Gate(JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="x")


def answer(hint: object) -> dict:
    return justification_for(hint.model_dump())  # type: ignore[attr-defined]


def test_a_hint_issued_by_one_gate_is_accepted_by_another_of_the_same_workspace(workspace_dir: Path) -> None:
    """Guards against "was not issued by this server" for a client that restarts the server per call."""
    hints = new_gate(workspace_dir).check(REPROJECT, REPROJECT.validate(ARGS), session="conn-first")
    later = new_gate(workspace_dir)
    for hint in hints:
        later.persist(hint.hash, hint.domain, answer(hint), session="conn-second")
    later.require(REPROJECT, REPROJECT.validate(ARGS))


def test_an_http_sessions_hint_is_not_accepted_from_another_session_in_another_process(
    workspace_dir: Path,
) -> None:
    """Guards against the file making a hint everyone's: it stays bound to its HTTP session."""
    (hint, *_) = new_gate(workspace_dir).check(REPROJECT, REPROJECT.validate(ARGS), session="http-alice")
    with pytest.raises(NotFound):
        new_gate(workspace_dir).persist(hint.hash, hint.domain, answer(hint), session="http-bob")


def test_a_forged_pending_hint_is_refused(workspace_dir: Path) -> None:
    """Guards against writing a pending-hint file by hand (or from a worker) to unlock any decision."""
    gate = new_gate(workspace_dir)
    (hint, *_) = gate.check(REPROJECT, REPROJECT.validate(ARGS), session="conn-a")
    path = next((workspace_dir / ".preflight/pending").glob(f"*/*-{hint.hash.removeprefix('sha256:')}.json"))
    entry = json.loads(path.read_bytes())
    entry["content"]["args"] = {"dst_crs": "EPSG:3857"}
    path.write_text(json.dumps(entry))
    with pytest.raises(NotFound):
        new_gate(workspace_dir).persist(hint.hash, hint.domain, answer(hint), session="conn-a")


def test_an_expired_pending_hint_is_refused(workspace_dir: Path) -> None:
    """Guards against a hint that stays answerable forever after the question was asked."""
    gate = new_gate(workspace_dir)
    gate.pending.ttl = -1.0
    (hint, *_) = gate.check(REPROJECT, REPROJECT.validate(ARGS), session="conn-a")
    with pytest.raises(NotFound):
        new_gate(workspace_dir).persist(hint.hash, hint.domain, answer(hint), session="conn-a")
    assert gate.pending.sweep() >= 1, "an expired hint file was not swept"


@pytest.mark.anyio
async def test_a_new_stdio_server_per_call_completes_a_gated_reprojection(workspace_dir: Path) -> None:
    """The langchain-mcp-adapters pattern, with the real command: miss, persist and retry in 3 processes."""
    params = stdio_params(workspace_dir, "--mode", "classic")
    async with Client(params) as client:
        miss = structured(await client.call_tool("raster_reproject", ARGS))
    for hint in miss["reflection_required"]:
        async with Client(params) as client:
            body = {"hash": hint["hash"], "domain": hint["domain"], "justification": justification_for(hint)}
            persisted = await client.call_tool("persist_justification", body)
            assert not persisted.is_error, persisted.content
    async with Client(params) as client:
        done = await client.call_tool("raster_reproject", ARGS)
    assert not done.is_error, done.content
    assert (workspace_dir / "o.tif").exists()


def test_sessions_asking_the_same_question_at_once_may_all_answer_it(workspace_dir: Path) -> None:
    """Guards against a lost update: two sessions issuing one hint together, one principal dropped,
    and that session told its own hint "was not issued to this session"."""
    from concurrent.futures import ThreadPoolExecutor

    args = REPROJECT.validate(ARGS)
    sessions = [f"http-{i}" for i in range(8)]
    gates = [new_gate(workspace_dir) for _ in sessions]
    with ThreadPoolExecutor(len(sessions)) as pool:
        issued = list(
            pool.map(
                lambda pair: pair[0].check(REPROJECT, args, session=pair[1]),
                zip(gates, sessions, strict=True),
            )
        )
    (hint, *_) = issued[0]
    pending = new_gate(workspace_dir).pending
    assert all(pending.find(hint.domain, hint.hash, principal(s)) for s in sessions)
