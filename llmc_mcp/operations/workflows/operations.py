"""The ``workflows`` namespace of the catalog: guided multi-step work the server leads.

Defined once here like every operation, so the stub namespace (``workflows.start(...)``), the
classic tools (``workflow_list``, ``workflow_start``, ``workflow_submit``) and the sandbox binding
derive from it. Each function asks the engine through ``ctx.workflows``: from a worker that is the
server (which keeps the states and the justification store), in-process an engine of its own.
"""

from __future__ import annotations

import builtins
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from llmc_mcp.errors import LlmcError
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import OperationContext, operation, provide_local_workflows
from llmc_mcp.operations.workflows.models import WorkflowDescription, WorkflowList, WorkflowProgress
from llmc_mcp.operations.workflows.service import LocalWorkflows
from llmc_mcp.reflection.schema import Justification

provide_local_workflows(LocalWorkflows)


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON schema with its ``$defs`` references written in place (the portable subset)."""
    definitions = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, builtins.list) else node

    return walk(schema)


StateId = Annotated[str, Field(description="The state_id a start returned ('wf-...').", max_length=64)]
Answer = Annotated[
    Any,
    Field(description="As the step's 'answer' says: text, a list of texts, a number, or a justification."),
    # Checked by the engine against the step (every problem at once), so the argument model accepts any
    # JSON; published with its real shapes so strict converters do not turn it into an empty object.
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "number"},
                {"type": "array", "items": {"type": "string"}},
                _inlined(Justification.model_json_schema()),
            ]
        }
    ),
]


@operation("workflows", read_only=True, classic_name="workflow_list")
def list(ctx: OperationContext) -> WorkflowList:
    """The workflows this server offers (built-in and the workspace's own), with their inputs.

    A workflow leads you through a task one step at a time: each answer you submit is saved and
    feeds the later steps.

    Errors (ApiError, by e.type): none of its own; a user definition that fails validation is not
    raised but listed under skipped, with the file, the step and the problem.
    """
    assert ctx.workflows is not None
    return WorkflowList.model_validate(ctx.workflows.request("list", {}))


@operation("workflows", read_only=True, classic=False)
def describe(
    ctx: OperationContext,
    name: Annotated[str, Field(description="A workflow name from workflows.list().", max_length=64)],
) -> WorkflowDescription:
    """One workflow's inputs and steps: instructions, answers expected, where each step leads.

    Errors (ApiError, by e.type): not_found for an unknown name.
    """
    assert ctx.workflows is not None
    return WorkflowDescription.model_validate(ctx.workflows.request("describe", {"name": name}))


@operation("workflows", read_only=False, classic_name="workflow_start")
def start(
    ctx: OperationContext,
    name: Annotated[str, Field(description="A workflow name from workflows.list().", max_length=64)],
    **inputs: Annotated[str, Field(description="The workflow's inputs by name (workflows.list()).")],
) -> WorkflowProgress:
    """Start a workflow; returns its first step: instruction, answer expected and next_action.

    Do what the instruction says, then submit your answer with the call next_action spells. The
    state_id is the handle of the run: it survives a server restart; unused, it expires (a week by
    default, the server's workflow TTL).

    Errors (ApiError, by e.type): not_found for an unknown workflow; invalid_argument naming every
    missing or unknown input; quota_exceeded when this session's or the workspace's runs (with their
    outputs) reach a quota; refused when the workflow's own definition cannot write its step.
    """
    assert ctx.workflows is not None
    return WorkflowProgress.model_validate(ctx.workflows.request("start", {"name": name, "inputs": inputs}))


@operation("workflows", read_only=False, classic_name="workflow_submit")
def submit(
    ctx: OperationContext,
    state_id: StateId,
    answer: Answer,
    step: Annotated[
        str | None,
        Field(
            description="The step the answer is for (next_action gives it): a stale one is refused.",
            max_length=64,
        ),
    ] = None,
) -> WorkflowProgress:
    """Submit the answer to the current step; returns the next step, or complete with every result.

    A step that requires a justification validates it as the reflection gate does and stores it, so
    the operation it justifies later runs without asking.

    Errors (ApiError, by e.type): answer_invalid listing every problem (nothing saved, the step
    stands); invalid_argument for a finished workflow or an answer to another step (out of order);
    not_found for an unknown or expired state_id; quota_exceeded when the run's state would pass a
    quota; busy when the states stay locked by another call (try again).
    """
    assert ctx.workflows is not None
    params: dict[str, Any] = {"state_id": state_id, "answer": answer, "step": step}
    requirement = ctx.workflows.request("requirement", params)
    if requirement is not None:
        params.update(_facts(ctx, requirement))
    return WorkflowProgress.model_validate(ctx.workflows.request("submit", params))


@operation("workflows", read_only=True, classic=False)
def state(ctx: OperationContext, state_id: StateId) -> WorkflowProgress:
    """Where a workflow run stands: the current step again (instruction, next_action), or its results.

    Errors (ApiError, by e.type): not_found for an unknown or expired state_id.
    """
    assert ctx.workflows is not None
    return WorkflowProgress.model_validate(ctx.workflows.request("state", {"state_id": state_id}))


def _facts(ctx: OperationContext, requirement: dict[str, Any]) -> dict[str, Any]:
    """What the justified operation's own checks read from the data, as before every gated call.

    The decision a justification is stored for is scoped by these facts (a resampling method for
    categorical or continuous data), so they are read the same way the later call reads them: here,
    in the session's worker, by the operation's preflight.
    """
    from llmc_mcp.operations.catalog import get_operation

    op = get_operation(str(requirement["operation"]))
    try:
        args = op.validate(requirement["args"])
        with gdal_env(ctx):
            return {"facts": op.check(ctx, args)}
    except LlmcError as exc:
        return {"check_problem": exc.message + (f" ({exc.fix})" if exc.fix else "")}


__all__ = ["describe", "list", "start", "state", "submit"]
