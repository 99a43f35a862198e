"""Classic face: one MCP tool per catalog operation, the reflection prompts, and persist_justification.

For hosts that cannot run code. Every tool is derived from its catalog entry
(name, description, typed and enum-constrained parameters, annotations). The
operation runs where code mode runs it: in the session's confined worker
process (rlimits, Landlock, GDAL hardening, wall-clock kill), through the same
binding, so there is one execution path and a crash in GDAL costs a call,
never the server. The gate and the store stay here, in the server.

Each tool declares its result model as ``outputSchema`` and its successes conform; errors are
``isError`` results with their JSON in the text only (:mod:`llmc_mcp.server.results`, DD-MCP-078).
``--tools raster,crs`` serves the tools of those namespaces only, from the same catalog.
"""

from __future__ import annotations

import inspect
import secrets
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from llmc_mcp import __version__
from llmc_mcp.config import Settings
from llmc_mcp.jobs.models import JobRecord
from llmc_mcp.operations import Operation, get_operation
from llmc_mcp.reflection.gate import PersistResult
from llmc_mcp.reflection.prompts import PromptTemplate
from llmc_mcp.reflection.schema import Justification
from llmc_mcp.sandbox.pool import WorkerPool
from llmc_mcp.server.base import LlmcServer
from llmc_mcp.server.host import worker_pools
from llmc_mcp.server.instructions import classic_instructions, classic_operations
from llmc_mcp.server.requests import serving
from llmc_mcp.server.resources import serve_resources
from llmc_mcp.server.results import (
    answer_result,
    error_result,
    exception_result,
    image_fields,
    ok_result,
    output_schema,
)
from llmc_mcp.server.resumable import ResumableCalls, needs_resuming
from llmc_mcp.server.review import persist_reviewed
from llmc_mcp.server.runtime import Runtime
from llmc_mcp.server.schemas import argument_error, declare_output, forbid_unknown_arguments, model_schema
from llmc_mcp.server.sessions import run_in_session, session_key, worker_lifespan
from llmc_mcp.server.tasks import Tasks, TasksExtension, serve_tasks
from llmc_mcp.sessions import STATELESS_PREFIX, current_session

NEXT_ACTION = (
    "Answer each hint's prompt_text with the JSON it asks for; then persist every answer with "
    "persist_justification(hash, domain, justification) and repeat the same tool call with the same "
    "arguments."
)
"""The gate retry as the classic instructions tell it."""


class ClassicServer(LlmcServer):
    """Arguments that fail a tool's published schema get the project's ``invalid_argument``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            tool = self._tool_manager.get_tool(name)
            # The SDK wraps its argument validation's ValidationError (and only that: the tools
            # catch their own) in a ToolError whose text is pydantic's, with its links.
            if (
                isinstance(exc, UnexpectedToolError)
                or tool is None
                or not isinstance(exc.__cause__, ValidationError)
            ):
                raise
            return error_result(argument_error(name, tool.parameters, exc.__cause__).to_dict())


def build_classic_server(runtime: Runtime) -> MCPServer:
    pool, jobs = worker_pools(runtime)
    tasks = Tasks(jobs, runtime.settings.task_after)
    tasks.renders("operation", render_operation)
    calls = ResumableCalls()
    server = ClassicServer(
        "llmc-mcp",
        instructions=classic_instructions(runtime.settings.tools, runtime.settings.allow_remote),
        version=__version__,
        lifespan=worker_lifespan(pool, calls),
        extensions=[TasksExtension(tasks)],
    )
    server.pool = pool  # type: ignore[attr-defined]
    server.resource_lister = serve_resources(server, runtime, pool, None)
    for op in classic_operations(runtime.settings.tools, runtime.settings.allow_remote):
        server.add_tool(
            _operation_tool(op, pool, calls, runtime.settings, tasks),
            name=op.tool_name,
            description=_tool_description(op),
            annotations=ToolAnnotations(
                read_only_hint=op.read_only,
                destructive_hint=not op.read_only,
                idempotent_hint=True,
                open_world_hint=False,
            ),
            structured_output=False,
        )
        forbid_unknown_arguments(server, op.tool_name)
        declare_output(server, op.tool_name, output_schema(op.result))
    server.add_tool(
        _persist_tool(runtime, calls),
        name="persist_justification",
        description=(
            "Store a justification for a reflection hint (hash and domain exactly as in the hint). "
            "The justification is validated; field-level errors come back. Then retry the operation."
        ),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        structured_output=False,
    )
    forbid_unknown_arguments(server, "persist_justification")
    declare_output(server, "persist_justification", output_schema(PersistResult))
    # The argument is checked by the gate (every problem at once), but published with its real shape
    # so strict converters know it, instead of an open object they would turn into an empty one.
    persist = server._tool_manager.get_tool("persist_justification")
    persist.parameters["properties"]["justification"] = {
        **model_schema(Justification),
        "description": persist.parameters["properties"]["justification"].get("description", ""),
    }
    for template in runtime.gate.prompts:
        server.add_prompt(_prompt(template))
    served = classic_operations(runtime.settings.tools, runtime.settings.allow_remote)
    serve_tasks(server, tasks, frozenset(op.tool_name for op in served))
    return server


def render_operation(record: JobRecord) -> CallToolResult:
    """An operation job's answer as its classic tool returns it."""
    return answer_result(record.answer or {}, image_fields(get_operation(record.name).result))


