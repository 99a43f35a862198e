"""What an agent reads: the bootstrap, the guide's promises, the fixes errors offer (issue 21 §1, §4, §6).

The bootstrap (tool list + instructions) is sent on every turn of code mode; it must stay under its
budget and must not grow with the catalog. Every fix an error offers must be a step the agent can take,
and every pointer to documentation names the smallest stub that answers it (a function's, a few
hundred tokens, not its module's, thousands).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from mcp import Client
from pydantic import ValidationError

import llmc_mcp
from llmc_mcp.cli.main import _lineage_target, _settings, build_parser, main
from llmc_mcp.config import Settings
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.operations import CATALOG, NAMESPACES, get_operation
from llmc_mcp.sandbox.failures import timeout_fix
from llmc_mcp.server.app import build_server
from llmc_mcp.server.instructions import (
    CODE_BOOTSTRAP_LIMIT,
    REMOTE_NAMESPACES,
    bootstrap_tokens,
    classic_instructions,
)
from llmc_mcp.stubs.render import StubSet
from tests.mcp_helpers import structured, text

pytestmark = pytest.mark.anyio

PACKAGE = Path(llmc_mcp.__file__).parent


async def _bootstrap(settings: Settings, era: str = "legacy") -> tuple[list[dict], str]:
    async with Client(build_server(settings), mode=era) as client:
        listed = (await client.list_tools()).model_dump(by_alias=True, mode="json", exclude_none=True)
        return listed["tools"], client.instructions or ""


# ------------------------------------------------------------------------------------- the bootstrap


async def test_the_code_bootstrap_fits_its_budget_by_the_one_count_in_both_eras(
    code_settings: Settings,
) -> None:
    """Guards against a bootstrap grown past 800 tokens, and against two published counts that disagree
    (the demo counted the 2026 era's list envelope, bench/tokens.py the legacy one's)."""
    counts = {era: bootstrap_tokens(*await _bootstrap(code_settings, era)) for era in ("legacy", "auto")}
    assert counts["legacy"] == counts["auto"] <= CODE_BOOTSTRAP_LIMIT == 800


async def test_the_one_count_leaves_out_what_the_model_is_not_given(workspace_dir: Path) -> None:
    """Guards against the demo and bench/tokens.py publishing different figures for one bootstrap: the
    count is the tools as the model gets them (no list envelope, which differs between eras, and no
    outputSchema, which the host keeps for typing results) plus the instructions, whoever counts."""
    settings = Settings(mode="classic", workspace=workspace_dir)
    tools, instructions = await _bootstrap(settings, "legacy")
    assert any("outputSchema" in tool for tool in tools)
    given = [{k: v for k, v in tool.items() if k != "outputSchema"} for tool in tools]
    assert bootstrap_tokens(tools, instructions) == bootstrap_tokens(given, instructions)
    assert bootstrap_tokens(*await _bootstrap(settings, "auto")) == bootstrap_tokens(tools, instructions)
    for counter in (PACKAGE / "cli" / "demo.py", PACKAGE.parent / "bench" / "tokens.py"):
        assert "bootstrap_tokens(" in counter.read_text(encoding="utf-8"), counter


def _with_extra_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module that imported the catalog sees one more raster operation."""
    extra = dataclasses.replace(get_operation("raster.stats"), name="stats_again", classic_name=None)
    grown = (*CATALOG, extra)
    for module in list(sys.modules.values()):
        if getattr(module, "CATALOG", None) is CATALOG:
            monkeypatch.setattr(module, "CATALOG", grown)


