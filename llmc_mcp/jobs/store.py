"""Job records on disk: one signed file per job in the server's private state folder.

A record is written before its job is handed out (a client may poll at once), when it ends and when
it is cancelled; progress lives in memory only. Each file is the record and an HMAC of it under a
key kept beside the store's (:mod:`llmc_mcp.state`), so a record that was edited, swapped between
ids or planted is refused like a missing one. Files are read bounded and never through a FIFO, and
the folder is looked at no more than :data:`MAX_FILES` files deep: the state folder is private, but
nothing read from disk is trusted to be small.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from llmc_mcp.durable import atomic_write, read_bounded
from llmc_mcp.jobs.models import JOB_ID, TERMINAL, JobRecord
from llmc_mcp.outputs.disk import is_alive
from llmc_mcp.state import check_private, load_or_create_secret, state_dir

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 2 * 1024 * 1024
"""The largest job file read back: a record with its answer (answers are cut at :data:`MAX_ANSWER_BYTES`)."""
MAX_ANSWER_BYTES = 1024 * 1024
MAX_FILES = 20_000
"""The most job files one look at the folder considers (``--max-jobs`` and ``--task-ttl`` keep far fewer)."""
LOST = (
    "The server stopped (restart, crash or shutdown) while this job ran; its work was lost and nothing "
    "it was writing was kept."
)
LOST_FIX = "Start it again."


class JobStore:
    """The signed job records of one workspace, in ``<state>/jobs/<workspace digest>/``."""

    def __init__(self, workspace: Path, folder: Path | None = None):
        digest = hashlib.sha256(os.fsencode(workspace.resolve())).hexdigest()[:32]
        self.folder = folder or state_dir() / "jobs" / digest
        check_private(self.folder, workspace)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._secret = load_or_create_secret(state_dir() / f"{digest}.jobs.key")

    def save(self, record: JobRecord) -> None:
        # Python's JSON, not pydantic's: a result's NaN (a float nodata) must read back as NaN, not null.
        body = record.model_dump()
        data = json.dumps({"record": body, "mac": self._mac(body)}, separators=(",", ":")).encode()
        atomic_write(self._path(record.id), data)

    def load(self, job_id: str) -> JobRecord | None:
        """The record of ``job_id``, or None: unknown, unreadable, too large or not signed by us."""
        if not JOB_ID.match(job_id):
            return None
        path = self._path(job_id)
        try:
            data = read_bounded(path, MAX_RECORD_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("job record %s unreadable: %s", job_id[:12], type(exc).__name__)
            return None
        return self._parse(data, job_id)

    def delete(self, job_id: str) -> None:
        if JOB_ID.match(job_id):
            self._path(job_id).unlink(missing_ok=True)

    def records(self) -> Iterator[JobRecord]:
        """Every readable record, at most :data:`MAX_FILES` files looked at."""
        try:
            entries = os.scandir(self.folder)
        except OSError:
            return
        with entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_FILES:
                    log.warning("more than %d job files; the rest are not looked at", MAX_FILES)
                    return
                name = entry.name.removesuffix(".json")
                if entry.name.endswith(".json") and JOB_ID.match(name):
                    record = self.load(name)
                    if record is not None:
                        yield record

    def reconcile(self, me: str, ttl: float) -> tuple[list[JobRecord], int]:
        """At a server's start, in one pass over the folder: delete the records past their expiry, mark
        failed every job left working by a server process that is gone, and return what is kept with
        how many were lost."""
        kept: list[JobRecord] = []
        lost = 0
        now = time.time()
        for record in list(self.records()):
            if record.expires is not None and record.expires <= now:
                self.delete(record.id)
                continue
            if record.status not in TERMINAL and record.server != me and not is_alive(record.server):
                record = record.model_copy(
                    update={
                        "status": "failed",
                        "message": LOST,
                        "updated": now,
                        "finished": now,
                        "expires": now + ttl,
                        "answer": lost_answer(),
                    }
                )
                self.save(record)
                lost += 1
            kept.append(record)
        return kept, lost

    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}.json"

    def _mac(self, body: object) -> str:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._secret, canonical, hashlib.sha256).hexdigest()

    def _parse(self, data: bytes, job_id: str) -> JobRecord | None:
        if len(data) > MAX_RECORD_BYTES:
            log.warning("job record %s is over %d bytes; ignored", job_id[:12], MAX_RECORD_BYTES)
            return None
        try:
            envelope = json.loads(data)
            body, mac = envelope["record"], envelope["mac"]
            if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(body)):
                raise ValueError("signature")
            record = JobRecord.model_validate(body)
        except (ValueError, KeyError, TypeError, ValidationError, RecursionError):
            log.warning("job record %s is not one this server signed; ignored", job_id[:12])
            return None
        return record if record.id == job_id else None


def lost_answer() -> dict[str, object]:
    """The answer of a job whose server stopped while it ran: no tool result exists."""
    error = {"type": "job_lost", "message": LOST, "fix": LOST_FIX}
    return {"ok": False, "result": None, "error": error, "lost": True}


def bounded_answer(answer: dict[str, object]) -> dict[str, object]:
    """The answer to keep: itself, or an error saying it was too large to keep."""
    size = len(json.dumps(answer, default=str))
    if size <= MAX_ANSWER_BYTES:
        return answer
    message = f"The job's result was {size:,} bytes, over the {MAX_ANSWER_BYTES:,} kept for a job."
    error = {
        "type": "ResultTooLarge",
        "message": message,
        "fix": "Return less: write large results to a file.",
    }
    return {"ok": False, "result": None, "error": error}
