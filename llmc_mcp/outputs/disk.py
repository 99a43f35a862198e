"""The ledger's file work: an output and its sidecars moved into place or removed together, a file's
identity, the journal's JSON, and whether the process that began a write is still alive."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llmc_mcp.durable import atomic_write
from llmc_mcp.outputs.models import SIDECAR_SUFFIXES, OutputRecord, RemoveRefused
from llmc_mcp.workspace import Workspace


def family(tmp: Path) -> list[Path]:
    """The temporary file and everything GDAL wrote beside it under its name (sidecars, COG temps)."""
    try:
        entries = list(os.scandir(tmp.parent))
    except FileNotFoundError:
        return []
    return [Path(e.path) for e in entries if e.name.startswith(tmp.name) and e.is_file(follow_symlinks=False)]


def unlink_with_sidecars(workspace: Workspace, path: Path, record: OutputRecord) -> list[str]:
    """Unlink ``path`` and its regular-file sidecars, through a handle on the folder checked.

    The folder is opened once and must really be ``path``'s (no link swapped in since it was
    resolved); the file's identity is checked in that folder right before the unlink.
    """
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        if os.readlink(f"/proc/self/fd/{fd}") != str(path.parent) or not record.describes(info):
            raise RemoveRefused(
                f"path: '{record.path}' changed while it was being removed; nothing was deleted.",
                fix="Look at it again with files.list() before removing it.",
            )
        os.unlink(path.name, dir_fd=fd)
        removed = [record.path]
        for suffix in SIDECAR_SUFFIXES:
            name = path.name + suffix
            try:
                if stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=fd)
                    removed.append(workspace.relative(path.parent / name))
            except FileNotFoundError:
                continue
    finally:
        os.close(fd)
    return removed


def move_into_place(tmp: Path, dst: Path) -> None:
    """Rename ``tmp`` onto ``dst``, then give ``dst`` the new file's sidecars.

    A sidecar of the file replaced (stale statistics, external overviews or mask) would be read as
    belonging to the new one: each is replaced by the new file's, or removed where GDAL wrote none.
    """
    os.replace(tmp, dst)
    for suffix in SIDECAR_SUFFIXES:
        new, old = Path(f"{tmp}{suffix}"), Path(f"{dst}{suffix}")
        if new.exists():
            os.replace(new, old)
        else:
            old.unlink(missing_ok=True)
    for leftover in family(tmp):
        leftover.unlink(missing_ok=True)


def file_identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """What changes with any write to a file: only the kernel sets the ctime."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def write_json(path: Path, data: Any) -> None:
    """Write ``path`` atomically and durably, as the justification store writes its records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, separators=(",", ":")).encode())


def process_identity(pid: int) -> str:
    """``<pid>-<start time>``: names a process uniquely across pid reuse (start time in clock ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"{pid}-0"
    return f"{pid}-{stat.rsplit(')', 1)[1].split()[19]}"


def is_alive(owner: str) -> bool:
    """Whether the process a journal entry names (by pid and start time) still runs.

    A pid with no process is dead, whatever start time the name gives: ``<pid>-0``, what
    :func:`process_identity` says of a process it cannot see, would otherwise match itself.
    """
    pid, _, _ = owner.partition("-")
    if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
        return False
    return process_identity(int(pid)) == owner


def now_text() -> str:
    """Now, in UTC, as the journal and the ledger write times."""
    return datetime.now(UTC).isoformat(timespec="seconds")
