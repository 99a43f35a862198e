from typing import TypedDict
class LineageStep(TypedDict):
    path: str
    sha256: str  # SHA-256 of the file's bytes
    record: str
    operation: str
    finished_at: str  # When it was written (UTC)
    inputs: list[str]
class LineageStop(TypedDict):
    path: str
    reason: str
class Lineage(TypedDict):
    path: str
    sha256: str
    steps: list[LineageStep]
    originals: list[str]
    stops: list[LineageStop]
    ignored_records: list[str]
    unverified_records: list[str]
def lineage(
    path: str,  # Workspace-relative file, e.g. 'out/ndvi_utm.tif'.
) -> Lineage:
    """Trace a file back to its originals by content: which operations made it, from which files.
    Errors (ApiError, by e.type): not_found if the file does not exist; path_refused outside the workspace.
    """
    ...
