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
def submit(
    state_id: str,  # The state_id a start returned ('wf-...').
    answer: Any,  # As the step's 'answer' says: text, a list of texts, a number, or a justification.
    step: str | None = None,  # The step the answer is for (next_action gives it): a stale one is refused.
) -> WorkflowProgress:
    """Submit the answer to the current step; returns the next step, or complete with every result.
    Errors (ApiError, by e.type): answer_invalid listing every problem (nothing saved, the step stands); invalid_argument for a finished workflow or an answer to another step (out of order); not_found for an unknown or expired state_id; quota_exceeded when the run's state would pass a quota; busy when the states stay locked by another call (try again).
    """
    ...
