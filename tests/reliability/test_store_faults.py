"""The justification store and raster outputs under faults: kills, contention, full and read-only disks.

- A writer SIGKILLed at random points leaves, under record names, only complete authenticated
  records (old or new version of an overwritten key); its temp files are never taken for records.
- Processes persisting and reading concurrently lose nothing, and never see a partial record.
- A full disk (a small tmpfs, root only) or a file-size limit (RLIMIT_FSIZE, anyone) gives a
  StoreError that says why; a read-only store (tmpfs remounted read-only, or ``chattr +i``) too.
- A raster operation that fails midway (write refused by RLIMIT_FSIZE, a corrupt source, a kill)
  leaves nothing under the destination name, and an existing destination unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmc_mcp.errors import RasterError, StoreError
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.reflection.store import KEY_PATTERN, JustificationStore
from tests.reliability._faults import key_for, record_for, run_operation, version_of
from tests.reliability._fs import tmpfs

ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0


def child(mode: str, params: dict[str, Any], **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability._faults", mode, json.dumps(params)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def run_child(mode: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    proc = child(mode, params)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def record_files(store: JustificationStore) -> list[Path]:
    """Files under record names: ``<domain>/<64 hex>.json``."""
    return (
        [p for p in store.records_dir.glob("*/*.json") if KEY_PATTERN.match("sha256:" + p.stem)]
        if store.records_dir.is_dir()
        else []
    )


def other_files(store: JustificationStore) -> list[Path]:
    named = set(record_files(store))
    return [p for p in store.records_dir.rglob("*") if p.is_file() and p not in named]


# ------------------------------------------------------------------------------------ kill -9 loops


def test_a_writer_killed_at_random_points_leaves_only_complete_records(tmp_path: Path) -> None:
    root = tmp_path / ".preflight"
    rng = random.Random(20240601)
    store = JustificationStore(root)
    best: dict[str, int] = {}
    for round_ in range(12):
        proc = child("write-loop", {"root": str(root), "seed": round_})
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.4))
        proc.kill()
        assert proc.wait(10) == -9, f"round {round_}: the writer stopped by itself: {proc.stderr.read()}"
        for path in record_files(store):
            domain, key = path.parent.name, "sha256:" + path.stem
            record = store.get(domain, key)
            assert record is not None, f"round {round_}: {path.name} is partial or unreadable"
            # Records are write-once: a later attempt to overwrite never changes the first version.
            assert version_of(record) == best.setdefault(key, version_of(record)) == 1
        assert len(list(store.records())) == len(record_files(store))
    assert len(best) > 20, "the writer hardly wrote anything; the test proves nothing"
    leftovers = other_files(store)
    for temp in leftovers:
        assert temp.name.startswith(".") and temp.suffix == ".tmp", f"unexpected file {temp}"
        assert not KEY_PATTERN.match("sha256:" + temp.stem), "a temp file name looks like a record name"
    # A temp file is never served: the records are exactly the record-named files.
    assert {r.key for r in store.records()} == {"sha256:" + p.stem for p in record_files(store)}


def test_a_temp_file_that_looks_almost_like_a_record_is_ignored(tmp_path: Path) -> None:
    store = JustificationStore(tmp_path / ".preflight")
    kept = store.put(record_for("kept"))
    folder = store.path_for(kept.domain, kept.key).parent
    body = store.path_for(kept.domain, kept.key).read_bytes()
    digest = kept.key.removeprefix("sha256:")
    (folder / f".{digest}.abc123.tmp").write_bytes(body[: len(body) // 2])
    (folder / f"{digest}.json.tmp").write_bytes(body)
    (folder / f"{digest[:-1]}.json").write_bytes(body)
    assert [r.key for r in store.records()] == [kept.key]
    assert store.get(kept.domain, kept.key) == kept


def test_concurrent_writers_and_readers_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / ".preflight"  # empty: the writers also race to create the store key
    writers, count, shared = 4, 25, 5
    params = {"root": str(root), "writers": writers, "count": count, "shared": shared}
    procs = [child("write-read", {**params, "writer": w}) for w in range(writers)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["problems"] for o in outs] == [[]] * writers
    store = JustificationStore(root)
    for w in range(writers):
        for i in range(count):
            sample = record_for(f"p{w}-{i}")
            assert store.get(sample.domain, sample.key) is not None, f"p{w}-{i} was lost"
    for i in range(shared):
        sample = record_for(f"shared-{i}")
        assert store.get(sample.domain, sample.key) is not None
    assert len(list(store.records())) == writers * count + shared == len(record_files(store))
    assert not other_files(store), "temp files were left behind without any kill"


# ------------------------------------------------------------------------------ full and read-only


def fill(directory: Path) -> None:
    """Write until the file system says ENOSPC."""
    with open(directory / "filler", "wb", buffering=0) as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0")


def test_a_full_disk_gives_a_clear_store_error_and_leaves_no_temp_files(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "256k") as mount:
        store = JustificationStore(mount / ".preflight")
        existing = store.put(record_for("before"))
        fill(mount)
        with pytest.raises(StoreError) as info:
            store.put(record_for("after", pad=3000))
        assert "disk is full" in info.value.message and info.value.fix
        assert store.get(existing.domain, existing.key) == existing, "the full disk damaged an old record"
        assert [r.key for r in store.records()] == [existing.key]
        assert not other_files(store), "a failed write left its temp file"


def test_a_full_disk_before_the_key_exists_gives_a_clear_store_error(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "64k") as mount:
        (mount / ".preflight").mkdir()
        fill(mount)
        store = JustificationStore(mount / ".preflight")
        with pytest.raises(StoreError) as info:
            store.put(record_for("first"))
        assert "disk is full" in info.value.message
        assert not (mount / ".preflight" / "secret.key").exists()


def test_a_file_size_limit_gives_a_clear_store_error(tmp_path: Path) -> None:
    """Works without root: RLIMIT_FSIZE with SIGXFSZ ignored makes the write fail with EFBIG."""
    out = run_child("persist-capped", {"root": str(tmp_path / ".preflight"), "limit": 2048})
    error = out["error"]
    assert error is not None and error["type"] == "store_error", out
    assert "Could not write the justification store" in error["message"]
    assert "too large" in error["message"].lower() or "size limit" in error["message"].lower(), error
    assert not other_files(JustificationStore(tmp_path / ".preflight"))


@contextlib.contextmanager
def read_only(mount: Path) -> Iterator[str]:
    """Make ``mount`` read-only: remount the tmpfs ro (root) - else chattr +i - else skip."""
    done = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True)
    if done.returncode == 0:
        try:
            yield "remount,ro"
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=False)
        return
    pytest.skip(f"cannot make the store read-only here: {done.stderr.decode().strip()}")


def test_a_read_only_store_gives_a_clear_store_error_and_still_reads(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m") as mount:
        store = JustificationStore(mount / ".preflight")
        existing = store.put(record_for("before"))
        with read_only(mount):
            with pytest.raises(StoreError) as info:
                store.put(record_for("after"))
            assert "read-only" in info.value.message and info.value.fix
            with pytest.raises(StoreError, match="read-only"):
                store.put(record_for("in a new domain folder perhaps", version=2))
            assert JustificationStore(mount / ".preflight").get(existing.domain, existing.key) == existing


def test_an_immutable_store_directory_gives_a_clear_store_error(tmp_path: Path) -> None:
    """Without mount rights: chattr +i on the domain folder (ext4 and friends)."""
    store = JustificationStore(tmp_path / ".preflight")
    existing = store.put(record_for("before"))
    folder = store.path_for(existing.domain, existing.key).parent
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not available here: {done.stderr.decode().strip()}")
    try:
        same_domain = next(
            label for label in (f"x{i}" for i in range(100)) if record_for(label).domain == existing.domain
        )
        with pytest.raises(StoreError) as info:
            store.put(record_for(same_domain))
        assert "read-only or not writable" in info.value.message
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=False)


# ----------------------------------------------------------------------- outputs that fail midway


def partials(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.rglob("*.partial-*"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("operation", "args"),
    [
        ("raster.convert", {"src": "world.byte.tif", "dst": "out.tif", "compress": "NONE"}),
        (
            "raster.reproject",
            {"src": "RGB.byte.tif", "dst": "out.tif", "dst_crs": "EPSG:4326", "compress": "NONE"},
        ),
    ],
)
def test_a_write_refused_midway_leaves_no_output_under_the_destination_name(
    workspace_dir: Path, operation: str, args: dict[str, Any]
) -> None:
    params = {"workspace": str(workspace_dir), "operation": operation, "args": args, "limit": 256 * 1024}
    out = run_child("operation-capped", params)
    assert out["error"] is not None and out["error"]["type"] == "raster_error", out
    assert "nothing was written" in out["error"]["message"], out["error"]
    assert not (workspace_dir / "out.tif").exists()
    assert partials(workspace_dir) == []


def test_a_write_refused_midway_keeps_an_existing_destination(workspace_dir: Path) -> None:
    made = run_operation(str(workspace_dir), "raster.convert", {"src": "shade.tif", "dst": "out.tif"})
    assert made["error"] is None, made  # an earlier output: only llmc-mcp's own may be replaced
    before = digest(workspace_dir / "out.tif")
    args = {"src": "world.byte.tif", "dst": "out.tif", "compress": "NONE"}
    params = {"workspace": str(workspace_dir), "operation": "raster.convert", "args": args, "limit": 1 << 20}
    out = run_child("operation-capped", params)
    assert out["error"]["type"] == "raster_error", out
    assert digest(workspace_dir / "out.tif") == before
    assert partials(workspace_dir) == []


@pytest.mark.parametrize(
    ("operation", "args"),
    [
        ("raster.convert", {"src": "corrupt.tif", "dst": "from_corrupt.tif"}),
        ("raster.reproject", {"src": "corrupt.tif", "dst": "from_corrupt.tif", "dst_crs": "EPSG:4326"}),
    ],
)
def test_a_corrupt_source_leaves_no_output_under_the_destination_name(
    workspace_dir: Path, operation: str, args: dict[str, Any]
) -> None:
    out = run_operation(str(workspace_dir), operation, args)
    assert out["error"] is not None and out["error"]["type"] == "raster_error", out
    assert "nothing was written" in out["error"]["message"]
    assert not (workspace_dir / "from_corrupt.tif").exists()
    assert partials(workspace_dir) == []


def test_a_corrupt_source_keeps_an_existing_destination(workspace_dir: Path, ctx: OperationContext) -> None:
    convert = get_operation("raster.convert")  # an earlier output: only llmc-mcp's own may be replaced
    convert.run(ctx, convert.validate({"src": "shade.tif", "dst": "from_corrupt.tif"}))
    before = digest(workspace_dir / "from_corrupt.tif")
    with pytest.raises(RasterError, match="nothing was written"):
        get_operation("raster.convert").run(
            ctx,
            {**get_operation("raster.convert").validate({"src": "corrupt.tif", "dst": "from_corrupt.tif"})},
        )
    assert digest(workspace_dir / "from_corrupt.tif") == before
    assert partials(workspace_dir) == []


def test_an_operation_killed_midway_never_leaves_a_partial_destination(workspace_dir: Path) -> None:
    """SIGKILL skips every cleanup: only a hidden temp file may remain, never a partial ``dst``."""
    # ~2 s of warping and writing (2383 x 1987 x 3); timed once, so the kills land inside the work.
    args = {"src": "RGB.byte.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "resolution": 0.001}
    full = run_operation(str(workspace_dir), "raster.reproject", {**args, "dst": "full.tif"})
    assert full["error"] is None, full
    duration, width = full["seconds"], full["result"]["width"]
    made = run_operation(str(workspace_dir), "raster.convert", {"src": "shade.tif", "dst": "kept.tif"})
    assert made["error"] is None, made  # an earlier output: only llmc-mcp's own may be replaced
    before = digest(workspace_dir / "kept.tif")
    rng = random.Random(7)
    for round_ in range(4):
        dst = "killed.tif" if round_ % 2 else "kept.tif"
        job = {"workspace": str(workspace_dir), "operation": "raster.reproject", "args": {**args, "dst": dst}}
        proc = child("operation", job)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.1, 0.7) * duration)
        proc.kill()
        proc.wait(10)
        target = workspace_dir / dst
        if dst == "kept.tif" and digest(target) == before:
            continue  # killed mid-work: the old file is untouched
        if target.exists():  # the work finished before the kill: then the file must be whole
            info = run_operation(str(workspace_dir), "raster.stats", {"path": dst, "approx": True})
            assert info["error"] is None, f"a killed write left a damaged {dst}: {info['error']}"
            assert run_operation(str(workspace_dir), "raster.info", {"path": dst})["result"]["width"] == width
            before = digest(workspace_dir / "kept.tif")
    leftovers = partials(workspace_dir)
    assert leftovers, "no kill landed mid-write; the test proves nothing"
    for name in leftovers:
        assert name.startswith(".") and ".partial-" in name, f"a partial output is not hidden: {name}"


def test_key_for_is_stable() -> None:
    assert key_for("a") == key_for("a") and KEY_PATTERN.match(key_for("a"))
