"""Real third-party Python MCP clients against llmc-mcp: openai-agents, pydantic-ai, langchain, fastmcp.

Each client lives in its own virtualenv under ``.clients/`` (``scripts/install-python-clients``
installs it from ``tests/clients/python/<name>.lock``: each pins its own ``mcp``, DD-MCP-031). A
scenario script in ``tests/clients/python`` drives the client's own MCP API (no LLM) against the
real ``llmc-mcp`` console script, over stdio or streamable HTTP, and prints one JSON line; the tests
here run each scenario once and check it:

- code mode: a variable set in one ``execute_code`` call is read back in the next (through the
  session handle for clients of the stateless 2026-07-28 era over HTTP), and the gated reprojection
  completes (the miss, then one call that persists every hint and retries);
- classic mode: the same reprojection through ``raster_reproject`` and ``persist_justification``.

Not every client runs every transport in every mode (the full cross product took five minutes): each
runs one mode over stdio and the other over HTTP (:data:`RUNS`), so every (client, transport) and every
(client, mode) pair occurs, and so does each case whose answer differs:

- code mode over HTTP in the stateless era, where the variable comes back through the session handle
  (openai-agents, fastmcp), and in the handshake era, where the mcp-session-id keeps it (langchain's
  session); code mode over stdio, where the connection is the session (pydantic-ai);
- classic mode over stdio (openai-agents, fastmcp, langchain's session) and over stateless HTTP
  (pydantic-ai);
- langchain's new session per call (``get_tools()``): over stdio in code mode the variable is gone
  (a NameError); over HTTP in both modes the hint is refused in the next call (DD-MCP-028). Its
  classic run over stdio (a new server process for the miss, each persist and the retry) is left to
  the Inspector, which calls the same way (``test_inspector.py``), and to
  ``tests/test_pending_hints.py``.

The README's "Clients" table summarises what each client needs. Every test skips when a client is
not installed, and fails instead with ``LLMC_MCP_REQUIRE_CLIENTS=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rasterio

from tests.clients.conftest import (
    PYTHON_CLIENTS,
    PYTHON_INSTALL_HINT,
    ROOT,
    SERVER,
    HttpServer,
    free_port,
    need,
    new_workspace,
)
from tests.mcp_helpers import JUSTIFICATION_TEMPLATE

pytestmark = pytest.mark.clients

SCENARIOS = ROOT / "tests" / "clients" / "python"
DST = "rgb_4326.tif"
TIMEOUT = 60.0  # the client timeout the scenarios set (several clients default to 5 s; see the README)

# client -> (venv folder under .clients, scenario script)
CLIENTS = {
    "openai-agents": "openai_agents_scenario.py",
    "pydantic-ai": "pydantic_ai_scenario.py",
    "langchain-mcp-adapters": "langchain_scenario.py",
    "fastmcp": "fastmcp_scenario.py",
}
# Clients whose MCP layer speaks the stateless 2026-07-28 era (mcp 2.x): over HTTP they send no
# mcp-session-id and keep variables only through the session handle. langchain-mcp-adapters 0.3.2
# pins mcp 1.x and so speaks the handshake era (a stateful mcp-session-id).
STATELESS_ERA = {"openai-agents", "pydantic-ai", "fastmcp"}
# langchain-mcp-adapters connects in two documented ways: a new MCP session per tool call
# (``get_tools()``, its default) or one session (``client.session()`` + ``load_mcp_tools``).
LANGCHAIN_PER_CALL = ("langchain-mcp-adapters", "per-call")
PER_CALL_HTTP_GATE = (
    "server limitation (DD-MCP-028): a hint issued over stateful HTTP belongs to that mcp-session-id; "
    "langchain's default get_tools() opens a new session per tool call, so reflection.persist of the "
    "hint in the next call is refused (not_found: 'not issued to this session')"
)


@dataclass(frozen=True)
class Case:
    client: str
    transport: str
    mode: str
    variant: str = ""

    @property
    def id(self) -> str:
        return "-".join(p for p in (self.client, self.variant, self.transport, self.mode) if p)


RUNS = (
    Case("openai-agents", "http", "code"),
    Case("openai-agents", "stdio", "classic"),
    Case("pydantic-ai", "stdio", "code"),
    Case("pydantic-ai", "http", "classic"),
    Case("langchain-mcp-adapters", "stdio", "code", "per-call"),
    Case("langchain-mcp-adapters", "http", "code", "per-call"),
    Case("langchain-mcp-adapters", "http", "classic", "per-call"),
    Case("langchain-mcp-adapters", "http", "code", "session"),
    Case("langchain-mcp-adapters", "stdio", "classic", "session"),
    Case("fastmcp", "http", "code"),
    Case("fastmcp", "stdio", "classic"),
)
"""The scenario runs: each client (and each way langchain connects) in both modes and both transports,
not in every combination of them; the module docstring says what each run stands for."""


def cases(mode: str) -> list[Any]:
    out = []
    for case in RUNS:
        if case.mode != mode:
            continue
        marks = []
        if (case.client, case.variant) == LANGCHAIN_PER_CALL and case.transport == "http":
            marks = [pytest.mark.xfail(strict=True, reason=PER_CALL_HTTP_GATE)]
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def client_python(client: str) -> Path:
    python = PYTHON_CLIENTS / client / "bin" / "python"
    need(python.exists(), f"{client} is not installed in .clients/{client} ({PYTHON_INSTALL_HINT})")
    return python


@dataclass
class Run:
    case: Case
    summary: dict[str, Any]
    workspace: Path
    wall_s: float


_RUNS: dict[Case, Run] = {}


@pytest.fixture
def scenario(tmp_path_factory: pytest.TempPathFactory):
    """``scenario(case)``: run the case's scenario once per test session (later tests reuse the summary)."""

    def run(case: Case) -> Run:
        if case in _RUNS:
            return _RUNS[case]
        python = client_python(case.client)
        need(SERVER.exists(), f"the llmc-mcp console script is missing: {SERVER}")
        root = tmp_path_factory.mktemp(case.id)
        workspace = new_workspace(root / "ws")
        args = [
            str(python),
            str(SCENARIOS / CLIENTS[case.client]),
            "--transport",
            case.transport,
            "--mode",
            case.mode,
            "--dst",
            DST,
            "--timeout",
            str(TIMEOUT),
            "--template",
            json.dumps(JUSTIFICATION_TEMPLATE),
        ]
        if case.variant:
            args += ["--variant", case.variant]
        server = None
        if case.transport == "http":
            server = HttpServer(case.mode, workspace, free_port(), root / "server.log").start()
            args += ["--url", server.url]
        else:
            args += ["--command", str(SERVER), "--workspace", str(workspace)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
            )
        finally:
            if server is not None:
                server.stop()
        wall = time.monotonic() - start
        lines = proc.stdout.strip().splitlines()
        log = (root / "server.log").read_text(errors="replace")[-3000:] if server else ""
        assert lines, f"no output (exit {proc.returncode})\nstderr: {proc.stderr[-4000:]}\nserver: {log}"
        summary = json.loads(lines[-1])
        assert "exception" not in summary, (
            f"{summary['exception']}\nstderr: {proc.stderr[-3000:]}\nserver: {log}"
        )
        _RUNS[case] = Run(case, summary, workspace, wall)
        return _RUNS[case]

    return run


