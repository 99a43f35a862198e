"""What clients send into justification records is bounded, and no record can forge a report.

Justification records are shared by every session of a workspace: a record one session's client
wrote (an agent's justification, the host model's name, a person's review) is read by the next
session that makes the same decision, copied into its outputs' provenance, and shown to reviewers.
These specify, as an attacker would try it:

- CRS text a session sends (a decision's CRS, a justified ``choice.method``) is identified by PROJ
  outside the server's process, under a deadline that kills the work: PROJ holds the GIL, and in a
  server thread one session's invalid persists (prose as a CRS) made every other session wait;
- the open questions (pending hints) a session makes the server write are bounded in number, charged
  to the session's and the workspace's output quotas, and never written into the disk's reserve
  (one 25-second loop over new decisions once wrote 2,689 hint files);
- every client-sent text has a length and a character bound before it is stored (a neighbour's
  3,000,000-character model name once made another session's provenance record unreadable);
- every text field of a record is escaped in the Markdown export and the review form, so that a
  justification cannot add decisions or "Approved by the user" lines to a report (the JSON export
  and ``reflection.report()`` are JSON: each text is one string value, whatever it holds).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from mcp import Client
from mcp.types import CreateMessageResult, TextContent
from pydantic import ValidationError

from llmc_mcp import crs_text
from llmc_mcp.cli.main import main
from llmc_mcp.config import Quota, Settings
from llmc_mcp.errors import CrsError, InvalidArgument, JustificationInvalid
from llmc_mcp.outputs import OutputLedger
from llmc_mcp.reflection import pending
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore, Record
from llmc_mcp.server.app import build_server
from llmc_mcp.server.review import ReviewForm, review_message
from llmc_mcp.sessions import current_session
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import JUSTIFICATION_TEMPLATE, justification_for, structured

MISS = 'raster.reproject("RGB.byte.tif", "o.tif", dst_crs="EPSG:4326", resampling="nearest")'
CODE = "raster.reproject('RGB.byte.tif', 'rgb_4326.tif', 'EPSG:4326', resampling='bilinear')['crs']['epsg']"

HOSTILE = (
    "Words.\n\n## resampling: cubic (raster.reproject)\n\n- **Approved by the user:** 2026-01-01 yes\n"
    "* item\n1. item\n> quote\n<details>x</details> [a](http://e.invalid) `c` | t |\nApprove this decision?"
)
"""Newlines with the Markdown a forger needs: a decision heading, list items of every kind, an
"Approved by the user" line, a quote, HTML, a link, code, emphasis, a table row, the review question."""
BENIGN = "Plain words that say why this choice fits the data."


class NamedModel:
    """A host model that answers every question correctly, under a model name of the client's choosing."""

    def __init__(self, name: str):
        self.name = name

    async def __call__(self, ctx: Any, params: Any) -> CreateMessageResult:
        text = params.messages[0].content.text
        subject = re.search(r'Set choice.method to "(.+?)" exactly', text).group(1)
        answer = json.dumps(justification_for({"prompt_args": {"x": subject}}))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=answer), model=self.name
        )


def stored(workspace_dir: Path) -> list[Record]:
    return list(JustificationStore(Workspace(workspace_dir).preflight_dir).records())


# ------------------------------------------------- §1: CRS identification never blocks the server


@pytest.fixture
def no_proj_in_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """PROJ work done in this (the server's) process fails the test."""

    def refuse(value: str, argument: str) -> str:
        raise AssertionError(f"PROJ identified {value[:40]!r} in the server's process")

    monkeypatch.setattr(crs_text, "_normalize", refuse)
    crs_text.clear_cache()


def test_a_sessions_crs_text_is_identified_outside_the_server_process(no_proj_in_the_server: None) -> None:
    """Guards against PROJ parsing a session's text in a server thread: it holds the GIL, so the event
    loop, and every other session's call, waits for it (0.15 s per paragraph of prose sent as a CRS)."""
    token = current_session.set("http:session-a")
    try:
        assert crs_text.normalize_crs("epsg:32633") == "EPSG:32633"
        with pytest.raises(CrsError, match="Unknown CRS"):
            crs_text.normalize_crs("a geographic CRS in degrees, as the web map wants " * 20)
    finally:
        current_session.reset(token)


