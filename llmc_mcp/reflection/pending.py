"""Hints issued and not yet answered, kept beside the store so any server process can verify them.

A hint is the gate's promise: "this decision was asked about, answer it with this hash". The
promise has to outlive the process that made it: clients such as langchain-mcp-adapters start a
new server per tool call, so the persist arrives at a process that never saw the miss. So each
issued hint is a small file under ``<store>/pending/<domain>/<64 hex>.json`` carrying the decision,
the principals it was issued to (:func:`~llmc_mcp.sessions.principal`) and an expiry, authenticated
with the store's key (which workers cannot read). A file that does not verify, has expired, or was
not issued to the caller is no hint at all: the caller is told to rerun the operation.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from llmc_mcp.errors import StoreError
from llmc_mcp.reflection.store import KEY_PATTERN, JustificationStore, atomic_write

log = logging.getLogger(__name__)

PENDING_TTL = 24 * 3600.0
"""Seconds an unanswered hint stays valid: long enough for a human to look, short enough to expire."""
SWEEP_EVERY = 64
"""Issued hints between two sweeps of expired ones (a bounded directory listing)."""


class PendingHints:
    """Issued, unanswered hints of one workspace, shared by every server process of it."""

    def __init__(self, store: JustificationStore, *, ttl: float = PENDING_TTL):
        self.store = store
        self.folder = store.root / "pending"
        self.ttl = ttl
        self._issued = 0

    def issue(self, domain: str, key: str, content: dict[str, Any], principal: str | None) -> None:
        """Record that ``key`` was asked about for ``principal`` (adding to earlier askers).

        The read, merge and write run under an exclusive lock on the folder's lock file, so two
        sessions (threads or server processes) asking at once both stay in the list.
        """
        path = self._path(domain, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(path.parent / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            log.warning("pending hint %s/%s not recorded: %s", domain, path.name, exc)
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._issue(path, domain, key, content, principal)
        finally:
            os.close(lock)

    def _issue(
        self, path: Path, domain: str, key: str, content: dict[str, Any], principal: str | None
    ) -> None:
        principals = {principal}
        earlier = self._read(path, domain, key)
        if earlier is not None:
            principals.update(earlier["principals"])
        entry = {
            "key": key,
            "domain": domain,
            "content": content,
            "principals": sorted(principals, key=lambda p: (p is None, p or "")),
            "expires_at": time.time() + self.ttl,
        }
        try:
            entry["digest"] = self.store.sign_bytes(_canonical(entry))
            atomic_write(path, json.dumps(entry, ensure_ascii=False).encode())
        except (OSError, StoreError) as exc:
            # The hint is still given; answering it will fail with the store's own clear error.
            log.warning("pending hint %s/%s not recorded: %s", domain, path.name, exc)
            return
        self._issued += 1
        if self._issued % SWEEP_EVERY == 0:
            self.sweep()

    def find(self, domain: str, key: str, principal: str | None) -> dict[str, Any] | None:
        """The content issued for ``key`` to ``principal``, or None (unknown, foreign, expired, forged)."""
        entry = self._read(self._path(domain, key), domain, key)
        if entry is None or principal not in entry["principals"]:
            return None
        return entry["content"]

    def consume(self, domain: str, key: str) -> None:
        """The hint was answered (or its decision is already justified): nobody may answer it again."""
        with contextlib.suppress(FileNotFoundError):
            self._path(domain, key).unlink()

    def sweep(self) -> int:
        """Remove expired or unreadable hint files; returns how many."""
        removed = 0
        now = time.time()
        for path in self.folder.glob("*/*.json"):
            entry = self._read(path, path.parent.name, "sha256:" + path.stem)
            if entry is None or entry["expires_at"] < now:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
        return removed

    def _path(self, domain: str, key: str) -> Path:
        return self.folder / domain / f"{key.removeprefix('sha256:')}.json"

    def _read(self, path: Path, domain: str, key: str) -> dict[str, Any] | None:
        if not KEY_PATTERN.match(key):
            return None
        try:
            entry = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("pending hint %s/%s unreadable; ignored", domain, path.name)
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or entry.get("domain") != domain:
            return None
        digest = entry.pop("digest", None)
        if not isinstance(digest, str) or not self.store.verify_bytes(_canonical(entry), digest):
            log.warning("pending hint %s/%s failed authentication; ignored", domain, path.name)
            return None
        if not isinstance(entry.get("expires_at"), int | float) or entry["expires_at"] < time.time():
            return None
        return entry


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
