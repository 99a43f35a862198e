from typing import Generic, Literal, TypedDict, TypeVar
R = TypeVar("R")
class Job(TypedDict, Generic[R]):
    id: str  # "job-" and 32 characters; also what an MCP client polls with (tasks/get)
    operation: str  # e.g. "raster.reproject"
    status: Literal["working", "completed", "failed", "cancelled"]
    message: str  # "queued", "running", the last progress message, or why it failed
    progress: float | None  # 0..1 once the operation reports it
    created: float  # Unix time
    finished: float | None
    expires: float | None  # when it and its result are deleted (--task-ttl after it ended)
def result(job: Job[R] | str) -> R:
    """What the operation returned. ApiError if the job is still running (type "invalid_argument"),
    failed (the operation's own error type, or "Timeout" past --job-timeout) or was cancelled."""
    ...
