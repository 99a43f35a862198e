"""The server's account of what llmc-mcp writes: quotas checked, writes journaled, outputs ledgered.

The writes in flight, and the cleanup after those given up, are :mod:`.journal`'s; quota figures and
refusal texts are :mod:`.accounting`'s; file work (moves, removals with sidecars) is :mod:`.disk`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llmc_mcp.capture import sha256_of
from llmc_mcp.config import Quota
from llmc_mcp.durable import read_bounded
from llmc_mcp.errors import InvalidArgument, LlmcError, NotFound, Refused
from llmc_mcp.outputs.accounting import (
    FREE_OUTPUTS,
    Standing,
    account_of,
    disk_free,
    reserve_text,
    session_bytes_text,
    size_text,
    usage_of,
    workspace_bytes_text,
)
from llmc_mcp.outputs.disk import (
    family,
    file_identity,
    move_into_place,
    now_text,
    process_identity,
    unlink_with_sidecars,
    write_json,
)
from llmc_mcp.outputs.journal import Journal
from llmc_mcp.outputs.models import (
    SIDECAR_SUFFIXES,
    Grant,
    OutputRecord,
    QuotaExceeded,
    Removal,
    RemoveRefused,
)
from llmc_mcp.provenance.authenticity import Claim, RecordSigner, seal, verify_claims
from llmc_mcp.provenance.record import RECORD_SUFFIX
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.workspace import Workspace, check_relative_name

log = logging.getLogger(__name__)

MAX_LEDGER_BYTES = 64 * 1024 * 1024
"""The ledger file is read whole: a workspace at its default file quota (10,000 outputs) writes a few
MiB. Workers can write where it lives, so it is read as a regular file of at most this size (never a
FIFO or a device planted under its name)."""


class OutputLedger:
    """The quotas, journal and ledger of one workspace, for one server process; thread-safe."""

    def __init__(self, workspace: Workspace, quota: Quota | None = None, signer: RecordSigner | None = None):
        """``signer`` defaults to the workspace's justification store (its key is read at first use)."""
        self.workspace = workspace
        self.quota = quota or Quota()
        self._signer = signer
        self.dir = workspace.root / ".llmc" / "outputs"
        self.owner = process_identity(os.getpid())
        self._ledger = self.dir / "ledger.json"
        self._lock = threading.RLock()
        self.journal = Journal(workspace, self.dir / "journal", self.owner, self._lock)
        self.charged: list[Callable[[str], tuple[int, int]]] = []
        """Other files the server writes for sessions, charged to the same byte quotas (workflow states,
        pending hints, justification records): each gives the bytes of one account's and of everyone's."""

    # -------------------------------------------------------------------------------------- writing

    def begin(self, session: str, dst: str) -> Grant:
        """Grant one write of ``dst`` to ``session``, or raise :class:`QuotaExceeded`."""
        path = self.workspace.output_path(dst, argument="dst")
        rel = self.workspace.relative(path)
        account = account_of(session)
        with self._locked():
            records = self._load()
            self._check_not_original(path, records)
            now = Standing.of(records, account, rel)
            self._check_files(now.session.files + now.new_to_session, now.workspace.files + now.new_file, rel)
            mine, everyone = self._charged(account)
            limits = [
                (
                    self.quota.session_bytes - now.session.bytes - mine + now.freed_in_session,
                    session_bytes_text(self.quota, now.session, mine),
                ),
                (
                    self.quota.workspace_bytes
                    - now.workspace.bytes
                    - everyone
                    - self.journal.in_flight_bytes()
                    + now.freed,
                    workspace_bytes_text(self.quota, now.workspace, everyone),
                ),
                (
                    disk_free(self.workspace.root) - self.quota.reserve_bytes,
                    reserve_text(self.quota, disk_free(self.workspace.root)),
                ),
            ]
            max_bytes, (bound, fix) = min(limits, key=lambda limit: limit[0])
            if max_bytes <= 0:
                raise QuotaExceeded(f"Writing '{rel}' was refused: {bound}. Nothing was written.", fix=fix)
            token = secrets.token_hex(6)
            tmp = path.with_name(f".{path.name}.partial-{token}.tif")
            dirs = self.workspace.missing_parents(path)
            entry = {
                "token": token,
                "worker": session,
                "tmp": self.workspace.relative(tmp),
                "dst": rel,
                "dirs": [self.workspace.relative(d) for d in dirs],
                "started_at": now_text(),
            }
            self.journal.add(entry)
        try:
            self.workspace.make_dirs(dirs)
        except BaseException:
            self.journal.discard(entry)
            raise
        return Grant(token, entry["tmp"], rel, max_bytes, bound, fix)

    def commit(self, session: str, token: str) -> OutputRecord:
        """Re-check the quotas with the bytes written, then move the temporary file onto ``dst``.

        Refused (:class:`QuotaExceeded`), the temporary file is deleted and ``dst`` is untouched.
        """
        entry = self.journal.entry(session, token)
        tmp, dst = self.workspace.root / entry["tmp"], self.workspace.root / entry["dst"]
        account = account_of(session)
        try:  # before the lock: hashing the output takes time, and other sessions commit meanwhile
            sealed = self._seal(entry, tmp)
        except BaseException:
            self.journal.discard(entry)
            raise
        with self._locked():
            try:
                if not tmp.is_file():
                    raise InvalidArgument(f"The temporary file of '{entry['dst']}' is missing.")
                if sealed is not None and file_identity(tmp.stat()) != sealed:
                    raise Refused(
                        f"'{entry['dst']}' changed after the server hashed it for its provenance record; "
                        "it was not kept.",
                        fix="Run the operation again.",
                    )
                size = sum(p.stat().st_size for p in family(tmp))
                records = self._load()
                now = Standing.of(records, account, entry["dst"])
                mine, everyone = self._charged(account)
                if now.session.bytes + mine - now.freed_in_session + size > self.quota.session_bytes:
                    bound, fix = session_bytes_text(self.quota, now.session, mine)
                    raise QuotaExceeded(
                        f"'{entry['dst']}' ({size_text(size)}) was not kept: {bound}.", fix=fix
                    )
                if now.workspace.bytes + everyone - now.freed + size > self.quota.workspace_bytes:
                    bound, fix = workspace_bytes_text(self.quota, now.workspace, everyone)
                    raise QuotaExceeded(
                        f"'{entry['dst']}' ({size_text(size)}) was not kept: {bound}.", fix=fix
                    )
                move_into_place(tmp, dst)
            except BaseException:
                self.journal.discard(entry)
                raise
            info = dst.stat()
            record = OutputRecord(
                entry["dst"], size, account, now_text(), info.st_ino, info.st_mtime_ns, info.st_ctime_ns
            )
            records[record.path] = record
            self._save(records)
            self.journal.forget(entry)
        return record

    def verify_records(self, claims: list[Claim]) -> list[bool]:
        """Which provenance records this server sealed (:mod:`llmc_mcp.provenance.authenticity`)."""
        return verify_claims(self.signer, claims)

    def _seal(self, entry: Mapping[str, Any], tmp: Path) -> tuple[int, int, int, int] | None:
        """Sign the provenance record of the write, after checking it describes what is committed.

        The output's own record (``<tmp>.provenance.json``) must claim the bytes the server hashes
        here; a record committed alone (``dst`` ends in ``.provenance.json``: a failed run's) claims
        no output. Returns the identity of the output hashed, which the commit checks again under the
        lock (a write since would change its ctime), or None when there was nothing to hash.
        """
        dst = str(entry["dst"])
        if dst.endswith(RECORD_SUFFIX):
            seal(self.signer, tmp, dst=dst, output_sha256=None, decision_known=self._decision_known)
            return None
        record = Path(f"{tmp}{RECORD_SUFFIX}")
        if not os.path.lexists(record) or not tmp.is_file():
            return None  # no record to vouch for (a write outside any call); nothing is signed
        before = file_identity(tmp.stat())
        digest = sha256_of(tmp)
        if file_identity(tmp.stat()) != before:
            raise Refused(
                f"'{dst}' changed while the server hashed it for its provenance record; it was not kept.",
                fix="Run the operation again.",
            )
        seal(self.signer, record, dst=dst, output_sha256=digest, decision_known=self._decision_known)
        return before

    def _decision_known(self, domain: str, key: str) -> bool:
        try:
            return self.signer.get(domain, key) is not None
        except LlmcError:  # not a domain or a key at all
            return False

    def abort(self, session: str, token: str) -> None:
        """A write failed: delete what it left and the directories it created."""
        self.journal.abort(session, token)

    def discard_worker(self, session: str) -> int:
        """A session's worker is gone: clean up after every write it had in flight. Returns how many."""
        return self.journal.discard_worker(session)

    def sweep(self) -> int:
        """Clean up after the writes in flight of server processes that are gone. Returns how many."""
        return self.journal.sweep()

    def check_writable(self, dst: str) -> None:
        """Raise :class:`~llmc_mcp.errors.Refused` if writing ``dst`` would replace a file llmc-mcp did
        not write (an operation's preflight asks before the gate; :meth:`begin` decides)."""
        path = self.workspace.output_path(dst, argument="dst")
        with self._lock:
            self._check_not_original(path, self._load())

    # ------------------------------------------------------------------------------------ observing

    def outputs(self) -> dict[str, OutputRecord]:
        """Every output llmc-mcp wrote that still exists, by workspace-relative path."""
        with self._lock:
            return self._load()

    def owned(self) -> list[str]:
        """The names :meth:`remove` would accept, sorted."""
        return sorted(self.outputs())

    # ------------------------------------------------------------------------------------- removing

    def remove(self, session: str, name: object) -> Removal:
        """Delete an output llmc-mcp wrote, with its sidecars and its ledger entry; refuse anything else.

        The decision is the server's: the file must be named without links, be in the ledger under a
        valid signature, and still be the very file written (inode, mtime, ctime), checked again on
        the folder actually opened right before the unlink. Anything else raises
        :class:`RemoveRefused` (or :class:`~llmc_mcp.errors.PathRefused`, :class:`NotFound`) saying
        why, and nothing is deleted.
        """
        path = self._named_file(name)
        rel = self.workspace.relative(path)
        account = account_of(session)
        with self._locked():
            records = self._load()
            record = records.get(rel)
            if record is None:
                raise self._refusal(rel)
            removed = unlink_with_sidecars(self.workspace, path, record)
            del records[rel]
            self._save(records)
            left = usage_of(r for r in records.values() if r.session == account)
        return Removal(rel, removed, record.bytes, left.bytes, left.files)

    def _check_not_original(self, path: Path, records: Mapping[str, OutputRecord]) -> None:
        """Refuse a write that would replace, or take the sidecars of, a file llmc-mcp did not write.

        A commit renames the new file onto ``dst`` and replaces or deletes each of ``dst``'s sidecars
        (:func:`move_into_place`): only an output in the ledger, unchanged since, may be so replaced,
        with the sidecars that go with it. Any other existing name (``dst`` or a sidecar of it, unless
        the sidecar is itself an output, such as the record of an earlier failed run) is someone's
        original, unless the server runs with ``--allow-overwrite-originals``.
        """
        if self.quota.overwrite_originals or self.workspace.relative(path) in records:
            return
        for name in (path, *(path.with_name(path.name + suffix) for suffix in SIDECAR_SUFFIXES)):
            rel = self.workspace.relative(name)
            if os.path.lexists(name) and rel not in records:
                raise self._original(rel, self.workspace.relative(path))

    def _original(self, rel: str, dst: str) -> Refused:
        """Why writing ``dst`` is refused: ``rel`` (``dst`` or a sidecar) is not an output llmc-mcp wrote."""
        changed = any(verified and item.get("path") == rel for item, verified in self._entries())
        whose = (
            "was written by llmc-mcp but has been replaced or modified since (by the user or another program)"
            if changed
            else "was not written by llmc-mcp (it is the user's or another program's)"
        )
        what = f"'{dst}'" if rel == dst else f"'{dst}' would replace its sidecar '{rel}', which"
        return Refused(
            f"dst: writing {what} {whose}; llmc-mcp overwrites only its own outputs. Nothing was written.",
            fix=f"Write to another dst (e.g. 'out/{Path(dst).name}'); only if the user wants their files "
            "replaced, they can restart the server with --allow-overwrite-originals.",
        )

    def _named_file(self, name: object) -> Path:
        """``name`` as a path to an existing regular file reached through no link."""
        relative = check_relative_name(name, "path")
        path = self.workspace.root.joinpath(*relative.parts)
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise NotFound(
                f"path: '{name}' does not exist in the workspace.",
                fix="files.list() shows the files you may use; written_by_llmc marks those you may remove.",
            ) from None
        except NotADirectoryError:
            raise NotFound(f"path: '{name}' does not exist in the workspace.", fix=_REMOVE_FIX) from None
        if path.resolve() != path:
            raise RemoveRefused(
                f"path: '{name}' is, or goes through, a symbolic link; llmc-mcp never writes links and "
                "removes files only by their own name.",
                fix="Name the file itself (the folder it really is in), as files.list() shows it.",
            )
        if not stat.S_ISREG(info.st_mode):
            raise RemoveRefused(f"path: '{name}' is not a file; folders are never removed.", fix=_REMOVE_FIX)
        return path

    def _refusal(self, rel: str) -> RemoveRefused:
        """Why ``rel``, an existing file, is not a current ledger entry."""
        for item, verified in self._entries():
            if verified and item.get("path") == rel:  # an unverified entry is nobody's word
                return RemoveRefused(
                    f"path: '{rel}' was written by llmc-mcp but has been replaced or modified since (by the "
                    "user or another program), so it is no longer llmc-mcp's to remove.",
                    fix="Ask the user whether to delete it; files.remove deletes only files llmc-mcp wrote "
                    "and nobody changed since.",
                )
        return RemoveRefused(
            f"path: '{rel}' was not written by llmc-mcp in this workspace (it is the user's or another "
            "program's), so files.remove will not delete it.",
            fix=_REMOVE_FIX,
        )

    # ------------------------------------------------------------------------------------ internals

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One at a time: this process's threads, and other server processes on the same workspace."""
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.dir / "ledger.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _load(self) -> dict[str, OutputRecord]:
        """The ledger, without outputs that are gone or that someone else has changed since, and
        without entries that fail authentication (the workers can write the file; only the server
        can sign)."""
        records: dict[str, OutputRecord] = {}
        for item, verified in self._entries():
            if not verified:
                continue
            record = _record(item)
            if record is None:
                continue
            try:
                info = (self.workspace.root / record.path).stat()
            except OSError:
                continue
            if record.describes(info):
                records[record.path] = record
        return records

    def _entries(self) -> list[tuple[dict[str, Any], bool]]:
        """Every entry of the ledger file, as stored, with whether its signature verifies."""
        try:
            data = read_bounded(self._ledger, MAX_LEDGER_BYTES)
            if len(data) > MAX_LEDGER_BYTES:
                raise ValueError(f"larger than {MAX_LEDGER_BYTES} bytes")
            raw = json.loads(data)
            items = raw.get("outputs", [])
            if not isinstance(items, list):
                raise ValueError("'outputs' is not a list")
        except FileNotFoundError:
            return []
        except (OSError, ValueError, AttributeError) as exc:
            log.error("output ledger unreadable (%s); starting a new one", exc)
            return []
        entries = []
        for item in items:
            if not isinstance(item, dict):
                continue
            record, digest = _record(item), item.get("digest")
            verified = (
                record is not None
                and isinstance(digest, str)
                and self.signer.verify_bytes(record.payload(), digest)
            )
            entries.append((item, verified))
        return entries

    def _save(self, records: Mapping[str, OutputRecord]) -> None:
        outputs = [{**asdict(r), "digest": self.signer.sign_bytes(r.payload())} for r in records.values()]
        write_json(self._ledger, {"version": 2, "outputs": outputs})

    @property
    def signer(self) -> RecordSigner:
        if self._signer is None:
            self._signer = JustificationStore(self.workspace.preflight_dir)
        return self._signer

    def _check_files(self, session_files: int, workspace_files: int, rel: str) -> None:
        if session_files > self.quota.session_files:
            raise QuotaExceeded(
                f"Writing '{rel}' was refused: this session already wrote {session_files - 1} files, its "
                f"quota (--quota-session-files {self.quota.session_files}). Nothing was written.",
                fix=f"{FREE_OUTPUTS} overwrite earlier outputs instead of writing new names, or ask the "
                "user to raise --quota-session-files.",
            )
        if workspace_files > self.quota.workspace_files:
            raise QuotaExceeded(
                f"Writing '{rel}' was refused: llmc-mcp outputs in this workspace number "
                f"{workspace_files - 1}, its quota (--quota-workspace-files {self.quota.workspace_files}). "
                "Nothing was written.",
                fix=f"{FREE_OUTPUTS} overwrite earlier outputs instead of writing new names, or ask the "
                "user to raise --quota-workspace-files.",
            )

    def _charged(self, account: str) -> tuple[int, int]:
        """The bytes of :attr:`charged` files: ``account``'s, and everyone's."""
        mine = everyone = 0
        for usage in self.charged:
            of_account, of_all = usage(account)
            mine, everyone = mine + of_account, everyone + of_all
        return mine, everyone


_REMOVE_FIX = (
    "files.remove deletes only files llmc-mcp wrote (files.list() marks them written_by_llmc); ask the "
    "user to delete any other file."
)


def _record(item: Mapping[str, Any]) -> OutputRecord | None:
    try:
        record = OutputRecord(**{name: item[name] for name in OutputRecord.__dataclass_fields__})
    except (KeyError, TypeError):
        return None
    return record if isinstance(record.path, str) else None
