"""Hints issued and not yet answered, kept beside the store so any server process can verify them.

A hint is the gate's promise: "this decision was asked about, answer it with this hash". The
promise has to outlive the process that made it: clients such as langchain-mcp-adapters start a
new server per tool call, so the persist arrives at a process that never saw the miss. So each
issued hint is a small file under ``<store>/pending/<domain>/<principal tag>-<64 hex>.json``: one
per principal it was issued to (:func:`~llmc_mcp.sessions.principal`; the tag is a digest, since
workers can read the workspace), carrying the decision and an expiry, authenticated with the store's
key (which workers cannot read). A file that does not verify, has expired, or was not issued to the
caller is no hint at all: the caller is told to rerun the operation.

Hints are files a session makes the server write, so they are bounded like its outputs: at most
:data:`MAX_OPEN_HINTS` open questions per principal (refused past that, with the reason; work for no
session, such as the CLI or a benchmark in process, has no principal to bound), each file at
most :data:`MAX_HINT_BYTES`, their bytes charged to the principal's and the workspace's output quotas
(:meth:`charge_to`, which charges the store's records to their writers too), never written into the
disk's free-space reserve, and at most
:data:`MAX_PENDING_FILES` in a workspace. Each principal writes only its own files, so no lock is
shared between sessions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from llmc_mcp.config import Quota
from llmc_mcp.durable import atomic_write, read_bounded
from llmc_mcp.errors import LlmcError, StoreError
from llmc_mcp.reflection.specs import DOMAINS
from llmc_mcp.reflection.store import KEY_PATTERN, JustificationStore, owner_tag

log = logging.getLogger(__name__)


class WrittenOutput(Protocol):
    """An output on the ledger, as far as quotas care: its size and the session that wrote it."""

    @property
    def bytes(self) -> int: ...

    @property
    def session(self) -> str: ...


class ChargedLedger(Protocol):
    """What open hints are charged to: the output ledger (:class:`~llmc_mcp.outputs.OutputLedger`),
    whose quotas its outputs, the server's other files and these hints share. A protocol, because the
    ledger sits above the reflection records and imports them."""

    quota: Quota
    charged: list[Callable[[str], tuple[int, int]]]

    def outputs(self) -> Mapping[str, WrittenOutput]: ...


PENDING_TTL = 24 * 3600.0
"""Seconds an unanswered hint stays valid: long enough for a human to look, short enough to expire."""
MAX_OPEN_HINTS = 200
"""Open (unanswered, unexpired) questions one principal may hold: an agent answers what it is asked
before asking more; a sweep of 200 distinct decisions without one answer is a loop, not an analysis."""
MAX_HINT_BYTES = 512 * 1024
"""One hint file: its prompt and decision, a CRS definition (at most 100,000 characters) included."""
MAX_PENDING_FILES = 20_000
"""Hint files in one workspace, all principals together: what one listing may have to read."""


class ServerFilesQuota(LlmcError):
    """A file the server would write for a session (a hint, a record) would pass a quota or the reserve."""

    kind = "quota_exceeded"


class TooManyOpenHints(ServerFilesQuota):
    """A session holds as many open questions (hints) as it may, or their files would pass a quota."""


@dataclass(frozen=True)
class _Usage:
    files: int
    bytes: int


class PendingHints:
    """Issued, unanswered hints of one workspace, shared by every server process of it."""

    def __init__(self, store: JustificationStore, *, ttl: float = PENDING_TTL):
        self.store = store
        self.folder = store.root / "pending"
        self.ttl = ttl
        self.outputs: ChargedLedger | None = None

    def charge_to(self, outputs: ChargedLedger) -> None:
        """Count hint files and the store's records in ``outputs``' quotas (and outputs in theirs)."""
        self.outputs = outputs
        outputs.charged += [self.charge, self.store.charge]

    def admit_record(self, principal: str | None, size: int) -> None:
        """Refuse a justification record of ``size`` bytes past the principal's or the workspace's quota.

        Records are what the disk's reserve is kept for, so only the quotas apply.
        """
        if self.outputs is not None:
            check_quotas(
                self.outputs,
                principal,
                size,
                "The justification was not stored",
                "Remove outputs no longer needed with files.remove, or ask the user to raise the quota.",
            )

    def issue(self, domain: str, key: str, content: dict[str, Any], principal: str | None) -> None:
        """Record that ``key`` was asked about for ``principal``, or raise :class:`TooManyOpenHints`.

        A principal's own file is (re)written: asking the same question again renews its expiry and
        costs nothing more.
        """
        path = self._path(domain, key, principal)
        entry = {
            "key": key,
            "domain": domain,
            "content": content,
            "principal": principal,
            "expires_at": time.time() + self.ttl,
        }
        try:
            entry["digest"] = self.store.sign_bytes(_canonical(entry))
        except StoreError as exc:
            # The hint is still given; answering it will fail with the store's own clear error.
            log.warning("pending hint %s/%s not recorded: %s", domain, path.name, exc)
            return
        data = json.dumps(entry, ensure_ascii=False).encode()
        self._check(principal, path, len(data))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data)
        except OSError as exc:
            log.warning("pending hint %s/%s not recorded: %s", domain, path.name, exc)

    def find(self, domain: str, key: str, principal: str | None) -> dict[str, Any] | None:
        """The content issued for ``key`` to ``principal``, or None (unknown, foreign, expired, forged)."""
        entry = self._read(self._path(domain, key, principal), domain, key)
        if entry is None or entry.get("principal") != principal:
            return None
        return entry["content"]

    def consume(self, domain: str, key: str) -> None:
        """The hint was answered (or its decision is already justified): nobody may answer it again."""
        for path in (self.folder / domain).glob(f"*-{key.removeprefix('sha256:')}.json"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def sweep(self) -> int:
        """Remove expired or unreadable hint files; returns how many."""
        removed = 0
        for path, _size in self._listing():
            if self._read(path, path.parent.name, _key_of(path)) is None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
        return removed

    def charge(self, account: str) -> tuple[int, int]:
        """The bytes of ``account``'s open hints and of all of them (the output ledger's hook)."""
        mine, every = self._usage(owner_tag(account))
        return mine.bytes, every.bytes

    # ------------------------------------------------------------------------------------ internals

    def _check(self, principal: str | None, path: Path, size: int) -> None:
        """Refuse a hint file of ``size`` bytes past any bound; rewriting one's own costs only the change."""
        if size > MAX_HINT_BYTES:
            raise TooManyOpenHints(
                f"This decision's question would take {size} bytes to record, over {MAX_HINT_BYTES}.",
                fix="Pass a shorter definition (an EPSG code such as 'EPSG:32633' instead of a WKT).",
            )
        mine, every = self._usage(owner_tag(principal))
        replaced = _size(path)
        new_file = 0 if replaced else 1
        grows = size - replaced
        fix = (
            "Answer the hints you were given (persist their justifications) or drop the calls that "
            f"asked them; unanswered hints expire after {self.ttl / 3600:g} h."
        )
        if principal is not None and mine.files + new_file > MAX_OPEN_HINTS:
            raise TooManyOpenHints(
                f"This session already holds {mine.files} open questions (justification hints not yet "
                f"answered), the most one session may hold ({MAX_OPEN_HINTS}).",
                fix=fix,
            )
        if every.files + new_file > MAX_PENDING_FILES:
            raise TooManyOpenHints(
                f"The workspace holds {every.files} open questions of all sessions, the most it may hold "
                f"({MAX_PENDING_FILES}).",
                fix=fix,
            )
        if self.outputs is not None:
            check_quotas(self.outputs, principal, grows, "The question was not recorded", fix)
            _check_reserve(self.outputs, self.store.root, grows)

    def _usage(self, tag: str) -> tuple[_Usage, _Usage]:
        """The files and bytes of one tag's open hints and of all of them, from a listing alone.

        A file older than the TTL has expired whatever it says (each write renews it), so it is
        deleted here, not counted.
        """
        mine = every = _Usage(0, 0)
        stale = time.time() - self.ttl
        for path, info in self._listing():
            if info.st_mtime < stale:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            every = _Usage(every.files + 1, every.bytes + info.st_size)
            if path.name.startswith(tag + "-"):
                mine = _Usage(mine.files + 1, mine.bytes + info.st_size)
        return mine, every

    def _listing(self) -> Iterator[tuple[Path, os.stat_result]]:
        for domain in sorted(DOMAINS):
            try:
                entries = list(os.scandir(self.folder / domain))
            except FileNotFoundError:
                continue
            for entry in entries:
                if not entry.name.endswith(".json") or entry.name.startswith("."):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    yield Path(entry.path), entry.stat(follow_symlinks=False)

    def _path(self, domain: str, key: str, principal: str | None) -> Path:
        return self.folder / domain / f"{owner_tag(principal)}-{key.removeprefix('sha256:')}.json"

    def _read(self, path: Path, domain: str, key: str) -> dict[str, Any] | None:
        if not KEY_PATTERN.match(key):
            return None
        try:
            raw = read_bounded(path, MAX_HINT_BYTES)
        except FileNotFoundError:
            return None
        except OSError:
            log.warning("pending hint %s/%s unreadable; ignored", domain, path.name)
            return None
        try:
            entry = json.loads(raw) if len(raw) <= MAX_HINT_BYTES else None
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or entry.get("key") != key or entry.get("domain") != domain:
            return None
        digest = entry.pop("digest", None)
        if not isinstance(digest, str) or not self.store.verify_bytes(_canonical(entry), digest):
            log.warning("pending hint %s/%s failed authentication; ignored", domain, path.name)
            return None
        if not isinstance(entry.get("expires_at"), int | float) or entry["expires_at"] < time.time():
            return None
        return entry


