"""Schemas that strict clients and every model provider accept, and a protocol surface that is honest.

The rules checked here are the common subset of OpenAI's strict mode (every object closed with
``additionalProperties: false``, no open objects) and Gemini's function declarations (string enums
only, arrays with typed ``items``, no ``prefixItems``/``const``/``$ref``). A schema outside it makes
a provider refuse the whole tool list, or a converter silently change its meaning.

Classic tools' output schemas (DD-MCP-078) keep the same rules but one: a result keyed by data
(raster tags, percentiles by name, statistics by name, a workflow's saved answers) is a map, an object
with no properties and ``additionalProperties`` giving its values' type. Closing it would declare
every real result invalid; a host's type generation reads it as ``dict[str, float]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import structured

pytestmark = pytest.mark.anyio

FORBIDDEN_KEYS = ("prefixItems", "const", "$ref", "$defs")


def nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from nodes(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from nodes(value, f"{path}/{i}")


def portability_problems(schema: dict[str, Any], maps: bool = False) -> list[str]:
    """What in ``schema`` falls outside the subset; ``maps``: objects keyed by data are allowed."""
    problems = []
    for path, node in nodes(schema):
        if path.endswith("/properties") or path.endswith("/default"):
            continue  # a map of names, or a value: not schemas
        for key in FORBIDDEN_KEYS:
            if key in node:
                problems.append(f"{path}: {key}")
        if "enum" in node and not all(isinstance(v, str) for v in node["enum"]):
            problems.append(f"{path}: non-string enum {node['enum']}")
        if node.get("type") == "array" and not (isinstance(node.get("items"), dict) and node["items"]):
            problems.append(f"{path}: array without typed items")
        if node.get("type") == "object":
            if maps and not node.get("properties") and node.get("additionalProperties") not in (None, False):
                continue
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: object not closed (additionalProperties)")
            if "properties" not in node:
                problems.append(f"{path}: open object without properties")
    return problems


@pytest.mark.parametrize("mode", ["code", "classic"])
async def test_every_tool_schema_is_in_the_subset_openai_strict_and_gemini_accept(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against one integer enum making Gemini refuse every tool (raster_convert.predictor)."""
    async with Client(build_server(Settings(mode=mode, workspace=workspace_dir))) as client:
        tools = (await client.list_tools()).tools
    problems = {t.name: portability_problems(t.input_schema) for t in tools}
    assert {name: p for name, p in problems.items() if p} == {}


async def test_every_output_schema_is_in_the_subset_openai_strict_and_gemini_accept(
    workspace_dir: Path,
) -> None:
    """Guards against a result schema with references or integer enums that a host's converter refuses."""
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        tools = (await client.list_tools()).tools
    problems = {t.name: portability_problems(t.output_schema or {}, maps=True) for t in tools}
    assert {name: p for name, p in problems.items() if p} == {}
    assert all(t.output_schema for t in tools)


async def test_a_misspelt_code_mode_argument_is_an_error_that_names_it(workspace_dir: Path) -> None:
    """Guards against 'rset' being silently ignored (the session then keeps state the agent dropped)."""
    async with Client(build_server(Settings(mode="code", workspace=workspace_dir))) as client:
        result = await client.call_tool("execute_code", {"code": "1", "rset": True})
    assert result.is_error and "rset" in result.content[0].text


async def test_persist_justification_publishes_the_justification_shape(workspace_dir: Path) -> None:
    """Guards against an open object that strict converters turn into an object that must be empty."""
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["persist_justification"].input_schema["properties"]["justification"]
    assert set(schema["properties"]) == {"intent", "alternatives", "choice", "confidence"}
    assert schema["additionalProperties"] is False
    assert schema["properties"]["confidence"]["enum"] == ["low", "medium", "high"]


async def test_the_predictor_keeps_its_meaning_as_a_bounded_integer(workspace_dir: Path) -> None:
    """Guards against the rewrite losing what the enum said: 1..3, and 4 still refused."""
    async with Client(build_server(Settings(mode="classic", workspace=workspace_dir))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool(
            "raster_convert", {"src": "RGB.byte.tif", "dst": "o.tif", "predictor": 4}
        )
    predictor = tools["raster_convert"].input_schema["properties"]["predictor"]
    (integer,) = [option for option in predictor["anyOf"] if option.get("type") == "integer"]
    assert (integer["minimum"], integer["maximum"]) == (1, 3)
    assert refused.is_error and "predictor" in refused.content[0].text


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("no_such_prompt", {}, "Unknown prompt"),
        ("justify_crs_selection", {}, "missing dst_crs"),
        ("justify_crs_selection", {"dst_crs": "EPSG:4326", "colour": "red"}, "unknown colour"),
    ],
)
async def test_a_prompt_that_cannot_be_served_is_invalid_params(
    workspace_dir: Path, name: str, arguments: dict[str, str], says: str
) -> None:
    """Guards against code 0 or -32603 with a traceback in the log for a caller's mistake."""
    async with Client(
        build_server(Settings(mode="classic", workspace=workspace_dir)), mode="legacy"
    ) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt(name, arguments)
    assert raised.value.code == -32602 and says in raised.value.error.message


async def test_code_mode_advertises_no_prompts(workspace_dir: Path) -> None:
    """Guards against advertising prompts that code mode does not serve (its resources: test_resources)."""
    async with Client(build_server(Settings(mode="code", workspace=workspace_dir)), mode="legacy") as client:
        capabilities = client.session.initialize_result.capabilities
        assert capabilities.tools is not None
        assert capabilities.prompts is None
        with pytest.raises(MCPError):
            await client.list_prompts()
        assert structured(await client.call_tool("execute_code", {"code": "1 + 1"}))["result"] == 2