@pytest.mark.anyio
async def test_invalid_persists_of_prose_as_a_crs_run_no_proj_in_the_server(
    code_settings: Settings, no_proj_in_the_server: None
) -> None:
    """Guards against the persist stall: a session persisting justifications whose choice.method is
    prose (each one a PROJ parse) froze the server for its neighbours."""
    async with Client(build_server(code_settings)) as client:
        miss = structured(await client.call_tool("execute_code", {"code": MISS}))
        hint = next(h for h in miss["reflection_required"] if h["domain"] == "crs_datum")
        payload = justification_for(hint)
        code = (
            f"P = {payload!r}\nkinds = []\nfor i in range(3):\n"
            "    P['choice']['method'] = f'a geographic CRS number {i} in degrees for the web map'\n"
            f"    try:\n        reflection.persist({hint['hash']!r}, 'crs_datum', P)\n"
            "    except ApiError as e:\n        kinds.append(e.type)\nkinds"
        )
        answer = structured(await client.call_tool("execute_code", {"code": code}))
    assert answer["result"] == ["justification_invalid"] * 3, answer


@pytest.mark.parametrize(
    ("bound", "limit", "stand_in", "refusal"),
    [
        ("IDENTIFY_WALL_SECONDS", 0.5, "import time; time.sleep(60)", r"took longer than 0\.5 s\."),
        ("IDENTIFY_TIMEOUT", 0.3, "input()\nwhile True: pass", r"took longer than 0\.3 s of CPU time"),
    ],
    ids=["stalled-past-the-wall-clock", "spinning-past-its-cpu-time"],
)
def test_an_identification_past_a_bound_is_refused_and_its_helper_killed(
    monkeypatch: pytest.MonkeyPatch, bound: str, limit: float, stand_in: str, refusal: str
) -> None:
    """Guards against a deadline that only stops waiting (the old thread pool kept running a slow
    identification after refusing it, holding a shared thread and the GIL), and against a CPU bound
    only a quiet machine keeps (a loaded host stretched a plain definition past 5 s of wall time): a
    helper that stalls is killed at the wall-clock backstop, one spinning on the text once it has
    spent its CPU time, with the other bound far away."""
    started: list[Any] = []

    class Recorded(crs_text._Helper):
        def __init__(self, command: list[str]):
            super().__init__(command)
            started.append(self)

    monkeypatch.setattr(crs_text, "_Helper", Recorded)
    monkeypatch.setattr(crs_text, bound, limit)
    ready_then_stand_in = "print('{\"ready\": true}', flush=True)\n" + stand_in
    helpers = crs_text.Identifiers(command=[sys.executable, "-c", ready_then_stand_in])
    monkeypatch.setattr(crs_text, "IDENTIFIERS", helpers)
    crs_text.clear_cache()
    token = current_session.set("http:session-a")
    try:
        with pytest.raises(CrsError, match=refusal):
            crs_text.normalize_crs("+proj=tmerc +lon_0=7.123 +datum=WGS84")
    finally:
        current_session.reset(token)
    assert len(started) == 1 and started[0].process.poll() is not None, "the helper is still running"


