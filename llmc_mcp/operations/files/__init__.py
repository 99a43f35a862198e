"""The ``files`` namespace: which files an agent may work on (:mod:`.listing`), and tidying up what
llmc-mcp wrote (:mod:`.removal`)."""

from llmc_mcp.operations.files.listing import list
from llmc_mcp.operations.files.removal import remove

__all__ = ["list", "remove"]
