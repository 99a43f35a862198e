"""The worker process: one per MCP session, holding that session's variables.

Started by :mod:`llmc_mcp.sandbox.pool` as ``python -m llmc_mcp.sandbox.worker CONFIG``.
Its stdin/stdout pipes carry the channel and are moved off fds 0 and 1 at
once, so nothing a library prints can corrupt the channel (and the worker's
stdio is never the MCP channel). Before any agent code runs, trusted code
applies, in this order:

- resource limits (:func:`apply_limits`): address space, file size, open
  files, no core dumps, and a cap on new tasks; CPU time is set per call;
- a Landlock confinement where the kernel has it (:func:`confine`): the
  process may read the Python and GDAL/PROJ runtime, read and write the
  workspace, and nothing else; no TCP; no signals to processes outside it.
  This backs the path policy at the kernel level for every file GDAL or PROJ
  opens by a name the policy never saw (sidecars, grids, links inside files).

The wall-clock limit is the server's.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import itertools
import json
import logging
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from llmc_mcp.runtime_files import runtime_paths

_MiB = 1024 * 1024
log = logging.getLogger("llmc_mcp.sandbox.worker")

STDERR_BUDGET = 20_000
"""Characters of Python-level stderr (warnings, log records, 'Exception ignored' reports) per call."""

NPROC_HEADROOM = 256
"""Tasks (processes or threads) the worker's user may add once the worker runs; see apply_limits."""


class WorkerConfig(BaseModel):
    workspace: str
    memory_mb: int
    output_limit: int
    num_threads: int
    cpu_seconds: int
    engine: str = "local"
    """``--engine``: a session worker on ``dask`` hands pixel operations to its engine worker."""
    dask_scheduler: str | None = None
    """An engine worker's cluster (``--engine dask``): it runs operations only, never agent code, with
    a Dask client whose allowed TCP connections are this scheduler and its workers' ports."""
    dask_worker_ports: str | None = None
    """``FIRST:LAST``, the ports the cluster's workers listen on, where known: the engine worker may
    connect to them and takes results from the workers directly, not through the scheduler."""
    dask_credentials: str | None = None
    """The TLS credentials of the server's own cluster (a private file, read before confinement)."""
    job_memory_mb: int | None = None
    """A job worker's memory (``--job-memory-mb``): what checks made for a job size the work by."""
    call_seconds: float = 30.0
    """The server's wall clock for one call (``--exec-timeout``): what ``jobs.wait`` may spend of it."""
    file_size_mb: int = 16 * 1024
    open_files: int = 256
    allow_remote: tuple[str, ...] = ()
    """``--allow-remote``: URLs under these are read through the server (the worker has no network)."""
    kernel_cache: str | None = None
    """The server's complete kernel cache, read (never written) for the routing kernels' machine code."""


def _take_channel_fds() -> tuple[Any, Any]:
    """Move the channel off fds 0 and 1; afterwards 0 reads /dev/null and 1 writes to stderr.

    The duplicates are non-inheritable, and nothing refers to the pipes by number 0 or 1 any more,
    so a library writing to fd 1 (or reading fd 0) can neither corrupt nor read the channel.
    """
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return reader, writer


class BoundedStderr(io.TextIOBase):
    """The worker's Python-level stderr: at most ``limit`` characters per call reach the server's.

    The worker's stderr is the server's, which is the host's log. Agent code can make Python write
    there without printing: a generator whose ``finally`` raises is reported as "Exception ignored"
    each time it is collected, a regex compiled with flag 128 (DEBUG) dumps itself, a warning per
    distinct message, a traceback logged per failing API call. Bounded here, a loop of those
    costs the log one summary line instead of gigabytes.
    """

    def __init__(self, stream: Any, limit: int):
        self._stream = stream
        self.limit = limit
        self.used = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.used
        if room > 0:
            self._stream.write(text[:room])
        self.used += min(len(text), max(room, 0))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def new_call(self) -> None:
        """Start the next call's budget, first saying how much the last one dropped."""
        if self.dropped:
            self._stream.write(f"worker: {self.dropped} characters of stderr output dropped in one call\n")
            self._stream.flush()
        self.used = self.dropped = 0


def _bounded_stderr() -> BoundedStderr:
    """Route Python-level stdout and stderr of the worker through one bounded stream."""
    stream = BoundedStderr(sys.__stderr__, STDERR_BUDGET)
    sys.stdout = sys.stderr = stream
    return stream


