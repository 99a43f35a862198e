"""A worker started before the server's event loop exists, adopted by the pool as its first spare.

A stdio host connects, shakes hands and calls at once; the worker a session needs takes about 0.5 s
to start (an interpreter importing GDAL, PROJ and numpy), and the server process spends longer than
that importing its own modules before it can answer the handshake. Started first, with a plain
``subprocess.Popen``, the worker starts while the server does, and the first call finds it ready.

The pool talks to workers through anyio's process and stream interfaces; :class:`AdoptedProcess`
and :class:`PipeStream` give a ``Popen`` those interfaces, reading and writing its pipes in worker
threads (a read is only pending while a call is, so this costs no thread while the worker is idle).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process


class PipeStream(ByteReceiveStream, ByteSendStream):
    """One end of a pipe as an anyio byte stream."""

    def __init__(self, fd: int):
        self._fd = fd
        self._closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await anyio.to_thread.run_sync(os.read, self._fd, max_bytes, abandon_on_cancel=True)
        except OSError as exc:
            raise anyio.BrokenResourceError(str(exc)) from None
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            try:
                written = await anyio.to_thread.run_sync(os.write, self._fd, view)
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from None
            view = view[written:]

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)


class AdoptedProcess(Process):
    """A ``subprocess.Popen`` behind anyio's ``Process`` interface."""

    def __init__(self, popen: subprocess.Popen[bytes]):
        assert popen.stdin is not None and popen.stdout is not None
        self._popen = popen
        # The pipes' file objects stay with the Popen (closed with it); the streams own duplicates.
        self._stdin = PipeStream(os.dup(popen.stdin.fileno()))
        self._stdout = PipeStream(os.dup(popen.stdout.fileno()))
        popen.stdin.close()
        popen.stdout.close()

    async def wait(self) -> int:
        return await anyio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: signal.Signals) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None

    async def aclose(self) -> None:
        await self._stdin.aclose()
        await self._stdout.aclose()
        await self.wait()


def prestart(command: Sequence[str], env: Mapping[str, str], cwd: str) -> AdoptedProcess | None:
    """Start a worker process now; None if it cannot be started (the pool then starts its own)."""
    try:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError:
        return None
    return AdoptedProcess(popen)
