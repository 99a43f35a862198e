"""Result models and vocabulary of the ``workflows`` namespace: what an agent sees of a workflow."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from llmc_mcp.results import ResultModel

WorkflowAnswerKind = Literal["text", "list", "number", "justification", "any"]
"""What a workflow step's answer must be: text, a list of texts, a number, a justification object
(``{intent, alternatives, choice, confidence}``), or any JSON value."""


class WorkflowInput(ResultModel):
    name: str = Field(description="Pass it to workflows.start as a keyword argument.")
    description: str


class WorkflowSummary(ResultModel):
    name: str
    description: str
    builtin: bool = Field(description="Shipped with llmc-mcp; false: from <workspace>/.llmc/workflows/.")
    inputs: list[WorkflowInput]
    steps: int


class WorkflowProblem(ResultModel):
    """Why a user workflow file was skipped (or is invalid): the file, the step, the problem."""

    file: str
    step: str | None
    problem: str


class WorkflowList(ResultModel):
    workflows: list[WorkflowSummary]
    skipped: list[WorkflowProblem] = Field(
        description="User definitions that failed validation and are not offered (fix and they appear)."
    )


class WorkflowStepInfo(ResultModel):
    id: str
    instruction: str = Field(description="The instruction template (${name} is a saved value).")
    answer: WorkflowAnswerKind
    save: str | None = Field(description="The name the answer is saved under.")
    foreach: str | None = Field(description="The saved list the step is asked once per item of.")
    requires: str | None = Field(description="'domain via operation' the answer justifies, stored for it.")
    next: list[str] = Field(description="Step ids it may go to; empty for the complete step.")
    complete: bool


class WorkflowDescription(ResultModel):
    name: str
    description: str
    builtin: bool
    inputs: list[WorkflowInput]
    steps: list[WorkflowStepInfo]


class ToolCall(ResultModel):
    """A classic-mode tool call: the tool's name and its arguments."""

    tool: str
    arguments: dict[str, str]


class WorkflowProgress(ResultModel):
    """One step of a running workflow to answer, or (complete) its results."""

    workflow: str
    state_id: str = Field(
        description="The handle of this run; pass it to submit. Keep it: it survives restarts."
    )
    complete: bool = Field(
        description="True once the last step is answered; results then holds every answer."
    )
    step: str | None = Field(description="The id of the step to answer now; null when complete.")
    step_index: int | None = Field(description="The step's position in the definition (1-based).")
    total_steps: int
    item: int | None = Field(description="For a step asked once per item: which item now (1-based).")
    items: int | None = Field(description="For a step asked once per item: how many items.")
    instruction: str | None = Field(description="What to do and answer now, with saved values filled in.")
    answer: WorkflowAnswerKind | None = Field(description="What the answer must be.")
    next_action: str | ToolCall | None = Field(
        description="The exact call to make next: a line of code (code mode) or a tool call (classic)."
    )
    results: dict[str, Any] | None = Field(description="When complete: every saved answer by its name.")
