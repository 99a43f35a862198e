"""Tool schemas every client and model provider accepts, and arguments checked as published.

Hosts convert MCP tool schemas for their model: OpenAI's strict mode needs ``additionalProperties:
false`` on every object and no open objects; Gemini's function declarations take string enums
only, arrays whose ``items`` have a type, and neither ``prefixItems``, ``const`` nor ``$ref``. One
integer enum (``predictor``) made Gemini refuse the whole classic tool list. So what pydantic
generates is rewritten once, here, into the common subset, with the same meaning: an integer enum
becomes a bounded integer (the values are in the description), a fixed-length tuple an array with
min and max items, a constant a one-value string enum; references are inlined.

A classic tool's ``outputSchema`` is its result model's schema, rewritten the same way
(:func:`declare_output`), and an argument that fails the published schema is answered with the
project's ``invalid_argument`` naming the tool, the argument and what it takes
(:func:`argument_error`), not pydantic's text with its documentation links.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, ValidationError

from llmc_mcp.errors import InvalidArgument


def forbid_unknown_arguments(server: MCPServer, name: str) -> None:
    """Make an unknown argument an error that names it, and publish the tool's schema portably.

    The SDK's argument model ignores unknown keys: a misspelt ``rset`` or ``include_wtk`` would be
    silently dropped. There is no public hook for this in mcp 2.3, so the tool's argument model is
    replaced by a subclass with ``extra="forbid"``, and the published schema says so.
    """
    tool = server._tool_manager.get_tool(name)
    base = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(
        base.__name__, (base,), {"model_config": ConfigDict(**base.model_config, extra="forbid")}
    )
    tool.parameters = portable_schema({**tool.parameters, "additionalProperties": False})


def declare_output(server: MCPServer, name: str, schema: dict[str, Any]) -> None:
    """Publish ``schema`` as the tool's ``outputSchema``.

    The tools return a ready ``CallToolResult``, so the SDK cannot derive one from a return
    annotation; a schema set on the metadata without an output model is published as it is.
    """
    server._tool_manager.get_tool(name).fn_metadata.output_schema = schema


def argument_error(tool: str, schema: dict[str, Any], exc: ValidationError) -> InvalidArgument:
    """The project's error for arguments that fail ``tool``'s published input ``schema``."""
    names = list(schema.get("properties", {}))
    problems = [_problem(err, names) for err in exc.errors(include_url=False)]
    return InvalidArgument(
        f"{tool}: " + "; ".join(problems) + ".",
        fix=f"Call {tool} again with the argument(s) named above corrected, each from what it takes.",
        details={"errors": problems},
    )


def _problem(err: Any, names: list[str]) -> str:
    where = ".".join(str(part) for part in err["loc"]) or "arguments"
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{where} is not an argument of this tool (its arguments: {', '.join(names)})"
    if kind == "missing":
        return f"{where} is required"
    if kind in ("literal_error", "enum"):
        return f"{where} must be one of {err['ctx']['expected']}"
    return f"{where}: {err['msg']}"


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A pydantic model's JSON schema in the portable subset (references inlined)."""
    return portable_schema(model.model_json_schema())


def portable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten into what OpenAI strict mode and Gemini both accept (see the module doc)."""
    definitions = schema.get("$defs", {})
    return _rewrite({k: v for k, v in schema.items() if k != "$defs"}, definitions)


def _rewrite(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _rewrite({**target, **extra}, definitions)
    node = {k: _rewrite(v, definitions) for k, v in node.items()}
    if "enum" in node and not all(isinstance(v, str) for v in node["enum"]):
        values = sorted(node.pop("enum"))
        node.update(minimum=values[0], maximum=values[-1])
        if values != list(range(values[0], values[-1] + 1)):
            node["description"] = f"{node.get('description', '')} One of {values}.".strip()
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "prefixItems" in node:
        items = node.pop("prefixItems")
        node["items"] = items[0] if all(item == items[0] for item in items) else {"anyOf": items}
    if node.get("type") == "object":
        node.setdefault("properties", {})
        node.setdefault("additionalProperties", False)
    return node
