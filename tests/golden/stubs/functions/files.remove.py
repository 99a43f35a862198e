from typing import TypedDict
class RemovedFile(TypedDict):
    path: str
    removed: list[str]
    freed_bytes: int
    session_bytes: int
    session_files: int
def remove(
    path: str,  # Workspace-relative file llmc-mcp wrote, e.g. 'out/rgb_4326.tif'.
) -> RemovedFile:
    """Delete a file llmc-mcp wrote in this workspace, with its sidecars (.aux.xml, .ovr, .msk, its record).
    Errors (ApiError, by e.type): remove_refused if llmc-mcp did not write it, it changed since, or it is a link or a folder; not_found; path_refused outside the workspace or in a server folder.
    """
    ...
