"""The bootstrap text of each mode, built from the catalog so it describes exactly what runs.

Classic mode lists its tools; code mode lists only its modules and the three
bootstrap tools, so its size does not grow with the catalog (the agent reads
the stubs on demand).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmc_mcp.config import Settings
from llmc_mcp.operations import CATALOG, NAMESPACES, Operation
from llmc_mcp.tokens import count_json_tokens, count_tokens

_PATHS = (
    "Paths are relative names in the server's workspace ('data/in.tif'); absolute paths, '..', URLs "
    "and /vsi paths are refused."
)


def paths_text(allow_remote: Sequence[str] = ()) -> str:
    """What a path may be on this server: the operator's URL prefixes, when there are any, are named."""
    if not allow_remote:
        return _PATHS
    return (
        "Paths are relative names in the server's workspace ('data/in.tif'). An input raster may also be a "
        f"URL under {', '.join(allow_remote)} (read by ranges; outputs stay in the workspace; stac.search "
        "finds scenes). Absolute paths, '..', other URLs and /vsi paths are refused."
    )


_MISS = """\
  try:
      raster.reproject("in.tif", "out.tif", dst_crs="EPSG:6933", resampling="nearest")
  except reflection.ReflectionRequired as e:
      hints = e.hints
      print([(h["domain"], h["prompt_text"]) for h in hints])"""
"""The first half of the gate retry, as code that runs as written (tests/test_examples.py runs it)."""

_RETRY = """\
  for h in hints:
      reflection.persist(h["hash"], h["domain"], answers[h["domain"]])
  raster.reproject("in.tif", "out.tif", dst_crs="EPSG:6933", resampling="nearest")"""
"""The second half: the one call that persists every answer and repeats the operation."""

CODE_BOOTSTRAP_LIMIT = 800
"""Tokens the code-mode bootstrap (tool list + instructions, :func:`bootstrap_tokens`) may take: it is
sent on every turn, and it names modules, never operations, so the catalog can grow under it."""


def bootstrap_tokens(tools: Sequence[Mapping[str, Any]], instructions: str) -> int:
    """The one count of a mode's bootstrap, as the model reads it; the demo and bench/tokens.py use it.

    ``tools`` are the entries of ``tools/list`` (``model_dump(by_alias=True, mode="json",
    exclude_none=True)``), counted as compact JSON, each as a host gives it to the model: name,
    description, inputSchema, annotations. Left out: the list's envelope (``ttlMs``, ``cacheScope``,
    ``_meta``), protocol that differs between eras (the handshake era's ``execution.taskSupport``), and
    the classic tools' ``outputSchema``, which a host reads to type results (bench/tokens.py counts it
    apart).
    """
    given = [{k: v for k, v in tool.items() if k not in ("outputSchema", "execution")} for tool in tools]
    return count_json_tokens(given) + count_tokens(instructions)


REMOTE_NAMESPACES = frozenset({"stac"})
"""Namespaces that only read URLs: classic mode serves their tools when the operator allowed a prefix
(``--allow-remote``), so a host never lists tools that can only refuse."""


def classic_operations(
    namespaces: Sequence[str] | None = None, allow_remote: Sequence[str] = ()
) -> list[Operation]:
    """The operations classic mode serves as tools: every classic one, or those of ``namespaces``
    (``--tools``), and the remote ones only where URLs may be read; the tool list and the guide both
    come from this one selection."""
    return [
        op
        for op in CATALOG
        if op.classic
        and (namespaces is None or op.namespace in namespaces)
        and (op.namespace not in REMOTE_NAMESPACES or allow_remote)
    ]


def classic_instructions(namespaces: Sequence[str] | None = None, allow_remote: Sequence[str] = ()) -> str:
    """The classic guide for the tools served (``namespaces`` as :func:`classic_operations` takes it):
    it names those tools and namespaces only, never one the host cannot call."""
    served = classic_operations(namespaces, allow_remote)
    tools = "\n".join(f"- {op.tool_name}: {op.summary}" for op in served)
    names = [ns for ns in NAMESPACES if any(op.namespace == ns for op in served)]
    workflows = (
        "Workflows: workflow_list offers guided tasks, walked one step at a time with "
        "workflow_start and workflow_submit; each next_action is the exact tool call to make next. "
        if "workflows" in names
        else ""
    )
    return (
        f"llmc-mcp (classic mode): geospatial raster work (rasterio/GDAL, pyproj), one tool per "
        f"operation, in the namespaces {', '.join(names)}:\n"
        f"{tools}\n"
        "- persist_justification: store a justification a tool asked for.\n\n"
        "Reflection: consequential choices (target CRS, resampling, lossy compression) need a "
        "justification first. The tool then returns isError with JSON: reflection_required (a list of "
        "hints with domain, hash and prompt_text) and next_action. Answer each hint's prompt_text; then "
        "persist every answer with persist_justification(hash, domain, justification) and repeat the "
        "call. Justifications are cached: the same decision is not asked twice. The prompts are also "
        f"MCP prompts. {workflows}"
        "Errors are JSON with a snake_case type (invalid_argument, not_found, refused: a deliberate "
        "refusal, change the call as fix says; reflection_required...), message and fix.\n\n"
        "Long work: a call is stopped at --exec-timeout. A client that supports MCP tasks gets a long "
        "call back as a task (tasks/get until it completes). Without tasks, do less per call (clip a "
        "part first, a coarser resolution) or ask the operator to raise --exec-timeout.\n\n"
        + paths_text(allow_remote)
    )


def code_instructions(settings: Settings) -> str:
    modules = ", ".join((*NAMESPACES, "reflection", "jobs"))
    return f"""llmc-mcp (code mode): raster work (rasterio/GDAL, pyproj) in Python.
read_stubs() lists the functions by module; read_stubs("raster.reproject") shows one function: \
signature, result shape, errors. execute_code(code) runs Python with {modules} preloaded; variables \
persist per session (reset=True clears them). Print summaries; the last expression is returned.
Imports: math, statistics, json, re, itertools, functools, collections, datetime.
Errors raise ApiError: e.type is the kind ("not_found", "refused"...), e.fix what to do. \
A consequential choice (target CRS, resampling, lossy compression) raises reflection.ReflectionRequired \
with one hint per decision; uncaught, execute_code returns them:
{_MISS}
Answer each prompt_text with {{"intent", "alternatives": [{{"method", "why_not"}}], "choice": \
{{"method", "rationale", "tradeoffs"}}, "confidence"}}; then, in ONE execute_code call:
{_RETRY}
Answers are cached. Guided tasks: workflows.list(), workflows.start(name, **inputs), then each \
next_action.
{paths_text(settings.allow_remote)}
Limits per call: {settings.exec_timeout:g} s (then variables reset), {settings.memory_mb} MiB, \
{settings.output_limit} characters of output. Longer work: read_stubs("jobs.start"); or clip first, or \
ask the operator to raise --exec-timeout.
Isolation: {isolation_layers()}."""


def isolation_layers() -> str:
    """What stands between agent code and the machine here, as the running system provides it."""
    from llmc_mcp.sandbox.worker import landlock_abi

    layers = ["RestrictedPython", "a worker per session under rlimits"]
    abi = landlock_abi()
    layers.append(f"Landlock on files and network (ABI {abi})" if abi else "no Landlock (kernel lacks it)")
    return ", ".join(layers)
