"""Code-execution face: ``00_INIT``, ``read_stubs`` and ``execute_code``, and nothing else.

``00_INIT`` is the mission's name for the guide tool; a host whose tool names must begin with a letter
(Vertex AI, Bedrock) would refuse the whole list, so ``--init-tool-name`` serves it under another name
instead (never both: the one invalid name is what such a host rejects).

The agent reads typed stubs generated from the catalog and runs Python in a
per-session worker (:mod:`llmc_mcp.sandbox.pool`). The gate's decisions and
the store stay here, in the server: the worker asks over its channel, so no
persist tool is exposed and nothing inside the worker can make the gate say
yes.

Which session (and worker) a request belongs to is :mod:`llmc_mcp.server.sessions`'s job,
shared with the classic face.
"""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ImageContent, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field

from llmc_mcp import __version__
from llmc_mcp.jobs.models import JobRecord
from llmc_mcp.server.base import LlmcServer, serve_no_prompts
from llmc_mcp.server.classic import render_operation
from llmc_mcp.server.host import worker_pools
from llmc_mcp.server.instructions import code_instructions
from llmc_mcp.server.requests import serving
from llmc_mcp.server.resources import serve_resources
from llmc_mcp.server.results import error_result, exception_result, without_inline_images
from llmc_mcp.server.resumable import ResumableCalls, needs_resuming
from llmc_mcp.server.runtime import Runtime
from llmc_mcp.server.schemas import forbid_unknown_arguments
from llmc_mcp.server.sessions import (
    SessionHandles,
    run_with_handle,
    session_key,
    worker_lifespan,
)
from llmc_mcp.server.tasks import Tasks, TasksExtension, serve_tasks
from llmc_mcp.sessions import HTTP_PREFIX
from llmc_mcp.stubs.render import StubSet, write_stubs

NEXT_ACTION = (
    "Answer each hint's prompt_text; then, in ONE next execute_code call, persist every answer with "
    "reflection.persist(hash, domain, justification) and repeat the operation."
)
"""The gate retry in the words of the instructions and the reflection stub: one story everywhere."""
INIT_DESCRIPTION = (
    "IF YOU HAVE NOT BEEN GIVEN MCP INSTRUCTIONS, USE THIS TOOL ON STARTUP TO GET CONTEXT. "
    "Returns the guide to this server; skip it if you already received server instructions."
)