def test_a_helper_slow_to_start_does_not_count_against_the_identification_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards against refusing a plain definition as 'took longer than 5 s' because a loaded machine
    took that long to start the helper process (seen in CI under load): the deadline bounds the work
    on the text, and the start has a bound of its own."""
    monkeypatch.setattr(crs_text, "IDENTIFY_WALL_SECONDS", 1.0)
    slow_start = "import time; time.sleep(2); from llmc_mcp.crs_text import serve_helper; serve_helper()"
    helpers = crs_text.Identifiers(command=[sys.executable, "-I", "-c", slow_start])
    monkeypatch.setattr(crs_text, "IDENTIFIERS", helpers)
    text = "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs"
    crs_text.clear_cache()
    in_process = crs_text.normalize_crs(text)  # no session: identified here, not by a helper
    crs_text.clear_cache()
    token = current_session.set("http:session-a")
    try:
        identified = crs_text.normalize_crs(text)
    finally:
        current_session.reset(token)
        helpers.close()
    assert identified == in_process and identified.startswith("PROJCRS[")


# ------------------------------------------------------------- §2: open questions are charged


def _gate_with_ledger(workspace_dir: Path, quota: Quota) -> tuple[Gate, OutputLedger]:
    workspace = Workspace(workspace_dir)
    gate = Gate(JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="")
    ledger = OutputLedger(workspace, quota)
    gate.pending.charge_to(ledger)
    return gate, ledger


def _ask(gate: Gate, session: str, method: str) -> list[Any]:
    from llmc_mcp.operations import get_operation

    op = get_operation("raster.reproject")
    args = op.validate({"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": "EPSG:4326", "resampling": method})
    return gate.check(op, args, session=session)


@pytest.mark.anyio
async def test_a_session_holding_too_many_open_questions_is_refused_and_its_neighbour_is_not(
    code_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a session that loops over new decisions without answering them writing a hint
    file for each, without bound (2,689 in one 25-second call)."""
    monkeypatch.setattr(pending, "MAX_OPEN_HINTS", 3)
    loop = (
        "kinds = []\n"
        "for method in ['nearest', 'bilinear', 'cubic', 'lanczos']:\n"
        "    try:\n"
        "        raster.reproject('RGB.byte.tif', 'o.tif', dst_crs='EPSG:4326', resampling=method)\n"
        "    except ApiError as e:\n"
        "        kinds.append((e.type, e.message))\n"
        "kinds"
    )
    server = build_server(code_settings)
    async with Client(server) as greedy, Client(server) as neighbour:
        kinds = structured(await greedy.call_tool("execute_code", {"code": loop}))["result"]
        fine = structured(await neighbour.call_tool("execute_code", {"code": MISS}))
    # The CRS question is asked again with each method: asking it again writes nothing new.
    assert [k for k, _ in kinds] == ["reflection_required", "reflection_required"] + ["quota_exceeded"] * 2
    assert "already holds 3 open questions" in kinds[2][1], kinds[2][1]
    assert fine["error"]["type"] == "reflection_required", fine["error"]


def test_open_questions_are_charged_to_the_sessions_output_quota(workspace_dir: Path) -> None:
    """Guards against hint files that fill the disk outside every quota: their bytes and the session's
    outputs share its --quota-session-mb, both ways."""
    gate, ledger = _gate_with_ledger(workspace_dir, Quota(session_bytes=12 * 1024))
    asked = 0
    with pytest.raises(pending.ServerFilesQuota, match="--quota-session-mb"):
        for method in ("nearest", "bilinear", "cubic", "lanczos", "average", "mode", "max", "min", "med"):
            asked += len(_ask(gate, "conn-a", method))
    on_disk = sum(p.stat().st_size for p in (workspace_dir / ".preflight" / "pending").rglob("*.json"))
    assert asked > 0 and on_disk <= 12 * 1024
    assert [hook("local") for hook in ledger.charged] == [(on_disk, on_disk), (0, 0)]
    grant = ledger.begin("conn-a", "out.tif")
    ledger.abort("conn-a", grant.token)
    assert grant.max_bytes == 12 * 1024 - on_disk, "the session's output may still take the hints' bytes"


