"""fastmcp 4 (its own venv, ``.clients/fastmcp``) with a host that will not sample, over stdio.

In the 2026-07-28 era a host that declines or fails the server's sampling request makes the SDK end
the agent's call with the error; the server is never told. These tests run
``tests/clients/python/fastmcp_declined_sampling.py`` against the real ``llmc-mcp`` in classic mode
with a sampling timeout of 600 s: the paused call must let go of the session's worker when the next
call comes, and the reprojection made again must come back with hints that say why the host's model
was not asked, instead of the question the host refuses each time.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import PYTHON_CLIENTS, PYTHON_INSTALL_HINT, SERVER, need, new_workspace

pytestmark = pytest.mark.clients

SCENARIO = Path(__file__).parent / "python" / "fastmcp_declined_sampling.py"
_RUNS: dict[str, dict[str, Any]] = {}


def scenario(sampler: str, root: Path) -> dict[str, Any]:
    """The scenario's summary for this sampler, run once per test session."""
    if sampler in _RUNS:
        return _RUNS[sampler]
    python = PYTHON_CLIENTS / "fastmcp" / "bin" / "python"
    need(python.exists(), f"fastmcp is not installed in .clients/fastmcp ({PYTHON_INSTALL_HINT})")
    need(SERVER.exists(), f"the llmc-mcp console script is missing: {SERVER}")
    workspace = new_workspace(root / "ws")
    args = [str(python), str(SCENARIO), "--command", str(SERVER), "--workspace", str(workspace)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # 600 s of sampling timeout per question: a worker held until then fails the 60 s client timeout.
    proc = subprocess.run(
        [*args, "--sampler", sampler, "--sampling-timeout", "600", "--timeout", "60"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output (exit {proc.returncode})\nstderr: {proc.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    assert "exception" not in summary, f"{summary['exception']}\nstderr: {proc.stderr[-3000:]}"
    _RUNS[sampler] = summary
    return summary


@pytest.mark.parametrize("sampler", ["declines", "raises"])
def test_fastmcp_host_that_will_not_sample_frees_the_worker_for_the_next_call(
    sampler: str, tmp_path: Path
) -> None:
    """Guards against the paused call keeping the session's worker for hints x the sampling timeout:
    an ungated crs_info after the refusal waited 2 x 120 s by default."""
    summary = scenario(sampler, tmp_path)
    assert summary["protocol_version"] == "2026-07-28"
    assert "raised" in summary["first"] or summary["first"]["is_error"]
    assert "raised" not in summary["crs_info"], summary["crs_info"]
    assert summary["crs_info"]["data"]["epsg"] == 4326


@pytest.mark.parametrize("sampler", ["declines", "raises"])
def test_fastmcp_host_that_will_not_sample_gets_hints_with_the_reason_on_the_next_call(
    sampler: str, tmp_path: Path
) -> None:
    """Guards against asking a host that refused again on every retry, so the agent never gets past
    the gate: the call made again is the hint flow, each hint saying why the model was not asked."""
    again = scenario(sampler, tmp_path)["again"]
    assert "raised" not in again, again
    assert again["data"]["type"] == "reflection_required"
    hints = again["data"]["reflection_required"]
    assert {h["domain"] for h in hints} == {"crs_datum", "resampling"}
    assert all("did not answer the server's last sampling question" in h["fallback"] for h in hints)
