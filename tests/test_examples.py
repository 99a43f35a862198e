"""Every code example an agent is shown runs as written in a real code-mode session.

The examples are taken from what the agent reads, not copied here: the literal blocks (an indented
block after a paragraph ending with ':' and a blank line) and ``e.g. module.function(...)`` calls of
every rendered stub, and the indented code lines of the code-mode instructions. Each source's
examples run in order, through ``execute_code`` of a real code-mode server (worker processes, gate,
store) whose workspace holds the test rasters, plus ``in.tif``: the input the examples name.

What an example promises is checked too. The gate-miss example must really meet a miss: it catches
``reflection.ReflectionRequired`` (so the call succeeds) and keeps the hints, and the same operation
uncaught fails with ``error.type == "reflection_required"``, as the instructions say. The retry
example runs in ONE call after the agent's own ``answers`` (one justification per domain, which the
examples leave to the agent) and must write the output.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import code_instructions
from llmc_mcp.stubs.render import StubSet
from tests.mcp_helpers import justification_for, structured

pytestmark = pytest.mark.anyio

EXAMPLE_INPUTS = {"in.tif": "RGB.byte.tif"}
"""File names the examples use, and the test raster standing behind each in the workspace."""

_INLINE = re.compile(r"e\.g\. ((?:raster|crs|files|reflection)\.\w+\((?:[^()]|\([^()]*\))*\))")


def literal_blocks(docstring: str) -> list[str]:
    """reST-style literal blocks: indented lines after a line ending with ':' and a blank line."""
    lines = docstring.splitlines()
    blocks: list[str] = []

    def indent_of(line: str) -> int:
        return len(line) - len(line.lstrip())

    i = 0
    while i < len(lines) - 2:
        intro, blank, first = lines[i], lines[i + 1], lines[i + 2]
        indent = indent_of(intro)
        if intro.rstrip().endswith(":") and not blank.strip() and indent_of(first) > indent:
            j = i + 2
            while j < len(lines) and (not lines[j].strip() or indent_of(lines[j]) > indent):
                j += 1
            blocks.append(textwrap.dedent("\n".join(lines[i + 2 : j])).strip())
            i = j
        else:
            i += 1
    return blocks


def stub_examples(source: str) -> list[str]:
    """The examples of one stub module: literal blocks of its docstrings, then inline ``e.g.`` calls."""
    tree = ast.parse(source)
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    docstrings = [doc for doc in (ast.get_docstring(n, clean=False) for n in nodes) if doc]
    examples = [block for doc in docstrings for block in literal_blocks(doc)]
    examples += [match for doc in docstrings for match in _INLINE.findall(doc)]
    return examples


def instruction_examples(text: str) -> list[str]:
    """The code of the instructions: runs of lines indented by two spaces, after a line ending with ':'."""
    examples: list[str] = []
    current: list[str] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("  ") and (current or previous.rstrip().endswith(":")):
            current.append(line)
            continue
        if current:
            examples.append(textwrap.dedent("\n".join(current)))
            current = []
        previous = line
    if current:
        examples.append(textwrap.dedent("\n".join(current)))
    return examples + _INLINE.findall(text)


def _sources(settings: Settings) -> dict[str, list[str]]:
    stubs = StubSet.render()
    sources = {"instructions": instruction_examples(code_instructions(settings))}
    for module in stubs.modules:
        sources[f"stub:{module}"] = stub_examples(stubs.get(module) or "")
    for name, source in stubs.functions.items():
        sources[f"stub:{name}"] = stub_examples(source)
    return sources


def _source_names() -> list[str]:
    return sorted(_sources(Settings(mode="code", workspace=Path("."))))


def test_the_examples_are_found() -> None:
    # The extraction is what the rest relies on: the gate story must be found in both places.
    sources = _sources(Settings(mode="code", workspace=Path(".")))
    for name in ("instructions", "stub:reflection"):
        joined = "\n".join(sources[name])
        assert "except reflection.ReflectionRequired" in joined and "reflection.persist(" in joined, name
    assert any("reflection.prompt(" in example for example in sources["stub:reflection"])
    for examples in sources.values():
        for example in examples:
            ast.parse(example)  # every example is Python, whatever it then does


async def _run(client: Client, code: str) -> dict[str, Any]:
    return structured(await client.call_tool("execute_code", {"code": code}))


@pytest.mark.parametrize("source", _source_names())
async def test_every_example_runs_as_written(
    code_settings: Settings, workspace_dir: Path, source: str
) -> None:
    for name, backing in EXAMPLE_INPUTS.items():
        shutil.copy(workspace_dir / backing, workspace_dir / name)
    examples = _sources(code_settings)[source]
    if not examples:
        pytest.skip(f"{source} shows no code example")
    async with Client(build_server(code_settings), mode="legacy") as client:
        for example in examples:
            code = example
            if "except reflection.ReflectionRequired" in example:
                await _check_uncaught_miss(client, example)
            if "answers[" in example:
                hints = (await _run(client, "hints"))["result"]
                answers = {hint["domain"]: justification_for(hint) for hint in hints}
                code = f"answers = {json.dumps(answers)}\n{example}"
            result = await _run(client, code)
            assert result["ok"], (source, example, result["error"])
            if "except reflection.ReflectionRequired" in example:
                kept = (await _run(client, "[h['domain'] for h in hints]"))["result"]
                assert kept and all(domain in result["stdout"] for domain in kept), (example, result)
            if "answers[" in example:
                written = await _run(client, 'raster.info("out.tif")["crs"]["epsg"]')
                assert written["result"] == 6933, written


async def _check_uncaught_miss(client: Client, example: str) -> None:
    """The guarded operation, uncaught, fails the call with the kind the docs name."""
    tree = ast.parse(example)
    guarded = next(node for node in ast.walk(tree) if isinstance(node, ast.Try)).body
    result = await _run(client, "\n".join(ast.unparse(statement) for statement in guarded))
    assert not result["ok"] and result["error"]["type"] == "reflection_required", result
    assert result["reflection_required"] and "ONE next execute_code call" in result["next_action"]