def test_justification_records_are_charged_to_the_session_that_wrote_them(workspace_dir: Path) -> None:
    """Guards against records, write-once and never expired, accumulating outside every quota: a
    session's loop of new decisions, each justified, would otherwise fill the disk."""
    gate, ledger = _gate_with_ledger(workspace_dir, Quota())
    hints = _ask(gate, "conn-a", "nearest")
    open_bytes = sum(hook("local")[0] for hook in ledger.charged)
    ledger.quota = Quota(session_bytes=open_bytes + 100)
    with pytest.raises(pending.ServerFilesQuota, match="The justification was not stored"):
        gate.persist(
            hints[0].hash, hints[0].domain, justification_for(hints[0].model_dump()), session="conn-a"
        )
    assert stored(workspace_dir) == []
    ledger.quota = Quota()
    for hint in hints:
        gate.persist(hint.hash, hint.domain, justification_for(hint.model_dump()), session="conn-a")
    records = sum(
        p.stat().st_size for p in (workspace_dir / ".preflight" / "justifications").glob("*/*.json")
    )
    assert [hook("local") for hook in ledger.charged] == [(0, 0), (records, records)]
    assert ledger.charged[1]("http-someone-else") == (0, records)


def test_open_questions_are_never_written_into_the_disks_reserve(workspace_dir: Path) -> None:
    """Guards against hint files taking the free space kept for the store's records."""
    gate, _ = _gate_with_ledger(workspace_dir, Quota(reserve_bytes=1 << 62))
    with pytest.raises(pending.ServerFilesQuota, match="--disk-reserve-mb"):
        _ask(gate, "conn-a", "nearest")
    assert not list((workspace_dir / ".preflight").rglob("pending/*/*.json"))


# ------------------------------------------------------------------------ §3: bounds on client text


@pytest.mark.anyio
async def test_a_model_name_past_its_bound_is_not_stored_and_the_hint_says_why(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a client's 3,000,000-character model name stored in a shared record (and from there
    copied into every output that relies on the decision)."""
    model = NamedModel("m" * 3_000_000)
    async with Client(build_server(code_settings), mode="legacy", sampling_callback=model) as client:
        result = structured(await client.call_tool("execute_code", {"code": CODE}))
    assert result["error"]["type"] == "reflection_required", result["error"]
    fallbacks = [h["fallback"] for h in result["reflection_required"]]
    assert len(fallbacks) == 2
    assert all("3000000 characters long; the limit is 200" in f for f in fallbacks), fallbacks
    assert stored(workspace_dir) == []


@pytest.mark.anyio
async def test_a_neighbours_model_name_cannot_make_another_sessions_provenance_unreadable(
    code_settings: Settings, workspace_dir: Path
) -> None:
    """Guards against a decision one session's client answered with a huge model name making a second
    session's output carry a 6 MB provenance record that ``provenance://`` refuses to serve."""
    server = build_server(code_settings)
    async with Client(server, mode="legacy", sampling_callback=NamedModel("m" * 3_000_000)) as neighbour:
        await neighbour.call_tool("execute_code", {"code": CODE})
    async with Client(server, mode="legacy", sampling_callback=NamedModel("host-model-1")) as victim:
        result = structured(await victim.call_tool("execute_code", {"code": CODE}))
        assert result["ok"], result
        (content,) = (await victim.read_resource("provenance://rgb_4326.tif")).contents
    record = json.loads(content.text)
    assert {j["answered_by"] for j in record["x-llmc:justifications"]} == {"sampling: host-model-1"}


@pytest.mark.parametrize(
    "character",
    ["\u202e", "\x1b", "\x00", "\u2028"],
    ids=["bidi-override", "escape", "nul", "line-separator"],
)
def test_a_justification_holding_a_character_text_may_not_hold_is_a_field_error(
    workspace_dir: Path, character: str
) -> None:
    """Guards against stored text that reads differently than it is stored (bidirectional overrides,
    terminal escapes, NUL, line separators): shown in reports and review forms, it would lie."""
    from llmc_mcp.operations import get_operation

    workspace = Workspace(workspace_dir)
    gate = Gate(JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="")
    op = get_operation("raster.reproject")
    args = op.validate({"src": "RGB.byte.tif", "dst": "o.tif", "dst_crs": "EPSG:4326"})
    hint = next(h for h in gate.check(op, args, session="s") if h.domain == "crs_datum")
    answer = justification_for(hint.model_dump())
    answer["intent"] = f"Keep the web map aligned {character} with the basemap tiles."
    with pytest.raises(JustificationInvalid) as refused:
        gate.persist(hint.hash, hint.domain, answer, session="s")
    assert refused.value.details["errors"][0].startswith("intent:")
    assert stored(workspace_dir) == []


