"""A wrong justification can be replaced by its writer or withdrawn by the workspace's owner, never
overwritten silently, and text copied from what llmc-mcp ships is refused (issue 21, item 2).

Decisions here are raster.reproject's of RGB.byte.tif (EPSG:32618) to a target CRS. The demo's
example justification argues for EPSG:4326 on a web map; copied for EPSG:3857 it says false things
(that the layers are in lat/lon), which is the mistake the copy check exists for.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from llmc_mcp.cli.main import main
from llmc_mcp.config import Settings
from llmc_mcp.errors import JustificationInvalid, NotFound, RecordExists
from llmc_mcp.operations import get_operation
from llmc_mcp.reflection.examples import EXAMPLE_JUSTIFICATIONS
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.server.app import build_server
from tests.mcp_helpers import text

REPROJECT = get_operation("raster.reproject")
ALICE = "alice"
BOB = "bob"


SUBSIDY = "Measure field areas on the ground for a crop subsidy report."


def reasoning(method: str, intent: str = SUBSIDY) -> dict:
    return {
        "intent": intent,
        "alternatives": [{"method": "keep the source grid", "why_not": "The report needs one common grid."}],
        "choice": {
            "method": method,
            "rationale": "It is the grid the subsidy agency publishes parcels in.",
            "tradeoffs": "Every cell is resampled once more.",
        },
        "confidence": "medium",
    }


@pytest.fixture
def gate(workspace_dir: Path) -> Gate:
    return Gate(JustificationStore(workspace_dir / ".preflight"), PromptLibrary.default(), next_action="")


def crs_hint(gate: Gate, session: str, dst_crs: str = "EPSG:3857") -> Any:
    args = REPROJECT.validate(
        {"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": dst_crs, "resampling": "nearest"}
    )
    (hint,) = [h for h in gate.check(REPROJECT, args, session=session) if h.domain == "crs_datum"]
    return hint


def test_the_writer_supersedes_its_own_record_and_the_old_one_is_kept_linked(gate: Gate) -> None:
    """Guards against a wrong justification that can never be taken back (record_exists forever),
    and against a replacement that silently overwrites what was stored."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    first = gate.store.get("crs_datum", hint.hash)
    better = reasoning("EPSG:3857", intent="Show the scene on a tiled web basemap served in Web Mercator.")
    gate.persist(hint.hash, "crs_datum", better, session=ALICE, supersede=True)
    current = gate.store.get("crs_datum", hint.hash)
    assert current is not None and first is not None
    assert current.justification.intent.startswith("Show the scene")
    assert current.supersedes is not None and current.supersedes["digest"] == first.digest
    (kept,) = list(gate.store.superseded_records())
    assert kept.justification.intent == first.justification.intent
    assert kept.superseded_by == {"created_at": current.created_at}
    assert current.supersedes["file"] == "superseded/" + hint.hash.removeprefix("sha256:") + ".0.json"


def test_another_principal_cannot_supersede_a_record_it_did_not_write(gate: Gate) -> None:
    """Guards against one session replacing a neighbour's reasoning behind the neighbour's outputs."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    with pytest.raises(RecordExists, match="another session") as refused:
        gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=BOB, supersede=True)
    assert "llmc-mcp justifications revoke" in (refused.value.fix or "")
    assert list(gate.store.superseded_records()) == []


def test_persisting_again_without_supersede_names_the_way_to_replace(gate: Gate) -> None:
    """Guards against a record_exists whose fix gives the agent no way out of a wrong justification."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    with pytest.raises(RecordExists) as exists:
        gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    assert "supersede=True" in (exists.value.fix or "")


def test_superseding_a_decision_nobody_justified_is_not_found(gate: Gate) -> None:
    """Guards against supersede becoming a way to store a justification no operation asked for."""
    hint = crs_hint(gate, ALICE)
    with pytest.raises(NotFound, match="to supersede"):
        gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE, supersede=True)


def test_a_replacement_is_validated_against_the_stored_decision(gate: Gate) -> None:
    """Guards against supersede swapping the decision itself: the choice must still be the value the
    record justified."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    with pytest.raises(JustificationInvalid, match="not the value being justified"):
        gate.persist(hint.hash, "crs_datum", reasoning("EPSG:4326"), session=ALICE, supersede=True)


def test_the_owner_revokes_a_record_and_the_gate_asks_again(gate: Gate, workspace_dir: Path, capsys) -> None:
    """Guards against a wrong record of another principal that nobody can remove but by deleting
    files, and against revocation losing the record: it is kept, marked, and the next justification
    of the decision links to it."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    assert main(["justifications", "--workspace", str(workspace_dir), "revoke", hint.hash]) == 0
    assert "revoked crs_datum" in capsys.readouterr().out
    assert gate.store.get("crs_datum", hint.hash) is None
    (revoked,) = list(gate.store.superseded_records())
    assert revoked.superseded_by is not None and revoked.superseded_by["by"] == "the workspace's owner"
    again = crs_hint(gate, BOB)
    assert again.hash == hint.hash
    gate.persist(again.hash, "crs_datum", reasoning("EPSG:3857"), session=BOB)
    successor = gate.store.get("crs_datum", hint.hash)
    assert successor is not None and successor.supersedes is not None
    assert successor.supersedes["digest"] == revoked.digest


