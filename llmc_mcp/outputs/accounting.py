"""How much a session and the workspace have written, against their quotas, and how a refusal says
so: the figures behind every :class:`~llmc_mcp.outputs.QuotaExceeded`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from llmc_mcp.config import MiB, Quota
from llmc_mcp.outputs.models import OutputRecord
from llmc_mcp.sessions import principal

FREE_OUTPUTS = "Remove outputs no longer needed with files.remove (files.list() marks them written_by_llmc),"
"""How a session frees its quota itself: the first fix of every quota refusal."""


@dataclass(frozen=True)
class Usage:
    """What a set of outputs takes: files and bytes."""

    bytes: int
    files: int


@dataclass(frozen=True)
class Standing:
    """What a session and the workspace hold before ``rel`` is written.

    Overwriting an output frees its bytes and adds no file (to the session, if it was its own).
    """

    session: Usage
    workspace: Usage
    freed: int
    replaces: bool
    own: bool

    @classmethod
    def of(cls, records: Mapping[str, OutputRecord], account: str, rel: str) -> Standing:
        replaced = records.get(rel)
        return cls(
            session=usage_of(r for r in records.values() if r.session == account),
            workspace=usage_of(records.values()),
            freed=replaced.bytes if replaced is not None else 0,
            replaces=replaced is not None,
            own=replaced is not None and replaced.session == account,
        )

    @property
    def freed_in_session(self) -> int:
        return self.freed if self.own else 0

    @property
    def new_to_session(self) -> int:
        return 0 if self.own else 1

    @property
    def new_file(self) -> int:
        return 0 if self.replaces else 1


def account_of(session: str) -> str:
    """Whose quota a write counts against: its session, or every stateless caller alike."""
    return principal(session) or session


def charged_text(charged: int) -> str:
    """The part of a refusal's text that names the server's other files charged to the quota."""
    return (
        f" and {size_text(charged)} by workflow states, open questions and justifications" if charged else ""
    )


def usage_of(records: Iterable[OutputRecord]) -> Usage:
    """The files and bytes of ``records``."""
    total = files = 0
    for record in records:
        total += record.bytes
        files += 1
    return Usage(total, files)


def size_text(n: int) -> str:
    """A byte count as people read it (``1.5 MiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def session_bytes_text(quota: Quota, use: Usage, charged: int = 0) -> tuple[str, str]:
    """The bound and the fix of a refusal for the session's bytes."""
    return (
        f"this session's output quota is {size_text(quota.session_bytes)} (--quota-session-mb "
        f"{quota.session_bytes // MiB}) and {size_text(use.bytes)} of it is used by {use.files} files"
        + charged_text(charged),
        f"{FREE_OUTPUTS} write a compressed output (compress='DEFLATE' or 'ZSTD'), overwrite earlier "
        "outputs instead of writing new names, or ask the user to raise --quota-session-mb.",
    )


def workspace_bytes_text(quota: Quota, use: Usage, charged: int = 0) -> tuple[str, str]:
    """The bound and the fix of a refusal for the workspace's bytes."""
    return (
        f"the workspace's output quota is {size_text(quota.workspace_bytes)} (--quota-workspace-mb "
        f"{quota.workspace_bytes // MiB}) and {size_text(use.bytes)} of it is used by {use.files} files"
        + charged_text(charged),
        f"{FREE_OUTPUTS} write a compressed output (compress='DEFLATE' or 'ZSTD'), overwrite earlier "
        "outputs instead of writing new names, or ask the user to raise --quota-workspace-mb.",
    )


def reserve_text(quota: Quota, free: int) -> tuple[str, str]:
    """The bound and the fix of a refusal for the disk reserve, with ``free`` bytes free."""
    return (
        f"the disk has {size_text(free)} free and {size_text(quota.reserve_bytes)} are kept "
        f"free for the server's own records (--disk-reserve-mb {quota.reserve_bytes // MiB})",
        "Write a compressed output (compress='DEFLATE' or 'ZSTD'), or ask the user to free disk space.",
    )


def disk_free(folder: Path) -> int:
    """Bytes free to this user on the disk holding ``folder``."""
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize
