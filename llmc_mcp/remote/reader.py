"""GDAL's view of one remote file: a rasterio opener that serves it, and nothing else, from ranges.

GDAL reads a GeoTIFF's header in dozens of small reads and its tiles as lists of ranges. The header
reads go through a block cache (blocks of :data:`BLOCK` bytes, fetched together when a read spans
several), so a header costs one or two round trips; tile lists go to the transport as one request of
many ranges (rasterio's multi-range callback). Every other name GDAL probes beside the file
(``.aux.xml``, ``.ovr``, ``.msk``, ``_RPC.TXT``, ``.IMD``...) is answered "no such file" here, without
a request: a remote raster is the file alone, so no sidecar can change what it says or point elsewhere.

Each read is recorded (offset and length, at most :data:`MAX_RANGES_KEPT`) for the provenance record.

An exception raised into GDAL from an opener is lost (GDAL reports only that a block failed), so a
failed remote read is kept here (:func:`take_failure`) and GDAL is given no bytes; whoever turns the
GDAL error into a message asks for it, and the agent sees why the read stopped and what to do.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from rasterio.abc import MultiByteRangeResourceContainer

from llmc_mcp.errors import LlmcError
from llmc_mcp.remote.allowlist import redact
from llmc_mcp.remote.transport import RemoteError, RemoteFile, RemoteTransport

BLOCK = 64 << 10
"""Header reads fetch whole blocks of this size: GDAL's first reads are a few bytes each."""
MAX_READ_BYTES = 8 << 20
"""One request to the transport at most; longer reads are split (a worker's answer is one message)."""
MAX_RANGES_PER_READ = 512
CACHE_BLOCKS = 256
"""Blocks kept per process (16 MiB): headers and overview directories of the files in use."""
MAX_RANGES_KEPT = 256


class BlockCache:
    """Blocks of remote files by (url, version, index), least recently used dropped first."""

    def __init__(self, capacity: int = CACHE_BLOCKS):
        self.capacity = capacity
        self._blocks: OrderedDict[tuple[str, str | None, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str | None, int]) -> bytes | None:
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
            return block

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()

    def put(self, key: tuple[str, str | None, int], block: bytes) -> None:
        with self._lock:
            self._blocks[key] = block
            self._blocks.move_to_end(key)
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)


BLOCKS = BlockCache()

_failure: LlmcError | None = None
_failure_lock = threading.Lock()


def _fail(error: LlmcError) -> None:
    global _failure
    with _failure_lock:
        _failure = error


def take_failure() -> LlmcError | None:
    """The remote read that failed since the last call, if any (a worker runs one call at a time)."""
    global _failure
    with _failure_lock:
        error, _failure = _failure, None
    return error