def test_prune_by_key_deletes_that_decision_only(gate: Gate, workspace_dir: Path) -> None:
    """Guards against a prune that cannot select one decision (age and domain filters only)."""
    first = crs_hint(gate, ALICE, "EPSG:3857")
    second = crs_hint(gate, ALICE, "EPSG:4326")
    gate.persist(first.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    gate.persist(second.hash, "crs_datum", reasoning("EPSG:4326"), session=ALICE)
    assert main(["justifications", "--workspace", str(workspace_dir), "prune", "--key", first.hash]) == 0
    assert gate.store.get("crs_datum", first.hash) is None
    assert gate.store.get("crs_datum", second.hash) is not None


def test_the_demos_justification_copied_for_another_crs_is_refused(gate: Gate) -> None:
    """Guards against the shipped example accepted with only its method changed: it argues that the
    other layers are in lat/lon, false for a Web Mercator choice."""
    copied = copy.deepcopy(EXAMPLE_JUSTIFICATIONS["crs_datum"])
    copied["choice"]["method"] = "EPSG:3857"
    copied["alternatives"] = [a for a in copied["alternatives"] if a["method"] != "EPSG:3857"]
    hint = crs_hint(gate, ALICE)
    with pytest.raises(JustificationInvalid) as refused:
        gate.persist(hint.hash, "crs_datum", copied, session=ALICE)
    errors = " | ".join(refused.value.details["errors"])
    assert "copies the example justification of 'EPSG:4326'" in errors
    assert "intent" in errors and "choice.rationale" in errors


def test_the_demos_justification_still_justifies_its_own_choice(gate: Gate) -> None:
    """Guards against a copy check that breaks the demo: the example stands for the very decision
    it was written for."""
    hint = crs_hint(gate, ALICE, "EPSG:4326")
    gate.persist(hint.hash, "crs_datum", EXAMPLE_JUSTIFICATIONS["crs_datum"], session=ALICE)
    assert gate.store.get("crs_datum", hint.hash) is not None


def test_a_sentence_copied_from_the_readme_is_refused(gate: Gate) -> None:
    """Guards against a copy check that knows only the prompt: README prose pasted as reasoning."""
    copied = reasoning("EPSG:3857")
    copied["choice"]["rationale"] = (
        "raster.area measures each cell on the ellipsoid in the raster's own CRS, so no warp is needed."
    )
    copied["intent"] = (
        "Every option is honoured or rejected with an error that names the problem and the fix."
    )
    hint = crs_hint(gate, ALICE)
    with pytest.raises(JustificationInvalid) as refused:
        gate.persist(hint.hash, "crs_datum", copied, session=ALICE)
    assert "intent: repeats text llmc-mcp ships" in " | ".join(refused.value.details["errors"])


@pytest.mark.anyio
async def test_outputs_made_under_a_superseded_record_say_so_in_report_and_export(
    classic_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a report that credits an output to the reasoning that replaced the one it was
    made under: the output is listed under the superseded record, marked, in reflection.report()
    (gate.report) and in the Markdown export."""
    args = {"src": "RGB.byte.tif", "dst": "web.tif", "dst_crs": "EPSG:3857", "resampling": "nearest"}
    async with Client(build_server(classic_settings)) as client:
        miss = await client.call_tool("raster_reproject", args)
        # The hints are JSON in the text (and in structuredContent where the face still sends it).
        hints = json.loads(text(miss))["reflection_required"]
        for hint in hints:
            method = next(iter(hint["prompt_args"].values()))
            answer = {"hash": hint["hash"], "domain": hint["domain"], "justification": reasoning(method)}
            assert not (await client.call_tool("persist_justification", answer)).is_error
        made = await client.call_tool("raster_reproject", args)
        assert not made.is_error, text(made)
        crs = next(h for h in hints if h["domain"] == "crs_datum")
        better = reasoning("EPSG:3857", intent="Show the scene on a tiled basemap served in Web Mercator.")
        replaced = await client.call_tool(
            "persist_justification",
            {"hash": crs["hash"], "domain": "crs_datum", "justification": better, "supersede": True},
        )
        assert not replaced.is_error, text(replaced)
    out = workspace_dir / "export.md"
    assert main(["justifications", "--workspace", str(workspace_dir), "export", "--out", str(out)]) == 0
    assert main(["justifications", "--workspace", str(workspace_dir), "list", "--json"]) == 0
    store = JustificationStore(workspace_dir / ".preflight")
    from llmc_mcp.outputs import OutputLedger
    from llmc_mcp.provenance.report import decisions, every_record
    from llmc_mcp.workspace import Workspace

    entries = [
        e
        for e in decisions(
            every_record(store), Workspace(workspace_dir), OutputLedger(Workspace(workspace_dir))
        )
        if e.domain == "crs_datum"
    ]
    by_status = {e.status: e for e in entries}
    assert by_status["superseded"].outputs == ["web.tif"]
    assert by_status["current"].outputs == []
    assert by_status["current"].supersedes is not None
    markdown = out.read_text()
    assert "**Superseded:** replaced" in markdown
    assert "**Outputs made under this superseded one:** `web.tif`" in markdown


def test_a_kept_superseded_record_is_charged_to_its_superseder(gate: Gate, workspace_dir: Path) -> None:
    """Guards against superseding as a way to write outside the quotas: the kept copy counts for the
    session that superseded and for the workspace, like any record."""
    hint = crs_hint(gate, ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE)
    gate.persist(hint.hash, "crs_datum", reasoning("EPSG:3857"), session=ALICE, supersede=True)
    folder = workspace_dir / ".preflight" / "justifications" / "crs_datum"
    sizes = [path.stat().st_size for path in (*folder.glob("*.json"), *folder.glob("superseded/*.json"))]
    assert len(sizes) == 2
    assert gate.store.charge(ALICE) == (sum(sizes), sum(sizes))
