"""The modules agent code sees, derived from the operation catalog.

Each catalog operation becomes a wrapper function with the operation's public
signature in a :class:`~llmc_mcp.sandbox.policy.ModuleProxy` named after its
namespace. A wrapper runs the shared pipeline (:func:`invoke`) with a gate
that lives in the server (:class:`RemoteGate`), and hands back plain JSON
data, never library objects. Errors come back as :class:`ApiError` (or its
subclass :class:`ReflectionRequired`) carrying plain strings and dicts only,
so no traceback or library object leaks into the sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from llmc_mcp.errors import LlmcError, OutOfMemory
from llmc_mcp.operations import CATALOG, NAMESPACES, Operation, OperationContext
from llmc_mcp.operations.about import describe_inputs
from llmc_mcp.operations.invoke import invoke, preflight
from llmc_mcp.reflection import gate as gate_module
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.remote.allowlist import looks_remote
from llmc_mcp.sandbox.policy import ModuleProxy, to_plain

log = logging.getLogger(__name__)


class HostLink(Protocol):
    """The worker's line to the server: a blocking request that returns a result or raises."""

    def request(self, method: str, params: Mapping[str, Any]) -> Any: ...


class ApiError(Exception):
    """An error from the raster API, as plain data: ``type``, ``message``, ``fix``, ``details``.

    ``type`` is the error's kind in snake_case (``"invalid_argument"``, ``"reflection_required"``),
    the same string a classic tool result and execute_code's ``error.type`` carry; the class names
    (``ApiError``, ``ReflectionRequired``) are CamelCase, as Python's are. Every attribute is a
    string or bounded JSON data (:func:`to_plain`), whatever the caller passed, so an error never
    carries a library object into the sandbox.
    """

    def __init__(self, data: Mapping[str, Any]):
        super().__init__(str(data.get("message", "error")))
        self.type = str(data.get("type", "error"))
        self.message = str(data.get("message", ""))
        self.fix = None if data.get("fix") is None else str(data.get("fix"))
        self.details: dict[str, Any] = to_plain(dict(data.get("details") or {}))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        if self.details:
            out["details"] = self.details
        return out


class ReflectionRequired(ApiError):
    """A decision needs a justification: ``hints`` lists them, ``next_action`` says what to do."""

    def __init__(self, data: Mapping[str, Any]):
        super().__init__(data)
        self.hints: list[dict[str, Any]] = to_plain([dict(h) for h in data.get("reflection_required", [])])
        self.next_action: str = str(data.get("next_action", ""))

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "reflection_required": self.hints, "next_action": self.next_action}


