"""Originals are never destroyed, and provenance records prove that the server wrote them (issue 20, §5-6).

Two classes of hostile workspace, both from the third security review:

- an operation given ``dst=<the user's file>`` replaced it and deleted its user-written ``.aux.xml``
  (``files.remove`` refused the same file, rightly); only outputs llmc-mcp wrote, which the ledger
  knows, may be replaced, unless the server runs with ``--allow-overwrite-originals``;
- a planted ``0.provenance.json``, conforming but written by no server, shadowed an output's genuine
  record: lineage followed it, ``provenance validate`` said it conforms, and the decisions export
  credited a real decision to a file that does not exist. The server now seals each record it commits
  (an HMAC under the justification store's key); lineage and the export follow sealed records only.

Each test's docstring names the mistake it guards against. Writes run in-process through
:func:`~llmc_mcp.operations.invoke.invoke` (the pipeline both faces share, with the capture that
writes records); the gate is stubbed to hand over the records a test chooses.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmc_mcp.capture import sha256_of
from llmc_mcp.cli.main import build_parser, main
from llmc_mcp.config import Quota, Settings
from llmc_mcp.errors import LlmcError
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.invoke import invoke
from llmc_mcp.outputs import LocalOutputs, OutputLedger, RemoveRefused
from llmc_mcp.provenance import lineage as lineage_module
from llmc_mcp.provenance.authenticity import SIGNATURE_FIELD, content_digest
from llmc_mcp.provenance.conformance import problems
from llmc_mcp.provenance.report import decisions
from llmc_mcp.reflection.store import JustificationStore, Record
from llmc_mcp.workspace import Workspace
from tests.mcp_helpers import justification_for
from tests.rasters import write

CONVERT = get_operation("raster.convert")
LINEAGE = get_operation("provenance.lineage")
RECORD = ".provenance.json"


class HandOver:
    """A gate that lets every call run with the records given (the gate itself is tested elsewhere)."""

    def __init__(self, records: Sequence[Record] = ()):
        self.records = list(records)

    def require(self, op: Any, args: Mapping[str, Any], facts: Mapping[str, str]) -> list[Record]:
        return self.records


def convert(ctx: OperationContext, src: str, dst: str, gate: HandOver | None = None) -> None:
    invoke(CONVERT, ctx, gate or HandOver(), {"src": src, "dst": dst})


def lineage(ctx: OperationContext, path: str) -> Any:
    return LINEAGE.run(ctx, LINEAGE.validate({"path": path}))


def raster(path: Path, value: int) -> Path:
    return write(path, np.full((1, 8, 8), value, dtype="uint8"))


def record_of(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}{RECORD}").read_text())


def plant(path: Path, record: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(record, indent=2))


def unsigned(record: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """The record as anyone could write it: conforming, changed as asked, with no server signature."""
    forged = {name: value for name, value in record.items() if name != SIGNATURE_FIELD}
    forged.update(changes)
    assert problems(forged) == []
    return forged


def out_and_decoy(ctx: OperationContext, workspace_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``out.tif`` converted from ``src.tif``: its genuine record, and that record's input pointed at
    ``decoy.tif`` (hash and all), as a forger would rewrite it."""
    raster(workspace_dir / "src.tif", 1)
    raster(workspace_dir / "decoy.tif", 5)
    convert(ctx, "src.tif", "out.tif")
    genuine = record_of(workspace_dir / "out.tif")
    decoy = {**genuine["inputs"][0], "path": "decoy.tif", "sha256": sha256_of(workspace_dir / "decoy.tif")}
    return genuine, decoy


def stored_decision(workspace: Workspace) -> Record:
    """A justification on record in the workspace's store, as the gate keeps it."""
    justification = justification_for({"prompt_args": {"method": "bilinear"}})
    record = Record(key="sha256:" + "b" * 64, domain="resampling", operation="raster.reproject",
                    prompt="justify_resampling_method", prompt_args={"method": "bilinear"},
                    prompt_hash="sha256:x", justification=justification)  # fmt: skip
    return JustificationStore(workspace.preflight_dir).put(record)