def _output_epsg(workspace: Path) -> int | None:
    with rasterio.open(workspace / DST) as out:
        assert out.count == 3
        return out.crs.to_epsg()


def _record_timings(request: pytest.FixtureRequest, run: Run) -> None:
    """Connect, first call and whole-scenario times, as user properties (shown by ``--junitxml``)."""
    for key in ("connect", "first_call"):
        request.node.user_properties.append((f"{key}_s", run.summary["timings"][key]))
    request.node.user_properties.append(("scenario_s", round(run.wall_s, 2)))


def _check_handshake(run: Run) -> None:
    s, case = run.summary, run.case
    assert s["client"] and s["version"]
    expected = ["00_INIT", "execute_code", "read_stubs"] if case.mode == "code" else None
    if expected:
        assert s["tools"] == expected
    else:
        assert {"persist_justification", "raster_reproject", "raster_info"} <= set(s["tools"])
    if case.client in STATELESS_ERA:
        assert s["protocol_version"] == "2026-07-28"


@pytest.mark.parametrize("case", cases("code"))
def test_code_mode_gated_reprojection(scenario, case: Case, request: pytest.FixtureRequest) -> None:
    """The miss names both decisions; one execute_code persists both and the reprojection completes."""
    run = scenario(case)
    s = run.summary
    _record_timings(request, run)
    _check_handshake(run)
    miss = s["miss"]
    assert miss["is_error"] and miss["error_type"] == "reflection_required"
    assert miss["domains"] == ["crs_datum", "resampling"], miss["text"]
    assert all(h.startswith("sha256:") for h in miss["hashes"])
    retry = s["retry"]
    assert not retry["is_error"], retry["text"]
    assert retry["result"] == {"epsg": 4326, "width": 835, "persisted": 2}
    assert _output_epsg(run.workspace) == 4326


