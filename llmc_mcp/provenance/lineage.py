"""From a file's bytes back to the originals it was made from, through the records beside outputs.

A file is identified by its SHA-256, not its name: :func:`lineage` hashes it, finds the provenance
record whose ``output.sha256`` claims those bytes, and walks each input the record lists the same
way. The walk stops, and says why, where no record claims the bytes (an original, or a file made
outside llmc-mcp), where an input is missing, or where an input's bytes are no longer those the
record hashed (edited since). Records are workspace files like any other, so each is read bounded
(size, count), checked against the format (:mod:`.conformance`), and followed only if the server
sealed it (:mod:`.authenticity`): a conforming record anyone else wrote is listed as unverified and
never walked. The records beside the outputs the ledger knows are read first, so no number of
planted files can push them out of the :data:`MAX_RECORDS` read; input paths go through the
workspace's path policy.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from llmc_mcp.capture import sha256_of
from llmc_mcp.durable import read_bounded
from llmc_mcp.errors import LlmcError
from llmc_mcp.provenance.authenticity import MAX_RECORD_BYTES, Claim, verified
from llmc_mcp.provenance.conformance import problems
from llmc_mcp.provenance.models import Lineage, LineageStep, LineageStop
from llmc_mcp.provenance.record import RECORD_SUFFIX
from llmc_mcp.remote.allowlist import looks_remote
from llmc_mcp.walk import compile_glob, walk
from llmc_mcp.workspace import Workspace

MAX_RECORDS = 5000
"""Record files a walk reads at most besides those beside the ledger's outputs (which the output
quota bounds)."""
MAX_STEPS = 200
"""Files a walk visits at most: each is hashed, and a chain longer than this is not a lineage anyone
reads to the end."""


@dataclass(frozen=True)
class _Claim:
    record: str
    content: dict[str, Any]


class SealedOutputs(Protocol):
    """What the walk asks the output ledger (:class:`~llmc_mcp.outputs.OutputGuard`): which outputs it
    wrote and which records the server sealed. A protocol, because the ledger writes these records
    and so sits above this module."""

    def owned(self) -> list[str]: ...

    def verify_records(self, claims: list[Claim]) -> list[bool]: ...


def lineage(workspace: Workspace, name: str, outputs: SealedOutputs) -> Lineage:
    """The steps that made ``name``, newest first, and where the walk back stopped.

    ``outputs`` answers which records the server sealed and which outputs it wrote (a worker's asks
    the server; in the server or the command line, the workspace's ledger, which reads the key).

    The walk moves from record to record. A digest finds the records that claim it, but a record once
    walked is never walked again: a byte-identical copy (``convert`` of a file into the same bytes) is
    claimed by its own record *and* its input's, and a walk keyed on digests alone would take the
    copy's record for its input's and stop there, reporting no originals.
    """
    path = workspace.input_path(name, argument="path")
    start = workspace.relative(path)
    start_digest = sha256_of(path)
    records = _records(workspace, outputs)
    claims = records.claims
    steps: list[LineageStep] = []
    stops: list[LineageStop] = []
    originals: list[str] = []
    walked: set[str] = set()
    visited: set[tuple[str, str]] = set()
    queue = deque([(start, start_digest)])
    while queue:
        rel, digest = queue.popleft()
        if (rel, digest) in visited:
            continue
        visited.add((rel, digest))
        if len(visited) > MAX_STEPS:
            stops.append(LineageStop(path=rel, reason=f"the walk stopped after {MAX_STEPS} files"))
            break
        candidates = [claim for claim in claims.get(digest, ()) if claim.record not in walked]
        if not candidates:
            if digest not in claims:
                originals.append(rel)
            # Otherwise every record claiming these bytes is already in the walk: traced above.
            continue
        claim = _preferred(candidates, rel)
        walked.add(claim.record)
        inputs = claim.content.get("inputs", [])
        steps.append(
            LineageStep(
                path=rel,
                sha256=digest,
                record=claim.record,
                operation=claim.content["operation"],
                finished_at=claim.content["finished_at"],
                inputs=[item["path"] for item in inputs],
            )
        )
        for item in inputs:
            if looks_remote(item["path"]):
                # Read where it lives: nothing in the workspace made it, whatever it holds now.
                if item["path"] not in originals:
                    originals.append(item["path"])
                continue
            found = _follow(workspace, item)
            if isinstance(found, LineageStop):
                stops.append(found)
            else:
                queue.append(found)
    return Lineage(
        path=start,
        sha256=start_digest,
        steps=steps,
        originals=originals,
        stops=stops,
        ignored_records=records.ignored,
        unverified_records=records.unverified,
    )


def _preferred(candidates: list[_Claim], rel: str) -> _Claim:
    """The record written beside ``rel`` when it is among the claims (its own history), else the first."""
    own = f"{rel}{RECORD_SUFFIX}"
    return next((claim for claim in candidates if claim.record == own), candidates[0])


def _follow(workspace: Workspace, item: dict[str, Any]) -> tuple[str, str] | LineageStop:
    """The input a record names, if its bytes are still those the record hashed."""
    name = item["path"]
    try:
        path = workspace.input_path(name, argument="input")
    except LlmcError as exc:
        return LineageStop(path=name, reason=f"cannot be read: {exc.message}")
    digest = sha256_of(path)
    if digest != item["sha256"]:
        return LineageStop(
            path=name, reason="its bytes changed since the record was written (the SHA-256 differs)"
        )
    return workspace.relative(path), digest


def authentic_records(workspace: Workspace, outputs: SealedOutputs) -> dict[str, dict[str, Any]]:
    """Every conforming record the server sealed, by its file's workspace-relative name."""
    found = _records(workspace, outputs)
    return {claim.record: claim.content for claims in found.claims.values() for claim in claims}


@dataclass(frozen=True)
class _Found:
    claims: dict[str, list[_Claim]]
    """Sealed records by the output digest they claim."""
    ignored: list[str]
    """Records not believed: unreadable, too large, not conforming, or claiming no output."""
    unverified: list[str]
    """Conforming records the server did not seal: planted, copied from elsewhere, or edited since."""


def _records(workspace: Workspace, outputs: SealedOutputs) -> _Found:
    """Read the records beside the ledger's outputs first, then up to :data:`MAX_RECORDS` others."""
    names = _ledger_records(workspace, outputs.owned())
    scanned, _ = walk(workspace.root, workspace.root, compile_glob(f"**/*{RECORD_SUFFIX}", True), True)
    others = [rel for rel, _ in scanned if rel not in names][:MAX_RECORDS]
    ignored: list[str] = []
    readable: list[tuple[str, dict[str, Any]]] = []
    for rel in [*names, *others]:
        content = _read(workspace.root / rel)
        output = (content or {}).get("output")
        if content is None or problems(content) or not isinstance(output, dict):
            ignored.append(rel)
        elif isinstance(output.get("sha256"), str):
            readable.append((rel, content))
        else:
            ignored.append(rel)
    claims: dict[str, list[_Claim]] = {}
    unverified: list[str] = []
    sealed_ones = verified([content for _, content in readable], outputs.verify_records)
    for (rel, content), sealed in zip(readable, sealed_ones, strict=True):
        if sealed:
            claims.setdefault(content["output"]["sha256"], []).append(_Claim(rel, content))
        else:
            unverified.append(rel)
    return _Found(claims, ignored, unverified)


def _ledger_records(workspace: Workspace, owned: list[str]) -> list[str]:
    """The record files beside the outputs the ledger knows (and records it keeps on their own)."""
    names = dict.fromkeys(o if o.endswith(RECORD_SUFFIX) else f"{o}{RECORD_SUFFIX}" for o in owned)
    return [name for name in names if (workspace.root / name).is_file()]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = read_bounded(path, MAX_RECORD_BYTES)
        if len(data) > MAX_RECORD_BYTES:
            return None
        content = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return content if isinstance(content, dict) else None
