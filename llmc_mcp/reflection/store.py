"""The justification store: one authenticated JSON record per cache key, written atomically.

Layout: ``<workspace>/.preflight/justifications/<domain>/<64 hex>.json``. The
domain comes from a fixed set and the file name from a key that must match
``sha256:<64 hex>``, so nothing a caller passes becomes a path component
unchecked, and names are portable (no ``:``).

Each record carries an HMAC-SHA256 of its own content, keyed with a secret
that only the server process reads. The key lives outside the workspace, in the
server's private state folder (:func:`state_dir`, mode 0700), one file per
workspace (:func:`key_path`, mode 0600): workers may read the whole workspace,
and GDAL opens files there by names the path policy never sees. A record that
fails to parse, to validate or to authenticate is a miss and a log line, never
a crash: a hand-edited, truncated or forged file cannot unlock the gate.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from llmc_mcp.durable import (
    MAX_RECORD_BYTES,
    atomic_write,
    exclusive_write,
    os_reason,
    read_bounded,
)
from llmc_mcp.errors import InvalidArgument, RecordExists, StoreError
from llmc_mcp.reflection.schema import Justification, PlainText, text_problem
from llmc_mcp.reflection.specs import DOMAINS
from llmc_mcp.state import check_private, key_path, load_or_create_secret

log = logging.getLogger(__name__)

KEY_PATTERN = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
LEGACY_KEY_NAME = "secret.key"
"""Where the key used to be, in ``<workspace>/.preflight/``; moved out on first use."""
_RECORD_VERSION = 1
SUPERSEDED_DIR = "superseded"
"""Inside each domain's folder: the records a newer one replaced or the owner revoked, kept as they
were (re-signed with the link to their successor), named ``<key hex>.<n>.json``."""
MAX_SUPERSEDED = 100
"""Superseded records kept per key: a writer replacing its own record in a loop fills no disk."""
TALLY_DIR = "writers"
"""Beside the records folder: one folder per writer (:func:`owner_tag`) of hard links to its records."""
MAX_ANSWERED_BY_CHARS = 256
MAX_REVIEW_CHARS = 2000


class Record(BaseModel):
    """What the store keeps for one key; ``digest`` authenticates everything else."""

    version: int = _RECORD_VERSION
    key: str
    domain: str
    operation: str
    prompt: str
    prompt_args: dict[str, Any]
    prompt_hash: str
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="microseconds"))
    """Microseconds: a record superseded within the second it was written is told from its successor
    (provenance names the justification an output was made under by key and this time)."""
    justification: Justification
    answered_by: PlainText | None = Field(None, max_length=MAX_ANSWERED_BY_CHARS)
    """Who wrote the justification when it was not the agent: ``sampling: <model>`` for one the host's
    model gave when the server asked it (:mod:`llmc_mcp.reflection.sampling`)."""
    review: dict[str, Any] | None = None
    """A person's review of a low-confidence justification: ``{"action": "accept", ...}``."""
    supersedes: dict[str, Any] | None = None
    """The record this one replaced (``created_at``, ``digest``, ``file``): kept, never overwritten."""
    superseded_by: dict[str, Any] | None = None
    """On a record kept under ``superseded/``: its successor's ``created_at`` (the successor is the
    key's record, whose ``supersedes`` names this one by digest), or ``{"revoked_at": ..., "by": ...}``
    when the workspace's owner revoked it without a successor."""
    digest: str = ""

    @field_validator("review")
    @classmethod
    def _bounded_review(cls, review: dict[str, Any] | None) -> dict[str, Any] | None:
        """A review holds what a person (through their client) typed: bounded like every client text."""
        if review is None:
            return None
        size = len(json.dumps(review, ensure_ascii=False, default=str))
        if size > MAX_REVIEW_CHARS:
            raise ValueError(f"the review is {size} characters serialized; the limit is {MAX_REVIEW_CHARS}")
        for name, value in review.items():
            if isinstance(value, str) and (problem := text_problem(value, MAX_REVIEW_CHARS)) is not None:
                raise ValueError(f"review.{name} {problem}")
        return review

    def payload(self) -> bytes:
        """The canonical bytes the digest covers: stable JSON of every field but the digest.

        Fields added since version 1 are covered when set and left out when not, so a record written
        before they existed verifies as it always did.
        """
        optional = ("answered_by", "review", "supersedes", "superseded_by")
        unset = {name for name in optional if getattr(self, name) is None}
        data = self.model_dump(mode="json", exclude={"digest", *unset})
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def check_key(key: object) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise InvalidArgument(
            f"{str(key)[:80]!r} is not a justification hash.",
            fix="Pass the 'hash' of a reflection hint exactly as given: 'sha256:' and 64 hex digits.",
        )
    return key