class RemoteSource:
    """One remote file as GDAL reads it; the ranges it read are kept for provenance."""

    def __init__(self, transport: RemoteTransport, file: RemoteFile, cache: BlockCache = BLOCKS):
        self.transport = transport
        self.file = file
        self.cache = cache
        self.ranges: list[tuple[int, int]] = []
        """The ranges fetched, in order (at most :data:`MAX_RANGES_KEPT`; ``ranges_complete`` says if all)."""
        self.ranges_complete = True
        self.bytes_read = 0
        self.digest = hashlib.sha256()
        """SHA-256 of the bytes fetched, in the order of ``ranges``: what a record can vouch for."""
        self._lock = threading.Lock()

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of ``ranges`` straight from the transport, in requests of bounded size."""
        out: list[bytes] = []
        batch: list[tuple[int, int]] = []
        size = 0
        for offset, length in ranges:
            for start in range(offset, offset + max(length, 0), MAX_READ_BYTES) or [offset]:
                piece = (start, min(MAX_READ_BYTES, offset + length - start))
                if batch and (size + piece[1] > MAX_READ_BYTES or len(batch) >= MAX_RANGES_PER_READ):
                    out += self._fetch(batch)
                    batch, size = [], 0
                batch.append(piece)
                size += piece[1]
        if batch:
            out += self._fetch(batch)
        return _rejoin(ranges, out)

    def read_cached(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` through the block cache (small reads: headers, directories)."""
        end = min(offset + length, self.file.size)
        if offset >= end:
            return b""
        first, last = offset // BLOCK, (end - 1) // BLOCK
        keys = [(self.file.url, self.file.version, i) for i in range(first, last + 1)]
        blocks = {key: self.cache.get(key) for key in keys}
        missing = [key for key, block in blocks.items() if block is None]
        if missing:
            fetched = self.read_ranges([(key[2] * BLOCK, BLOCK) for key in missing])
            for key, block in zip(missing, fetched, strict=True):
                self.cache.put(key, block)
                blocks[key] = block
        data = b"".join(blocks[key] or b"" for key in keys)
        start = offset - first * BLOCK
        return data[start : start + end - offset]

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        got = self.transport.read(self.file, ranges)
        if len(got) != len(ranges):
            raise RemoteError(f"the answer for '{redact(self.file.url)}' has the wrong number of ranges.")
        with self._lock:
            for (offset, _length), data in zip(ranges, got, strict=True):
                self.bytes_read += len(data)
                self.digest.update(data)
                if len(self.ranges) < MAX_RANGES_KEPT:
                    self.ranges.append((offset, len(data)))
                else:
                    self.ranges_complete = False
        return got


def _rejoin(ranges: Sequence[tuple[int, int]], pieces: list[bytes]) -> list[bytes]:
    """Join the pieces a long range was split into back into one bytes per range."""
    out, at = [], 0
    for _offset, length in ranges:
        count = max(1, -(-max(length, 0) // MAX_READ_BYTES))
        out.append(b"".join(pieces[at : at + count]))
        at += count
    return out


class RemoteFileReader:
    """The Python file GDAL reads through (read, seek, tell, and multi-range reads)."""

    def __init__(self, source: RemoteSource):
        self._source = source
        self._position = 0
        self.closed = False

    def __enter__(self) -> RemoteFileReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._source.file.size - self._position
        try:
            data = self._source.read_cached(self._position, size)
        except LlmcError as exc:  # the server's refusal or bound, as it was given
            _fail(exc)
            return b""
        except Exception as exc:
            _fail(RemoteError(f"reading '{redact(self._source.file.url)}' failed ({type(exc).__name__})."))
            return b""
        self._position += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._position, 2: self._source.file.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self.closed = True

    def get_byte_ranges(self, offsets: Sequence[int], sizes: Sequence[int]) -> list[bytes]:
        try:
            return self._source.read_ranges(list(zip(offsets, sizes, strict=True)))
        except LlmcError as exc:  # the server's refusal or bound, as it was given
            _fail(exc)
        except Exception as exc:
            _fail(RemoteError(f"reading '{redact(self._source.file.url)}' failed ({type(exc).__name__})."))
        return [b"" for _ in offsets]


class RemoteOpener(MultiByteRangeResourceContainer):
    """The opener rasterio registers for one URL: that name opens, every other name does not exist."""

    def __init__(self, name: str, source: RemoteSource):
        self._name = name
        self._source = source

    def open(self, path: str, mode: str = "rb", **_kwds: Any) -> RemoteFileReader:
        if path != self._name or "w" in mode or "+" in mode or "a" in mode:
            raise FileNotFoundError(path)
        return RemoteFileReader(self._source)

    def isfile(self, path: str) -> bool:
        return path == self._name

    def isdir(self, path: str) -> bool:
        return False

    def ls(self, path: str) -> list[str]:
        return []

    def mtime(self, path: str) -> int:
        return 0

    def size(self, path: str) -> int:
        if path != self._name:
            raise FileNotFoundError(path)
        return self._source.file.size

    def rm(self, path: str) -> None:
        raise PermissionError(path)
