"""The server's own files on disk: reads that are bounded and never block, writes that are atomic.

Every file the server reads back (justification records, provenance records, workflow states, the
output journal) lives where workers and hostile neighbours can plant things under its name: a FIFO,
a device, a link, a file of gigabytes. :func:`read_bounded` reads such a name safely;
:func:`atomic_write` and :func:`exclusive_write` leave either the old bytes or the new ones, never a
half-written file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

MAX_RECORD_BYTES = 128 * 1024
"""Largest record file written or read. A justification is at most 16,000 characters and a decision's
arguments a CRS definition (EPSG's longest WKT is ~10 k characters), so real records stay far below;
the bound keeps every record, and the provenance records that copy up to three of them, readable
within their own limits (1 MiB) whatever a client sent."""


def read_bounded(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """The bytes of one of the server's files in the workspace, at most one past ``limit`` (then it is
    too big): a regular file reached through no link, opened without blocking, so a FIFO or a device
    planted under its name raises :class:`OSError` instead of hanging the server (FileNotFoundError
    when it is missing)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read(limit + 1)


def exclusive_write(path: Path, data: bytes) -> bool:
    """Write ``data`` durably under ``path`` unless the name exists; False (nothing written) if it does."""
    tmp = _durable_temp(path, data)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)
    return True


def _durable_temp(path: Path, data: bytes) -> str:
    """``data`` written and fsynced to a hidden temporary file beside ``path``; removed on failure."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def fsync_dir(folder: Path) -> None:
    """Make a rename or link in ``folder`` durable."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: durable, and never seen half-written."""
    tmp = _durable_temp(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def os_reason(exc: OSError) -> str:
    """Why a write failed, in words an operator acts on."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full (or the user's quota is used up)"
    if exc.errno == errno.EFBIG:
        return "the file-size limit of this process was reached"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "the store is read-only or not writable"
    return exc.strerror or type(exc).__name__
