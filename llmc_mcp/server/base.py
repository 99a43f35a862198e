"""The MCP server both faces are built on, and what it publishes: only what the face serves.

:class:`LlmcServer` answers a ``prompts/get`` it cannot serve (an unknown prompt, a missing or
unknown argument) with JSON-RPC ``-32602`` and a message that says what to pass, where mcp 2.3
answers with code 0 or ``-32603`` and a traceback in the log; and it lists, beside its registered
resources, those that change as work is done (:attr:`LlmcServer.resource_lister`, see
:mod:`llmc_mcp.server.resources`). :func:`serve_no_prompts` removes the prompt handlers that
``MCPServer`` always installs, so code mode does not advertise prompts it does not serve (clients
then do not list an empty set).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ListResourcesResult, Resource
from mcp_types.jsonrpc import INVALID_PARAMS

_PROMPT_METHODS = ("prompts/list", "prompts/get")


class LlmcServer(MCPServer):
    resource_lister: Callable[[Context], Awaitable[list[Resource]]] | None = None
    """Lists the resources that come and go (workspace rasters, records), for the request's session."""

    async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
        # mcp 2.3's list_resources() has no request context, and the session's worker needs one.
        listed = await self.list_resources()
        if self.resource_lister is not None:
            context = Context(
                request_context=ctx, mcp_server=self, input_params=params, subscriptions=self._subscriptions
            )
            listed += await self.resource_lister(context)
        return ListResourcesResult(resources=listed)

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


def serve_no_prompts(server: MCPServer) -> None:
    """Remove the prompt methods, and with them the prompts capability.

    mcp 2.3 derives the advertised capabilities from the installed request handlers and has no
    option to leave these out, so they are removed from the low-level server's handler table.
    """
    handlers = server._lowlevel_server._request_handlers
    for method in _PROMPT_METHODS:
        handlers.pop(method, None)
