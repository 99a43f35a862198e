"""The bootstrap text of each mode, built from the catalog so it describes exactly what runs.

Classic mode lists its tools; code mode lists only its modules and the three
bootstrap tools, so its size does not grow with the catalog (the agent reads
the stubs on demand).
"""

from __future__ import annotations

from llmc_mcp.config import Settings
from llmc_mcp.operations import CATALOG, NAMESPACES

_PATHS = (
    "Paths are relative names inside the server's workspace ('data/in.tif'); absolute paths, '..', "
    "URLs and GDAL virtual file systems are refused."
)


_MISS = """\
  try:
      raster.reproject("in.tif", "out.tif", dst_crs="EPSG:6933", resampling="nearest")
  except reflection.ReflectionRequired as e:
      hints = e.hints
      for hint in hints:
          print(hint["domain"], hint["prompt_text"])"""
"""The first half of the gate retry, as code that runs as written (tests/test_examples.py runs it)."""

_RETRY = """\
  for hint in hints:
      reflection.persist(hint["hash"], hint["domain"], answers[hint["domain"]])
  raster.reproject("in.tif", "out.tif", dst_crs="EPSG:6933", resampling="nearest")"""
"""The second half: the one call that persists every answer and repeats the operation."""


def classic_instructions() -> str:
    tools = "\n".join(f"- {op.tool_name}: {op.summary}" for op in CATALOG if op.classic)
    return (
        "llmc-mcp (classic mode): raster inspection, statistics, reprojection and conversion "
        "(rasterio/GDAL, pyproj), one tool per operation:\n"
        f"{tools}\n"
        "- persist_justification: store a justification a tool asked for.\n\n"
        "Reflection: consequential choices (target CRS, resampling, lossy compression) need a "
        "justification first. The tool then returns isError with JSON: reflection_required (a list of "
        "hints with domain, hash and prompt_text) and next_action. Answer each hint's prompt_text; then "
        "persist every answer with persist_justification(hash, domain, justification) and repeat the "
        "call. Justifications are cached: the same decision is not asked twice. The prompts are also "
        "MCP prompts. Workflows: workflow_list offers guided tasks, walked one step at a time with "
        "workflow_start and workflow_submit; each next_action is the exact tool call to make next. "
        "Errors are JSON with a snake_case type (invalid_argument, not_found, refused: a deliberate "
        "refusal, change the call as fix says; reflection_required...), message and fix.\n\n" + _PATHS
    )


def code_instructions(settings: Settings) -> str:
    modules = ", ".join((*NAMESPACES, "reflection"))
    return f"""llmc-mcp (code mode): raster work (rasterio/GDAL, pyproj) by writing Python.
Tools: read_stubs() lists every function's signature; read_stubs("raster") or \
read_stubs("raster.reproject") shows types, result shapes and docs. execute_code(code) runs \
Python with the modules {modules} preloaded; variables persist between calls (reset=True clears them). \
Without a protocol session (stateless HTTP) each result carries a session handle: pass it back as \
execute_code(code, session=...) to keep the variables. \
Print summaries, keep data in variables. The last expression's value is returned.
Allowed imports: those modules and math, statistics, json, re, itertools, functools, collections, \
datetime. No files or network except through the API.
Errors raise ApiError: e.type is its kind ("not_found", "refused"...), as execute_code's error.type; \
e.fix says what to do. Reflection: a consequential choice (target CRS, resampling, lossy compression) raises \
reflection.ReflectionRequired (e.type "reflection_required") with one hint per decision (domain, hash, \
prompt_text); uncaught, execute_code returns them. Keep them:
{_MISS}
Answer each hint's prompt_text; then, in ONE next execute_code call, persist every answer and repeat the \
operation (answers: your justification per domain, {{"intent": ..., "alternatives": [{{"method": ..., \
"why_not": ...}}], "choice": {{"method": ..., "rationale": ..., "tradeoffs": ...}}, "confidence": ...}}):
{_RETRY}
Justifications are cached; the same decision is not asked again.
Workflows: workflows.list() offers guided tasks; workflows.start(name, **inputs) gives one step at a time, \
its next_action the exact call to make next.
{_PATHS}
Limits per call: {settings.exec_timeout:g} s wall time (then the session's variables are reset), \
{settings.memory_mb} MiB memory, {settings.output_limit} characters of output.
Isolation: {isolation_layers()}."""


def isolation_layers() -> str:
    """What stands between agent code and the machine here, as the running system provides it."""
    from llmc_mcp.sandbox.worker import landlock_abi

    layers = ["RestrictedPython policy", "one worker process per session with rlimits"]
    abi = landlock_abi()
    layers.append(
        f"Landlock file and network confinement (ABI {abi})" if abi else "no Landlock (kernel lacks it)"
    )
    return ", ".join(layers)
