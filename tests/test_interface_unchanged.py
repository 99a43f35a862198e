"""What agents and hosts see is pinned: stubs, tool lists, schemas, instructions and prompts.

A refactor that moves code between modules must not change a byte of what an agent reads or a host
declares. The golden files in ``tests/golden/`` were written from the interface as it stood; a change
that means to alter the interface rewrites them on purpose with ``LLMC_MCP_WRITE_GOLDEN=1``, and the
diff is reviewed with the change.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from llmc_mcp.stubs.render import StubSet

GOLDEN = Path(__file__).parent / "golden"
WRITE = os.environ.get("LLMC_MCP_WRITE_GOLDEN") == "1"


def _compare(name: str, actual: str) -> None:
    path = GOLDEN / name
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} changed; rerun with LLMC_MCP_WRITE_GOLDEN=1 if that is intended"


@functools.cache
def _stub_texts() -> dict[str, str]:
    stubs = StubSet.render()
    texts = {f"stubs/{name}.py": text for name, text in stubs.modules.items()}
    texts.update((f"stubs/functions/{name}.py", text) for name, text in stubs.functions.items())
    texts["stubs/INDEX.md"] = stubs.index
    return texts


@pytest.mark.parametrize("name", sorted(_stub_texts()))
def test_every_stub_is_byte_identical_to_its_golden_copy(name: str) -> None:
    """Guards against a move of models or functions that changes a type name, an order or a docstring
    in the text an agent reads."""
    _compare(name, _stub_texts()[name])


async def _listing(settings: Settings, era: str) -> dict[str, Any]:
    async with Client(build_server(settings), mode=era) as client:
        tools = [
            tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            for tool in (await client.list_tools()).tools
        ]
        try:
            prompts = [
                p.model_dump(mode="json", by_alias=True, exclude_none=True)
                for p in (await client.list_prompts()).prompts
            ]
        except MCPError:
            prompts = None  # code mode serves no prompts
        templates = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in (await client.list_resource_templates()).resource_templates
        ]
        return {
            "instructions": client.instructions,
            "tools": tools,
            "prompts": prompts,
            "resource_templates": templates,
        }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["classic", "code"])
@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_the_tool_list_and_its_schemas_are_identical_to_the_golden_copy(
    mode: str, era: str, workspace_dir: Path
) -> None:
    """Guards against a refactor that changes a tool's name, description, input or output schema, its
    annotations, the instructions, or the prompts and resource templates a host lists. Both protocol
    eras must list the same thing, so both compare against one copy; the one difference is the
    handshake era's ``execution.taskSupport`` (tasks are an extension on 2026-07-28), checked in
    ``tests/test_tasks_mcp.py`` and left out here."""
    listing = await _listing(Settings(mode=mode, workspace=workspace_dir), era)
    for tool in listing["tools"]:
        tool.pop("execution", None)
    _compare(f"listing/{mode}.json", json.dumps(listing, indent=1, sort_keys=True) + "\n")