def check_quotas(outputs: ChargedLedger, principal: str | None, grows: int, what: str, fix: str) -> None:
    """Refuse ``grows`` more bytes for ``principal`` past its or the workspace's output quota, which its
    outputs and every file charged to the ledger (:attr:`ChargedLedger.charged`) share."""
    quota = outputs.quota
    account = principal or ""
    records = outputs.outputs()
    charged = [hook(account) for hook in outputs.charged]
    session = sum(r.bytes for r in records.values() if r.session == account) + sum(m for m, _ in charged)
    workspace = sum(r.bytes for r in records.values()) + sum(e for _, e in charged)
    if session + grows > quota.session_bytes:
        raise ServerFilesQuota(
            f"{what}: this session's outputs, workflow states, open questions and justifications take "
            f"{_mib(session)}, and its quota is {_mib(quota.session_bytes)} (--quota-session-mb).",
            fix=fix,
        )
    if workspace + grows > quota.workspace_bytes:
        raise ServerFilesQuota(
            f"{what}: the workspace's outputs, workflow states, open questions and justifications take "
            f"{_mib(workspace)}, and its quota is {_mib(quota.workspace_bytes)} (--quota-workspace-mb).",
            fix=fix,
        )


def _check_reserve(outputs: ChargedLedger, folder: Path, grows: int) -> None:
    disk = os.statvfs(folder if folder.is_dir() else folder.parent)
    free = disk.f_bavail * disk.f_frsize
    if free - grows < outputs.quota.reserve_bytes:
        raise ServerFilesQuota(
            f"The question was not recorded: the disk has {_mib(free)} free and "
            f"{_mib(outputs.quota.reserve_bytes)} are kept free for the server's own records "
            "(--disk-reserve-mb).",
            fix="Ask the user to free disk space.",
        )


def _key_of(path: Path) -> str:
    """The key a hint file is named for (its name after the principal's tag)."""
    return "sha256:" + path.stem.rpartition("-")[2]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