def test_a_review_comment_is_bounded_in_length_and_characters() -> None:
    """Guards against a client's elicitation answer storing terminal escapes or megabytes in a record."""
    assert ReviewForm.model_validate({"approve": True, "comment": "Checked with the team."}).approve
    for comment in ("\x1b[2J cleared", "ok\u202egnp.exe", "x" * 501):
        with pytest.raises(ValidationError):
            ReviewForm.model_validate({"approve": True, "comment": comment})


def test_a_record_past_the_size_bound_is_refused_before_it_is_written(workspace_dir: Path) -> None:
    """Guards against a record too large for the provenance records that copy it (their limit is 1 MiB,
    and an output's record may cite three decisions)."""
    store = JustificationStore(Workspace(workspace_dir).preflight_dir)
    record = _record("sha256:" + "1" * 64, prompt_args={"dst_crs": "x" * 200_000})
    with pytest.raises(InvalidArgument, match="at most 131072"):
        store.put(record)
    assert stored(workspace_dir) == []
    with pytest.raises(ValidationError, match="answered_by"):
        _record("sha256:" + "2" * 64, answered_by="sampling: " + "m" * 3_000_000)


# ---------------------------------------------------------------- §4: reports cannot be forged


FIELDS = [
    "intent",
    "choice.method",
    "choice.rationale",
    "choice.tradeoffs",
    "alternatives.method",
    "alternatives.why_not",
    "answered_by",
    "review.comment",
    "decision",
]


def _record(key: str, **fields: Any) -> Record:
    data: dict[str, Any] = {
        "key": key,
        "domain": "resampling",
        "operation": "raster.reproject",
        "prompt": "justify_resampling_method",
        "prompt_args": {"method": "bilinear"},
        "prompt_hash": "sha256:" + "0" * 64,
        "created_at": "2026-11-01T00:00:00+00:00",
        "justification": json.loads(json.dumps(JUSTIFICATION_TEMPLATE)) | {"confidence": "low"},
    }
    data["justification"]["choice"]["method"] = "bilinear"
    data.update(fields)
    return Record.model_validate(data)


def _with(field: str, text: str) -> dict[str, Any]:
    """The record fields that put ``text`` into ``field`` (a reviewed record for review.comment)."""
    justification = json.loads(json.dumps(JUSTIFICATION_TEMPLATE)) | {"confidence": "low"}
    justification["choice"]["method"] = "bilinear"
    fields: dict[str, Any] = {"justification": justification}
    if field == "answered_by":
        fields["answered_by"] = f"sampling: {text}"
    elif field == "review.comment":
        fields["review"] = {"action": "approved", "by": "user", "comment": text, "at": "2026-11-02"}
    elif field == "decision":
        fields["prompt_args"] = {"method": text}
    elif field == "intent":
        justification["intent"] = text
    elif field.startswith("choice."):
        justification["choice"][field.removeprefix("choice.")] = text
    else:
        justification["alternatives"][0][field.removeprefix("alternatives.")] = text
    return fields


def _export(workspace_dir: Path, capsys: pytest.CaptureFixture[str], field: str, text: str) -> str:
    """The export of a workspace holding two decisions, the second with ``text`` in ``field``."""
    store = JustificationStore(Workspace(workspace_dir).preflight_dir)
    for path in store.records_dir.glob("*/*.json"):
        path.unlink()
    store.put(_record("sha256:" + "a" * 64))
    store.put(_record("sha256:" + "b" * 64, **_with(field, text)))
    assert main(["justifications", "--workspace", str(workspace_dir), "export"]) == 0
    return capsys.readouterr().out