class RemoteGate:
    """The gate as the worker sees it: every decision is made by the server."""

    def __init__(self, host: HostLink, ctx: OperationContext):
        self._host = host
        self._ctx = ctx

    def require(
        self, op: Operation, args: Mapping[str, Any], facts: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        request = {
            "operation": op.qualname,
            "args": dict(args),
            "facts": dict(facts),
            "about": describe_inputs(self._ctx, op, args, facts),
        }
        answer = self._host.request("gate.check", request)
        hints = [gate_module.Hint.model_validate(h) for h in answer.get("hints", [])]
        if hints:
            raise gate_module.ReflectionRequired(hints, str(answer.get("next_action", "")))
        return list(answer.get("justifications", []))


def sandbox_error(exc: BaseException) -> ApiError:
    """Translate any exception from trusted code into plain sandbox data."""
    if isinstance(exc, LlmcError):
        data = exc.to_dict()
        return ReflectionRequired(data) if data["type"] == "reflection_required" else ApiError(data)
    if isinstance(exc, MemoryError):  # the worker's address-space limit, not a bug to report
        return ApiError(OutOfMemory.in_this_process().to_dict())
    log.exception("unexpected error in an API call")
    return ApiError(
        {
            "type": "internal_error",
            "message": f"The operation failed unexpectedly ({type(exc).__name__}).",
            "fix": "Check the arguments; if it persists, report it with the server log.",
        }
    )


def trusted(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run trusted code for the sandbox; any failure becomes an :class:`ApiError` and nothing else.

    The ApiError is raised outside the ``except`` block, so it has neither a ``__cause__`` nor a
    ``__context__``: the library exception (and its traceback's frames) is not even one private
    attribute away from agent code.
    """
    try:
        return function(*args, **kwargs)
    except ApiError as exc:
        failure = exc
    except Exception as exc:
        failure = sandbox_error(exc)
    failure.__cause__ = failure.__context__ = None
    raise failure


def bind_arguments(op: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call of ``op`` by name, or an ``invalid_argument`` ApiError saying why not."""
    try:
        return dict(op.signature.bind(*args, **kwargs).arguments)
    except TypeError as exc:
        raise ApiError(
            {
                "type": "invalid_argument",
                "message": f"{op.qualname}: {exc}",
                "fix": f"See read_stubs('{op.qualname}') for the signature.",
            }
        ) from None


ENGINE_NAMESPACES = frozenset({"raster", "terrain", "hydrology"})
"""The namespaces whose operations do pixel work: on ``--engine dask`` they run in an engine worker."""


def names_a_url(value: Any, depth: int = 4) -> bool:
    """Whether an argument names a URL anywhere (a path, a calc input, a merge source).

    An operation that reads a URL runs in the session's worker even on ``--engine dask``: the bytes
    come through the server either way, and a Dask worker has no remote access to read them with.
    """
    if isinstance(value, str):
        return looks_remote(value)
    if depth and isinstance(value, dict):
        return any(names_a_url(v, depth - 1) for v in list(value.values())[:1000])
    if depth and isinstance(value, list | tuple):
        return any(names_a_url(v, depth - 1) for v in value[:1000])
    return False


def _operation_function(
    op: Operation, ctx: OperationContext, gate: RemoteGate, host: HostLink, remote_engine: bool
) -> Callable[..., Any]:
    on_engine = remote_engine and op.namespace in ENGINE_NAMESPACES

    def run(*args: Any, **kwargs: Any) -> Any:
        arguments = bind_arguments(op, args, kwargs)
        if on_engine and not names_a_url(arguments):
            # Checked and gated here, in the agent's call (sampling, review); the work runs in the
            # session's engine worker, which alone holds the cluster's client.
            preflight(op, ctx, gate, arguments)
            return host.request("engine.operate", {"operation": op.qualname, "args": arguments})
        return invoke(op, ctx, gate, arguments).model_dump(mode="json")

    def call(*args: Any, **kwargs: Any) -> Any:
        return trusted(run, *args, **kwargs)

    call.__name__ = op.name
    call.__qualname__ = op.qualname
    call.__doc__ = op.doc
    call.__signature__ = op.signature  # type: ignore[attr-defined]
    return call


def _reflection_module(host: HostLink, prompts: PromptLibrary) -> ModuleProxy:
    def persist(
        hash: str, domain: str, justification: dict[str, Any], supersede: bool = False
    ) -> dict[str, Any]:
        """Store a justification for a hint (or replace this session's own with ``supersede``)."""
        params = {"hash": hash, "domain": domain, "justification": justification, "supersede": supersede}
        return trusted(host.request, "gate.persist", params)

    def prompt(name: str, **args: Any) -> str:
        """The text of a reflection prompt rendered with its arguments."""
        return trusted(lambda: prompts.get(name).render(args))

    def report() -> list[dict[str, Any]]:
        """The justifications stored in this workspace: domain, args, choice, confidence, when."""
        return trusted(host.request, "gate.report", {})

    return ModuleProxy(
        "reflection",
        {
            "persist": persist,
            "prompt": prompt,
            "report": report,
            "ReflectionRequired": ReflectionRequired,
            "ApiError": ApiError,
        },
    )


def build_operations(
    ctx: OperationContext, host: HostLink, *, remote_engine: bool = False
) -> dict[str, Callable[..., Any]]:
    """Every catalog operation as a function of plain data, by qualified name (``raster.info``).

    The one binding both faces run: agent code calls these through the namespace proxies, and a
    classic-mode tool call reaches them through :func:`call_operation`. ``remote_engine``: a session
    worker on ``--engine dask``, which has no network, asks the server to run pixel work.
    """
    gate = RemoteGate(host, ctx)
    return {op.qualname: _operation_function(op, ctx, gate, host, remote_engine) for op in CATALOG}


def build_preflights(ctx: OperationContext, host: HostLink) -> dict[str, Callable[..., Any]]:
    """Every catalog operation's checks and gate without its work, by qualified name: what a task
    asks in the client's call before its work is queued (:func:`~llmc_mcp.operations.invoke.preflight`)."""
    gate = RemoteGate(host, ctx)

    def checked(op: Operation) -> Callable[..., Any]:
        def call(**kwargs: Any) -> dict[str, Any]:
            trusted(preflight, op, ctx, gate, kwargs)
            return {"checked": op.qualname}

        return call

    return {op.qualname: checked(op) for op in CATALOG}


def call_operation(
    operations: Mapping[str, Callable[..., Any]], qualname: object, args: object
) -> dict[str, Any]:
    """Run one operation for a classic tool call; the answer is ``{ok, result}`` or ``{ok, error}``."""
    function = operations.get(str(qualname))
    if function is None or not isinstance(args, dict):
        error = {"type": "not_found", "message": f"No operation named {str(qualname)[:100]!r}."}
        return {"ok": False, "result": None, "error": error}
    try:
        return {"ok": True, "result": function(**args), "error": None}
    except ApiError as exc:
        return {"ok": False, "result": None, "error": exc.as_dict()}


def build_modules(
    ctx: OperationContext, host: HostLink, prompts: PromptLibrary, *, remote_engine: bool = False
) -> dict[str, ModuleProxy]:
    """One proxy per catalog namespace, plus ``reflection``.

    Every namespace also carries ``ApiError``, because every stub says its functions raise it: an
    agent writes ``except raster.ApiError`` or ``from raster import ApiError`` and both must work
    (it is also a builtin). It is a plain exception class of plain attributes, so exposing it
    under more names opens nothing the builtin did not.
    """
    operations = build_operations(ctx, host, remote_engine=remote_engine)
    modules = {
        namespace: ModuleProxy(
            namespace,
            {
                **{op.name: operations[op.qualname] for op in CATALOG if op.namespace == namespace},
                "ApiError": ApiError,
            },
        )
        for namespace in NAMESPACES
    }
    modules["reflection"] = _reflection_module(host, prompts)
    return modules
