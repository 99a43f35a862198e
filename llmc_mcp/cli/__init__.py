"""The ``llmc-mcp`` command."""
