"""The writes in flight: granted by :meth:`OutputLedger.begin`, not yet committed or given up.

Each is kept in memory with the session it was granted to, and journaled on disk without it
(``journal/<server>/<token>.json``) *before* its temporary file exists, so whatever a write leaves
behind can be deleted: by the session that gave it up, when its worker is gone, or, for a server
process that is gone, by the next server's sweep. :mod:`.ledger` decides the writes; this module
remembers them and cleans up after them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmc_mcp.durable import read_bounded
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.outputs.disk import family, is_alive, write_json
from llmc_mcp.workspace import Workspace

log = logging.getLogger(__name__)

MAX_ENTRY_BYTES = 64 * 1024
"""A journal entry names one write (a token, a path, its folders): a few hundred bytes. The sweep
reads entries a worker could have replaced, so each is read bounded and never through a FIFO."""


class Journal:
    """The writes in flight of one server process (``owner``) on one workspace; thread-safe under ``lock``."""

    def __init__(self, workspace: Workspace, folder: Path, owner: str, lock: threading.RLock):
        """``lock`` is the ledger's: a write leaves the journal in the same step as it enters the ledger."""
        self.workspace = workspace
        self.folder = folder
        self.owner = owner
        self._own = folder / owner
        self._lock = lock
        self._pending: dict[str, dict[str, Any]] = {}

    def add(self, entry: dict[str, Any]) -> None:
        """Journal a granted write (durably, before its file exists) and remember its session."""
        # The session key stays in memory: on disk, where workers can read, it would name a session.
        write_json(self._own / f"{entry['token']}.json", {k: v for k, v in entry.items() if k != "worker"})
        self._pending[entry["token"]] = entry

    def entry(self, session: str, token: str) -> dict[str, Any]:
        """The write ``token`` granted to ``session``, or a refusal."""
        entry = self._pending.get(token)
        if entry is None or entry["worker"] != session:
            raise InvalidArgument("Unknown or expired output grant.", fix="Run the operation again.")
        return entry

    def abort(self, session: str, token: str) -> None:
        """A write failed: delete what it left and the directories it created."""
        entry = self._pending.get(token)
        if entry is not None and entry["worker"] == session:
            self.discard(entry)

    def discard_worker(self, session: str) -> int:
        """A session's worker is gone: clean up after every write it had in flight. Returns how many."""
        with self._lock:
            entries = [e for e in self._pending.values() if e["worker"] == session]
        for entry in entries:
            self.discard(entry)
        return len(entries)

    def discard(self, entry: Mapping[str, Any]) -> None:
        """Delete what a write left, keeping the directories other writes in flight use, and forget it."""
        with self._lock:
            others = [e for e in self._pending.values() if e is not entry]
            busy = {Path(e["tmp"]).parent for e in others}
            self._cleanup(entry, keep=busy)
            self.forget(entry)

    def forget(self, entry: Mapping[str, Any]) -> None:
        """The write is over (committed or cleaned up): drop it and its journal file."""
        self._pending.pop(entry["token"], None)
        (self._own / f"{entry['token']}.json").unlink(missing_ok=True)

    def in_flight_bytes(self) -> int:
        """The bytes written so far by the writes in flight, charged to the workspace's quota."""
        total = 0
        for entry in self._pending.values():
            with contextlib.suppress(OSError):
                total += sum(p.stat().st_size for p in family(self.workspace.root / entry["tmp"]))
        return total

    def sweep(self) -> int:
        """Clean up after the writes in flight of server processes that are gone. Returns how many."""
        if not self.folder.is_dir():
            return 0
        swept = 0
        for folder in self.folder.iterdir():
            if folder.name == self.owner or is_alive(folder.name):
                continue
            for path in folder.glob("*.json"):
                try:
                    data = read_bounded(path, MAX_ENTRY_BYTES)
                    if len(data) > MAX_ENTRY_BYTES:
                        raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes")
                    entry = json.loads(data)
                    self._cleanup(entry)
                    swept += 1
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    log.warning("output journal entry %s unreadable (%s); removed", path.name, exc)
                path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                folder.rmdir()
        if swept:
            log.warning("removed the temporary files of %d writes a previous server left unfinished", swept)
        return swept

    def _cleanup(self, entry: Mapping[str, Any], keep: Iterable[Path] = ()) -> None:
        """Delete the temporary file and its sidecars, then the directories the write created.

        A journal read back from disk is not trusted further than the workspace: the workers can
        write there too, so nothing it names outside the workspace is touched.
        """
        root = self.workspace.root
        tmp = root / entry["tmp"]
        if not tmp.resolve().is_relative_to(root) or not Path(entry["tmp"]).name.startswith("."):
            return
        for path in family(tmp):
            path.unlink(missing_ok=True)
        for name in reversed(entry.get("dirs", [])):
            folder = root / name
            if any(Path(name) == busy or Path(name) in busy.parents for busy in keep):
                break
            if not folder.resolve().is_relative_to(root) or folder.resolve() == root:
                break
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (another write uses it) or already gone