@pytest.fixture
def originals(workspace_dir: Path) -> Path:
    """``orig.tif`` with a user-written ``orig.tif.aux.xml``, and ``src.tif`` to write from."""
    raster(workspace_dir / "orig.tif", 7)
    (workspace_dir / "orig.tif.aux.xml").write_text(
        "<PAMDataset><Metadata><MDI>user</MDI></Metadata></PAMDataset>"
    )
    raster(workspace_dir / "src.tif", 1)
    return workspace_dir


# ------------------------------------------------------------------------------------- §5 originals


def test_an_operation_refuses_to_replace_a_users_file_naming_it_and_the_fix(
    ctx: OperationContext, originals: Path
) -> None:
    """Guards against dst=<original> replacing the user's file and deleting its .aux.xml (the review's
    first finding): the refusal names the file and both ways out, and nothing changed."""
    before = (originals / "orig.tif").read_bytes(), (originals / "orig.tif.aux.xml").read_bytes()
    with pytest.raises(LlmcError) as refused:
        convert(ctx, "src.tif", "orig.tif")
    assert refused.value.kind == "refused"
    assert "'orig.tif'" in refused.value.message and "not written by llmc-mcp" in refused.value.message
    assert "another dst" in refused.value.fix and "--allow-overwrite-originals" in refused.value.fix
    after = (originals / "orig.tif").read_bytes(), (originals / "orig.tif.aux.xml").read_bytes()
    assert after == before
    assert not (originals / f"orig.tif{RECORD}").exists()


def test_a_users_sidecar_is_not_taken_by_a_new_output(ctx: OperationContext, originals: Path) -> None:
    """Guards against a new dst whose name has a user's sidecar beside it: the commit would replace
    or delete ``new.tif.aux.xml`` although ``new.tif`` itself did not exist."""
    (originals / "new.tif.aux.xml").write_text("<PAMDataset/>")
    with pytest.raises(LlmcError) as refused:
        convert(ctx, "src.tif", "new.tif")
    assert refused.value.kind == "refused" and "'new.tif.aux.xml'" in refused.value.message
    assert (originals / "new.tif.aux.xml").read_text() == "<PAMDataset/>"
    assert not (originals / "new.tif").exists()


def test_the_refusal_comes_before_the_gate_asks_for_a_justification(
    ctx: OperationContext, originals: Path
) -> None:
    """Guards against an agent asked to justify a write that will be refused anyway: the preflight
    (run before the gate) refuses an original as dst."""
    with pytest.raises(LlmcError) as refused:
        CONVERT.check(ctx, CONVERT.validate({"src": "src.tif", "dst": "orig.tif"}))
    assert refused.value.kind == "refused"


def test_an_output_llmc_mcp_wrote_may_be_replaced(ctx: OperationContext, originals: Path) -> None:
    """Guards against a refusal so broad that an agent cannot rerun a step onto its own output."""
    convert(ctx, "src.tif", "out.tif")
    raster(originals / "src2.tif", 2)
    convert(ctx, "src2.tif", "out.tif")
    assert record_of(originals / "out.tif")["inputs"][0]["path"] == "src2.tif"


def test_an_output_the_user_changed_since_is_the_users(ctx: OperationContext, originals: Path) -> None:
    """Guards against the ledger's old word outliving the file: an output the user rewrote in place
    (new bytes, same name) is theirs now, and the refusal says why."""
    convert(ctx, "src.tif", "out.tif")
    raster(originals / "out.tif", 9)
    with pytest.raises(LlmcError) as refused:
        convert(ctx, "src.tif", "out.tif")
    assert refused.value.kind == "refused" and "modified since" in refused.value.message


