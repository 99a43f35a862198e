"""``provenance.lineage``: how a workspace file came to be, from the records beside outputs.

Every file an operation writes gets ``<file>.provenance.json`` (:mod:`llmc_mcp.provenance.record`);
this namespace reads them back.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.provenance.lineage import lineage as walk_lineage
from llmc_mcp.provenance.models import Lineage


@operation("provenance", read_only=True, inputs=("path",))
def lineage(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative file, e.g. 'out/ndvi_utm.tif'.")],
) -> Lineage:
    """Trace a file back to its originals by content: which operations made it, from which files.

    The file is identified by its SHA-256, not its name: a copy or a renamed output is found too. The
    record claiming those bytes names the inputs with their digests, and each is followed the same
    way. The walk stops where no record claims a file (an original: listed in ``originals``), where
    an input is missing or its bytes changed since the record was written (``stops``, with the
    reason). Records that are unreadable or do not conform to the manifest format are not believed
    (``ignored_records``); conforming records this server did not sign are foreign and never followed
    (``unverified_records``). Reads only; hashes every file it visits (at most 200).

    Errors (ApiError, by e.type): not_found if the file does not exist; path_refused outside the
    workspace.
    """
    return walk_lineage(ctx.workspace, path, ctx.outputs)