def _tool_description(op: Operation) -> str:
    description = op.doc
    if op.reflection:
        whens = "; ".join(f"{spec.domain} ({spec.when})" for spec in op.reflection)
        description += f"\n\nReflection: may require a justification for {whens}."
    return description


def _operation_tool(
    op: Operation, pool: WorkerPool, calls: ResumableCalls, settings: Settings, tasks: Tasks
) -> Any:
    images = image_fields(op.result)

    async def tool(ctx: Context, **kwargs: Any) -> CallToolResult | InputRequiredResult:
        async def work() -> CallToolResult:
            try:
                args = op.from_classic(kwargs)
                with serving(ctx):
                    if tasks.wanted():
                        return await _as_task(op, args, ctx, pool, tasks)
                    answer = await run_in_session(
                        pool, ctx, lambda key, _fresh: pool.operate(key, op.qualname, args)
                    )
            except Exception as exc:
                return exception_result(exc, op.tool_name)
            return answer_result(answer, images)

        if op.reflection and needs_resuming(ctx, settings.reflection, settings.min_confidence):
            return await calls.run(ctx, session_key(ctx), kwargs, work)
        return await work()

    tool.__name__ = op.tool_name
    tool.__doc__ = op.doc
    # MCP reads the signature (and finds the Context parameter in __annotations__); pydantic's
    # validate_call reads __annotations__: give both.
    signature, hints = op.classic_parameters()
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    parameters = [*signature.parameters.values(), context]
    tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=CallToolResult | InputRequiredResult
    )
    tool.__annotations__ = {**hints, "ctx": Context, "return": CallToolResult | InputRequiredResult}
    return tool


async def _as_task(
    op: Operation, args: dict[str, Any], ctx: Context, pool: WorkerPool, tasks: Tasks
) -> CallToolResult:
    """The call as a task: checked and gated now, in the session's worker (where the client's model or
    user can still be asked), then run as a job; nothing is queued that would wait on a question."""
    checked = await run_in_session(pool, ctx, lambda key, _fresh: pool.preflight(key, op.qualname, args))
    if not checked["ok"]:
        return answer_result(checked)
    owner = session_key(ctx) or STATELESS_PREFIX + secrets.token_hex(8)
    return await tasks.hand_over(lambda: tasks.runner.start_operation(owner, op.qualname, args))


def _persist_tool(runtime: Runtime, calls: ResumableCalls) -> Any:
    async def persist_justification(
        ctx: Context,
        hash: Annotated[str, Field(description="The hint's hash: 'sha256:' and 64 hex digits.")],
        domain: Annotated[str, Field(description="The hint's domain.")],
        justification: Annotated[
            dict[str, Any],
            Field(
                description="{intent, alternatives: [{method, why_not}], choice: {method, rationale, "
                "tradeoffs}, confidence: low|medium|high}"
            ),
        ],
        supersede: Annotated[
            bool,
            Field(
                description="Replace the justification this session stored for hash (it is kept, "
                "marked superseded); no hint needed."
            ),
        ] = False,
    ) -> CallToolResult | InputRequiredResult:
        # A stateless request has no session: its hints are bound to every stateless caller alike.
        session = session_key(ctx) or STATELESS_PREFIX
        settings = runtime.settings

        async def work() -> CallToolResult:
            token = current_session.set(session)
            try:
                result = await persist_reviewed(
                    runtime.gate,
                    ctx,
                    settings.min_confidence,
                    hash,
                    domain,
                    justification,
                    session=session,
                    timeout=settings.review_timeout,
                    supersede=supersede,
                )
            except Exception as exc:
                return exception_result(exc, "persist_justification")
            finally:
                current_session.reset(token)
            return ok_result(result.model_dump(mode="json"))

        # The user's review of a weak justification reaches a 2026-07-28 client only through a retry.
        if needs_resuming(ctx, "hints", settings.min_confidence):
            arguments = {
                "hash": hash,
                "domain": domain,
                "justification": justification,
                "supersede": supersede,
            }
            return await calls.run(ctx, session_key(ctx), arguments, work)
        return await work()

    return persist_justification


def _prompt(template: PromptTemplate) -> Prompt:
    def render(**kwargs: str) -> str:
        return template.render(kwargs)

    render.__name__ = template.name
    render.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
            for name in template.arguments
        ],
        return_annotation=str,
    )
    render.__annotations__ = {**dict.fromkeys(template.arguments, str), "return": str}
    return Prompt.from_function(render, name=template.name, description=template.description)
