"""Tests that drive llmc-mcp with third-party Node MCP clients (see tests/clients/conftest.py)."""