@pytest.mark.parametrize("case", [pytest.param(c.values[0], id=c.id) for c in cases("code")])
def test_code_mode_variable_read_back(scenario, case: Case) -> None:
    """``x = 41`` in one call, ``x + 1`` in the next: 42, except where the client opens a session per call."""
    s = scenario(case).summary
    first = s["first"]
    assert not first["is_error"] and first["result"] == 41
    stateless = case.transport == "http" and case.client in STATELESS_ERA
    if stateless:
        # The server starts a session, returns its handle, and the scenario passes it back.
        assert s["handle_issued"] and s["handle_passed"]
        assert first["session"]["stateless"] is True and first["session"]["handle"].startswith("s-")
        assert "Pass session='s-" in first["session"]["note"]
    else:
        # stdio, or a stateful mcp-session-id: the connection is the session, no handle is needed.
        assert not s["handle_issued"] and not s["handle_passed"]
    if (case.client, case.variant) == LANGCHAIN_PER_CALL:
        # Every call is a new MCP session (over stdio a new server process) and no handle is
        # issued to a stateful session, so the variable is gone: the agent is told by a NameError.
        assert s["readback"]["is_error"] and s["readback"]["error_type"] == "NameError"
    else:
        assert not s["readback"]["is_error"], s["readback"]["text"]
        assert s["readback"]["result"] == 42
        assert s["readback"]["session"]["fresh"] is False


@pytest.mark.parametrize("case", cases("classic"))
def test_classic_mode_gated_reprojection(scenario, case: Case, request: pytest.FixtureRequest) -> None:
    """Successes conform to their outputSchema and a wrong enum is invalid_argument, through the client;
    raster_reproject misses; persist_justification for each hint; the retry writes EPSG:4326."""
    run = scenario(case)
    s = run.summary
    _record_timings(request, run)
    _check_handshake(run)
    assert s["width"] == 791
    assert s["conforming"] == ["raster_stats", "raster_preview", "crs_transform"], s["not_conforming"]
    bad = s["bad_enum"]
    assert bad["is_error"] and bad["error_type"] == "invalid_argument", bad["text"]
    assert bad["message"].startswith("raster_reproject: resampling must be one of 'nearest'"), bad["text"]
    miss = s["miss"]
    assert miss["is_error"] and miss["domains"] == ["crs_datum", "resampling"], miss["text"]
    assert [p["is_error"] for p in s["persisted"]] == [False, False], s["persisted"]
    assert not s["retry"]["is_error"], s["retry"]["text"]
    assert s["retry"]["epsg"] == 4326
    assert _output_epsg(run.workspace) == 4326


@pytest.mark.parametrize("mode", ["code", "classic"])
def test_langchain_per_call_over_http_persist_is_refused(scenario, mode: str) -> None:
    """What the xfail above stands for, exactly: the hint belongs to the previous mcp-session-id."""
    s = scenario(Case("langchain-mcp-adapters", "http", mode, "per-call")).summary
    assert s["miss"]["domains"] == ["crs_datum", "resampling"]
    refusals = [s["retry"]] if mode == "code" else s["persisted"]
    assert len(refusals) == (1 if mode == "code" else 2), refusals
    for refused in refusals:
        assert refused["is_error"] and refused["error_type"] == "not_found", refused["text"]
        assert "was not issued to this session" in refused["text"]


def test_every_client_runs_over_each_transport_and_in_each_mode() -> None:
    """Guards against a change to :data:`RUNS` that leaves a client untried over a transport or in a mode."""
    for client in CLIENTS:
        variants = {c.variant for c in RUNS if c.client == client}
        for variant in variants:
            runs = [c for c in RUNS if (c.client, c.variant) == (client, variant)]
            assert {c.transport for c in runs} == {"stdio", "http"}, (client, variant)
            assert {c.mode for c in runs} == {"code", "classic"}, (client, variant)