async def test_adding_an_operation_does_not_change_the_code_bootstrap(
    code_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a bootstrap that lists operations (it grew from 711 to over 1,000 tokens as
    features were added): it names modules only, and the agent reads the stubs on demand."""
    before = await _bootstrap(code_settings)
    _with_extra_operation(monkeypatch)
    assert "stats_again" in StubSet.render().index  # the extra operation is really in the catalog
    assert await _bootstrap(code_settings) == before


async def test_the_guide_says_read_stubs_lists_names_and_points_at_one_function(
    code_settings: Settings,
) -> None:
    """Guards against 00_INIT promising signatures from read_stubs() (it lists names), and against a
    guide that sends the agent to a whole module's stub."""
    tools, instructions = await _bootstrap(code_settings)
    read_stubs = next(t for t in tools if t["name"] == "read_stubs")
    for said in (instructions, read_stubs["description"]):
        assert "every function's signature" not in said
    assert "read_stubs() lists the functions by module" in instructions
    assert 'read_stubs("raster.reproject") shows one function' in instructions
    assert 'read_stubs("raster")' not in instructions


def test_the_classic_guide_names_the_catalogs_namespaces_and_not_code_mode() -> None:
    """Guards against show() (code mode only) in the classic guide, and a fixed description of the
    catalog ("inspection, statistics, reprojection and conversion") that aged as terrain and
    hydrology arrived."""
    guide = classic_instructions()
    assert "show(" not in guide and "inspection, statistics, reprojection and conversion" not in guide
    with_tools = [ns for ns in NAMESPACES if any(op.classic and op.namespace == ns for op in CATALOG)]
    local = [ns for ns in with_tools if ns not in REMOTE_NAMESPACES]
    assert f"in the namespaces {', '.join(local)}:" in guide
    assert f"in the namespaces {', '.join(with_tools)}:" in classic_instructions(None, ["https://x.org/a/"])
    assert "terrain" in with_tools and "hydrology" in with_tools and "stac" not in local


# ---------------------------------------------------------------------------- the guide tool's name


async def test_the_guide_tool_is_00_INIT_by_default(code_settings: Settings) -> None:
    """Guards against the mission's name being lost to the alias."""
    tools, _ = await _bootstrap(code_settings)
    assert "00_INIT" in [t["name"] for t in tools]


async def test_init_tool_name_serves_the_guide_under_a_name_that_begins_with_a_letter(
    code_settings: Settings,
) -> None:
    """Guards against a list Vertex AI and Bedrock refuse whole (a name must begin with a letter): with
    the flag the guide is `init`, and 00_INIT is not listed beside it."""
    settings = code_settings.model_copy(update={"init_tool_name": "init"})
    async with Client(build_server(settings)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        guide = text(await client.call_tool("init", {}))
        assert guide == client.instructions
    assert sorted(names) == ["execute_code", "init", "read_stubs"]


def test_the_init_tool_name_flag_reaches_the_settings_and_refuses_a_leading_digit(tmp_path: Path) -> None:
    """Guards against a flag that is parsed but not used, and against an alias as invalid as 00_INIT."""
    args = build_parser().parse_args(["serve", "--workspace", str(tmp_path), "--init-tool-name", "init"])
    assert _settings(args).init_tool_name == "init"
    with pytest.raises(ValidationError):
        Settings(workspace=tmp_path, init_tool_name="1init")


@pytest.mark.parametrize("name", ["read_stubs", "execute_code"])
def test_the_init_tool_name_cannot_take_another_tools_name(tmp_path: Path, name: str) -> None:
    """Guards against a server that dies at start-up with pydantic's TypeError (two tools registered
    under one name) instead of a settings error naming the flag."""
    with pytest.raises(ValidationError, match="name of another code-mode tool"):
        Settings(workspace=tmp_path, init_tool_name=name)


# --------------------------------------------------------------------------- fixes the agent can take


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_an_invalid_argument_points_at_the_functions_own_stub(op) -> None:
    """Guards against read_stubs('raster') (14,205 tokens) where read_stubs('raster.stats') (544)
    answers the question."""
    with pytest.raises(InvalidArgument) as caught:
        op.validate({"no_such_argument": 1})
    assert f"read_stubs('{op.qualname}')" in caught.value.fix
    assert op.qualname in StubSet.render().functions


def _shipped_texts() -> dict[str, str]:
    files = [
        *PACKAGE.rglob("*.py"),
        *PACKAGE.rglob("*.yaml"),
        *PACKAGE.rglob("*.tmpl"),
        *PACKAGE.rglob("*.md"),
    ]
    return {str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8") for path in files}


MODULE_STUB = re.compile(r"""read_stubs\((?:module=)?['"]([^'"]*)['"]\)""")
MODULE_ARGUMENT_DOCUMENTED = {"server/code.py"}
"""The read_stubs tool's own description documents its module argument; no other text sends there."""


def test_no_shipped_text_sends_the_agent_to_a_whole_module_stub() -> None:
    """Guards against a fix, instruction or next_action that names a module's stub (or one built from
    a namespace) where a function's would answer."""
    stubs = StubSet.render()
    offenders = []
    for name, source in _shipped_texts().items():
        for target in MODULE_STUB.findall(source):
            if name in MODULE_ARGUMENT_DOCUMENTED and target in stubs.modules:
                continue
            built_from_the_function = re.fullmatch(r"\{\w+\.qualname\}", target)
            if target and target not in stubs.functions and not built_from_the_function:
                offenders.append(f"{name}: read_stubs({target!r})")
    assert offenders == []


@pytest.mark.parametrize("qualname", ["terrain.slope", "raster.calc"])
def test_a_timeout_fix_for_an_operation_without_a_window_names_a_step_it_can_take(qualname: str) -> None:
    """Guards against "split the work into windows" for operations that take no window or bounds."""
    fix = timeout_fix(qualname)
    fields = get_operation(qualname).arguments.model_fields
    assert "bounds" not in fields and "window" not in fix and "bounds" not in fix and "approx" not in fix
    assert "raster_clip" in fix and "--exec-timeout" in fix


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: op.qualname)
def test_a_timeout_fix_names_only_arguments_the_operation_takes(op) -> None:
    """Guards against a fix that offers an argument (approx, bounds, resolution) the call cannot pass."""
    fix = timeout_fix(op.qualname)
    for argument in ("approx", "bounds", "resolution", "points"):
        if re.search(rf"\b{argument}\b", fix):
            assert argument in op.arguments.model_fields or f"pour_{argument}" in op.arguments.model_fields


def test_the_code_mode_timeout_fix_names_functions_and_arguments_that_exist() -> None:
    """Guards against advice for agent code naming an API the sandbox does not have."""
    fix = timeout_fix(None)
    for qualname, argument in re.findall(r"\b(raster\.\w+)\([^)]*?(\w+)=", fix):
        assert argument in get_operation(qualname).arguments.model_fields
    assert "approx" in get_operation("raster.stats").arguments.model_fields and "raster.clip" in fix


async def test_execute_code_past_its_wall_clock_offers_the_code_mode_fix(code_settings: Settings) -> None:
    """Guards against the pool's timeout keeping its old, window-based advice."""
    settings = code_settings.model_copy(update={"exec_timeout": 1.0})
    async with Client(build_server(settings)) as client:
        result = structured(await client.call_tool("execute_code", {"code": "while True:\n    pass"}))
    assert result["error"]["type"] == "Timeout" and result["error"]["fix"] == timeout_fix(None)


# ------------------------------------------------------------------------------------------ lineage


def test_lineage_resolves_a_relative_file_inside_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against `provenance lineage FILE --workspace W` reading FILE from the current folder and
    then telling the user to pass the --workspace they passed."""
    workspace, elsewhere = tmp_path / "w", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "out.tif").write_bytes(b"x")
    monkeypatch.chdir(elsewhere)
    assert _lineage_target(Path("out.tif"), workspace) == workspace / "out.tif"
    assert main(["provenance", "lineage", "out.tif", "--workspace", str(workspace)]) == 0
    assert "out.tif  original" in capsys.readouterr().out


# -------------------------------------------------------------------------------- CONFORMANCE.md

CONFORMANCE = Path(__file__).parent / "clients" / "CONFORMANCE.md"


async def test_conformance_notes_state_the_servers_tools_resources_and_prompts(tmp_path: Path) -> None:
    """Guards against notes that age: they said 8 classic tools, no resources, three prompts, and a
    server that never samples or elicits, while it had 31 tools, stub resources, 7 prompts, and
    sampled and elicited for its gate. The figures are read from the server, not written here."""
    notes = CONFORMANCE.read_text(encoding="utf-8")
    counts, listed, prompts = {}, {}, 0
    for mode in ("code", "classic"):
        async with Client(build_server(Settings(mode=mode, workspace=tmp_path))) as client:
            counts[mode] = len((await client.list_tools()).tools)
            listed[mode] = len((await client.list_resources()).resources)
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            if mode == "classic":
                prompts = len((await client.list_prompts()).prompts)
        for template in templates:
            assert f"`{template}`" in notes
    assert f"({counts['code']} tools in code mode, {counts['classic']} in classic mode)" in notes
    assert f"code mode also lists the {listed['code']} stubs" in notes
    assert "On an empty workspace classic mode lists nothing" in notes and listed["classic"] == 0
    assert f"Classic mode lists the {prompts} reflection prompts" in notes
    for stale in (
        "never asks the client to sample",
        "never elicits",
        "No elicitation",
        "Neither mode serves",
    ):
        assert stale not in notes


# ------------------------------------------------------------------------- schemas through converters


def _keep_one_branch(schema: object, pick: int) -> object:
    """What converters to Gemini's function declarations do with a union: ``type`` is one field there,
    so ``anyOf`` becomes one of its non-null branches (which one depends on the converter) + nullable."""
    if isinstance(schema, list):
        return [_keep_one_branch(item, pick) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _keep_one_branch(value, pick) for key, value in schema.items() if key != "anyOf"}
    if "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
        out.update(_keep_one_branch(branches[pick], pick))
    return out


@pytest.mark.parametrize("pick", [0, -1], ids=["first-branch", "last-branch"])
@pytest.mark.parametrize("qualname", ["raster.reproject", "raster.merge"])
def test_both_resolution_forms_survive_a_converter_that_keeps_one_branch_of_a_union(
    qualname: str, pick: int
) -> None:
    """Guards against a resolution declared as number-or-pair, whose single-number form Gemini's
    converter dropped: one size and an (x, y) pair must both pass the converted schema and mean what
    they say (square pixels of 30; 30 by 20)."""
    import jsonschema

    from llmc_mcp.server.schemas import portable_schema

    op = get_operation(qualname)
    published = portable_schema(op.arguments.model_json_schema())["properties"]["resolution"]
    converted = _keep_one_branch(published, pick)
    required = (
        {"src": "a.tif", "dst": "b.tif", "dst_crs": "EPSG:4326"}
        if "src" in op.arguments.model_fields
        else {
            "sources": ["a.tif"],
            "dst": "b.tif",
        }
    )
    for form, meaning in (([30], 30.0), ([30, 20], (30.0, 20.0))):
        jsonschema.validate(form, converted)
        assert op.arguments.model_validate({**required, "resolution": form}).resolution == meaning
    assert op.arguments.model_validate({**required, "resolution": 30}).resolution == 30.0  # code mode's habit


def test_the_out_of_memory_fix_names_steps_every_operation_can_take() -> None:
    """Guards against "work on a smaller window" for operations that take no window: the steps are
    functions of the catalog and an argument of the one they name."""
    from llmc_mcp.errors import OutOfMemory

    fix = OutOfMemory.in_this_process().fix
    assert "window" not in fix and "--memory-mb" in fix
    assert "raster_clip" in fix and get_operation("raster.clip").tool_name == "raster_clip"
    assert "resolution" in get_operation("raster.reproject").arguments.model_fields
