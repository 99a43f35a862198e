"""The records and errors of output accounting: quotas, grants, ledger entries, removals."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from llmc_mcp.errors import LlmcError

SIDECAR_SUFFIXES = (".aux.xml", ".ovr", ".msk", ".provenance.json")
"""Files beside a GeoTIFF that belong to it (GDAL's, and its provenance record); moved (or removed) with
it on commit, so a replaced output never keeps the old one's."""


class QuotaExceeded(LlmcError):
    """A write would exceed an output quota or eat into the disk's free-space reserve."""

    kind = "quota_exceeded"


class RemoveRefused(LlmcError):
    """A file llmc-mcp did not write, or that someone changed since, was asked to be removed."""

    kind = "remove_refused"


@dataclass(frozen=True)
class Grant:
    """Permission for one write: the temporary file to write and the most bytes any file may take."""

    token: str
    tmp: str
    """Workspace-relative name of the hidden temporary file, beside ``dst``."""
    dst: str
    max_bytes: int
    bound: str
    """Which limit sets ``max_bytes``, as a phrase for an error message."""
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grant:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class OutputRecord:
    """One file llmc-mcp wrote, as the ledger keeps it."""

    path: str
    bytes: int
    session: str
    written_at: str
    inode: int
    mtime_ns: int
    ctime_ns: int
    """With the inode and mtime, what makes the file still the one written: a user who rewrites it in
    place keeps its inode, and may set its mtime back, but only the kernel sets the ctime."""

    def payload(self) -> bytes:
        """What the entry's signature covers; the prefix keeps it from passing for any other signed text."""
        fields = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return b"llmc-mcp output ledger 1\n" + fields.encode()

    def describes(self, info: os.stat_result) -> bool:
        """Whether ``info`` (of the file at :attr:`path`) is the file this record was written as."""
        return (info.st_ino, info.st_mtime_ns, info.st_ctime_ns) == (self.inode, self.mtime_ns, self.ctime_ns)


@dataclass(frozen=True)
class Removal:
    """What :meth:`OutputLedger.remove` deleted, and where the remover's session stands after it."""

    path: str
    removed: list[str]
    freed_bytes: int
    session_bytes: int
    session_files: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Removal:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass
class WriteLimit:
    """What :meth:`OutputGuard.limit` saw: whether a write ran into the grant's budget."""

    reached: bool = False
