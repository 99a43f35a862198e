from typing import Any, Literal, TypedDict
class ToolCall(TypedDict):
    tool: str
    arguments: dict[str, str]
class WorkflowProgress(TypedDict):
    workflow: str
    state_id: str
    complete: bool
    step: str | None
    step_index: int | None  # The step's position in the definition (1-based)
    total_steps: int
    item: int | None
    items: int | None
    instruction: str | None
    answer: Literal['text', 'list', 'number', 'justification', 'any'] | None
    next_action: str | ToolCall | None
    results: dict[str, Any] | None
def start(
    name: str,  # A workflow name from workflows.list().
    **inputs: str,  # The workflow's inputs by name (workflows.list()).
) -> WorkflowProgress:
    """Start a workflow; returns its first step: instruction, answer expected and next_action.
    Errors (ApiError, by e.type): not_found for an unknown workflow; invalid_argument naming every missing or unknown input; quota_exceeded when this session's or the workspace's runs (with their outputs) reach a quota; refused when the workflow's own definition cannot write its step.
    """
    ...
