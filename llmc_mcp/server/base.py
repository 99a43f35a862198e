"""The MCP server both faces are built on, and what it publishes: tools only where tools are all.

:class:`LlmcServer` answers a ``prompts/get`` it cannot serve (an unknown prompt, a missing or
unknown argument) with JSON-RPC ``-32602`` and a message that says what to pass, where mcp 2.3
answers with code 0 or ``-32603`` and a traceback in the log. :func:`serve_tools_only` removes the
prompt and resource handlers that ``MCPServer`` always installs, so code mode does not advertise
capabilities it does not serve (clients then do not list empty prompts and resources).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

_PROMPT_AND_RESOURCE_METHODS = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
)


class LlmcServer(MCPServer):
    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(sorted(p.name for p in self._prompt_manager.list_prompts())) or "none"
            raise MCPError(INVALID_PARAMS, f"Unknown prompt {name[:100]!r}. Prompts: {known}.")
        declared = {a.name: a.required for a in prompt.arguments or []}
        given = set(arguments or {})
        missing = sorted(a for a, required in declared.items() if required and a not in given)
        unknown = sorted(given - set(declared))
        if missing or unknown:
            problems = [
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(unknown)}" if unknown else "",
            ]
            raise MCPError(
                INVALID_PARAMS,
                f"Prompt {name}: {'; '.join(p for p in problems if p)} argument(s). "
                f"Its arguments are: {', '.join(declared) or 'none'}.",
            )
        return await super().get_prompt(name, arguments, context)


def serve_tools_only(server: MCPServer) -> None:
    """Remove the prompt and resource methods, and with them their capabilities.

    mcp 2.3 derives the advertised capabilities from the installed request handlers and has no
    option to leave these out, so they are removed from the low-level server's handler table.
    """
    handlers = server._lowlevel_server._request_handlers
    for method in _PROMPT_AND_RESOURCE_METHODS:
        handlers.pop(method, None)
