"""Jobs: work that outlasts a call, run in confined workers of its own, recorded durably (DD-MCP-083)."""