def check_domain(domain: object) -> str:
    if not isinstance(domain, str) or domain not in DOMAINS:
        raise InvalidArgument(
            f"{str(domain)[:80]!r} is not a reflection domain.",
            fix=f"Pass the 'domain' of the hint; domains are: {', '.join(sorted(DOMAINS))}.",
        )
    return domain


class JustificationStore:
    """Authenticated, atomically written justification records under ``<root>/justifications``."""

    def __init__(self, root: Path, *, secret: bytes | None = None):
        """``root`` is ``<workspace>/.preflight``; without ``secret`` the key is the workspace's own,
        kept in :func:`state_dir`, which must be out of every worker's reach (checked here)."""
        self.root = root
        self.records_dir = root / "justifications"
        self._secret = secret
        self._key_path = None if secret is not None else key_path(root.parent)
        if self._key_path is not None:
            check_private(self._key_path.parent, root.parent)

    def path_for(self, domain: str, key: str) -> Path:
        return self.records_dir / check_domain(domain) / f"{check_key(key).removeprefix('sha256:')}.json"

    def get(self, domain: str, key: str) -> Record | None:
        """The verified record for ``key``, or None (missing, unreadable, forged or stale)."""
        path = self.path_for(domain, key)
        try:
            raw = read_bounded(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("justification %s unreadable: %s", path.name, exc)
            return None
        return self._verify(raw, domain, key, path)

    def put(
        self, record: Record, *, owner: str | None = None, admit: Callable[[int], None] | None = None
    ) -> Record:
        """Sign and write a record that must not exist yet: records are write-once.

        ``admit(size)`` may refuse the write before anything is written (a quota); the record is then
        tallied to ``owner`` (a principal), whose quota its bytes are charged to (:meth:`charge`).

        The record is written in full under a temporary name and then hard-linked to its own name:
        ``link`` fails if the name exists, so of two concurrent writers exactly one wins and a
        reader never sees a partial record. A file already there that does not verify (truncated,
        forged, stale) is not a record and is replaced; a valid one is kept and
        :class:`RecordExists` raised.
        """
        revoked = self._revoked_predecessor(record.domain, record.key)
        if revoked is not None and record.supersedes is None:
            record = record.model_copy(update={"supersedes": revoked})
        signed = record.model_copy(update={"digest": self._sign(record)})
        path = self.path_for(signed.domain, signed.key)
        data = _encode(signed)
        if len(data) > MAX_RECORD_BYTES:
            raise InvalidArgument(
                f"The {signed.domain} record would take {len(data)} bytes; a record may take at most "
                f"{MAX_RECORD_BYTES}, so that every record and the provenance that cites it stays readable.",
                fix="Shorten the justification's text fields (reasoning, not data) and persist again.",
            )
        if admit is not None:
            admit(len(data))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            linked = exclusive_write(path, data)
            if not linked:
                existing = self.get(signed.domain, signed.key)
                if existing is not None:
                    raise RecordExists(
                        f"The {signed.domain} decision {signed.key} is already justified (recorded "
                        f"{existing.created_at}); only the session that wrote it may replace it.",
                        fix="Nothing to persist: run the operation again, it will proceed. If this session "
                        "wrote it and it is wrong, persist the right one with supersede=True.",
                    )
                atomic_write(path, data)
            if owner is not None:
                self._tally(path, owner)
        except OSError as exc:
            raise _write_failed(exc) from None
        return signed

    def written_by(self, domain: str, key: str, owner: str | None) -> bool:
        """Whether the record for ``key`` is the one ``owner`` wrote (its tally links to the same file)."""
        path = self.path_for(domain, key)
        tally = self.root / TALLY_DIR / owner_tag(owner) / f"{path.parent.name}-{path.name}"
        try:
            return os.path.samefile(path, tally)
        except OSError:
            return False

    def supersede(
        self, record: Record, *, owner: str | None, admit: Callable[[int], None] | None = None
    ) -> Record:
        """Replace the record for ``record.key`` by ``record``, keeping the old one linked to it.

        The caller has checked that ``owner`` wrote the current record (:meth:`written_by`). The old
        record is first kept under ``superseded/``, re-signed with ``superseded_by``; only then does
        the new one, which names it in ``supersedes``, take the key's name (``os.replace``): a crash
        between the two leaves the old record current and a copy of it, never neither.
        """
        current = self.get(record.domain, record.key)
        if current is None:
            return self.put(record, owner=owner, admit=admit)
        # The successor is found by its key and created_at (its digest covers the link back here,
        # so the kept copy cannot name it without a circle).
        new = record.model_copy(update={"supersedes": None})
        kept = self._keep_superseded(current, {"created_at": new.created_at}, admit)
        if owner is not None:
            self._tally(self.records_dir / record.domain / kept, owner)
        linked = new.model_copy(
            update={"supersedes": {"created_at": current.created_at, "digest": current.digest, "file": kept}}
        )
        signed = linked.model_copy(update={"digest": self._sign(linked)})
        data = _encode(signed)
        if admit is not None:
            admit(len(data))
        path = self.path_for(signed.domain, signed.key)
        try:
            old_tallies = list(self.root.glob(f"{TALLY_DIR}/*/{signed.domain}-{path.name}"))
            atomic_write(path, data)
            for tally in old_tallies:
                tally.unlink(missing_ok=True)
            if owner is not None:
                self._tally(path, owner)
        except OSError as exc:
            raise _write_failed(exc) from None
        return signed

    def revoke(self, domain: str, key: str, *, by: str) -> Record | None:
        """Withdraw the record for ``key`` (the workspace owner's command line): it is kept under
        ``superseded/`` marked revoked, and the next operation making the decision asks again."""
        current = self.get(domain, key)
        if current is None:
            return None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        self._keep_superseded(current, {"revoked_at": now, "by": by}, None)
        path = self.path_for(domain, key)
        for tally in self.root.glob(f"{TALLY_DIR}/*/{domain}-{path.name}"):
            tally.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        return current

    def superseded_records(self) -> Iterator[Record]:
        """Every verified record kept under a domain's ``superseded/`` folder."""
        for domain in sorted(DOMAINS):
            folder = self.records_dir / domain / SUPERSEDED_DIR
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                key = "sha256:" + path.name.split(".", 1)[0]
                if not KEY_PATTERN.match(key):
                    continue
                with contextlib.suppress(OSError):
                    record = self._verify(read_bounded(path), domain, key, path)
                    if record is not None and record.superseded_by is not None:
                        yield record

    def _keep_superseded(
        self, current: Record, successor: dict[str, Any], admit: Callable[[int], None] | None
    ) -> str:
        """Write ``current``, marked with its successor, under a new name in ``superseded/``."""
        folder = self.records_dir / current.domain / SUPERSEDED_DIR
        stem = current.key.removeprefix("sha256:")
        marked = current.model_copy(update={"superseded_by": successor, "digest": ""})
        marked = marked.model_copy(update={"digest": self._sign(marked)})
        data = _encode(marked)
        if admit is not None:
            admit(len(data))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for n in range(MAX_SUPERSEDED):
                target = folder / f"{stem}.{n}.json"
                if exclusive_write(target, data):
                    return f"{SUPERSEDED_DIR}/{target.name}"
        except OSError as exc:
            raise StoreError(
                f"Could not keep the superseded justification ({os_reason(exc)}).",
                fix="Free disk space or make <workspace>/.preflight writable, then try again.",
            ) from None
        raise InvalidArgument(
            f"The {current.domain} decision {current.key} has been replaced {MAX_SUPERSEDED} times already.",
            fix="Ask the workspace's owner to prune its old records (llmc-mcp justifications prune --key).",
        )

    def records(self) -> Iterator[Record]:
        """Every verified record, for reports; bad files are skipped and logged."""
        if not self.records_dir.is_dir():
            return
        for domain in sorted(DOMAINS):
            folder = self.records_dir / domain
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                key = "sha256:" + path.stem
                if not KEY_PATTERN.match(key):
                    continue
                with contextlib.suppress(OSError):
                    record = self._verify(read_bounded(path), domain, key, path)
                    if record is not None:
                        yield record

    def prune(self, drop: Callable[[Record], bool]) -> list[Record]:
        """Delete the verified records ``drop`` selects; the user's command line calls this, never an agent.

        Records are write-once for agents (no tool deletes one); a person tidying a workspace may. A
        pruned decision is asked for again the next time an operation makes it.
        """
        dropped = [record for record in self.records() if drop(record)]
        for record in dropped:
            path = self.path_for(record.domain, record.key)
            for tally in self.root.glob(f"{TALLY_DIR}/*/{record.domain}-{path.name}"):
                tally.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        return dropped

    def _revoked_predecessor(self, domain: str, key: str) -> dict[str, Any] | None:
        """The newest revoked record of ``key``, as a ``supersedes`` link for the record that follows it."""
        folder = self.records_dir / domain / SUPERSEDED_DIR
        stem = check_key(key).removeprefix("sha256:")
        revoked: list[tuple[Record, Path]] = []
        for path in sorted(folder.glob(f"{stem}.*.json")) if folder.is_dir() else ():
            with contextlib.suppress(OSError):
                record = self._verify(read_bounded(path), domain, key, path)
                if record is not None and "revoked_at" in (record.superseded_by or {}):
                    revoked.append((record, path))
        if not revoked:
            return None
        record, path = max(revoked, key=lambda pair: pair[0].created_at)
        kept = f"{SUPERSEDED_DIR}/{path.name}"
        return {"created_at": record.created_at, "digest": record.digest, "file": kept}

    def charge(self, account: str) -> tuple[int, int]:
        """The bytes of the records ``account`` wrote and of all records, from listings alone (the
        output ledger's hook: records count in the session's and the workspace's quotas)."""
        mine = sum(size for _, size in _sizes(self.root / TALLY_DIR / owner_tag(account)))
        folders = [self.records_dir / domain for domain in sorted(DOMAINS)]
        folders += [folder / SUPERSEDED_DIR for folder in folders]
        every = sum(size for folder in folders for _, size in _sizes(folder))
        return mine, every

    def _tally(self, path: Path, owner: str) -> None:
        """A hard link to the record under its writer's tag: its records are listed without reading one."""
        tally = self.root / TALLY_DIR / owner_tag(owner) / f"{path.parent.name}-{path.name}"
        try:
            tally.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, tally)
        except FileExistsError:
            pass
        except OSError as exc:  # a file system without hard links: the record counts for the workspace only
            log.warning("justification %s not tallied to its writer: %s", path.name, os_reason(exc))

    def _verify(self, raw: bytes, domain: str, key: str, path: Path) -> Record | None:
        if len(raw) > MAX_RECORD_BYTES:
            log.warning("justification %s/%s is larger than any record; ignored", domain, path.name)
            return None
        try:
            record = Record.model_validate_json(raw)
        except ValidationError as exc:
            log.warning("justification %s/%s is not a valid record: %s", domain, path.name, exc.error_count())
            return None
        if record.key != key or record.domain != domain:
            log.warning("justification %s/%s is filed under the wrong key", domain, path.name)
            return None
        if not hmac.compare_digest(record.digest, self._sign(record)):
            log.warning("justification %s/%s failed authentication; ignored", domain, path.name)
            return None
        return record

    def _sign(self, record: Record) -> str:
        return self.sign_bytes(record.payload())

    def sign_bytes(self, payload: bytes) -> str:
        """``hmac-sha256:<hex>`` of ``payload`` under the store's key (records, pending hints)."""
        mac = hmac.new(self._key(), payload, hashlib.sha256).hexdigest()
        return f"hmac-sha256:{mac}"

    def verify_bytes(self, payload: bytes, digest: str) -> bool:
        return hmac.compare_digest(digest, self.sign_bytes(payload))

    def _key(self) -> bytes:
        if self._secret is None:
            assert self._key_path is not None
            self._secret = load_or_create_secret(self._key_path, legacy=self.root / LEGACY_KEY_NAME)
        return self._secret


def _write_failed(exc: OSError) -> StoreError:
    return StoreError(
        f"Could not write the justification store ({os_reason(exc)}).",
        fix="Free disk space or make <workspace>/.preflight writable, then persist again.",
    )


def _encode(record: Record) -> bytes:
    return json.dumps(record.model_dump(mode="json"), indent=1, ensure_ascii=False).encode()


def owner_tag(principal: str | None) -> str:
    """A principal as a file-name part (a digest: principals go into files workers can read)."""
    return hashlib.sha256((principal or "").encode()).hexdigest()[:12]


def _sizes(folder: Path) -> Iterator[tuple[str, int]]:
    """The ``.json`` files of ``folder`` and their sizes, from one listing."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.endswith(".json") and not entry.name.startswith("."):
            with contextlib.suppress(FileNotFoundError):
                yield entry.name, entry.stat(follow_symlinks=False).st_size
