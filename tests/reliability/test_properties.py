"""Hostile input: any arguments to any tool get a result or a clear error, never a crash or a hang.

Classic tools are driven through the real in-process ``mcp.Client``: every parameter gets
schema-shaped values, arbitrary JSON (wrong types, NaN/inf, nested objects), huge strings and
unknown keys. ``execute_code`` gets arbitrary text and non-string values. ``persist_justification``
gets arbitrary JSON for real (issued) and made-up hashes. The invariant is the same everywhere: an
``isError`` result carries a message and is never an ``internal_error`` nor the SDK's bare
"Error executing tool X" (an exception that escaped), and every call returns within its limit.

Examples are derandomized (the same inputs on every run, no example database) and few, so the file
stays under a minute. Known bugs whose fix is outside the reliability files are pinned by
``xfail(strict=True)`` tests; their inputs are kept out of the broad strategies meanwhile.

Note: every value is drawn in ``@given`` (no ``st.data()`` in async tests). Hypothesis signals an
overrun with a BaseException, and under anyio's pytest plugin that kills the test runner task.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult

from llmc_mcp.config import Settings
from llmc_mcp.errors import LlmcError
from llmc_mcp.operations import get_operation
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import classic_operations
from llmc_mcp.server.results import result_data
from tests.mcp_helpers import justification_for, text
from tests.reliability._strategies import (
    HUGE,
    JSON,
    LEAVES,
    LONE_SURROGATES,
    SPECIAL_STRINGS,
    UNKNOWN_KEYS,
    arguments_for,
)

pytestmark = pytest.mark.anyio

CALL_LIMIT = 30.0
"""Seconds any single call may take before it counts as hung."""

PROFILE: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}


def profile(max_examples: int) -> settings:
    """Reproducible (derandomized, no example database) and small."""
    return settings(max_examples=max_examples, **PROFILE)


SCHEMAS = {op.tool_name: op.arguments.model_json_schema() for op in classic_operations()}
"""The classic tools' input schemas come from the same signatures (checked below); those a server that
reads no URLs serves (``stac`` tools are tested in tests/test_stac.py)."""
CLASSIC_CASES = st.sampled_from(sorted(SCHEMAS)).flatmap(
    lambda tool: st.tuples(st.just(tool), arguments_for(SCHEMAS[tool]))
)
PERSIST_ERRORS = {"invalid_argument", "not_found", "justification_invalid", "record_exists"}
"""``record_exists``: an earlier example already justified the decision (records are write-once)."""
REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}
ISSUED_ARGS = [{"dst_crs": "EPSG:4326"}, {"method": "nearest", "data": "integer", "purpose": "warping"}]
"""The decisions REPROJECT asks about, in hint order (crs_datum, resampling)."""


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(CALL_LIMIT):
        return await client.call_tool(tool, arguments)


def assert_clear(result: CallToolResult, tool: str) -> dict[str, Any] | None:
    """A result, or an error that says what went wrong; never an internal error or a hidden one."""
    body = text(result)
    assert body, f"{tool}: empty result"
    data = result.structured_content
    if not result.is_error:
        assert isinstance(data, dict), body[:300]
        return data
    assert body.strip() != f"Error executing tool {tool}", f"{tool}: an exception escaped the tool"
    if tool == "execute_code" and data is None:
        # The SDK's own argument validation: a pydantic message naming the field.
        assert body.startswith(f"Error executing tool {tool}:") and "validation error" in body, body[:300]
        return None
    # A classic error's JSON is its text (no structuredContent, DD-MCP-078).
    error = data.get("error") if tool == "execute_code" else result_data(result)
    assert isinstance(error, dict), body[:300]
    assert error.get("type") != "internal_error", f"{tool}: {body[:500]}"
    assert error.get("message"), body[:300]
    return data if tool == "execute_code" else error


@pytest.fixture
async def classic(workspace_dir: Path):
    server = build_server(Settings(mode="classic", workspace=workspace_dir))
    async with Client(server) as client:
        yield client


@pytest.fixture
async def code_client(workspace_dir: Path):
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=10))
    async with Client(server) as client:
        yield client


# ------------------------------------------------------------------------------------- classic tools


async def test_the_static_schemas_are_the_tools_schemas(classic: Client) -> None:
    listed = {t.name: t.input_schema for t in (await classic.list_tools()).tools}
    assert set(listed) == {*SCHEMAS, "persist_justification"}
    for name, schema in SCHEMAS.items():
        assert sorted(listed[name]["properties"]) == sorted(schema["properties"])
        assert listed[name].get("required") == schema.get("required")


@profile(200)
@given(case=CLASSIC_CASES)
async def test_any_arguments_to_a_classic_tool_get_a_clear_answer(
    classic: Client, workspace_dir: Path, case: tuple[str, dict[str, Any]]
) -> None:
    tool, arguments = case
    assert_clear(await call(classic, tool, arguments), tool)
    leftovers = [p.name for p in workspace_dir.rglob("*.partial-*")]
    assert not leftovers, f"temporary outputs left behind: {leftovers}"


@profile(40)
@given(
    tool=st.sampled_from(sorted(SCHEMAS)),
    arguments=st.dictionaries(st.sampled_from(["path", "src", "dst", "crs", "dst_crs", "bands"]), JSON),
)
async def test_arguments_of_the_wrong_json_type_get_a_clear_answer(
    classic: Client, tool: str, arguments: dict[str, Any]
) -> None:
    assert_clear(await call(classic, tool, arguments), tool)


async def test_huge_string_arguments_are_refused_without_echoing_them(classic: Client) -> None:
    for tool, arguments in [
        ("raster_info", {"path": HUGE}),
        ("raster_stats", {"path": "RGB.byte.tif", "percentiles": HUGE}),
        ("crs_info", {"crs": HUGE}),
        ("raster_reproject", {"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": HUGE}),
        ("persist_justification", {"hash": HUGE, "domain": HUGE, "justification": {"intent": HUGE}}),
    ]:
        result = await call(classic, tool, arguments)
        assert result.is_error
        assert_clear(result, tool)
        assert len(text(result)) < 20_000, f"{tool} echoed a huge argument back ({len(text(result))} chars)"
    assert not (await call(classic, "raster_info", {"path": "RGB.byte.tif"})).is_error


async def test_an_unknown_argument_is_an_error_not_silently_ignored(classic: Client) -> None:
    result = await call(classic, "raster_info", {"path": "RGB.byte.tif", "include_wtk": True})
    assert result.is_error and "include_wtk" in text(result)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("raster_reproject", {"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": LONE_SURROGATES[2]}),
        ("crs_info", {"crs": LONE_SURROGATES[0]}),
    ],
)
async def test_a_lone_surrogate_in_a_crs_is_a_clear_error(
    classic: Client, tool: str, arguments: dict[str, Any]
) -> None:
    assert assert_clear(await call(classic, tool, arguments), tool)["type"] == "crs_error"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("raster_info", {"path": LONE_SURROGATES[0]}),
        ("raster_stats", {"path": LONE_SURROGATES[1]}),
        ("raster_convert", {"src": "RGB.byte.tif", "dst": LONE_SURROGATES[1]}),
    ],
)
async def test_a_lone_surrogate_in_a_path_is_a_clear_error(
    classic: Client, tool: str, arguments: dict[str, Any]
) -> None:
    assert assert_clear(await call(classic, tool, arguments), tool)["type"] == "path_refused"


# ---------------------------------------------------------------------------------- justifications


def _valid(index: int) -> dict[str, Any]:
    return justification_for({"prompt_args": ISSUED_ARGS[index]})


def _mutated(template: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A valid justification with one field replaced by anything, or a field dropped or added."""
    fields = ["intent", "alternatives", "choice", "confidence"]
    replaced = st.builds(lambda f, v: {**template, f: v}, st.sampled_from(fields), JSON)
    dropped = st.sampled_from(fields).map(lambda f: {k: v for k, v in template.items() if k != f})
    added = st.builds(lambda k, v: {**template, k: v}, st.text(max_size=8), JSON)
    nested = st.builds(
        lambda k, v: {**template, "choice": {**template["choice"], k: v}},
        st.sampled_from(["method", "rationale", "tradeoffs", "extra"]),
        LEAVES,
    )
    return st.one_of(replaced, dropped, added, nested)


