"""The ``provenance`` namespace: how a workspace file came to be, from the records beside outputs
(:mod:`.lineage`)."""

from llmc_mcp.operations.provenance.lineage import lineage

__all__ = ["lineage"]
