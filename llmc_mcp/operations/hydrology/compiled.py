"""Where the routing kernels' machine code comes from: the server's kernel cache, or compiled in memory.

numba compiles pyflwdir's functions and ours (:mod:`._kernels`) on first use: 7 s of CPU for
pyflwdir's priority flood alone, on any grid, and 30-40 s of wall time on a loaded two-core host, so
a session's first routing could spend its whole ``--exec-timeout`` compiling (DD-MCP-100). numba can
keep compiled code on disk, but its cache is pickles and object code: whoever can write it runs code
in every process that reads it. So:

- one process writes the cache: a warm-up the server starts in the background (:func:`start_warming`),
  which runs the hydrology operations on a small synthetic DEM in a temporary workspace (no input of
  any agent) with writing on, into a fresh directory it renames into place when done;
- the cache is the server user's (not writable by group or others) and never inside the workspace;
- workers read it (:func:`read_from`, then a Landlock read rule) and never write it: a function or
  signature it lacks is compiled in memory, as without a cache.

This module imports no numba until :func:`compiled_code` runs: the server and the pool import it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

log = logging.getLogger(__name__)

KERNEL_SOURCE = Path(__file__).with_name("_kernels.py")
LOCK_NAME = ".warming"
"""The file a warm-up holds an exclusive lock on while it writes (one writer per cache root)."""
WARM_CPU_SECONDS = 600
"""CPU a warm-up may spend (it needs about 20-40 s); past it the kernel stops it."""
WARM_MEMORY = 4 * 1024 * 1024 * 1024
"""Address space of a warm-up (numba and LLVM take about 700 MiB)."""

_PASSED_ENV = ("PATH", "HOME", "LANG", "PROJ_DATA", "PROJ_LIB", "GDAL_DATA")
"""The warm-up's environment: no credentials or proxies (it reads nothing remote)."""

_reading: Path | None = None
"""The cache this process reads (a worker's, set before confinement); None: compile in memory."""
_writing: Path | None = None
"""The cache this process writes (the warm-up's own, unfinished directory)."""
_import_lock = threading.Lock()
_warm_ups: dict[Path, subprocess.Popen[bytes]] = {}
"""The warm-ups this process started, by root: one each."""


@functools.cache
def cache_key() -> str:
    """The name of this installation's cache: numba's, pyflwdir's and Python's versions, where the
    packages are and the kernels' source (numba also checks each source file and the CPU itself; two
    virtual environments of one user get a cache each, as numba's entries name the source's folder)."""
    digest = hashlib.sha256()
    pyflwdir_spec = importlib.util.find_spec("pyflwdir")
    for part in (
        metadata.version("numba"),
        metadata.version("pyflwdir"),
        sys.version,
        str(KERNEL_SOURCE.resolve()),
        str(pyflwdir_spec.origin if pyflwdir_spec else None),
    ):
        digest.update(part.encode() + b"\0")
    digest.update(KERNEL_SOURCE.read_bytes())
    return digest.hexdigest()[:16]


def ready(root: Path | None) -> Path | None:
    """This installation's complete cache under ``root``, if both are directories of this user that
    no one else may write; else None (compile in memory)."""
    if root is None:
        return None
    path = root / cache_key()
    return path if _private(root) and _private(path) else None


def _private(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def read_from(path: str | None) -> None:
    """Have this process take compiled kernels from ``path`` (:func:`ready`'s answer in the server)."""
    global _reading
    _reading = Path(path) if path else None


@contextlib.contextmanager
def compiled_code() -> Iterator[None]:
    """Import numba-decorated modules inside this: each ``cache=True`` function then reads the cache
    of :func:`read_from` (writing nothing) or, without one, compiles in memory only."""
    from numba.core.dispatcher import Dispatcher

    with _import_lock:
        enable = Dispatcher.enable_caching
        cache = _cache_class(_writing or _reading, writable=_writing is not None)
        Dispatcher.enable_caching = _caching_with(cache)  # type: ignore[method-assign]
        try:
            yield
        finally:
            Dispatcher.enable_caching = enable  # type: ignore[method-assign]


def _caching_with(cache: type | None) -> Callable[[Any], None]:
    if cache is None:
        return lambda dispatcher: None  # the dispatcher keeps its NullCache: compiled in memory

    def enable(dispatcher: Any) -> None:
        dispatcher._cache = cache(dispatcher.py_func)

    return enable


def _cache_class(root: Path | None, *, writable: bool) -> type | None:
    """numba's function cache, located under ``root`` whatever numba's own settings say; a reader's
    saves are dropped (a confined worker could not write, and must not)."""
    if root is None:
        return None
    from numba.core import caching

    base = str(root)

    class Locator(caching.UserProvidedCacheLocator):
        def __init__(self, py_func: Any, py_file: str):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(base, self.get_suitable_cache_subpath(py_file))

        def ensure_cache_path(self) -> None:
            if not writable:
                raise OSError("the kernel cache is read-only in this process")
            super().ensure_cache_path()

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Locator | None:
            return cls(py_func, py_file) if os.path.exists(py_file) else None

    class Impl(caching.CompileResultCacheImpl):
        _locator_classes: ClassVar[list[type]] = [Locator]

    class Cache(caching.FunctionCache):
        _impl_class = Impl

        def save_overload(self, sig: Any, data: Any) -> None:
            if writable:
                super().save_overload(sig, data)

    return Cache


def start_warming(root: Path | None) -> None:
    """Start the warm-up in the background, unless this process did, the cache is ready, or another
    process is writing it. Logs (never raises) when the root cannot be used."""
    if root is None or root in _warm_ups or ready(root) is not None:
        return
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("kernel cache %s cannot be created (%s): routing kernels compile per worker", root, exc)
        return
    if not _private(root):
        log.warning("kernel cache %s is not a directory only this user may write: not used", root)
        return
    try:
        with _warming_lock(root) as held:
            if not held:
                return
    except OSError as exc:
        log.warning("kernel cache %s cannot be locked (%s): routing kernels compile per worker", root, exc)
        return
    # -c, not -m: run as __main__, this module would be a second copy beside the one the operations use.
    entry = "from llmc_mcp.operations.hydrology.compiled import main; main()"
    command = [sys.executable, "-I", "-c", entry, str(root)]
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    try:
        _warm_ups[root] = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=env,
            start_new_session=True,  # outlives a server that stops first; the next start finds it done
        )
    except OSError as exc:
        log.warning("kernel warm-up could not start (%s): routing kernels compile per worker", exc)


@contextlib.contextmanager
def _warming_lock(root: Path) -> Iterator[bool]:
    """Hold the root's warm-up lock if no one else does; yields whether it is held."""
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def warm(root: Path) -> bool:
    """Compile the kernels every hydrology operation uses into this installation's cache under
    ``root``; whether the cache is there afterwards. Other installations' caches (a few MiB each) stay:
    two virtual environments of one user may share the root."""
    global _writing
    import resource

    os.nice(19)
    resource.setrlimit(resource.RLIMIT_CPU, (WARM_CPU_SECONDS, WARM_CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (WARM_MEMORY, WARM_MEMORY))
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(root):
        return False
    with _warming_lock(root) as held:
        if not held or ready(root) is not None:
            return ready(root) is not None
        key = cache_key()
        for entry in root.glob(".*.*"):  # warm-ups stopped before they finished
            shutil.rmtree(entry, ignore_errors=True)
        unfinished = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        _writing = unfinished
        try:
            _exercise_operations()
        finally:
            _writing = None
        os.rename(unfinished, root / key)
    return True


def _exercise_operations() -> None:
    """Run each hydrology operation, and each routing and method, on a small DEM: every kernel and
    signature the operations use is compiled, and saved by the caches :func:`compiled_code` gives."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    from llmc_mcp.operations.catalog import OperationContext, get_operation
    from llmc_mcp.state import STATE_DIR_ENV
    from llmc_mcp.workspace import Workspace

    rows, cols = np.mgrid[0:32, 0:32]
    dem = (300.0 - 2.0 * rows - 1.5 * cols).astype("float32")
    dem[10, 10] -= 8.0  # a pit
    dem[20:24, 5:9] = dem[20, 5]  # a flat
    dem[0, 31] = -9999.0  # nodata
    profile = {
        "driver": "GTiff", "height": 32, "width": 32, "count": 1, "dtype": "float32",
        "crs": "EPSG:32632", "transform": from_origin(500_000.0, 5_000_000.0, 30.0, 30.0), "nodata": -9999.0,
    }  # fmt: skip
    outlet = (500_000.0 + 30.5 * 30.0, 5_000_000.0 - 30.5 * 30.0)
    with tempfile.TemporaryDirectory(prefix="llmc-mcp-warm-") as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        # The outputs' ledger keys go to a state folder of its own, never the server's.
        os.environ[STATE_DIR_ENV] = str(Path(folder) / "state")
        with rasterio.open(workspace / "dem.tif", "w", **profile) as dst:
            dst.write(dem, 1)
        ctx = OperationContext(Workspace(workspace), num_threads=1)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("condition", {"dem": "dem.tif", "dst": "fill.tif"}),
            ("condition", {"dem": "dem.tif", "dst": "kept.tif", "max_depth": 1.0}),
            ("condition", {"dem": "dem.tif", "dst": "flats.tif", "method": "fill_flats"}),
            ("condition", {"dem": "dem.tif", "dst": "breach.tif", "method": "breach", "max_depth": 0.5}),
            ("flow_direction", {"dem": "fill.tif", "dst": "d8.tif"}),
            ("flow_direction", {"dem": "flats.tif", "dst": "dinf.tif", "routing": "dinf"}),
            ("flow_direction", {"dem": "flats.tif", "dst": "mfd.tif", "routing": "mfd"}),
            ("flow_accumulation", {"flow_dir": "d8.tif", "dst": "cells.tif"}),
            ("flow_accumulation", {"flow_dir": "d8.tif", "dst": "m2.tif", "units": "m2"}),
            ("flow_accumulation", {"flow_dir": "d8.tif", "dst": "weighted.tif", "weights": "dem.tif"}),
            ("flow_accumulation", {"flow_dir": "dinf.tif", "dst": "dinf_cells.tif"}),
            ("flow_accumulation", {"flow_dir": "mfd.tif", "dst": "mfd_cells.tif", "dem": "flats.tif"}),
            ("streams", {"accumulation": "cells.tif", "dst": "streams.tif", "threshold": 5}),
            ("watershed", {"flow_dir": "d8.tif", "pour_points": [outlet], "dst": "basin.tif"}),
        ]
        for name, args in calls:
            op = get_operation(f"hydrology.{name}")
            try:
                op.run(ctx, op.validate(args))
            except Exception:  # one operation's failure leaves the others' kernels cached
                log.exception("kernel warm-up: hydrology.%s failed", name)


def main() -> None:
    """The warm-up process (:func:`start_warming`): ``ROOT`` is its one argument."""
    logging.basicConfig(level=logging.WARNING)
    sys.exit(0 if warm(Path(sys.argv[1])) else 1)


if __name__ == "__main__":
    sys.exit(0 if warm(Path(sys.argv[1])) else 1)
