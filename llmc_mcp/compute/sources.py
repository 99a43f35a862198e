"""A raster that a piece of work reads by path, so the piece can run in another process.

An engine that runs pieces elsewhere (:class:`~llmc_mcp.compute.dask_engine.DaskEngine`) pickles
what each piece needs. An open ``DatasetReader`` cannot travel; a :class:`SourceRaster` can: it
carries the path the server already checked against the workspace policy, the file's size and
modification time when it was checked, and how to open it. Where the plan was made (the local
engine) it hands back the caller's open dataset, so nothing is opened twice; anywhere else it opens
the file once per thread through the workspace's path policy and
:func:`~llmc_mcp.gdal.datasets.open_for_read`, so the policy, the allowed drivers and the dataset
checks run before any pixel is read there too.

A file that changed since it was checked (a neighbour or another call replaced it) is refused: a
piece must never mix windows of two files.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rasterio.io import DatasetReader

from llmc_mcp.errors import RasterError
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, open_for_read
from llmc_mcp.gdal.environment import GdalContext, gdal_env
from llmc_mcp.gdal.remote_datasets import remote_name
from llmc_mcp.remote.allowlist import looks_remote
from llmc_mcp.workspace import Workspace

MAX_OPEN_PER_THREAD = 16
"""Datasets a worker thread keeps open between pieces; the oldest is closed past it."""

_opened = threading.local()


@dataclass(frozen=True)
class PieceContext:
    """What a piece needs of its operation's context, and no more: the workspace (names in messages,
    the policy) and the thread budget. Unlike the operation's context it pickles: no channel, no
    ledger, no engine."""

    workspace: Workspace
    num_threads: int = 1


@dataclass(frozen=True)
class SourceRaster:
    """A workspace raster, by its checked path, that pieces open where they run; or a remote one, by
    its URL, which only a process that reads URLs (the session's worker) can open again."""

    root: str
    path: str
    argument: str
    georeferencing: GeoreferencingPolicy
    size: int
    mtime_ns: int
    num_threads: int = 1
    opened: DatasetReader | None = field(default=None, repr=False, compare=False)
    """The caller's own open dataset, used where the piece runs in the caller's thread."""
    owner: int = field(default_factory=threading.get_ident, repr=False, compare=False)
    """The thread that opened :attr:`opened`: a dataset handle is never used by two threads at once."""

    @classmethod
    def of(
        cls,
        ctx: GdalContext,
        dataset: DatasetReader,
        argument: str = "path",
        georeferencing: GeoreferencingPolicy = "unchecked",
    ) -> SourceRaster:
        """``dataset``, opened by the caller through the policy, as pieces will open it.

        ``georeferencing`` must be the policy the caller opened it with, so a piece elsewhere reads
        the same georeferencing.
        """
        url = remote_name(dataset)
        if url is not None:
            # Opened again elsewhere through that process's remote access (the session worker's, or
            # none: a Dask worker refuses it, and remote inputs run on the local engine).
            return cls(str(ctx.workspace.root), url, argument, georeferencing, 0, 0, ctx.num_threads, dataset)
        path = Path(dataset.name).resolve()
        stat = path.stat()
        return cls(
            str(ctx.workspace.root), str(path), argument, georeferencing, stat.st_size, stat.st_mtime_ns,
            ctx.num_threads, dataset,
        )  # fmt: skip

    @property
    def context(self) -> PieceContext:
        return PieceContext(Workspace(self.root), self.num_threads)

    def dataset(self) -> DatasetReader:
        """The open dataset: the caller's in the caller's thread, else this thread's own, opened (and
        checked) once."""
        if self.opened is not None and not self.opened.closed and threading.get_ident() == self.owner:
            return self.opened
        cache: OrderedDict[tuple[str, int, int, str], DatasetReader] = _thread_cache()
        key = (self.path, self.size, self.mtime_ns, self.georeferencing)
        dataset = cache.get(key)
        if dataset is not None and not dataset.closed:
            cache.move_to_end(key)
            return dataset
        dataset = self._open()
        cache[key] = dataset
        while len(cache) > MAX_OPEN_PER_THREAD:
            _, oldest = cache.popitem(last=False)
            oldest.close()
        return dataset

    def _open(self) -> DatasetReader:
        ctx = self.context
        if looks_remote(self.path):
            with gdal_env(ctx):
                return open_for_read(ctx, self.path, self.argument, georeferencing=self.georeferencing)
        path = Path(self.path)
        shown = ctx.workspace.relative(path)
        try:
            stat = path.stat()
        except OSError:
            stat = None
        if stat is None or (stat.st_size, stat.st_mtime_ns) != (self.size, self.mtime_ns):
            raise RasterError(
                f"{self.argument}: '{shown}' changed or went away while it was being processed.",
                fix="Run the operation again once nothing else writes that file.",
            )
        # The workspace's path policy again, where the piece runs: links and sidecars leading out
        # are refused here too, whatever the process that submitted the piece checked.
        checked = ctx.workspace.input_path(shown, argument=self.argument)
        with gdal_env(ctx):
            return open_for_read(
                ctx, shown, self.argument, resolved=checked, georeferencing=self.georeferencing
            )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["opened"] = None
        state["owner"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)


def close_thread_datasets() -> None:
    """Close the datasets this thread opened for pieces: a helper thread that ends must not keep
    files open (a replaced or deleted file stays on disk while a handle holds it)."""
    cache = _thread_cache()
    while cache:
        _, dataset = cache.popitem()
        dataset.close()


def _thread_cache() -> OrderedDict[tuple[str, int, int, str], DatasetReader]:
    cache = getattr(_opened, "cache", None)
    if cache is None:
        cache = _opened.cache = OrderedDict()
    return cache