def apply_limits(config: WorkerConfig) -> None:
    """Address space, file size, open files, core dumps and new tasks; CPU is set per call.

    RLIMIT_NPROC is per *user*, not per process: it caps how many tasks (processes and threads)
    the worker's real user may have when the worker creates one. It is set to what the user runs
    now plus :data:`NPROC_HEADROOM`, which leaves GDAL's thread pools room while stopping a fork
    or thread bomb; workers started later count against it too. The kernel ignores it for root
    (and for CAP_SYS_RESOURCE/CAP_SYS_ADMIN), so under root it documents intent and nothing more.
    """
    limits = {
        resource.RLIMIT_AS: config.memory_mb * _MiB,
        resource.RLIMIT_FSIZE: config.file_size_mb * _MiB,
        resource.RLIMIT_NOFILE: config.open_files,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: _user_tasks() + NPROC_HEADROOM,
    }
    for which, value in limits.items():
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))
    # A write past RLIMIT_FSIZE (an output's byte budget) then fails with EFBIG, which the operation
    # reports, instead of killing the worker and its session.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _user_tasks() -> int:
    """Tasks (threads) of this real user now, as RLIMIT_NPROC counts them."""
    uid, total = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1"))
    return total


# ----------------------------------------------------------------------------------------- Landlock

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_DIR, _MAKE_REG = 1 << 4, 1 << 5, 1 << 7, 1 << 8
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc_syscall() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    return syscall


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none. Probes only; confines nothing."""
    abi = _libc_syscall()(
        _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION
    )
    return max(0, int(abi))


def confine(workspace: str, readable: Iterable[str] | None = None, connect_ports: Iterable[int] = ()) -> int:
    """Confine this process with Landlock; return the ABI version used, or 0 where unavailable.

    Allowed afterwards: reading (and mapping executable) files under ``readable`` (default: the
    runtime, :func:`runtime_paths`); reading, creating, replacing and removing regular files and
    directories under ``workspace`` (no symlinks, devices, fifos or sockets); /dev/null; nothing
    else, whatever path or link leads there. With ABI 4+ no TCP bind or connect; with ABI 6+ no
    signals or abstract unix sockets beyond the confined process; ``connect_ports`` (an engine worker's
    scheduler and Dask workers) are the TCP ports it may connect to. Files opened before the call
    keep working. Call it once every import is done: a module imported later from elsewhere fails.
    """
    # Whatever follows: no exec from here on can gain privileges (setuid, file capabilities).
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    syscall = _libc_syscall()
    abi = landlock_abi()
    if abi < 1:
        log.warning("Landlock is not available (%s); the worker relies on the path policy alone",
                    os.strerror(ctypes.get_errno()))  # fmt: skip
        return 0
    handled = (1 << 13) - 1  # ABI 1: execute .. make_sym
    handled |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)  # fmt: skip
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        log.warning("Landlock ruleset refused (%s)", os.strerror(ctypes.get_errno()))
        return 0
    try:
        read = _EXECUTE | _READ_FILE | _READ_DIR
        write = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_DIR | _MAKE_REG
        write |= (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
        rules = [(path, read) for path in (readable if readable is not None else runtime_paths())]
        rules += [(workspace, _READ_FILE | _READ_DIR | write), (os.devnull, _READ_FILE | _WRITE_FILE)]
        for path, access in rules:
            _add_path_rule(syscall, ruleset, path, access & handled)
        for port in connect_ports if abi >= 4 else ():
            rule = _NetPortAttr(_NET_CONNECT_TCP, port)
            if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_NET_PORT, ctypes.byref(rule), 0):
                log.warning("Landlock rule for port %d refused (%s)", port, os.strerror(ctypes.get_errno()))
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0):
            log.warning("Landlock could not be enforced (%s)", os.strerror(ctypes.get_errno()))
            return 0
    finally:
        os.close(ruleset)
    return abi


def _add_path_rule(syscall: Any, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a runtime directory this system does not have
    try:
        if not os.path.isdir(path):
            access &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # rights a file can hold
        rule = _PathBeneathAttr(access, fd)
        if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0):
            log.warning("Landlock rule for %s refused (%s)", path, os.strerror(ctypes.get_errno()))
    finally:
        os.close(fd)


def set_cpu_budget(seconds: int) -> None:
    """Allow ``seconds`` more CPU from now: RLIMIT_CPU counts the process's whole life."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


