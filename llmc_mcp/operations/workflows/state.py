"""Workflow states on disk: one authenticated file per state, replaced atomically, expiring, paid for.

Layout: ``<workspace>/.llmc/workflow-state/<principal tag>-<digest of the id>.json``. The state id is
192 random bits returned only to the caller that started the workflow; the file is named by a digest
of it and does not contain it, so a listing of the folder (workers may read the workspace) yields no
usable id. The name starts with a tag of the principal that started the run
(:func:`llmc_mcp.sessions.principal`), so what a principal holds is counted from a listing, without
reading any file; another principal holding the id looks for another file and gets the same answer
as for an unknown id.

Each file carries an HMAC under the justification store's key, which only the server reads, over the
run's id, its revision (one more at every save) and its content: a file written by anyone else, or
another run's file copied over this one, is not a state. An earlier copy put back (a replay: its
signature is genuine) is refused too, because the highest revision the server wrote of each run is
kept in the server's private state folder, out of every worker's reach.

Writing a state is charged like writing an output: the bytes of a principal's states count against
its session quota and those of every state against the workspace's (each with the outputs already
there), and no write eats into the disk's free-space reserve (``--quota-*``, ``--disk-reserve-mb``;
:class:`~llmc_mcp.config.Quota`). Each principal holds at most :data:`MAX_STATES_PER_PRINCIPAL` runs
and the workspace :data:`MAX_STATES` (every HTTP session is a principal of its own).

Every read-modify-write holds an exclusive ``flock`` on the folder's lock file, so two servers on one
workspace do not lose an answer; it is held only to check and write (never while a template renders),
and waited for at most :data:`LOCK_SECONDS`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from llmc_mcp.config import MiB, Quota
from llmc_mcp.durable import atomic_write, read_bounded
from llmc_mcp.errors import InvalidArgument, LlmcError, NotFound, Refused
from llmc_mcp.provenance.authenticity import Signer
from llmc_mcp.state import key_path

if TYPE_CHECKING:
    from llmc_mcp.outputs import OutputLedger

log = logging.getLogger(__name__)

STATE_ID = re.compile(r"\Awf-[A-Za-z0-9_-]{32}\Z")
MAX_STATE_BYTES = 2 * 1024 * 1024
MAX_STATES_PER_PRINCIPAL = 500
"""Live states one principal may hold: a loop of starts fills this, not the disk."""
MAX_STATES = 5000
"""Live states in one workspace, whoever holds them: every HTTP session is a principal of its own."""
MAX_REVISIONS_BYTES = 1024 * 1024
"""The revisions file names each live state once with a number (:data:`MAX_STATES` of them take about
300 KB); read bounded, since workers can plant anything under its name."""
LOCK_SECONDS = 10.0
"""The longest a call waits for the folder's lock (held only to check and write one file, normally
milliseconds); past it the call is refused, not queued behind whoever holds it (a worker can flock)."""
_VERSION = 2
_PAYLOAD = b"llmc-mcp workflow state 2\n"
"""Prefix of what a state's signature covers: no other signed text (a ledger entry) passes for one."""


class WorkflowLimit(LlmcError):
    """A principal or the workspace holds too many live workflow states, or states would take more bytes
    than a quota or the disk's reserve allows."""

    kind = "quota_exceeded"


class WorkflowBusy(LlmcError):
    """The state folder's lock was held past :data:`LOCK_SECONDS`; nothing was changed."""

    kind = "busy"


class WorkflowState(BaseModel):
    """Where one run of a workflow stands; ``definition`` is the workflow as it was when started."""

    version: int = _VERSION
    revision: int = 0
    """How many times the run was saved: signed with the id, so an earlier copy is known as one."""
    principal: str | None
    definition: dict[str, Any]
    inputs: dict[str, str]
    saved: dict[str, Any]
    step: str | None
    """The step waiting for an answer; None once complete."""
    item: int = 0
    """For a foreach step: the position of the item being asked."""
    answers: list[Any] = []
    """For a foreach step: the answers to the items before ``item``."""
    complete: bool = False
    created: float
    updated: float
    expires: float


@dataclass(frozen=True)
class _Usage:
    files: int
    bytes: int