PAYLOADS = st.one_of(
    st.sampled_from([0, 1]).map(_valid),
    st.sampled_from([0, 1]).map(_valid).flatmap(_mutated),
    JSON,
)


class Issued(int):
    """Stands for the hash of the n-th hint REPROJECT gets (known only once the server issued it)."""


@pytest.fixture
async def issued(classic: Client) -> list[dict[str, Any]]:
    miss = await call(classic, "raster_reproject", REPROJECT)
    assert miss.is_error
    hints = result_data(miss)["reflection_required"]
    assert [h["prompt_args"] for h in hints] == ISSUED_ARGS
    return hints


@profile(100)
@given(
    hash_=st.one_of(st.sampled_from([0, 1]).map(Issued), st.sampled_from(SPECIAL_STRINGS), JSON),
    domain=st.one_of(
        st.sampled_from(["crs_datum", "resampling", "format_selection", "aggregation", "hydrology"]), JSON
    ),
    justification=PAYLOADS,
    extra=st.one_of(st.just({}), UNKNOWN_KEYS),
)
async def test_any_justification_payload_is_persisted_or_refused_clearly(
    classic: Client,
    issued: list[dict[str, Any]],
    workspace_dir: Path,
    hash_: Any,
    domain: Any,
    justification: Any,
    extra: dict[str, Any],
) -> None:
    if isinstance(hash_, Issued):
        hash_ = issued[hash_]["hash"]
    arguments = {**extra, "hash": hash_, "domain": domain, "justification": justification}
    result = await call(classic, "persist_justification", arguments)
    data = assert_clear(result, "persist_justification")
    if result.is_error and data is not None:
        assert data["type"] in PERSIST_ERRORS, data
    elif not result.is_error:
        assert data is not None and data["persisted"] is True
        assert data["hash"] in [h["hash"] for h in issued]
    files = list((workspace_dir / ".preflight").glob("justifications/*/*"))
    assert len(list(JustificationStore(workspace_dir / ".preflight").records())) == len(files)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _gate(workspace_dir: Path) -> tuple[Gate, list[Any]]:
    gate = Gate(JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="")
    op = get_operation("raster.reproject")
    return gate, gate.check(op, op.validate(REPROJECT))


def test_a_deeply_nested_justification_is_refused_not_a_crash(workspace_dir: Path) -> None:
    gate, hints = _gate(workspace_dir)
    payload = {**_valid(1), "intent": _deep(100_000)}
    with pytest.raises(LlmcError):
        gate.persist(hints[1].hash, hints[1].domain, payload)


ODD_OBJECTS = [object(), b"bytes", {1: 2}, {None: "x"}, (1, 2), {"a", "b"}, math.nan, 10**400, _deep(50)]


def test_the_gate_refuses_any_python_payload_with_an_llmc_error(workspace_dir: Path) -> None:
    """Below MCP: whatever object reaches Gate.persist (code mode passes the worker's), only LlmcError."""
    gate, hints = _gate(workspace_dir)

    @profile(60)
    @given(
        which=st.integers(0, 1),
        payload=st.one_of(PAYLOADS, st.sampled_from(ODD_OBJECTS)),
        hash_=st.one_of(st.none(), JSON, st.sampled_from(ODD_OBJECTS)),
        use_real_hash=st.booleans(),
    )
    def check(which: int, payload: Any, hash_: Any, use_real_hash: bool) -> None:
        hint = hints[which]
        try:
            result = gate.persist(hint.hash if use_real_hash else hash_, hint.domain, payload)
        except LlmcError as exc:
            assert exc.message and json.dumps(exc.to_dict(), default=str)
        else:
            assert use_real_hash and result.persisted

    check()


# ------------------------------------------------------------------------------------ execute_code


