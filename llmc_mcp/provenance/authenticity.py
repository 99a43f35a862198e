"""Which provenance records the server wrote: each carries an HMAC under the server's key, added at commit.

A record is a workspace file, and anyone who can write the workspace (the user, another program, a
worker that escaped its confinement) can plant one that conforms to the format. Conformance says a
record is well formed, never that llmc-mcp wrote it. So the server seals every record it commits
(:func:`seal`, called by :meth:`llmc_mcp.outputs.OutputLedger.commit`): it reads the record the
worker wrote beside the temporary output, checks what it can check on its own, and adds
``x-llmc:signature``, an HMAC-SHA256 under the justification store's key
(:class:`~llmc_mcp.reflection.store.JustificationStore`, the key kept in the server's state folder,
out of every worker's reach) of the SHA-256 of the record's canonical JSON without the signature.

What the server checks before it signs, so that a worker escape cannot have it sign a forgery: the
record conforms; it describes the output being committed (``output.path`` is the grant's ``dst``,
``output.sha256`` the digest of the bytes the server itself hashed), or, committed on its own, it
describes no output (the record of a failed run); and every justification it credits is a decision
on record in the store. A worker can still misreport which inputs it read: the server cannot see
that, and an escaped worker computes what it likes anyway; it cannot credit a decision that was
never made, nor have the server vouch for bytes it did not commit.

Verification needs only the content digest and the signature (:func:`claim`), so a worker, which
cannot read the key, asks the server (:meth:`llmc_mcp.outputs.OutputGuard.verify_records`): a
yes/no per record, which teaches nothing about the key.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from llmc_mcp.durable import read_bounded
from llmc_mcp.errors import Refused
from llmc_mcp.provenance.conformance import PRODUCER_PREFIX, problems

SIGNATURE_FIELD = f"{PRODUCER_PREFIX}signature"
"""Where a sealed record carries its signature (an extension field: the format allows them)."""

MAX_RECORD_BYTES = 1 << 20
"""The largest record read back anywhere: sealed at commit, walked by lineage."""

MAX_CLAIMS = 5000
"""Records one verification request may carry."""

_PAYLOAD_PREFIX = b"llmc-mcp provenance record 1\n"
"""Keeps a record's signature from passing for any other text the same key signs (ledger entries,
justifications, pending hints)."""


Claim = tuple[str, str]
"""``(content digest, signature)`` of one record: all a verifier needs."""

RecordVerifier = Callable[[Sequence[Claim]], list[bool]]
"""Which of the claims carry the server's signature; one answer per claim, in order."""


def content_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of the record's canonical JSON (sorted keys, no spaces), its signature left out."""
    body = {name: value for name, value in record.items() if name != SIGNATURE_FIELD}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def claim(record: Mapping[str, Any]) -> Claim | None:
    """What verifying ``record`` takes, or None when it carries no signature at all."""
    signature = record.get(SIGNATURE_FIELD)
    if not isinstance(signature, str) or len(signature) > 200:
        return None
    return content_digest(record), signature


def verify_claims(signer: Signer, claims: Sequence[Claim]) -> list[bool]:
    """The server's answer to :data:`RecordVerifier` (bounded: :data:`MAX_CLAIMS` per call)."""
    if len(claims) > MAX_CLAIMS:
        raise Refused(
            f"{len(claims)} records in one verification; at most {MAX_CLAIMS} are checked at once.",
            fix=f"Ask about at most {MAX_CLAIMS} records per request.",
        )
    answers = []
    for item in claims:
        digest, signature = (item[0], item[1]) if len(item) == 2 else ("", "")
        valid = isinstance(digest, str) and isinstance(signature, str) and len(digest) == 64
        answers.append(valid and signer.verify_bytes(_PAYLOAD_PREFIX + digest.encode(), signature))
    return answers


def local_verifier(signer: Signer) -> RecordVerifier:
    """A :data:`RecordVerifier` for a process that holds the key (the server, the command line)."""
    return lambda claims: verify_claims(signer, claims)


def verified(records: Sequence[Mapping[str, Any]], verify: RecordVerifier) -> list[bool]:
    """Which of ``records`` the server sealed, asking ``verify`` in batches of :data:`MAX_CLAIMS`."""
    claims = [claim(record) for record in records]
    signed = [(i, c) for i, c in enumerate(claims) if c is not None]
    answers = [False] * len(records)
    for start in range(0, len(signed), MAX_CLAIMS):
        batch = signed[start : start + MAX_CLAIMS]
        for (index, _), ok in zip(batch, verify([c for _, c in batch]), strict=True):
            answers[index] = bool(ok)
    return answers


def seal(
    signer: Signer,
    path: Path,
    *,
    dst: str,
    output_sha256: str | None,
    decision_known: Callable[[str, str], bool],
) -> None:
    """Check the record the worker wrote at ``path`` and rewrite it signed; raise :class:`Refused` if it
    is not one the server can vouch for (nothing is signed then).

    ``output_sha256`` is the digest the server computed of the output being committed under ``dst``;
    None when the record is committed on its own (the record of a failed run, with no output).
    """
    record = _read_for_seal(path, dst)
    found = problems(record)
    output = record.get("output")
    if output_sha256 is None:
        if output is not None:
            found.append("a record committed without an output claims one")
    elif not isinstance(output, dict) or output.get("path") != dst or output.get("sha256") != output_sha256:
        found.append(f"its `output` is not '{dst}' with the bytes being committed")
    for item in record.get(f"{PRODUCER_PREFIX}justifications") or []:
        domain, key = (item.get("domain"), item.get("key")) if isinstance(item, dict) else (None, None)
        if not isinstance(domain, str) or not isinstance(key, str) or not decision_known(domain, key):
            found.append(f"it credits a decision that is not on record ({str(key)[:80]!r})")
    if found:
        raise Refused(
            f"The provenance record of '{dst}' was not signed: {'; '.join(found[:5])}. Nothing was written.",
            fix="Run the operation again; if it persists, report it with the server log.",
        )
    record[SIGNATURE_FIELD] = signer.sign_bytes(_PAYLOAD_PREFIX + content_digest(record).encode())
    data = (json.dumps(record, indent=2, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _read_for_seal(path: Path, dst: str) -> dict[str, Any]:
    """The record at ``path``: a regular file (no link), at most :data:`MAX_RECORD_BYTES`, a JSON object."""
    refused = Refused(
        f"The provenance record of '{dst}' is not a readable record of at most {MAX_RECORD_BYTES} bytes; "
        "it was not signed. Nothing was written.",
        fix="Run the operation again; if it persists, report it with the server log.",
    )
    try:
        data = read_bounded(path, MAX_RECORD_BYTES)
    except OSError:
        raise refused from None
    try:
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError("too large")
        record = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise refused from None
    if not isinstance(record, dict):
        raise refused
    return record


class Signer(Protocol):
    """What authenticates ledger entries: :class:`~llmc_mcp.reflection.store.JustificationStore`."""

    def sign_bytes(self, payload: bytes) -> str: ...

    def verify_bytes(self, payload: bytes, digest: str) -> bool: ...


class RecordSigner(Signer, Protocol):
    """What seals provenance records at commit: a :class:`Signer` that also knows the decisions on record
    (a record may credit only those)."""

    def get(self, domain: str, key: str) -> object | None: ...
