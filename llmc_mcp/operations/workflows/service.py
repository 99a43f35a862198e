"""How operation code reaches the workflow engine: in this process, or in the server over the channel.

The engine reads and writes workflow states and stores justifications, so it runs where the gate and
its key live: in the server. A worker's operations ask it over the host channel (:class:`RemoteWorkflows`);
code run in-process (tests, the command line) uses an engine of its own (:class:`LocalWorkflows`).
The catalog defines what operation code asks (:class:`~llmc_mcp.operations.catalog.WorkflowService`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmc_mcp.operations.workflows.engine import Engine, Face
    from llmc_mcp.workspace import Workspace


CALLS = ("list", "describe", "start", "state", "requirement", "submit")


class RemoteWorkflows:
    """A worker's line to the server's engine: ``workflows.<call>`` host requests."""

    def __init__(self, host: Any):
        self._host = host

    def request(self, call: str, params: Mapping[str, Any]) -> Any:
        return self._host.request(f"workflows.{call}", dict(params))


class LocalWorkflows:
    """An engine in this process (built on first use), for one principal."""

    def __init__(self, workspace: Workspace, *, face: Face = "code", principal: str | None = None):
        self._workspace = workspace
        self._face: Face = face
        self._principal = principal
        self._engine: Engine | None = None

    def request(self, call: str, params: Mapping[str, Any]) -> Any:
        if self._engine is None:
            from llmc_mcp.operations.workflows.engine import local_engine

            self._engine = local_engine(self._workspace, self._face)
        return serve(self._engine, call, params, self._principal)


def serve(
    engine: Engine,
    call: str,
    params: Mapping[str, Any],
    principal: str | None,
    review: dict[str, Any] | None = None,
) -> Any:
    """One engine call from request parameters, for ``principal``; the answer as JSON data.

    ``review`` is the user's approval of a ``submit``'s justification, obtained by the server (never
    taken from ``params``: a worker could claim one)."""
    if call == "list":
        result: Any = engine.list()
    elif call == "describe":
        result = engine.describe(str(params.get("name")))
    elif call == "start":
        result = engine.start(str(params.get("name")), dict(params.get("inputs") or {}), principal)
    elif call == "state":
        result = engine.state(str(params.get("state_id")), principal)
    elif call == "requirement":
        return engine.requirement(str(params.get("state_id")), params.get("answer"), _step(params), principal)
    elif call == "submit":
        check_problem = params.get("check_problem")
        result = engine.submit(
            str(params.get("state_id")),
            params.get("answer"),
            _step(params),
            principal,
            facts=params.get("facts"),
            check_problem=None if check_problem is None else str(check_problem)[:2000],
            review=review,
        )
    else:
        from llmc_mcp.errors import InvalidArgument

        raise InvalidArgument(f"unknown workflows call {call[:40]!r}")
    return result.model_dump(mode="json")


def _step(params: Mapping[str, Any]) -> str | None:
    step = params.get("step")
    return None if step is None else str(step)
