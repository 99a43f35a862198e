"""Every attack in the corpus is stopped, and leaves the server exactly as capable and as strict.

The corpus (``corpus.py``) runs through the real in-process MCP ``Client`` against a code-mode
server with small limits, in one session shared by the module, its variables cleared before each
attack (an attack that costs the worker its life gives the next one a fresh worker, as it would
for an agent). For each attack:

- the outcome is the expected one: denied by the policy with its precise error and reason, or
  bounded by a limit (timeout, memory, recursion, a crash of the worker alone, a cut answer);
- nothing appeared outside the workspace (the canary directory and the workspace's parent are
  listed before and after), and nothing in the justification store changed;
- the reflection gate still refuses an unjustified reprojection;
- the server answers the next request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.security.corpus import (
    BOUNDED,
    CATEGORIES,
    CORPUS,
    DENIED,
    GATE_PROBE,
    LIMIT_ERRORS,
    OTHER_SESSION_SETUP,
    TRUNCATED,
    Attack,
    prepare,
    render,
    sizes,
    snapshot,
    verdict,
)

pytestmark = pytest.mark.anyio

EXEC_TIMEOUT = 4.0
"""Small, so the CPU bombs cost little, yet ample for the gate probe on a loaded machine."""
MEMORY_MB = 512
"""Room for GDAL and the sample rasters, far below what the memory bombs ask for."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module scope, so one server and one session serve the whole corpus.
    return "asyncio"


@dataclass
class World:
    client: Client
    settings: Settings
    workspace: Path
    outside: Path

    def outside_listing(self) -> set[str]:
        """Everything beside the workspace (the canary included), and the directory above it."""
        above = {str(p) for p in self.workspace.parent.parent.iterdir()}
        return snapshot(self.workspace.parent, skip=self.workspace) | above

    def store_listing(self) -> set[str]:
        return snapshot(self.workspace / ".preflight")


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    base = tmp_path_factory.mktemp("security")
    workspace, outside = base / "ws", base / "outside"
    prepare(workspace, outside)
    settings = Settings(mode="code", workspace=workspace, exec_timeout=EXEC_TIMEOUT, memory_mb=MEMORY_MB)
    server = build_server(settings)
    async with Client(server) as other, Client(server) as client:
        planted = await execute(other, OTHER_SESSION_SETUP)
        assert planted["ok"], planted
        yield World(client, settings, workspace, outside)


async def execute(client: Client, code: str, reset: bool = False) -> dict[str, Any]:
    result = await client.call_tool("execute_code", {"code": code, "reset": reset})
    assert result.structured_content is not None, result.content
    return result.structured_content


def test_the_corpus_has_over_110_distinct_attacks_in_every_category() -> None:
    ids = [attack.id for attack in CORPUS]
    assert len(set(ids)) == len(ids) >= 110
    assert len(set(attack.code for attack in CORPUS)) == len(CORPUS)
    assert set(CATEGORIES) == {
        "imports", "dunder", "frames", "format", "builtins", "files", "paths", "network", "cpu", "memory",
        "output", "state",
    }  # fmt: skip
    assert min(sizes().values()) >= 5


def test_every_expectation_names_a_precise_outcome() -> None:
    # A generic error would let an attack that fails by accident (a TypeError) count as denied.
    accidental = {"TypeError", "ValueError", "KeyError", "Exception", "RuntimeError", "internal_error"}
    for attack in CORPUS:
        assert attack.expect in (DENIED, BOUNDED), attack.id
        if attack.expect == DENIED:
            assert attack.error not in accidental and attack.match and not attack.also, attack.id
        else:
            assert attack.error in (*LIMIT_ERRORS, TRUNCATED), attack.id
            assert set(attack.also) <= set(LIMIT_ERRORS), attack.id  # another limit, never a policy error


@pytest.mark.parametrize("attack", CORPUS, ids=[attack.id for attack in CORPUS])
async def test_the_attack_is_stopped_and_changes_nothing(world: World, attack: Attack) -> None:
    outside, store = world.outside_listing(), world.store_listing()

    # Each attack starts from clean variables, so one that broke its session cannot fail the next.
    answer = await execute(world.client, render(attack, world.workspace), reset=True)

    outcome, reason = verdict(attack, answer, world.settings.output_limit)
    assert outcome == attack.expect, reason
    assert world.outside_listing() == outside, "a file appeared outside the workspace"
    assert world.store_listing() == store, "the justification store changed"
    gate = await execute(world.client, GATE_PROBE)
    assert (gate["error"] or {}).get("type") == "reflection_required", gate["error"]
    assert not (world.workspace / "gate_probe.tif").exists()
    assert (await execute(world.client, "1 + 1"))["result"] == 2
