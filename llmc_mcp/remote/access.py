"""This process's access to remote files: the allowlist, and the transport that reaches them.

Set once per process where it starts (the server from its settings, a worker from its configuration);
unset, every URL is refused with the reason and the operator's flag, which is the default.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from llmc_mcp.remote.allowlist import Allowlist, RemoteUrl
from llmc_mcp.remote.transport import Method, RemoteError, RemoteFile, RemoteTransport


@dataclass(frozen=True)
class RemoteAccess:
    allowlist: Allowlist
    transport: RemoteTransport

    def check(self, url: object, argument: str) -> RemoteUrl:
        return self.allowlist.check(url, argument)


_access: RemoteAccess | None = None


def configure(access: RemoteAccess | None) -> None:
    """Allow (or, with None, stop) remote reading in this process."""
    global _access
    _access = access


def remote_access() -> RemoteAccess:
    """This process's access; with none configured, an allowlist that refuses every URL."""
    return _access or RemoteAccess(Allowlist(), _NoTransport())


class _NoTransport:
    def stat(self, url: str) -> RemoteFile:
        raise RemoteError("this server reads no URLs.")

    def read(self, file: RemoteFile, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        raise RemoteError("this server reads no URLs.")

    def document(self, url: str, method: Method = "GET", body: Any = None) -> bytes:
        raise RemoteError("this server reads no URLs.")


class Host(Protocol):
    def request(self, method: str, params: Mapping[str, Any]) -> Any: ...


class HostTransport:
    """A worker's transport: each call is a request to the server, which holds the network and
    checks the URL again (a worker is not trusted to have checked it)."""

    def __init__(self, host: Host):
        self._host = host

    def stat(self, url: str) -> RemoteFile:
        return RemoteFile.from_dict(self._host.request("remote.stat", {"url": url}))

    def read(self, file: RemoteFile, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        answer = self._host.request(
            "remote.read", {"file": file.to_dict(), "ranges": [[int(o), int(n)] for o, n in ranges]}
        )
        if not isinstance(answer, list):
            raise RemoteError("malformed answer to a remote read")
        return [base64.b64decode(item) for item in answer]

    def document(self, url: str, method: Method = "GET", body: Any = None) -> bytes:
        answer = self._host.request("remote.document", {"url": url, "method": method, "body": body})
        return base64.b64decode(answer)
