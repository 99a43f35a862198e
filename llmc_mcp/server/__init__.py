"""The MCP faces: classic (a tool per operation) and code (three bootstrap tools)."""