def test_the_server_flag_lets_an_original_be_replaced(workspace: Workspace, originals: Path) -> None:
    """Guards against a documented flag that changes nothing: with it, dst=<original> is written."""
    ctx = OperationContext(
        workspace, outputs=LocalOutputs(OutputLedger(workspace, Quota(overwrite_originals=True)))
    )
    convert(ctx, "src.tif", "orig.tif")
    assert record_of(originals / "orig.tif")["output"]["path"] == "orig.tif"
    assert not (originals / "orig.tif.aux.xml").exists()  # the old file's stale sidecar goes with it


def test_the_flag_reaches_the_ledger_from_the_command_line() -> None:
    """Guards against a flag parsed and dropped on its way to the quota the ledger reads."""
    args = build_parser().parse_args(["serve", "--allow-overwrite-originals"])
    settings = Settings.from_env(allow_overwrite_originals=args.allow_overwrite_originals)
    assert Quota.from_settings(settings).overwrite_originals is True
    assert Quota.from_settings(Settings()).overwrite_originals is False


def test_files_remove_still_refuses_an_original_after_a_refused_overwrite(
    ctx: OperationContext, originals: Path
) -> None:
    """Guards against the review's chain: a refused overwrite that still left the original in the
    ledger's hands, so that files.remove would then delete it."""
    with pytest.raises(LlmcError):
        convert(ctx, "src.tif", "orig.tif")
    assert ctx.outputs is not None
    with pytest.raises(RemoveRefused):
        ctx.outputs.remove("orig.tif")
    assert (originals / "orig.tif").exists() and (originals / "orig.tif.aux.xml").exists()


# ---------------------------------------------------------------------------- §6 provenance records


def test_a_committed_record_carries_the_servers_signature(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against records anyone could have written: the one beside an output is sealed at commit,
    over its content (one changed character and the seal no longer holds)."""
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "out.tif")
    record = record_of(workspace_dir / "out.tif")
    assert ctx.outputs is not None
    assert ctx.outputs.verify_records([(content_digest(record), record[SIGNATURE_FIELD])]) == [True]
    edited = {**record, "operation": "raster.reproject"}
    assert ctx.outputs.verify_records([(content_digest(edited), record[SIGNATURE_FIELD])]) == [False]


def test_lineage_follows_the_genuine_record_not_a_planted_one(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against the review's forgery: an unsigned, conforming ``0.provenance.json`` claiming the
    output's bytes (named to be read first) shadowed the genuine record. It is listed as unverified
    and never walked; the walk reaches the real original."""
    genuine, forged_input = out_and_decoy(ctx, workspace_dir)
    plant(workspace_dir / f"0{RECORD}", unsigned(genuine, inputs=[forged_input]))
    walked = lineage(ctx, "out.tif")
    assert [step.record for step in walked.steps] == [f"out.tif{RECORD}"]
    assert walked.originals == ["src.tif"]
    assert walked.unverified_records == [f"0{RECORD}"]


def test_a_record_edited_after_it_was_sealed_is_unverified(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against a seal checked for presence only: the genuine record, its inputs rewritten and
    its signature kept, no longer counts (the output then reads as an original)."""
    genuine, forged_input = out_and_decoy(ctx, workspace_dir)
    plant(workspace_dir / f"out.tif{RECORD}", {**genuine, "inputs": [forged_input]})
    walked = lineage(ctx, "out.tif")
    assert walked.steps == [] and walked.originals == ["out.tif"]
    assert walked.unverified_records == [f"out.tif{RECORD}"]


def test_a_flood_of_planted_records_cannot_push_the_genuine_one_out(
    ctx: OperationContext, workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a walk that reads the first MAX_RECORDS record files it finds: more junk than that
    (here MAX_RECORDS + 10, the limit lowered to keep the test small) hid the genuine record."""
    monkeypatch.setattr(lineage_module, "MAX_RECORDS", 5)
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "deep/out.tif")
    genuine = record_of(workspace_dir / "deep" / "out.tif")
    for n in range(15):
        plant(workspace_dir / f"{n:02d}{RECORD}", unsigned(genuine, operation=f"raster.junk{n}"))
    walked = lineage(ctx, "deep/out.tif")
    assert [step.record for step in walked.steps] == [f"deep/out.tif{RECORD}"]
    assert walked.originals == ["src.tif"]
    assert len(walked.unverified_records) == 5


def test_the_export_credits_a_decision_only_to_outputs_of_sealed_records(
    ctx: OperationContext, workspace: Workspace, workspace_dir: Path
) -> None:
    """Guards against the review's export: a planted record crediting a real decision to 'ghost.tif', a
    file that does not exist, was listed among that decision's outputs."""
    decision = stored_decision(workspace)
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "out.tif", HandOver([decision]))
    genuine = record_of(workspace_dir / "out.tif")
    ghost = {**genuine["output"], "path": "ghost.tif", "sha256": "0" * 64}
    plant(workspace_dir / f"0{RECORD}", unsigned(genuine, output=ghost))
    [entry] = decisions([decision], workspace, OutputLedger(workspace))
    assert entry.outputs == ["out.tif"]


