"""A hostile neighbour: one HTTP session trying to rewrite or borrow another's justifications.

Two real MCP clients share one streamable-HTTP server (stateful sessions, loopback). What one
session justified stays its own reasoning: records are write-once, and a hint can only be answered
by the session it was issued to, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import justification_for, structured
from tests.reliability.test_load import serve_http

pytestmark = pytest.mark.anyio

REPROJECT = 'raster.reproject("RGB.byte.tif", "{dst}", dst_crs="EPSG:4326", resampling="bilinear")'
FORGED = {
    "intent": "Forged by another session to replace the first reasoning.",
    "alternatives": [{"method": "nearest", "why_not": "The attacker does not care."}],
    "choice": {
        "method": "",
        "rationale": "Anything goes for this attacker.",
        "tradeoffs": "All of them, silently.",
    },
    "confidence": "high",
}


def forged(hint: dict[str, Any]) -> dict[str, Any]:
    data = {**FORGED, "choice": {**FORGED["choice"], "method": next(iter(hint["prompt_args"].values()))}}
    return data


async def execute(client: Client, code: str) -> dict[str, Any]:
    return structured(await client.call_tool("execute_code", {"code": code}))


def record_bytes(workspace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (workspace / ".preflight/justifications").glob("*/*.json")}


async def persist_all(
    client: Client, hints: list[dict[str, Any]], make: Any = justification_for
) -> list[Any]:
    answers = []
    for hint in hints:
        code = f"reflection.persist({hint['hash']!r}, {hint['domain']!r}, {make(hint)!r})"
        answers.append(await execute(client, code))
    return answers


async def test_a_second_session_cannot_overwrite_records_whose_hashes_it_read(workspace_dir: Path) -> None:
    """Guards against re-signing: B took A's hashes from reflection.report() and persisted its own text."""
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=30))
    async with (
        serve_http(server) as web,
        Client(web.url, mode="legacy") as alice,
        Client(web.url, mode="legacy") as bob,
    ):
        miss = await execute(alice, REPROJECT.format(dst="a.tif"))
        hints = miss["reflection_required"]
        assert all(a["ok"] for a in await persist_all(alice, hints)), "alice could not justify"
        assert (await execute(alice, REPROJECT.format(dst="a.tif")))["ok"]
        before = record_bytes(workspace_dir)
        assert len(before) == 2

        report = (await execute(bob, "reflection.report()"))["result"]
        stolen = [{"hash": r["hash"], "domain": r["domain"], "prompt_args": r["decision"]} for r in report]
        answers = await persist_all(bob, stolen, forged)

    assert len(answers) == 2 and all(not a["ok"] for a in answers), answers
    assert record_bytes(workspace_dir) == before, "a neighbour rewrote a justification"


async def test_a_pending_hint_cannot_be_answered_by_another_session(workspace_dir: Path) -> None:
    """Guards against borrowing: a hint issued to A and persisted by B would put B's words on A's decision."""
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=30))
    async with (
        serve_http(server) as web,
        Client(web.url, mode="legacy") as alice,
        Client(web.url, mode="legacy") as bob,
    ):
        hints = (await execute(alice, REPROJECT.format(dst="a.tif")))["reflection_required"]
        stolen = await persist_all(bob, hints, forged)
        assert [a["error"]["type"] for a in stolen] == ["not_found", "not_found"], stolen
        assert not record_bytes(workspace_dir), "the neighbour's text was stored"
        # The hint is still alice's to answer.
        assert all(a["ok"] for a in await persist_all(alice, hints))


async def test_a_hint_is_consumed_by_the_persist_that_answers_it(workspace_dir: Path) -> None:
    """Guards against replay: the same hint persisted twice would replace or duplicate the record."""
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=30))
    async with Client(server, mode="legacy") as client:
        hints = (await execute(client, REPROJECT.format(dst="a.tif")))["reflection_required"]
        assert all(a["ok"] for a in await persist_all(client, hints))
        before = record_bytes(workspace_dir)
        again = await persist_all(client, hints, forged)
    assert [a["error"]["type"] for a in again] == ["record_exists", "record_exists"], again
    assert record_bytes(workspace_dir) == before


async def test_a_record_is_never_replaced_even_for_a_fresh_hint_of_the_same_decision(
    workspace_dir: Path,
) -> None:
    """Guards against overwriting through a race: two sessions both hold a hint for one decision.

    The first persist wins; the second is told the decision is already justified and its text is
    not stored.
    """
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=30))
    async with (
        serve_http(server) as web,
        Client(web.url, mode="legacy") as alice,
        Client(web.url, mode="legacy") as bob,
    ):
        alice_hints = (await execute(alice, REPROJECT.format(dst="a.tif")))["reflection_required"]
        bob_hints = (await execute(bob, REPROJECT.format(dst="b.tif")))["reflection_required"]
        assert [h["hash"] for h in alice_hints] == [h["hash"] for h in bob_hints]
        assert all(a["ok"] for a in await persist_all(alice, alice_hints))
        before = record_bytes(workspace_dir)
        late = await persist_all(bob, bob_hints, forged)
        assert (await execute(bob, REPROJECT.format(dst="b.tif")))["ok"], "bob's retry did not proceed"
    assert all(not a["ok"] for a in late), late
    assert record_bytes(workspace_dir) == before


async def test_classic_persist_is_bound_to_the_session_too(workspace_dir: Path) -> None:
    """Guards against a face that forgot the binding: classic persist_justification with another's hash."""
    server = build_server(Settings(mode="classic", workspace=workspace_dir, exec_timeout=30))
    arguments = {"src": "RGB.byte.tif", "dst": "a.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}
    async with (
        serve_http(server) as web,
        Client(web.url, mode="legacy") as alice,
        Client(web.url, mode="legacy") as bob,
    ):
        miss = structured(await alice.call_tool("raster_reproject", arguments))
        hints = miss["reflection_required"]
        for hint in hints:
            attempt = {"hash": hint["hash"], "domain": hint["domain"], "justification": forged(hint)}
            refused = await bob.call_tool("persist_justification", attempt)
            assert refused.is_error and structured(refused)["type"] == "not_found"
        for hint in hints:
            answer = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            assert not (await alice.call_tool("persist_justification", answer)).is_error
        assert not (await alice.call_tool("raster_reproject", arguments)).is_error
