from typing import Callable, Generic, Literal, ParamSpec, TypedDict, TypeVar
P = ParamSpec("P")
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
def start(operation: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Job[R]:
    """Check and gate ``operation(*args, **kwargs)`` now, then run it as a job; its status.
    Raises ApiError (type "invalid_argument", "limit" past --max-jobs or --max-session-jobs) or
    ReflectionRequired, exactly as calling the operation would before it starts its work.
    """
    ...