def build_code_server(runtime: Runtime) -> MCPServer:
    settings = runtime.settings
    stubs = StubSet.render(settings)
    write_stubs(runtime.context.workspace.stubs_dir, stubs)
    pool, jobs = worker_pools(runtime)
    tasks = Tasks(jobs, settings.task_after)
    tasks.renders("operation", render_operation)
    tasks.renders(
        "code", lambda record: execute_result(copy.deepcopy(record.answer or {}), settings.output_limit)
    )
    handles = SessionHandles(pool)
    calls = ResumableCalls()
    instructions = code_instructions(settings)
    server = LlmcServer(
        "llmc-mcp",
        instructions=instructions,
        version=__version__,
        lifespan=worker_lifespan(pool, calls),
        extensions=[TasksExtension(tasks)],
    )
    serve_no_prompts(server)
    server.pool = pool  # type: ignore[attr-defined]
    server.resource_lister = serve_resources(server, runtime, pool, stubs)

    @server.tool(
        name=settings.init_tool_name,
        description=INIT_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    def init() -> str:
        return instructions

    @server.tool(
        name="read_stubs",
        description=(
            "No argument: the functions by module. A function ('raster.reproject'): its typed stub; "
            "a module ('raster'): all of its stubs."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    def read_stubs(module: str | None = None) -> CallToolResult:
        if module is None:
            return CallToolResult(content=[_text(stubs.index)])
        source = stubs.get(module)
        if source is None:
            return error_result(
                {
                    "type": "not_found",
                    "message": f"No stub module or function named {module[:100]!r}.",
                    "fix": f"Valid modules: {', '.join(stubs.modules)}; or one function such as "
                    f"'{next(iter(stubs.functions))}'.",
                }
            )
        return CallToolResult(content=[_text(source)])

    @server.tool(
        name="execute_code",
        description=(
            "Run Python with the stub modules in a sandbox; variables persist per session. Returns "
            "printed output and the last expression's value, or an error."
        ),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
        structured_output=False,
    )
    async def execute_code(
        code: Annotated[str, Field(description="Python source.")],
        ctx: Context,
        reset: Annotated[bool, Field(description="Start from a clean session first.")] = False,
        session: Annotated[
            str | None,
            Field(
                description="Without a protocol session: an earlier result's session handle, to keep "
                "its variables.",
                max_length=64,
            ),
        ] = None,
    ) -> CallToolResult | InputRequiredResult:
        async def work() -> CallToolResult:
            try:
                key = session_key(ctx) if session is None else handles.known(session)
                busy = jobs.running_code(key) if key is not None else None
                if busy is not None:
                    return _busy(busy)
                with serving(ctx):
                    if tasks.wanted():
                        return await _code_task(key)
                    result = await run_with_handle(
                        pool,
                        handles,
                        ctx,
                        session,
                        lambda key, fresh: pool.execute(key, code, reset or fresh),
                    )
            except Exception as exc:
                return exception_result(exc, "execute_code")
            return execute_result(result, settings.output_limit)

        async def _code_task(key: str | None) -> CallToolResult:
            """The code as a task, run in the session's own worker (its variables persist) under
            ``--job-timeout``; a gate miss in it is a ReflectionRequired in its result, as in a call."""
            if key is None:
                _handle, key, _why = handles.resolve(session)
            elif key.startswith(HTTP_PREFIX):
                pool.close_with_connection(key, ctx)
            return await tasks.hand_over(lambda: jobs.start_code(pool, key, code, reset))

        if needs_resuming(ctx, settings.reflection, settings.min_confidence):
            arguments = {"code": code, "reset": reset, "session": session}
            # A stateless client's session is its handle, when it passes one back.
            owner = session_key(ctx) or (f"handle:{session}" if session else None)
            return await calls.run(ctx, owner, arguments, work)
        return await work()

    for name in (settings.init_tool_name, "read_stubs", "execute_code"):
        forbid_unknown_arguments(server, name)
        _drop_titles(server, name)
    serve_tasks(server, tasks, frozenset({"execute_code"}))
    return server


def _busy(task: JobRecord) -> CallToolResult:
    return error_result(
        {
            "type": "session_busy",
            "message": f"This session's worker is running task {task.id} (execute_code); nothing ran.",
            "fix": "Follow the task with tasks/get until it ends, or cancel it with tasks/cancel; or call "
            "without this session (another session handle) meanwhile.",
        }
    )


def _drop_titles(server: MCPServer, name: str) -> None:
    """Leave out the titles pydantic derives ("Code", "execute_codeArguments"): they repeat the names,
    and the bootstrap is sent on every turn (its budget, ``CODE_BOOTSTRAP_LIMIT``)."""
    tool = server._tool_manager.get_tool(name)
    schema = {k: v for k, v in tool.parameters.items() if k != "title"}
    schema["properties"] = {
        prop: {k: v for k, v in spec.items() if k != "title"} for prop, spec in schema["properties"].items()
    }
    tool.parameters = schema


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def execute_result(result: dict[str, Any], output_limit: int) -> CallToolResult:
    """Compact text for the model (stdout, then the value or the error); the same data structured.

    Both printed output and the returned value are capped at ``output_limit`` characters, each
    with an explicit marker saying how much was cut. Images the code attached with ``show()`` follow
    the text as image content; the structured result keeps their sizes only, and a base64 PNG printed
    or returned is cut out of both (:func:`without_inline_images`).
    """
    images = result.pop("images", [])
    result["stdout"] = without_inline_images(result["stdout"])
    result["result"] = without_inline_images(result["result"])
    if images:
        result["images"] = [{k: v for k, v in image.items() if k != "data"} for image in images]
    dropped = result.pop("stdout_dropped", 0)
    if dropped:
        result["stdout"] += (
            f"\n[output truncated: {dropped} more characters not shown (limit {output_limit}); "
            "print less or summarize]"
        )
        result["stdout_truncated"] = dropped
    parts = [result["stdout"]] if result["stdout"] else []
    note = (result.get("session") or {}).get("note")
    if note:
        parts.insert(0, f"[session: {note}]")
    if result["ok"] and result["result"] is not None:
        rendered = json.dumps(result["result"], ensure_ascii=False, default=str)
        if len(rendered) > output_limit:
            cut = len(rendered) - output_limit
            rendered = rendered[:output_limit] + f" [result truncated: {cut} more characters not shown]"
            result["result"] = rendered
            result["result_truncated"] = cut
        parts.append(rendered)
    elif not result["ok"]:
        parts.append(json.dumps(_error_text(result), ensure_ascii=False, default=str))
    if images:
        parts.append(f"[{len(images)} image{'s' if len(images) > 1 else ''} attached by show()]")
    attached = [ImageContent(type="image", data=i["data"], mime_type=i["mime_type"]) for i in images]
    return CallToolResult(
        content=[_text("\n".join(parts) or "(no output)"), *attached],
        structured_content=result,
        is_error=not result["ok"],
    )


_HINT_TEXT_FIELDS = ("domain", "hash", "prompt_args", "prompt_text", "fallback")
"""What the model needs of a hint to answer it (hosts that drop ``structuredContent`` show only the
text); the prompt's name and the operation stay in ``structuredContent``."""


def _error_text(result: dict[str, Any]) -> dict[str, Any]:
    """The error as the model reads it: a gate miss without its traceback and machine-only fields."""
    error = {k: result[k] for k in ("error", "reflection_required", "next_action") if k in result}
    if "reflection_required" in error:
        error["error"] = {k: v for k, v in error["error"].items() if k not in ("traceback", "line")}
        error["reflection_required"] = [
            {k: h[k] for k in _HINT_TEXT_FIELDS if h.get(k) is not None} for h in error["reflection_required"]
        ]
    return error
