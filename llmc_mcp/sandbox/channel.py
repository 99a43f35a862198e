"""The two-way channel between the server and a worker: length-prefixed JSON frames.

Either side may send a request while it waits for a response, which is what
lets agent code block inside the worker while the server decides the gate,
writes the store (and, later, asks the host's model or the user). Messages:

- request:  ``{"id": <int>, "method": <str>, "params": {...}}``
- response: ``{"id": <int>, "result": ...}`` or ``{"id": <int>, "error": {...}}``
- notification (worker to server only): ``{"method": <str>, "params": {...}}`` without an id; it is
  never answered, so the worker does not wait (progress, :mod:`llmc_mcp.compute.progress`)

Frames are a 4-byte big-endian length then UTF-8 JSON; a frame over
:data:`MAX_FRAME` is a protocol error, so a runaway worker cannot make the
server allocate without bound.
"""

from __future__ import annotations

import json
import struct
import threading
from typing import Any, BinaryIO

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

MAX_FRAME = 32 * 1024 * 1024
_CLOSED = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
_HEADER = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other side went away (exited, crashed or was killed)."""


class ProtocolError(Exception):
    """A malformed or oversized frame."""


def encode(message: dict[str, Any]) -> bytes:
    # ASCII escapes carry any Python string, lone surrogates included, to the other side unchanged,
    # where the operation's own validation refuses it with the error the agent can act on.
    body = json.dumps(message, ensure_ascii=True, separators=(",", ":"), default=str).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_FRAME}-byte frame limit")
    return _HEADER.pack(len(body)) + body


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("frame is nested too deeply") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message


def _length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit")
    return length


class SyncChannel:
    """The worker's end: blocking reads and writes on two pipes."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO):
        self._reader = reader
        self._writer = writer
        self._sending = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        frame = encode(message)
        try:
            with self._sending:  # one frame at a time: progress may come from another thread
                self._writer.write(frame)
                self._writer.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise ChannelClosed(str(exc)) from None

    def receive(self) -> dict[str, Any]:
        return _decode(self._read_exact(_length(self._read_exact(_HEADER.size))))

    def _read_exact(self, size: int) -> bytes:
        data = self._reader.read(size)
        if data is None or len(data) < size:
            raise ChannelClosed("the server closed the channel")
        return data


class AsyncChannel:
    """The server's end, over the worker process's stdin/stdout streams."""

    def __init__(self, receive_stream: ByteReceiveStream, send_stream: ByteSendStream):
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._buffer = bytearray()

    async def send(self, message: dict[str, Any]) -> None:
        frame = encode(message)
        try:
            await self._send_stream.send(frame)
        except _CLOSED as exc:
            raise ChannelClosed(f"worker channel closed: {type(exc).__name__}") from None

    async def receive(self) -> dict[str, Any]:
        header = await self._read_exact(_HEADER.size)
        return _decode(await self._read_exact(_length(header)))

    async def _read_exact(self, size: int) -> bytes:
        while len(self._buffer) < size:
            try:
                chunk = await self._receive_stream.receive(max(65536, size - len(self._buffer)))
            except (anyio.EndOfStream, *_CLOSED):
                raise ChannelClosed("the worker closed the channel") from None
            self._buffer.extend(chunk)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data
