"""``llmc-mcp justifications list|show|export|prune`` and ``reflection.report()``.

Records are put in the workspace's real store (signed), with creation times set where age matters;
the outputs a decision is behind come from real provenance records written by a real server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client

from llmc_mcp.cli.main import main
from llmc_mcp.config import Settings
from llmc_mcp.reflection.store import JustificationStore, Record
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for, structured

REPROJECT = {"src": "RGB.byte.tif", "dst": "rgb_4326.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}


def put(workspace_dir: Path, domain: str, method: str, *, days_old: float, confidence: str = "medium") -> str:
    """A signed record as the gate stores it, justified ``days_old`` days ago; returns its key."""
    store = JustificationStore(Workspace(workspace_dir).preflight_dir)
    answer = justification_for({"prompt_args": {"x": method}})
    answer["confidence"] = confidence
    key = "sha256:" + f"{abs(hash((domain, method))):064d}"[-64:]
    created = (datetime.now(UTC) - timedelta(days=days_old)).isoformat(timespec="seconds")
    store.put(
        Record.model_validate(
            {
                "key": key,
                "domain": domain,
                "operation": "raster.reproject",
                "prompt": "justify_resampling_method",
                "prompt_args": {"method": method},
                "prompt_hash": "sha256:" + "0" * 64,
                "created_at": created,
                "justification": answer,
            }
        )
    )
    return key


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().out


def test_list_narrows_by_domain_age_and_confidence(
    workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against filters that are accepted and ignored (every record listed whatever is asked)."""
    put(workspace_dir, "resampling", "bilinear", days_old=1, confidence="high")
    put(workspace_dir, "resampling", "cubic", days_old=40, confidence="low")
    put(workspace_dir, "format_selection", "jpeg", days_old=2, confidence="high")
    base = ("justifications", "--workspace", workspace_dir, "list", "--json")
    _, out = cli(capsys, *base, "--domain", "resampling")
    assert sorted(e["choice"] for e in json.loads(out)) == ["bilinear", "cubic"]
    _, out = cli(capsys, *base, "--newer-than", "30")
    assert sorted(e["choice"] for e in json.loads(out)) == ["bilinear", "jpeg"]
    _, out = cli(capsys, *base, "--min-confidence", "high", "--domain", "resampling")
    assert [e["choice"] for e in json.loads(out)] == ["bilinear"]


def test_prune_deletes_only_what_the_filter_selects(
    workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against a prune that deletes recent decisions, or keeps the old ones it reports deleted."""
    put(workspace_dir, "resampling", "bilinear", days_old=1)
    old = put(workspace_dir, "resampling", "cubic", days_old=100)
    code, out = cli(capsys, "justifications", "--workspace", workspace_dir, "prune", "--older-than", "90")
    assert code == 0 and old in out and "1 decision(s) deleted" in out
    remaining = JustificationStore(Workspace(workspace_dir).preflight_dir).records()
    assert [r.justification.choice.method for r in remaining] == ["bilinear"]


def test_prune_without_a_filter_deletes_nothing(
    workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against 'prune' alone wiping every decision of a workspace."""
    put(workspace_dir, "resampling", "bilinear", days_old=1)
    code, _ = cli(capsys, "justifications", "--workspace", workspace_dir, "prune")
    assert code == 2
    assert len(list(JustificationStore(Workspace(workspace_dir).preflight_dir).records())) == 1


def test_a_dry_run_prune_says_what_would_go_and_keeps_it(
    workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against --dry-run deleting."""
    key = put(workspace_dir, "resampling", "cubic", days_old=100)
    _, out = cli(
        capsys, "justifications", "--workspace", workspace_dir, "prune", "--older-than", "90", "--dry-run"
    )
    assert f"would delete resampling {key}" in out
    assert len(list(JustificationStore(Workspace(workspace_dir).preflight_dir).records())) == 1


def test_show_prints_one_decision_in_full(workspace_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards against a decision whose rationale and rejected alternatives cannot be read back."""
    key = put(workspace_dir, "resampling", "bilinear", days_old=1)
    code, out = cli(capsys, "justifications", "--workspace", workspace_dir, "show", key)
    shown = json.loads(out)
    assert code == 0 and shown["hash"] == key and shown["rationale"] and shown["alternatives"]


@pytest.mark.anyio
async def test_export_names_the_outputs_each_decision_is_behind(
    classic_settings: Settings, workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against a report of decisions that cannot say what they produced (the audit question)."""
    async with Client(build_server(classic_settings)) as client:
        for hint in structured(await client.call_tool("raster_reproject", REPROJECT))["reflection_required"]:
            answer = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            await client.call_tool("persist_justification", answer)
        assert not (await client.call_tool("raster_reproject", REPROJECT)).is_error
    _, markdown = cli(capsys, "justifications", "--workspace", workspace_dir, "export")
    assert "## crs_datum: EPSG:4326 (raster.reproject)" in markdown
    assert "## resampling: nearest (raster.reproject)" in markdown
    assert markdown.count("- **Outputs:** `rgb_4326.tif`") == 2


@pytest.mark.anyio
async def test_reflection_report_in_code_mode_gives_the_same_entries(
    code_settings: Settings, workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against code mode's report and the command line's export telling different stories."""
    put(workspace_dir, "resampling", "bilinear", days_old=1)
    async with Client(build_server(code_settings)) as client:
        result = await client.call_tool("execute_code", {"code": "reflection.report()"})
    reported = structured(result)["result"]
    _, exported = cli(capsys, "justifications", "--workspace", workspace_dir, "export", "--json")
    assert reported == json.loads(exported)
