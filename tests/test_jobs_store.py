"""The job records on disk are hostile files too: signed, bound to their id, read bounded.

A record is what a restarted server believes about a job and what it hands a client as a result, so
an edited, swapped, planted, oversized or FIFO record must read as no record at all, and a record
left working by a dead server must come back failed, never working forever.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmc_mcp.jobs.models import JobRecord, new_job_id
from llmc_mcp.jobs.store import MAX_RECORD_BYTES, JobStore, bounded_answer
from llmc_mcp.outputs.disk import is_alive, process_identity


def record(**changes: object) -> JobRecord:
    now = time.time()
    values: dict[str, object] = {
        "id": new_job_id(),
        "principal": "local",
        "session": "conn-1",
        "kind": "operation",
        "name": "terrain.slope",
        "created": now,
        "updated": now,
        "server": process_identity(os.getpid()),
    }
    values.update(changes)
    return JobRecord.model_validate(values)


@pytest.fixture
def store(workspace_dir: Path) -> JobStore:
    return JobStore(workspace_dir)


def test_a_saved_record_reads_back_as_saved(store: JobStore) -> None:
    """Guards against a store that loses fields (the answer, the principal) between save and load."""
    saved = record(status="completed", answer={"ok": True, "result": {"x": 1}, "error": None})
    store.save(saved)
    assert store.load(saved.id) == saved


def test_an_edited_record_is_not_read(store: JobStore) -> None:
    """Guards against a record whose principal or result was edited on disk being believed."""
    saved = record(status="completed", answer={"ok": True, "result": {"x": 1}, "error": None})
    store.save(saved)
    path = store.folder / f"{saved.id}.json"
    envelope = json.loads(path.read_text())
    envelope["record"]["principal"] = "http-someone-else"
    path.write_text(json.dumps(envelope))
    assert store.load(saved.id) is None


def test_a_record_copied_under_another_id_is_not_read(store: JobStore) -> None:
    """Guards against a valid record swapped in under another job's id (its signature is genuine)."""
    saved = record()
    store.save(saved)
    other = new_job_id()
    (store.folder / f"{other}.json").write_bytes((store.folder / f"{saved.id}.json").read_bytes())
    assert store.load(other) is None


def test_a_planted_or_oversized_or_fifo_record_is_not_read(store: JobStore) -> None:
    """Guards against unsigned records believed, a huge file read whole, and a FIFO that hangs the read."""
    planted, huge, fifo = new_job_id(), new_job_id(), new_job_id()
    body = record(id=planted).model_dump(mode="json")
    (store.folder / f"{planted}.json").write_text(json.dumps({"record": body, "mac": "0" * 64}))
    (store.folder / f"{huge}.json").write_bytes(b"{" * (MAX_RECORD_BYTES + 10))
    os.mkfifo(store.folder / f"{fifo}.json")
    assert [store.load(job_id) for job_id in (planted, huge, fifo)] == [None, None, None]
    assert list(store.records()) == []


def test_an_id_that_is_not_a_job_id_never_touches_the_disk(store: JobStore) -> None:
    """Guards against a client-chosen id used as a path (``../../x``)."""
    for bad in ("../../etc/passwd", "job-../../x", "", "job-" + "a" * 31):
        assert store.load(bad) is None


def test_a_job_left_working_by_a_dead_server_is_recovered_as_failed(store: JobStore) -> None:
    """Guards against a job reported working forever after its server died."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = record(server=process_identity(int(dead.stdout)))
    mine = record()
    store.save(orphan)
    store.save(mine)
    kept, lost_count = store.reconcile(process_identity(os.getpid()), ttl=60)
    assert lost_count == 1 and {r.id for r in kept} == {orphan.id, mine.id}
    lost = store.load(orphan.id)
    assert lost is not None and lost.status == "failed" and lost.answer and lost.answer["lost"] is True
    assert "server stopped" in lost.message
    assert store.load(mine.id) == mine


def test_a_pid_with_no_process_is_not_alive() -> None:
    """Guards against ``<pid>-0`` (what a vanished process's identity reads as) matching itself: its
    journal, and a job it ran, would be kept forever."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    assert not is_alive(f"{pid}-0")
    assert not is_alive(process_identity(pid))
    assert is_alive(process_identity(os.getpid()))


def test_expired_records_are_swept(store: JobStore) -> None:
    """Guards against results kept past --task-ttl, filling the state folder."""
    old = record(status="completed", finished=time.time() - 10, expires=time.time() - 1)
    fresh = record(status="completed", finished=time.time(), expires=time.time() + 60)
    store.save(old)
    store.save(fresh)
    kept, _ = store.reconcile(process_identity(os.getpid()), ttl=60)
    assert [r.id for r in kept] == [fresh.id]
    assert [r.id for r in store.records()] == [fresh.id]


def test_an_answer_too_large_to_keep_becomes_an_error_saying_so() -> None:
    """Guards against a job's result of any size written into the state folder."""
    kept = bounded_answer({"ok": True, "result": {"values": "x" * 2_000_000}, "error": None})
    assert kept["ok"] is False
    assert kept["error"]["type"] == "ResultTooLarge"


def test_a_nan_in_a_result_reads_back_as_nan(store: JobStore) -> None:
    """Guards against a float nodata of NaN turned into null by the round trip through the record, so
    a job's result differed from the same call's."""
    saved = record(
        status="completed", answer={"ok": True, "result": {"nodata": [float("nan")]}, "error": None}
    )
    store.save(saved)
    loaded = store.load(saved.id)
    assert loaded is not None and loaded.answer is not None
    assert math.isnan(loaded.answer["result"]["nodata"][0])
