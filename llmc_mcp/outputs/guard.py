"""How operation code gets permission to write: from the ledger in-process, or from the server in a worker."""

from __future__ import annotations

import contextlib
import resource
import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from llmc_mcp.outputs.ledger import OutputLedger
from llmc_mcp.outputs.models import Grant, Removal, WriteLimit
from llmc_mcp.provenance.authenticity import Claim


class OutputGuard(Protocol):
    """How operation code asks for, and hands back, permission to write one output."""

    def begin(self, dst: str) -> Grant: ...

    def check_writable(self, dst: str) -> None:
        """Refuse, before any work, a ``dst`` that :meth:`begin` would refuse as someone's original."""
        ...

    def limit(self, grant: Grant) -> AbstractContextManager[WriteLimit]:
        """While the write runs: no file may grow past ``grant.max_bytes``, where the process allows it."""
        ...

    def commit(self, grant: Grant) -> None: ...

    def abort(self, grant: Grant) -> None: ...

    def owned(self) -> list[str]:
        """Workspace-relative names of the outputs llmc-mcp wrote here that nobody changed since."""
        ...

    def remove(self, path: str) -> Removal:
        """Delete an output llmc-mcp wrote (:meth:`OutputLedger.remove`); refuse anything else."""
        ...

    def verify_records(self, claims: list[Claim]) -> list[bool]:
        """Which provenance records the server sealed (:mod:`llmc_mcp.provenance.authenticity`)."""
        ...


class LocalOutputs:
    """An :class:`OutputGuard` for operations run in this process: the ledger itself, for one session."""

    def __init__(self, ledger: OutputLedger, session: str = "local"):
        self.ledger = ledger
        self.session = session

    def begin(self, dst: str) -> Grant:
        return self.ledger.begin(self.session, dst)

    def check_writable(self, dst: str) -> None:
        self.ledger.check_writable(dst)

    def limit(self, grant: Grant) -> AbstractContextManager[WriteLimit]:
        # A file-size limit is per process: here it would also bound the server's own writes (the
        # store) and other threads' operations. The commit's re-check bounds what is kept.
        return contextlib.nullcontext(WriteLimit())

    def commit(self, grant: Grant) -> None:
        self.ledger.commit(self.session, grant.token)

    def abort(self, grant: Grant) -> None:
        self.ledger.abort(self.session, grant.token)

    def owned(self) -> list[str]:
        return self.ledger.owned()

    def remove(self, path: str) -> Removal:
        return self.ledger.remove(self.session, path)

    def verify_records(self, claims: list[Claim]) -> list[bool]:
        return self.ledger.verify_records(claims)


class RemoteOutputs:
    """An :class:`OutputGuard` for a worker: every step is decided by the server, over the channel."""

    def __init__(self, host: Any):
        self._host = host

    def begin(self, dst: str) -> Grant:
        return Grant.from_dict(self._host.request("outputs.begin", {"dst": dst}))

    def check_writable(self, dst: str) -> None:
        self._host.request("outputs.writable", {"dst": dst})

    @contextlib.contextmanager
    def limit(self, grant: Grant) -> Iterator[WriteLimit]:
        """RLIMIT_FSIZE at the grant's budget (never above the worker's own limit), restored after.

        A write past it fails with EFBIG; the kernel also sends SIGXFSZ, which is caught here (not
        ignored) to tell the budget apart from other write errors: GDAL deletes a failed copy, so the
        file's size cannot tell afterwards.
        """
        seen = WriteLimit()
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        cap = grant.max_bytes if soft == resource.RLIM_INFINITY else min(grant.max_bytes, soft)
        catching = threading.current_thread() is threading.main_thread()
        if catching:
            previous = signal.signal(signal.SIGXFSZ, lambda *_: setattr(seen, "reached", True))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))
        try:
            yield seen
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            if catching:
                signal.signal(signal.SIGXFSZ, previous)

    def commit(self, grant: Grant) -> None:
        self._host.request("outputs.commit", {"token": grant.token})

    def abort(self, grant: Grant) -> None:
        self._host.request("outputs.abort", {"token": grant.token})

    def owned(self) -> list[str]:
        return [str(name) for name in self._host.request("outputs.owned", {})]

    def remove(self, path: str) -> Removal:
        return Removal.from_dict(self._host.request("outputs.remove", {"path": path}))

    def verify_records(self, claims: list[Claim]) -> list[bool]:
        """Asked of the server: the key that signs the records never enters a worker."""
        answers = self._host.request("outputs.verify_records", {"claims": [list(c) for c in claims]})
        return [answer is True for answer in answers]
