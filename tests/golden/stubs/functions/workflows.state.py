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
def state(
    state_id: str,  # The state_id a start returned ('wf-...').
) -> WorkflowProgress:
    """Where a workflow run stands: the current step again (instruction, next_action), or its results.
    Errors (ApiError, by e.type): not_found for an unknown or expired state_id.
    """
    ...