class StateStore:
    def __init__(
        self,
        folder: Path,
        signer: Signer,
        ttl_seconds: float,
        *,
        outputs: OutputLedger | None = None,
        quota: Quota | None = None,
    ):
        """``outputs`` is the workspace's output ledger, whose usage states share the quotas with;
        ``quota`` defaults to its own (or the defaults)."""
        self.folder = folder
        self.signer = signer
        self.ttl = ttl_seconds
        self.outputs = outputs
        self.quota = quota or (outputs.quota if outputs is not None else Quota())
        if outputs is not None:
            outputs.charged.append(self.charge)
        workspace = folder.parent.parent
        self.revisions = key_path(workspace).with_name(key_path(workspace).stem + ".workflow-revisions.json")
        """The highest revision written of each run (by file name), in the private state folder."""

    @staticmethod
    def new_id() -> str:
        return "wf-" + secrets.token_urlsafe(24)

    def create(self, state: WorkflowState, state_id: str | None = None) -> str:
        """Write a new run's first state (under ``state_id``, else a new id); its id. Refused past a
        count, a quota or the reserve."""
        state_id = check_state_id(state_id) if state_id is not None else self.new_id()
        state.revision = 1
        document = self._document(state_id, state)
        with self.locked():
            mine, every = self._usage(_tag(state.principal))
            if mine.files >= MAX_STATES_PER_PRINCIPAL:
                raise WorkflowLimit(
                    f"This session already has {mine.files} workflows in progress, the most one session may "
                    f"hold ({MAX_STATES_PER_PRINCIPAL}).",
                    fix="Finish the runs under way (workflows.state shows each); unfinished runs expire "
                    "after the server's workflow TTL.",
                )
            if every.files >= MAX_STATES:
                raise WorkflowLimit(
                    f"The workspace already holds {every.files} workflows in progress, the most it may hold "
                    f"({MAX_STATES}).",
                    fix="Finish the runs under way; unfinished runs expire after the server's workflow TTL.",
                )
            self._check_bytes(state.principal, len(document), 0)
            self._put(state_id, state.principal, document, 1)
        return state_id

    def load(self, state_id: object, principal: str | None) -> WorkflowState:
        """The live state ``state_id`` names for ``principal``; unknown, expired, another's: NotFound.

        A genuine earlier copy of the run's file put back in its place is refused (:class:`Refused`).
        """
        state_id = check_state_id(state_id)
        path = self._path(state_id, principal)
        state = self._read(path, state_id)
        if state is None or state.principal != principal or state.expires < time.time():
            raise NotFound(
                f"No workflow state {state_id!r} for this session (unknown, expired, or started by "
                "another session).",
                fix="Start the workflow again with workflows.start (classic: workflow_start).",
            )
        written = self._revisions().get(path.name, 0)
        if state.revision < written:
            raise Refused(
                f"The file of workflow state {state_id!r} is an earlier copy (revision {state.revision}; the "
                f"server last wrote revision {written}): someone put it back in its place, so the run is not "
                "continued from it.",
                fix="Start the workflow again; ask the user who restores files in .llmc/workflow-state.",
            )
        return state

    def save(self, state_id: str, state: WorkflowState, principal: str | None) -> None:
        """Write ``state`` as the next revision of the run ``load`` returned it as; under the lock, and
        only if nobody saved the run since (else :class:`~llmc_mcp.errors.InvalidArgument`, nothing
        written). Refused past a quota or the reserve."""
        state_id = check_state_id(state_id)
        loaded = state.revision
        state = state.model_copy(update={"revision": loaded + 1})
        document = self._document(state_id, state)
        with self.locked():
            current = self.load(state_id, principal)
            if current.revision != loaded:
                raise InvalidArgument(
                    "The workflow run was answered by another call meanwhile; this answer was not saved.",
                    fix="Read where it stands with workflows.state(state_id), then submit again.",
                )
            path = self._path(state_id, principal)
            self._check_bytes(principal, len(document), _size(path))
            self._put(state_id, principal, document, state.revision)

    @contextlib.contextmanager
    def locked(self, seconds: float | None = None) -> Iterator[None]:
        """The folder's lock, waited for at most ``seconds`` (:data:`LOCK_SECONDS`): then WorkflowBusy."""
        seconds = LOCK_SECONDS if seconds is None else seconds
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + seconds
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise WorkflowBusy(
                            f"The workflow states are locked by another call for over {seconds:g} s; "
                            "nothing was changed.",
                            fix="Try again in a moment; if it persists, another program holds "
                            ".llmc/workflow-state/.lock (restart the server).",
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)

    def sweep(self) -> int:
        """Delete expired states (and files that are not states); returns how many went."""
        removed = 0
        with self.locked():
            now = time.time()
            for path in self.folder.glob("*.json"):
                state = self._read(path, None)
                if state is None or state.expires < now:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed += 1
            self._write_revisions(self._revisions())
        return removed

    def charge(self, account: str) -> tuple[int, int]:
        """The bytes of ``account``'s states and of all states: what the output ledger adds to the
        outputs when it checks a write against the quotas."""
        mine, every = self._usage(_tag(account))
        return mine.bytes, every.bytes

    # ------------------------------------------------------------------------------------ internals

    def _usage(self, tag: str) -> tuple[_Usage, _Usage]:
        """The files and bytes of one principal's states and of all of them, from a listing alone.

        A file not rewritten for longer than the TTL is expired whatever it says (its ``expires`` is
        its last save plus the TTL), so it is deleted here, not counted.
        """
        mine = every = _Usage(0, 0)
        stale = time.time() - self.ttl
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return mine, every
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if info.st_mtime < stale:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                continue
            every = _Usage(every.files + 1, every.bytes + info.st_size)
            if entry.name.startswith(tag + "-"):
                mine = _Usage(mine.files + 1, mine.bytes + info.st_size)
        return mine, every

    def _check_bytes(self, principal: str | None, size: int, replaced: int) -> None:
        """Refuse a state of ``size`` bytes (replacing ``replaced``) past the quotas or into the reserve."""
        if size > MAX_STATE_BYTES:
            raise WorkflowLimit(
                f"The workflow state would be {size} bytes, over {MAX_STATE_BYTES}.",
                fix="Submit shorter answers: summaries, not data.",
            )
        mine, every = self._usage(_tag(principal))
        records = self.outputs.outputs() if self.outputs is not None else {}
        account = principal or ""
        session = mine.bytes + sum(r.bytes for r in records.values() if r.session == account)
        workspace = every.bytes + sum(r.bytes for r in records.values())
        grows = size - replaced
        fix = (
            "Finish or leave the runs under way (they expire after the server's workflow TTL), remove "
            "outputs no longer needed with files.remove, or ask the user to raise the quota."
        )
        if session + grows > self.quota.session_bytes:
            raise WorkflowLimit(
                f"The workflow state was not written: this session's outputs and workflow states take "
                f"{_mib(session)}, and its quota is {_mib(self.quota.session_bytes)} (--quota-session-mb).",
                fix=fix,
            )
        if workspace + grows > self.quota.workspace_bytes:
            raise WorkflowLimit(
                f"The workflow state was not written: the workspace's outputs and workflow states take "
                f"{_mib(workspace)}, and its quota is {_mib(self.quota.workspace_bytes)} "
                "(--quota-workspace-mb).",
                fix=fix,
            )
        disk = os.statvfs(self.folder)
        free = disk.f_bavail * disk.f_frsize
        if free - grows < self.quota.reserve_bytes:
            raise WorkflowLimit(
                f"The workflow state was not written: the disk has {_mib(free)} free and "
                f"{_mib(self.quota.reserve_bytes)} are kept free for the server's own records "
                "(--disk-reserve-mb).",
                fix="Ask the user to free disk space; finished runs can be left to expire.",
            )

    def _path(self, state_id: str, principal: str | None) -> Path:
        return self.folder / f"{_tag(principal)}-{hashlib.sha256(state_id.encode()).hexdigest()[:40]}.json"

    def _document(self, state_id: str, state: WorkflowState) -> bytes:
        digest = self.signer.sign_bytes(_payload(state_id, state))
        return json.dumps(
            {"state": state.model_dump(mode="json"), "digest": digest}, ensure_ascii=False
        ).encode()

    def _put(self, state_id: str, principal: str | None, document: bytes, revision: int) -> None:
        """Write the file, then raise the run's recorded revision (so a crash between leaves the file
        newer than the record, which is still accepted)."""
        path = self._path(state_id, principal)
        atomic_write(path, document)
        revisions = self._revisions()
        revisions[path.name] = revision
        self._write_revisions(revisions)

    def _revisions(self) -> dict[str, int]:
        try:
            raw = read_bounded(self.revisions, MAX_REVISIONS_BYTES)
            if len(raw) > MAX_REVISIONS_BYTES:
                raise ValueError(f"larger than {MAX_REVISIONS_BYTES} bytes")
            data = json.loads(raw)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("workflow revisions unreadable (%s); replays go unnoticed until the next save", exc)
            return {}
        return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}

    def _write_revisions(self, revisions: dict[str, int]) -> None:
        """Keep the entries of files that still exist (so the file is bounded by the count of states)."""
        kept = {name: n for name, n in revisions.items() if (self.folder / name).exists()}
        self.revisions.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.revisions, json.dumps(kept, separators=(",", ":")).encode())

    def _read(self, path: Path, state_id: str | None) -> WorkflowState | None:
        """A verified state, or None: missing, unreadable, too big, forged, another run's, another version.

        Without ``state_id`` (a sweep), only whether the file could be a state at all: its signature
        cannot be checked without the id, which the server does not keep.
        """
        try:
            raw = read_bounded(path, MAX_STATE_BYTES + 4096)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("workflow state %s unreadable: %s", path.name, exc)
            return None
        try:
            document = json.loads(raw)
            state = WorkflowState.model_validate(document["state"])
            digest = str(document["digest"])
        except (ValueError, KeyError, TypeError, ValidationError, RecursionError):
            log.warning("workflow state %s is not a state; ignored", path.name)
            return None
        if state.version != _VERSION:
            return None
        if state_id is not None and not self.signer.verify_bytes(_payload(state_id, state), digest):
            log.warning("workflow state %s failed authentication; ignored", path.name)
            return None
        return state


def check_state_id(state_id: object) -> str:
    if not isinstance(state_id, str) or not STATE_ID.match(state_id):
        raise InvalidArgument(
            f"{str(state_id)[:80]!r} is not a workflow state id.",
            fix="Pass the state_id a workflows.start result returned, exactly as given ('wf-...').",
        )
    return state_id


def _payload(state_id: str, state: WorkflowState) -> bytes:
    """What a state's signature covers: the run's id (a file copied from another run fails), its
    revision (inside the content) and the content."""
    data = state.model_dump(mode="json")
    content = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return _PAYLOAD + state_id.encode() + b"\n" + content


def _tag(principal: str | None) -> str:
    """A principal as a file-name prefix (a digest: principals go into files workers can read)."""
    return hashlib.sha256((principal or "").encode()).hexdigest()[:12]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB"
