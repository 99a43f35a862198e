"""Templates the code-mode stubs are rendered through (installed as llmc_mcp.stubs_templates)."""