class ChannelHost:
    """Requests to the server over the channel; the executing code blocks until the answer."""

    def __init__(self, channel: Any):
        self._channel = channel
        self._ids = itertools.count(1)
        # GDAL may read a remote file from more than one thread; a request and its answer are a pair.
        self._lock = threading.Lock()

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        from llmc_mcp.errors import LlmcError

        with self._lock:
            request_id = next(self._ids)
            self._channel.send({"id": request_id, "method": method, "params": dict(params)})
            reply = self._channel.receive()
        if reply.get("id") != request_id:
            raise RuntimeError("channel out of step with the server")
        if "error" in reply:
            data = reply["error"]
            error = LlmcError(
                str(data.get("message", "error")), fix=data.get("fix"), details=data.get("details")
            )
            error.kind = str(data.get("type", "error"))
            raise error
        return reply.get("result")


def serve(config: WorkerConfig, channel: Any, *, netns: bool = False) -> None:
    from llmc_mcp.compute.memory import set_job_memory
    from llmc_mcp.compute.progress import tracking
    from llmc_mcp.gdal.environment import disable_network, libgdal, size_block_cache, unexpected_drivers
    from llmc_mcp.operations import OperationContext
    from llmc_mcp.operations.hydrology.compiled import read_from as read_kernels_from
    from llmc_mcp.operations.workflows.service import RemoteWorkflows
    from llmc_mcp.outputs import RemoteOutputs
    from llmc_mcp.reflection.prompts import PromptLibrary
    from llmc_mcp.remote.access import HostTransport, RemoteAccess
    from llmc_mcp.remote.access import configure as configure_remote
    from llmc_mcp.remote.allowlist import Allowlist
    from llmc_mcp.sandbox.bindings import build_operations, build_preflights, call_operation
    from llmc_mcp.sandbox.channel import ProtocolError
    from llmc_mcp.sandbox.executor import Session
    from llmc_mcp.sandbox.jobs_module import CallClock, sandbox_modules
    from llmc_mcp.workspace import Workspace

    refuse_unexpected_drivers(unexpected_drivers())
    disable_network()
    size_block_cache(config.memory_mb)
    set_job_memory(config.job_memory_mb)
    # Found before confinement: without rasterio's wheel it is read from /proc/self/maps, which
    # Landlock then refuses (raster.convert's progress calls GDAL through it).
    libgdal()
    host = ChannelHost(channel)
    if config.allow_remote:
        configure_remote(RemoteAccess(Allowlist(config.allow_remote), HostTransport(host)))
    engine, ports = _engine(config)
    context = OperationContext(
        Workspace(config.workspace), config.num_threads, RemoteOutputs(host), RemoteWorkflows(host), engine
    )
    remote_engine = config.engine == "dask" and not ports
    operations = build_operations(context, host, remote_engine=remote_engine)
    preflights = build_preflights(context, host)
    clock = CallClock(config.call_seconds)
    modules = sandbox_modules(context, host, PromptLibrary.default(), clock, remote_engine=remote_engine)
    session = Session(modules, config.output_limit)
    apply_limits(config)
    read_kernels_from(config.kernel_cache)
    # An engine worker also reads its cluster's TLS credentials, where Dask connects; every worker, the
    # kernel cache (read only: DD-MCP-100).
    extra = [path for path in (config.dask_credentials, config.kernel_cache) if path]
    readable = [*runtime_paths(), *extra]
    confined = confine(str(context.workspace.root), readable, connect_ports=ports)
    ready = {"ready": True, "pid": os.getpid(), "landlock": confined, "netns": netns}
    channel.send({"id": 0, "result": ready})
    while True:
        message = channel.receive()
        method, params = message.get("method"), message.get("params") or {}
        if method in ("execute", "operation", "preflight"):
            set_cpu_budget(config.cpu_seconds)
            clock.start_call(params.get("seconds"))
            if isinstance(sys.stderr, BoundedStderr):
                sys.stderr.new_call()
            with tracking(_progress_sender(channel), one_operation=method != "execute"):
                if method == "operation":
                    result = _run_operation(call_operation, operations, params)
                elif method == "preflight":
                    result = _run_operation(call_operation, preflights, params)
                else:
                    if params.get("reset"):
                        session.reset()
                    result = session.execute(params.get("code", ""))
            try:
                channel.send({"id": message.get("id"), "result": result})
            except ProtocolError as exc:  # over the frame limit: say so rather than die
                failure = {"type": "ResultTooLarge", "message": str(exc), "line": 0, "traceback": ""}
                answer = {"ok": False, "stdout": "", "stdout_dropped": 0, "result": None, "error": failure}
                channel.send({"id": message.get("id"), "result": answer})
        else:
            channel.send(
                {"id": message.get("id"), "error": {"type": "protocol", "message": f"unknown {method}"}}
            )