CODE_TEXT = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=50),
    st.sampled_from(
        [
            "",
            "1+1",
            "\x00",
            "def f(:",
            "import os",
            "raise SystemExit(3)",
            "print('x' * 100000)\nx = 1",
            "print(float('nan'))\nx = 1",
            "raster.info(" + "'a'," * 1000 + ")",
            "[" * 200 + "]" * 200,
            "(" * 5000,
            "1" * 100_000,
            "reflection.persist('sha256:' + '0' * 64, 'resampling', {})",
            'raster.info("corrupt.tif")',
            'raster.stats("corrupt.tif")',
            "yield 1",
            "return 5",
            "await x",
            "__import__('os')",
            "del raster",
            "raster = 1",
            "float('nan')",
            "{'a': float('inf')}",
            "b'\\xff'",
            "object()",
            "{1: 2, (1, 2): 3}",
        ]
    ),
)


@profile(80)
@given(code=CODE_TEXT, reset=st.booleans())
async def test_execute_code_with_arbitrary_text_never_fails_internally(
    code_client: Client, code: str, reset: bool
) -> None:
    result = await call(code_client, "execute_code", {"code": code, "reset": reset})
    data = assert_clear(result, "execute_code")
    assert data is not None
    if not data["ok"]:
        assert data["error"]["type"] not in ("WorkerCrashed", "Timeout"), data["error"]


@profile(40)
@given(
    arguments=st.fixed_dictionaries({}, optional={"code": JSON, "reset": JSON}),
    extra=st.one_of(st.just({}), UNKNOWN_KEYS),
)
async def test_execute_code_with_arguments_of_any_type_gets_a_clear_answer(
    code_client: Client, arguments: dict[str, Any], extra: dict[str, Any]
) -> None:
    assert_clear(await call(code_client, "execute_code", {**extra, **arguments}), "execute_code")


async def test_a_huge_code_string_gets_a_clear_answer_and_the_session_survives(code_client: Client) -> None:
    await call(code_client, "execute_code", {"code": "kept = 7"})
    for code in ("x = '" + HUGE + "'\nlen(x)", "#" + "y" * 40_000_000):
        assert_clear(await call(code_client, "execute_code", {"code": code}), "execute_code")
    after = await call(code_client, "execute_code", {"code": "kept"})
    assert after.structured_content["result"] == 7


async def test_a_lone_surrogate_in_code_is_refused_and_the_session_survives(code_client: Client) -> None:
    await call(code_client, "execute_code", {"code": "kept = 7"})
    for code in (LONE_SURROGATES[0], f"x = '{LONE_SURROGATES[0]}'"):
        result = await call(code_client, "execute_code", {"code": code})
        data = assert_clear(result, "execute_code")
        assert data is not None and data["error"]["type"] == "InvalidText", data
    assert (await call(code_client, "execute_code", {"code": "kept"})).structured_content["result"] == 7


SURROGATE_VALUES = ["'\\ud800'", "raise ValueError('\\ud800')", "{'\\udfff': 1}", "print('\\ud800')\nx = 1"]


async def test_a_lone_surrogate_produced_by_the_code_does_not_kill_the_worker(code_client: Client) -> None:
    await call(code_client, "execute_code", {"code": "kept = 7"})
    for code in SURROGATE_VALUES:
        data = assert_clear(await call(code_client, "execute_code", {"code": code}), "execute_code")
        assert data is not None and (data["ok"] or data["error"]["type"] != "WorkerCrashed"), (code, data)
    assert (await call(code_client, "execute_code", {"code": "kept"})).structured_content["result"] == 7


async def test_print_as_the_last_statement_prints(code_client: Client) -> None:
    first = (await call(code_client, "execute_code", {"code": "print('one')"})).structured_content
    await call(code_client, "execute_code", {"code": "print('two')\nx = 1"})
    third = (await call(code_client, "execute_code", {"code": "print('three')"})).structured_content
    assert (first["ok"], first["stdout"]) == (True, "one\n"), first
    assert third["stdout"] == "three\n", third
