from typing import TypedDict
class WorkflowInput(TypedDict):
    name: str
    description: str
class WorkflowSummary(TypedDict):
    name: str
    description: str
    builtin: bool
    inputs: list[WorkflowInput]
    steps: int
class WorkflowProblem(TypedDict):
    file: str
    step: str | None
    problem: str
class WorkflowList(TypedDict):
    workflows: list[WorkflowSummary]
    skipped: list[WorkflowProblem]  # User definitions that failed validation and are not offered (fix and they appear)
def list(
) -> WorkflowList:
    """The workflows this server offers (built-in and the workspace's own), with their inputs.
    Errors (ApiError, by e.type): none of its own; a user definition that fails validation is not raised but listed under skipped, with the file, the step and the problem.
    """
    ...