def _engine(config: WorkerConfig) -> tuple[Any, list[int]]:
    """This worker's engine, and the ports it may connect to: an engine worker's scheduler and, where
    known, its cluster's workers."""
    from llmc_mcp.compute.engine import local_engine

    if config.dask_scheduler is None:
        return local_engine(config.num_threads), []
    # Imported before confinement: afterwards only the runtime can be read, and Dask reads its config.
    import distributed  # noqa: F401

    from llmc_mcp.compute.dask_engine import DaskEngine, load_security
    from llmc_mcp.config import worker_ports

    security = None if config.dask_credentials is None else load_security(config.dask_credentials)
    workers = [] if config.dask_worker_ports is None else list(worker_ports(config.dask_worker_ports))
    engine = DaskEngine(config.dask_scheduler, security=security, direct=bool(workers))
    return engine, [int(config.dask_scheduler.rsplit(":", 1)[1]), *workers]


def _progress_sender(channel: Any) -> Callable[[float, float | None, str], None]:
    """Progress as a notification: a message with a method and no id, which the server never answers."""

    def send(progress: float, total: float | None, message: str) -> None:
        params = {"progress": progress, "total": total, "message": message}
        channel.send({"method": "progress", "params": params})

    return send


def _run_operation(call: Any, operations: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """One classic-mode operation; it always answers, so the worker (and its warm state) survives."""
    try:
        return call(operations, params.get("operation"), params.get("args"))
    except MemoryError:
        from llmc_mcp.errors import OutOfMemory

        error = OutOfMemory.in_this_process().to_dict()
    except Exception as exc:  # never the worker's end; the server reports it as an internal error
        log.error("operation %.60r failed unexpectedly: %s", params.get("operation"), type(exc).__name__)
        message = f"The operation failed unexpectedly ({type(exc).__name__})."
        error = {"type": "internal_error", "message": message}
    return {"ok": False, "result": None, "error": error}


def refuse_unexpected_drivers(unexpected: list[str]) -> None:
    """Fail closed: a worker whose GDAL registered a driver beyond the allowlist does not start.

    The server passes ``GDAL_SKIP``; a GDAL that ignored it (a renamed driver, a plugin loaded from
    ``GDAL_DRIVER_PATH``) would open hostile sidecars with drivers nobody reviewed.
    """
    if unexpected:
        log.error("GDAL drivers beyond the allowlist are registered (%s); refusing to start",
                  ", ".join(unexpected))  # fmt: skip
        raise SystemExit(3)


_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000


def isolate_network() -> bool:
    """Move this process into a new, empty network namespace; True if it worked.

    There, no interface is up, not even loopback: no TCP, UDP (DNS) or unix-socket-by-address
    reaches anything, whatever GDAL, curl or a driver tries. As root CLONE_NEWNET suffices; otherwise a
    user namespace comes with it, mapping our own ids so files keep their owners. unshare with a new
    user namespace needs a single-threaded process: call this first thing in :func:`main`. Where both
    are refused (seccomp, sysctl), Landlock ABI 4+ still denies TCP bind and connect.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) == 0:
        return True
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        log.warning("no network namespace (%s); the worker relies on Landlock and GDAL's settings",
                    os.strerror(ctypes.get_errno()))  # fmt: skip
        return False
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with contextlib.suppress(OSError):  # unmapped, ids read as "nobody"; access checks are unchanged
            Path("/proc/self", name).write_text(text)
    return True


def _die_with_the_server() -> None:
    """Ask the kernel to kill this worker when the server dies, even mid-call in agent code.

    An idle worker notices the closed channel and exits; a busy one would otherwise run on until its
    CPU limit.
    """
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main() -> None:
    config = WorkerConfig.model_validate(json.loads(sys.argv[1]))
    # An engine worker reaches its scheduler over TCP; Landlock allows that one port and no other.
    netns = isolate_network() if config.dask_scheduler is None else False
    _die_with_the_server()
    reader, writer = _take_channel_fds()
    stderr = _bounded_stderr()
    logging.basicConfig(stream=stderr, level=logging.WARNING, format="worker %(levelname)s %(message)s")
    from llmc_mcp.sandbox.channel import ChannelClosed, SyncChannel

    with contextlib.suppress(ChannelClosed):
        serve(config, SyncChannel(reader, writer), netns=netns)


if __name__ == "__main__":
    main()
