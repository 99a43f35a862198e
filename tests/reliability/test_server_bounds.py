"""Server-side work that agent code can drive is bounded: parsing, CRS identification, logging.

The gate and the store run in the server, outside any worker's CPU limit, on text the agent sends.
A deeply nested ``choice.method`` once raised ``RecursionError`` inside PROJ's parsing, escaped the
request handler and wrote a full traceback per call (7 MB of log in one call). These specify that
such input is a field error for the agent, that CRS identification has a cache, a timeout and a
per-session budget, and that one session's failures cost the log a line each, not a traceback.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp import crs_text
from llmc_mcp.config import Settings
from llmc_mcp.crs_text import SessionBudget, normalize_crs
from llmc_mcp.errors import CrsError
from llmc_mcp.server.app import build_server
from llmc_mcp.server.host import LogBudget
from llmc_mcp.sessions import current_session
from tests.mcp_helpers import justification_for, structured

pytestmark = pytest.mark.anyio

MISS = 'raster.reproject("RGB.byte.tif", "o.tif", dst_crs="EPSG:4326", resampling="nearest")'


async def execute(client: Client, code: str) -> dict[str, Any]:
    return structured(await client.call_tool("execute_code", {"code": code}))


@pytest.mark.parametrize(
    "method",
    ["[" * 7000 + "]" * 7000, "{" * 5000 + "}" * 5000, '{"a":' * 1500 + "1" + "}" * 1500],
    ids=["brackets", "braces", "json"],
)
async def test_a_deeply_nested_choice_is_a_field_error_and_logs_no_traceback(
    workspace_dir: Path, caplog: pytest.LogCaptureFixture, method: str
) -> None:
    """Guards against RecursionError escaping CRS parsing into the handler (a traceback per call)."""
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=30))
    async with Client(server) as client:
        hint = next(
            h for h in (await execute(client, MISS))["reflection_required"] if h["domain"] == "crs_datum"
        )
        payload = justification_for(hint)
        payload["choice"]["method"] = method
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            answer = await execute(client, f"reflection.persist({hint['hash']!r}, 'crs_datum', {payload!r})")
    assert answer["error"]["type"] == "justification_invalid", answer["error"]
    assert "choice.method" in answer["error"]["message"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"
    assert sum(len(r.getMessage()) for r in caplog.records) < 2000


async def test_a_session_over_its_crs_budget_is_refused_and_others_are_not(
    workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against one session keeping the server's CRS identification busy for everyone."""
    monkeypatch.setattr(crs_text, "SESSION_BUDGET", SessionBudget(capacity=3, rate=0))
    crs_text.clear_cache()
    loop = (
        "kinds = []\n"
        "for i in range(6):\n"
        "    try:\n"
        '        crs = f"+proj=tmerc +lon_0={i}.25 +datum=WGS84"\n'
        '        raster.reproject("RGB.byte.tif", "o.tif", dst_crs=crs)\n'
        "    except ApiError as e:\n"
        "        kinds.append(e.type)\n"
        "kinds"
    )
    server = build_server(Settings(mode="code", workspace=workspace_dir, exec_timeout=60))
    async with Client(server) as greedy, Client(server) as other:
        kinds = (await execute(greedy, loop))["result"]
        assert kinds == ["reflection_required"] * 3 + ["crs_error"] * 3, kinds
        refused = await execute(
            greedy, 'raster.reproject("RGB.byte.tif", "o.tif", dst_crs="+proj=utm +zone=3")'
        )
        assert "Too many new CRS definitions" in refused["error"]["message"], refused["error"]
        fine = await execute(other, 'raster.reproject("RGB.byte.tif", "o.tif", dst_crs="EPSG:32633")')
        assert fine["error"]["type"] == "reflection_required", fine["error"]


def test_a_cached_crs_costs_no_budget() -> None:
    """Guards against a budget that punishes the normal case: an agent reusing its one CRS."""
    crs_text.clear_cache()
    budget = SessionBudget(capacity=1, rate=0)
    token = current_session.set("s1")
    try:
        original, crs_text.SESSION_BUDGET = crs_text.SESSION_BUDGET, budget
        for _ in range(5):
            assert normalize_crs("EPSG:4326") == "EPSG:4326"
        with pytest.raises(CrsError, match="Too many"):
            normalize_crs("EPSG:3857")
    finally:
        crs_text.SESSION_BUDGET = original
        current_session.reset(token)


def _stalled(release: threading.Event) -> Any:
    release.wait(30)
    return None, None


def _spinning(release: threading.Event) -> Any:
    while not release.is_set():
        pass
    return None, None


@pytest.mark.parametrize(
    ("bound", "stand_in", "refusal"),
    [
        ("IDENTIFY_WALL_SECONDS", _stalled, r"took longer than 0\.2 s\."),
        ("IDENTIFY_TIMEOUT", _spinning, r"took longer than 0\.2 s of CPU time"),
    ],
    ids=["stalled-past-the-wall-clock", "spinning-past-its-cpu-time"],
)
def test_an_identification_past_a_bound_is_a_crs_error(
    monkeypatch: pytest.MonkeyPatch, bound: str, stand_in: Any, refusal: str
) -> None:
    """Guards against a pathological definition holding a thread (and its caller) indefinitely: one
    that stalls without computing (never reaching its CPU bound) is refused at the wall-clock
    backstop, one that computes once it has spent its CPU time, which load does not stretch."""
    release = threading.Event()
    monkeypatch.setattr(crs_text, "identify", lambda crs: stand_in(release))
    monkeypatch.setattr(crs_text, bound, 0.2)
    crs_text.clear_cache()
    try:
        with pytest.raises(CrsError, match=refusal) as caught:
            normalize_crs("+proj=tmerc +lon_0=7.5 +datum=WGS84")
        assert "EPSG" in (caught.value.fix or "")
    finally:
        release.set()


def test_the_log_budget_writes_one_traceback_per_kind_then_lines_then_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Guards against a loop of failing requests writing a traceback each to the host's log."""
    budget = LogBudget(lines=5, window=3600)
    with caplog.at_level(logging.ERROR, logger="llmc_mcp.server.host"):
        for _ in range(1000):
            try:
                raise RecursionError("deep")
            except RecursionError as exc:
                budget.failure("session-a", "gate.persist", exc)
        budget.failure("session-b", "gate.persist", ValueError("x"))
    mine = [r for r in caplog.records if "session-a" in r.getMessage()]
    assert len(mine) == 5
    assert [bool(r.exc_info) for r in mine] == [True, False, False, False, False]
    assert any("session-b" in r.getMessage() for r in caplog.records), "one session's budget silenced another"
