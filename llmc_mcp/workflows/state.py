"""Workflow states on disk: one authenticated file per state, replaced atomically, expiring.

Layout: ``<workspace>/.llmc/workflow-state/<digest of the id>.json``. The state id is 192 random bits
returned only to the caller that started the workflow; the file is named by a digest of it and does
not contain it, so a listing of the folder (workers may read the workspace) yields no usable id.
Each file carries an HMAC of its content under the justification store's key, which only the server
reads, so a state written by anyone else is not a state. A state is bound to the principal that
started it (:func:`llmc_mcp.sessions.principal`): another principal holding the id gets the same
answer as for an unknown id. Every read-modify-write holds an exclusive ``flock`` on the folder's
lock file, so two servers on one workspace (a host that starts one per call) do not lose an answer.
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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from llmc_mcp.errors import InvalidArgument, LlmcError, NotFound
from llmc_mcp.outputs.models import Signer
from llmc_mcp.reflection.store import atomic_write

log = logging.getLogger(__name__)

STATE_ID = re.compile(r"\Awf-[A-Za-z0-9_-]{32}\Z")
MAX_STATE_BYTES = 2 * 1024 * 1024
MAX_STATES_PER_PRINCIPAL = 500
"""Live states one principal may hold: a loop of starts fills this, not the disk."""
_VERSION = 1


class WorkflowLimit(LlmcError):
    """A principal holds too many live workflow states, or a state grew past its size limit."""

    kind = "quota_exceeded"


class WorkflowState(BaseModel):
    """Where one run of a workflow stands; ``definition`` is the workflow as it was when started."""

    version: int = _VERSION
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


class StateStore:
    def __init__(self, folder: Path, signer: Signer, ttl_seconds: float):
        self.folder = folder
        self.signer = signer
        self.ttl = ttl_seconds

    @staticmethod
    def new_id() -> str:
        return "wf-" + secrets.token_urlsafe(24)

    def create(self, state: WorkflowState) -> str:
        with self.locked():
            owned = sum(1 for s in self._live() if s.principal == state.principal)
            if owned >= MAX_STATES_PER_PRINCIPAL:
                raise WorkflowLimit(
                    f"This session already has {owned} workflows in progress.",
                    fix="Finish or abandon some; unfinished workflows expire after the configured time.",
                )
            state_id = self.new_id()
            self._write(state_id, state)
        return state_id

    def load(self, state_id: object, principal: str | None) -> WorkflowState:
        """The live state ``state_id`` names for ``principal``; unknown, expired, another's: NotFound."""
        state_id = check_state_id(state_id)
        state = self._read(self._path(state_id))
        if state is None or state.principal != principal or state.expires < time.time():
            raise NotFound(
                f"No workflow state {state_id!r} for this session (unknown, expired, or started by "
                "another session).",
                fix="Start the workflow again with workflows.start (classic: workflow_start).",
            )
        return state

    def save(self, state_id: str, state: WorkflowState) -> None:
        self._write(check_state_id(state_id), state)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def sweep(self) -> int:
        """Delete expired states (and files that are not states); returns how many went."""
        removed = 0
        with self.locked():
            for path in self.folder.glob("*.json"):
                state = self._read(path)
                if state is None or state.expires < time.time():
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed += 1
        return removed

    def _live(self) -> Iterator[WorkflowState]:
        now = time.time()
        for path in self.folder.glob("*.json"):
            state = self._read(path)
            if state is not None and state.expires >= now:
                yield state

    def _path(self, state_id: str) -> Path:
        return self.folder / (hashlib.sha256(state_id.encode()).hexdigest()[:40] + ".json")

    def _write(self, state_id: str, state: WorkflowState) -> None:
        payload = _canonical(state)
        if len(payload) > MAX_STATE_BYTES:
            raise WorkflowLimit(
                f"The workflow state would be {len(payload)} bytes, over {MAX_STATE_BYTES}.",
                fix="Submit shorter answers: summaries, not data.",
            )
        document = {"state": state.model_dump(mode="json"), "digest": self.signer.sign_bytes(payload)}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self._path(state_id), json.dumps(document, ensure_ascii=False).encode())

    def _read(self, path: Path) -> WorkflowState | None:
        """A verified state, or None: missing, unreadable, forged, or of another version."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("workflow state %s unreadable: %s", path.name, exc)
            return None
        try:
            document = json.loads(raw)
            state = WorkflowState.model_validate(document["state"])
            digest = str(document["digest"])
        except (ValueError, KeyError, TypeError, ValidationError):
            log.warning("workflow state %s is not a state; ignored", path.name)
            return None
        if state.version != _VERSION or not self.signer.verify_bytes(_canonical(state), digest):
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


def _canonical(state: WorkflowState) -> bytes:
    data = state.model_dump(mode="json")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
