"""``files.remove``: tidying up what llmc-mcp wrote.

Not decided here: the worker can write anywhere in the workspace, the ledger included, so the server
checks the ledger's signatures and the file's identity and deletes
(:meth:`~llmc_mcp.outputs.OutputLedger.remove`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.files.models import RemovedFile


@operation("files", read_only=False)
def remove(
    ctx: OperationContext,
    path: Annotated[
        str, Field(description="Workspace-relative file llmc-mcp wrote, e.g. 'out/rgb_4326.tif'.")
    ],
) -> RemovedFile:
    """Delete a file llmc-mcp wrote in this workspace, with its sidecars (.aux.xml, .ovr, .msk, its record).

    Only files that ``files.list`` marks ``written_by_llmc`` are accepted: outputs of raster.reproject
    or raster.convert that nobody has replaced or modified since. A file the user put there, a file
    changed since llmc-mcp wrote it, a link, a folder or anything in the server's folders is refused
    and nothing is deleted. The output quota the file used is freed (``freed_bytes``); the server
    decides and deletes, never the code that asks.

    Errors (ApiError, by e.type): remove_refused if llmc-mcp did not write it, it changed since, or
    it is a link or a folder; not_found; path_refused outside the workspace or in a server folder.
    """
    assert ctx.outputs is not None
    return RemovedFile(**ctx.outputs.remove(path).to_dict())