def test_provenance_validate_says_a_conforming_unsigned_record_is_unverified(
    ctx: OperationContext, workspace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against ``provenance validate`` vouching for a forgery because it conforms: the planted
    record fails (exit 1, named unverified); the server's own passes."""
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "out.tif")
    plant(workspace_dir / f"0{RECORD}", unsigned(record_of(workspace_dir / "out.tif")))
    genuine, planted = workspace_dir / f"out.tif{RECORD}", workspace_dir / f"0{RECORD}"
    assert main(["provenance", "validate", "--workspace", str(workspace_dir), str(genuine)]) == 0
    assert "signed" in capsys.readouterr().out
    assert main(["provenance", "validate", "--workspace", str(workspace_dir), str(planted)]) == 1
    assert "unverified" in capsys.readouterr().out


def _commit_with_record(workspace: Workspace, record: dict[str, Any], bytes_: bytes) -> OutputLedger:
    """What an escaped worker can do: ask for a grant and put any bytes and record under it."""
    ledger = OutputLedger(workspace)
    grant = ledger.begin("worker", "forged.tif")
    tmp = workspace.root / grant.tmp
    tmp.write_bytes(bytes_)
    Path(f"{tmp}{RECORD}").write_text(json.dumps(record))
    with pytest.raises(LlmcError) as refused:
        ledger.commit("worker", grant.token)
    assert refused.value.kind == "refused"
    return ledger


def test_the_server_does_not_seal_a_record_of_other_bytes_than_those_committed(
    ctx: OperationContext, workspace: Workspace, workspace_dir: Path
) -> None:
    """Guards against a seal that signs whatever a worker wrote: a record claiming the bytes of the
    user's original (to make it look derived) is refused, and nothing is kept."""
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "out.tif")
    claim = {**record_of(workspace_dir / "out.tif")["output"], "path": "forged.tif"}
    claim["sha256"] = sha256_of(workspace_dir / "src.tif")
    _commit_with_record(
        workspace, unsigned(record_of(workspace_dir / "out.tif"), output=claim), b"other bytes"
    )
    assert (
        not (workspace_dir / "forged.tif").exists() and not (workspace_dir / f"forged.tif{RECORD}").exists()
    )


def test_the_server_does_not_seal_a_record_crediting_a_decision_never_made(
    ctx: OperationContext, workspace: Workspace, workspace_dir: Path
) -> None:
    """Guards against a worker crediting an output to a justification nobody gave: every decision a
    record names must be on record in the store."""
    raster(workspace_dir / "src.tif", 1)
    convert(ctx, "src.tif", "out.tif", HandOver([stored_decision(workspace)]))
    genuine = record_of(workspace_dir / "out.tif")
    invented = [{**genuine["x-llmc:justifications"][0], "key": "sha256:" + "c" * 64}]
    content = b"forged output bytes"
    output = {**genuine["output"], "path": "forged.tif", "sha256": hashlib.sha256(content).hexdigest()}
    _commit_with_record(
        workspace, unsigned(genuine, output=output, **{"x-llmc:justifications": invented}), content
    )
    assert not (workspace_dir / "forged.tif").exists()