def _structure(markdown: str) -> list[tuple[str, ...]]:
    """The Markdown's block structure and the kinds of inline content, text runs merged."""
    shape: list[tuple[str, ...]] = []
    for token in MarkdownIt("commonmark").parse(markdown):
        kinds: list[str] = []
        for child in token.children or []:
            if not (kinds and kinds[-1] == child.type == "text"):
                kinds.append(child.type)
        shape.append((token.type, token.tag, *kinds))
    return shape


@pytest.mark.parametrize("field", FIELDS)
def test_a_hostile_field_cannot_change_the_markdown_exports_structure(
    workspace_dir: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    """Guards against a justification whose text adds headings, decisions or "Approved by the user"
    lines to the report a reviewer reads (two unreviewed records once exported as four decisions, two
    of them approved)."""
    hostile = _export(workspace_dir, capsys, field, HOSTILE)
    benign = _export(workspace_dir, capsys, field, BENIGN)
    assert _structure(hostile) == _structure(benign)
    headings = [line for line in hostile.splitlines() if line.startswith("## ")]
    approvals = [line for line in hostile.splitlines() if line.startswith("- **Approved by the user:**")]
    assert len(headings) == 2
    assert len(approvals) == (1 if field == "review.comment" else 0)
    rendered = MarkdownIt("commonmark").render(hostile)
    assert "<details>" not in rendered and "<a href" not in rendered and "<blockquote>" not in rendered


@pytest.mark.parametrize("field", ["intent", "choice.method", "choice.rationale", "choice.tradeoffs",
                                   "alternatives.method", "alternatives.why_not", "decision"])  # fmt: skip
def test_a_hostile_field_cannot_pose_as_a_line_of_the_review_form(field: str) -> None:
    """Guards against a justification that shows the person asked to approve it a forged question or
    a forged part of the decision: every agent text is one line of the form."""
    benign_record = _record("sha256:" + "c" * 64, **_with(field, BENIGN))
    hostile_record = _record("sha256:" + "c" * 64, **_with(field, HOSTILE))

    def form(record: Record) -> list[str]:
        return review_message(
            record.operation, record.prompt_args, record.justification, "medium"
        ).splitlines()

    assert len(form(hostile_record)) == len(form(benign_record))
    assert [line for line in form(hostile_record) if line.startswith("Approve")] == ["Approve this decision?"]


def test_a_fifo_under_a_records_name_is_no_record_and_does_not_hang_the_server(workspace_dir: Path) -> None:
    """Guards against a record read that blocks for ever: a FIFO planted under a justification's (or an
    open question's) name hung the gate's look-up in the server. It is read as no record."""
    store = JustificationStore(Workspace(workspace_dir).preflight_dir)
    key = "sha256:" + "c" * 64
    path = store.path_for("resampling", key)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(store.get("resampling", key)), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the look-up blocked on the FIFO"
    assert found == [None]


def test_a_fifo_under_the_output_ledgers_name_does_not_hang_the_server(workspace_dir: Path) -> None:
    """Guards against the ledger read blocking for ever: workers can write where the ledger lives, and
    a FIFO planted as ``ledger.json`` hung every later write. It is read as an unreadable ledger."""
    ledger = OutputLedger(Workspace(workspace_dir))
    ledger.dir.mkdir(parents=True, exist_ok=True)
    os.mkfifo(ledger.dir / "ledger.json")
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(ledger.outputs()), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the ledger read blocked on the FIFO"
    assert found == [{}]


def test_a_fifo_among_a_gone_servers_journal_entries_does_not_hang_the_sweep(workspace_dir: Path) -> None:
    """Guards against the sweep of a previous server's unfinished writes blocking on a FIFO a worker
    planted among its journal entries (or reading a huge one whole): it is dropped like any unreadable
    entry."""
    ledger = OutputLedger(Workspace(workspace_dir))
    gone = ledger.journal.folder / "999999999-1"  # no such process: its writes are over
    gone.mkdir(parents=True, exist_ok=True)
    os.mkfifo(gone / "token.json")
    found: list[int] = []
    thread = threading.Thread(target=lambda: found.append(ledger.sweep()), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the sweep blocked on the FIFO"
    assert found == [0] and not (gone / "token.json").exists()
