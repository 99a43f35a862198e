"""A raw stdio peer for ``llmc-mcp serve``: bytes in, parsed JSON-RPC lines out, no SDK client."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.mcp_helpers import run_folders

PROTOCOL_VERSION = "2025-06-18"


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc), e.g. a server's code workers."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 is the parent pid; the command name (field 2) may hold spaces, so split after ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class RawServer:
    """``llmc-mcp serve`` over stdio pipes; every stdout line must be one JSON-RPC message."""

    def __init__(
        self,
        workspace: Path,
        *args: str,
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        protocol: str = PROTOCOL_VERSION,
    ):
        command = str(Path(sys.executable).parent / "llmc-mcp")
        self.stderr_path = stderr or workspace.parent / "server.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115  (closed in close())
        self.process = subprocess.Popen(
            [command, "serve", "--workspace", str(workspace), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": os.environ.get("HOME", "/root"),
                **run_folders(),
                **(env or {}),
            },
        )
        self.protocol = protocol
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.garbage: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1000

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.garbage.append(line[:200])
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                self.garbage.append(line[:200])
                continue
            self.messages.put(message)
        self.messages.put(None)

    def send_raw(self, data: bytes, newline: bool = True) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + (b"\n" if newline else b""))
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        reply = self.wait_for(self._next_id, timeout)
        assert reply is not None, f"no answer to {method} within {timeout} s"
        return reply

    def wait_for(self, request_id: Any, timeout: float) -> dict[str, Any] | None:
        """The response with this id, or None if none comes within ``timeout`` (others are kept)."""
        deadline = time.monotonic() + timeout
        held: list[dict[str, Any]] = []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                try:
                    message = self.messages.get(timeout=remaining)
                except queue.Empty:
                    return None
                if message is None:
                    self.messages.put(None)
                    return None
                if "method" not in message and message.get("id") == request_id:
                    return message
                held.append(message)
        finally:
            for message in held:
                self.messages.put(message)

    def drain(self, seconds: float) -> list[dict[str, Any]]:
        """Every message that arrives within ``seconds``."""
        found = []
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                break
            if message is None:
                self.messages.put(None)
                break
            found.append(message)
        return found

    def initialize(self) -> dict[str, Any]:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": self.protocol,
                "capabilities": {},
                "clientInfo": {"name": "raw-reliability", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call_tool(self, name: str, arguments: Any, timeout: float = 60.0) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments}, timeout)

    def close(self, timeout: float = 20.0) -> int | None:
        """Close stdin (the polite shutdown) and wait; kill if it does not exit."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        self._stderr.close()
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")
