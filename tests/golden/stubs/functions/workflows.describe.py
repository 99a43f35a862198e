from typing import Literal, TypedDict
class WorkflowInput(TypedDict):
    name: str
    description: str
class WorkflowStepInfo(TypedDict):
    id: str
    instruction: str  # The instruction template (${name} is a saved value)
    answer: Literal['text', 'list', 'number', 'justification', 'any']
    save: str | None
    foreach: str | None
    requires: str | None  # 'domain via operation' the answer justifies
    next: list[str]
    complete: bool
class WorkflowDescription(TypedDict):
    name: str
    description: str
    builtin: bool
    inputs: list[WorkflowInput]
    steps: list[WorkflowStepInfo]
def describe(
    name: str,  # A workflow name from workflows.list().
) -> WorkflowDescription:
    """One workflow's inputs and steps: instructions, answers expected, where each step leads.
    Errors (ApiError, by e.type): not_found for an unknown name.
    """
    ...
