"""CRS text from agents: one set of rules for every place a CRS definition arrives.

``crs.info``, ``raster.reproject`` and the reflection gate's decision keys all turn user text into
a CRS. They must refuse the same inputs (PROJ ``+init=`` files, oversized or non-Unicode text) and
agree on which authority code a definition is, or a definition refused in one place could be
accepted, cached or justified through another. This module sits outside ``llmc_mcp.operations`` so
that ``llmc_mcp.reflection.specs`` can import it: the operation catalog imports the specs, and
importing anything under ``llmc_mcp.operations`` from there would be a cycle.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from pyproj import CRS
from pyproj.exceptions import CRSError

from llmc_mcp.errors import CrsError
from llmc_mcp.sessions import current_session

_CRS_FIX = "Pass an EPSG code ('EPSG:4326'), WKT, a PROJ string or PROJJSON."
MAX_CRS_CHARS = 100_000
"""Far above any real WKT or PROJJSON (EPSG's longest are ~10 k characters)."""

# PROJ "+init=file:key" reads definition files (absolute paths included); EPSG codes cover every real use.
_INIT = re.compile(r"(^|[\s+])init\s*=", re.IGNORECASE)
_GRID_PATH = re.compile(
    r"grids\s*=\s*[^\s+]*[/\\]"  # +nadgrids=/abs/file, +geoidgrids=@../x
    r"|parameterfile\s*\[[^\]]*[/\\]"  # WKT PARAMETERFILE["...","/abs/file"]
    r"|proj4_grids\"\s*,\s*\"[^\"]*[/\\]"  # GDAL's WKT1 EXTENSION["PROJ4_GRIDS","/abs/file"]
    r"|file\"\s*,\s*\"value\"\s*:\s*\"[^\"]*[/\\]",  # PROJJSON {"name": "... file", "value": "/x"}
    re.IGNORECASE,
)
"""A grid named by path: PROJ would open that file (anywhere on disk, ``.llmc/`` included) while
parsing or when it transforms coordinates."""


def parse_crs(value: str, argument: str = "crs") -> CRS:
    """A pyproj CRS from any user text PROJ understands, or a :class:`CrsError` with the fix.

    Messages quote at most the first 200 characters of the input: PROJ's own message echoes all of it.
    """
    text = str(value).strip()
    if len(text) > MAX_CRS_CHARS:
        raise CrsError(
            f"{argument} is {len(text)} characters long; no CRS definition needs more than {MAX_CRS_CHARS}.",
            fix=_CRS_FIX,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # PROJ takes UTF-8; a lone surrogate would escape as an internal error instead.
        raise CrsError(
            f"{argument} contains characters that are not valid Unicode (lone surrogates).", fix=_CRS_FIX
        ) from None
    if _INIT.search(text):
        raise CrsError(
            f"{argument}: PROJ '+init=' definitions are not accepted ({text[:200]!r}).",
            fix="Use the EPSG code instead, e.g. 'EPSG:4326' for '+init=epsg:4326'.",
        )
    grid = _GRID_PATH.search(text)
    if grid:
        raise CrsError(
            f"{argument}: grid files given by path are not accepted ({_around(text, grid)!r}).",
            fix="Name grids without a directory (e.g. '+nadgrids=conus'), or use an EPSG code.",
        )
    try:
        return CRS.from_user_input(text)
    except CRSError as exc:
        reason = str(exc).replace(text, "<input>")[:300]
        raise CrsError(f"Unknown CRS {text[:200]!r}: {reason}", fix=_CRS_FIX) from None
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        # pyproj tries the text as JSON first: deeply nested brackets exhaust the recursion limit.
        raise CrsError(f"Unknown CRS {text[:200]!r} ({type(exc).__name__}).", fix=_CRS_FIX) from None


def check_file_crs(text: str | None, argument: str, shown: str) -> None:
    """Refuse the CRS of a workspace file (a zone file's ``.prj``, a raster's header or ``.aux.xml``)
    that :func:`parse_crs` would refuse from an agent: a file's CRS text is the agent's text too.

    A ``.prj`` naming a grid by path makes PROJ open that file when the zones are transformed, even
    one in ``.llmc/``; GDAL keeps such a grid as ``EXTENSION["PROJ4_GRIDS","/path"]`` in WKT1.
    """
    if not text:
        return
    if len(text) > MAX_CRS_CHARS:
        raise CrsError(
            f"{argument}: the CRS of '{shown}' is {len(text)} characters long; no CRS definition needs "
            f"more than {MAX_CRS_CHARS}.",
            fix=_FILE_CRS_FIX,
        )
    refused = _INIT.search(text) or _GRID_PATH.search(text)
    if refused:
        raise CrsError(
            f"{argument}: the CRS of '{shown}' names a file for PROJ to open ({_around(text, refused)!r}); "
            "grid and definition files given by path are not accepted, from a file or from an argument.",
            fix=_FILE_CRS_FIX,
        )


_FILE_CRS_FIX = (
    "Rewrite the file's CRS as an EPSG code (vectors: ogr2ogr -a_srs EPSG:xxxx; rasters: gdal_edit -a_srs "
    "EPSG:xxxx, or remove the SRS from its .aux.xml); grids are named without a directory."
)


def _around(text: str, found: re.Match[str]) -> str:
    """What the refusal quotes: the offending part, not the first 200 characters of a long WKT."""
    return text[max(0, found.start() - 40) : found.end() + 80]


def identify(crs: CRS) -> tuple[int | None, str | None]:
    """The EPSG code and the preferred 'AUTH:CODE' of an exact (100%) match, in one PROJ search.

    A bound CRS (+towgs84) is never an authority CRS, and PROJ's search for one takes many seconds.
    """
    if crs.is_bound:
        return None, None
    matches = crs.list_authority(min_confidence=100)
    epsg = next((int(m.code) for m in matches if m.auth_name == "EPSG" and m.code.isdigit()), None)
    if epsg is not None:
        return epsg, f"EPSG:{epsg}"
    return None, f"{matches[0].auth_name}:{matches[0].code}" if matches else None


IDENTIFY_TIMEOUT = 5.0
"""Seconds of CPU one CRS identification may take before the caller is told to pass an EPSG code.

Real definitions take 0.3-30 ms (a projected definition PROJ must compare with every projected CRS
it knows, about 1 s). The server identifies CRS text that agents send (decision keys, justified
choices) outside any worker's CPU limit, so a pathological text must not hold a process. CPU time,
not time on the clock: a loaded machine stretched a plain ``+proj=tmerc`` definition past 5 s of
wall time, and refusing it then was a wrong answer, not a bound."""
IDENTIFY_WALL_SECONDS = 60.0
"""Wall-clock backstop of one identification, for work that stalls without spending CPU."""
CPU_POLL_SECONDS = 0.05
"""How often a waiting caller reads the CPU time the identification has spent."""
HELPERS = 2
"""Helper processes that identify CRS text for sessions (:class:`Identifiers`)."""
HELPER_START_SECONDS = 60.0
"""How long a helper may take to start (its imports and PROJ's database) and a caller may wait for a
free one. Neither counts against :data:`IDENTIFY_TIMEOUT`, which bounds the work on the text: on a
loaded machine a start alone took over 5 s, and identifications refused for it were not slow ones."""
HELPER_MEMORY = 1024 * 1024 * 1024
"""Address space of a helper: PROJ and its database need ~300 MiB; past the cap a parse fails, alone."""
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""Largest answer read from a helper: a WKT2 of the largest accepted definition, with room to spare."""

_CACHE_SIZE = 4096
_CACHE_CHARS = 8_000_000
"""Characters of definitions and results the cache holds at most (about 32 MiB of str at worst): by
count alone, 4096 definitions of :data:`MAX_CRS_CHARS` would hold 400 million characters."""
_cache: OrderedDict[str, str] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()
_identifier = ThreadPoolExecutor(max_workers=2, thread_name_prefix="llmc-crs")


class SessionBudget:
    """A token bucket per session: ``capacity`` uncached identifications, refilled at ``rate`` per second.

    Cache hits are free, so an agent that reuses its CRS never notices; a session sending a stream of
    new definitions (each up to :data:`IDENTIFY_TIMEOUT` of a shared thread) is refused before it can
    make other sessions wait. Work done for no session (the worker, tests, the CLI) is not budgeted.
    """

    def __init__(self, capacity: float = 20, rate: float = 0.2):
        self.capacity = capacity
        self.rate = rate
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def charge(self, session: str | None) -> None:
        if session is None:
            return
        now = time.monotonic()
        with self._lock:
            tokens, since = self._buckets.pop(session, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - since) * self.rate)
            if tokens < 1:
                self._buckets[session] = (tokens, now)
                raise CrsError(
                    "Too many new CRS definitions from this session in a short time; identifying each "
                    "one costs the server work shared with other sessions.",
                    fix="Pass EPSG codes ('EPSG:32633'), or reuse a definition you already used"
                    + (f"; a new one is accepted every {1 / self.rate:g} s." if self.rate > 0 else "."),
                )
            self._buckets[session] = (tokens - 1, now)
            while len(self._buckets) > _CACHE_SIZE:
                self._buckets.popitem(last=False)


SESSION_BUDGET = SessionBudget()


def normalize_crs(value: str, argument: str = "crs") -> str:
    """A stable text for a CRS: ``AUTH:CODE`` (EPSG preferred) where the definition is exactly one, else WKT2.

    The text is read by :func:`parse_crs`, the rules every CRS argument follows, so a definition the
    operations refuse (``+init=``, grid paths, oversized or non-Unicode text) can be neither a cache
    key nor a justified ``choice.method``. The authority match is :func:`identify`'s. Bounded three
    ways, because the gate runs this in the server on text agents send: a cache of results (a hit is
    a dict lookup; errors are not cached), :data:`IDENTIFY_TIMEOUT`, and :data:`SESSION_BUDGET` for
    the session being served. Work for a session runs in a helper process (:data:`IDENTIFIERS`):
    PROJ holds the GIL while it parses and searches (0.15 s for a paragraph of prose), which in a
    thread of the server stops its event loop, and every other session with it. Work for no session
    (a worker's own operation, the CLI, tests) runs here, on a small thread pool.
    """
    global _cache_chars
    key = value  # the argument's name only shapes error messages, and errors are not cached
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    session = current_session.get()
    SESSION_BUDGET.charge(session)
    if session is not None and len(str(value).strip()) <= MAX_CRS_CHARS:
        result = IDENTIFIERS.normalize(value, argument, IDENTIFY_TIMEOUT)
    else:
        clock: list[tuple[int, float]] = []  # the identifying thread's CPU clock and its reading at start
        future = _identifier.submit(_normalize_on_clock, clock, value, argument)
        result = _within_bounds(future, clock, argument)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = result
            _cache_chars += len(key) + len(result)
        while len(_cache) > _CACHE_SIZE or _cache_chars > _CACHE_CHARS:
            old_key, old_result = _cache.popitem(last=False)
            _cache_chars -= len(old_key) + len(old_result)
    return result


def _normalize_on_clock(clock: list[tuple[int, float]], value: str, argument: str) -> str:
    thread_clock = time.pthread_getcpuclockid(threading.get_ident())
    clock.append((thread_clock, time.clock_gettime(thread_clock)))
    return _normalize(value, argument)


def _within_bounds(future: Future[str], clock: list[tuple[int, float]], argument: str) -> str:
    """``future``'s result, refused once its thread has spent :data:`IDENTIFY_TIMEOUT` of CPU or
    :data:`IDENTIFY_WALL_SECONDS` have passed. A thread cannot be stopped: this path serves work for
    no session (a worker's own operation, under the worker's limits; the CLI; tests)."""
    deadline = time.monotonic() + IDENTIFY_WALL_SECONDS
    while True:
        try:
            return future.result(timeout=CPU_POLL_SECONDS)
        except FutureTimeout:
            pass
        if time.monotonic() > deadline:
            raise _too_slow(argument, wall=True)
        if not clock:
            continue  # queued behind another identification: not this text's CPU yet
        thread_clock, start = clock[0]
        try:
            spent = time.clock_gettime(thread_clock) - start
        except OSError:
            continue  # the thread just finished: its result is there on the next turn
        if spent > IDENTIFY_TIMEOUT:
            raise _too_slow(argument)


def _too_slow(argument: str, *, wall: bool = False) -> CrsError:
    spent = f"{IDENTIFY_WALL_SECONDS:g} s" if wall else f"{IDENTIFY_TIMEOUT:g} s of CPU time"
    return CrsError(
        f"{argument}: identifying this CRS definition took longer than {spent}.",
        fix="Pass its EPSG code ('EPSG:32633') instead of the definition.",
    )


def _busy(argument: str) -> CrsError:
    return CrsError(
        f"{argument}: the server had no CRS helper free or starting within {HELPER_START_SECONDS:g} s "
        "(it is overloaded).",
        fix="Try again shortly, or pass an EPSG code ('EPSG:32633'), which needs no helper.",
    )


class CpuExceeded(Exception):
    """A CRS helper spent more CPU on one text than it may."""


class _Helper:
    """One helper process: a request is a JSON line on its stdin, the answer a JSON line on its stdout.
    Its first line says it is ready: imported, PROJ's database open."""

    def __init__(self, command: list[str]):
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/"
        )

    def start(self, deadline: float) -> None:
        """Wait until the helper is ready; TimeoutError past ``deadline``, OSError if it ended or said
        something else."""
        if self._line(deadline) != {"ready": True}:
            raise OSError("the CRS helper did not start")

    def ask(self, request: dict[str, str], cpu_seconds: float, deadline: float) -> dict[str, str]:
        """The answer to ``request``; :class:`CpuExceeded` once the helper has spent ``cpu_seconds``
        of CPU on it, TimeoutError past ``deadline``, OSError if the helper is gone."""
        assert self.process.stdin is not None
        start = self.cpu_time()
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        return self._line(deadline, lambda: self.cpu_time() - start > cpu_seconds)

    def cpu_time(self) -> float:
        """The helper's CPU time so far (user and system, from ``/proc``), s."""
        with open(f"/proc/{self.process.pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _line(self, deadline: float, over_cpu: Callable[[], bool] = lambda: False) -> dict[str, str]:
        assert self.process.stdout is not None
        fd, answer = self.process.stdout.fileno(), b""
        while not answer.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not select.select([fd], [], [], min(remaining, CPU_POLL_SECONDS))[0]:
                if over_cpu():
                    raise CpuExceeded
                continue
            chunk = os.read(fd, 65536)
            if not chunk or len(answer) + len(chunk) > MAX_ANSWER_BYTES:
                raise OSError("the CRS helper ended or answered more than any definition")
            answer += chunk
        return json.loads(answer)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


class Identifiers:
    """Helper processes that run PROJ for sessions, outside the server's interpreter (and its GIL).

    At most ``size`` run at once; a caller waits for a free one, and a new helper for its start, within
    :data:`HELPER_START_SECONDS`, then gives it the text with :data:`IDENTIFY_TIMEOUT` of CPU time to
    answer (read from ``/proc``, and :data:`IDENTIFY_WALL_SECONDS` in all). A helper past either bound
    is killed, so the bound really ends the work: nothing keeps running for a call that was already
    refused. Helpers start on first use and are reused (a start costs ~0.3 s on an idle machine).
    """

    def __init__(self, size: int = HELPERS, command: list[str] | None = None):
        """``command`` starts one helper (:func:`serve_helper` in an isolated interpreter, cwd ``/``)."""
        self.command = command or [
            sys.executable, "-I", "-c", "from llmc_mcp.crs_text import serve_helper; serve_helper()"
        ]  # fmt: skip
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Helper] = []
        self._lock = threading.Lock()

    def normalize(self, value: str, argument: str, cpu_seconds: float) -> str:
        if not self._slots.acquire(timeout=HELPER_START_SECONDS):
            raise _busy(argument)
        try:
            with self._lock:
                helper = self._idle.pop() if self._idle else None
            if helper is None:
                helper = _Helper(self.command)
                try:
                    helper.start(time.monotonic() + HELPER_START_SECONDS)
                except (TimeoutError, OSError, ValueError):
                    helper.kill()
                    raise _busy(argument) from None
            try:
                answer = helper.ask(
                    {"value": value, "argument": argument},
                    cpu_seconds,
                    time.monotonic() + IDENTIFY_WALL_SECONDS,
                )
            except CpuExceeded:
                helper.kill()
                raise _too_slow(argument) from None
            except TimeoutError:
                helper.kill()
                raise _too_slow(argument, wall=True) from None
            except (OSError, ValueError):
                helper.kill()
                raise CrsError(
                    f"{argument}: identifying this CRS definition ended the process doing it (past its "
                    f"{HELPER_MEMORY >> 20} MiB, or an answer larger than any definition's).",
                    fix="Pass its EPSG code ('EPSG:32633') instead of the definition.",
                ) from None
            with self._lock:
                self._idle.append(helper)
        finally:
            self._slots.release()
        if "error" in answer:
            raise CrsError(str(answer["error"]), fix=str(answer.get("fix") or _CRS_FIX))
        return str(answer["crs"])

    def close(self) -> None:
        with self._lock:
            helpers, self._idle = self._idle, []
        for helper in helpers:
            helper.kill()


IDENTIFIERS = Identifiers()


def serve_helper() -> None:
    """A helper's loop (:class:`Identifiers`): identify each definition read, until stdin closes.

    Its address space is capped (:data:`HELPER_MEMORY`): it parses hostile text outside any worker.
    """
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (HELPER_MEMORY, HELPER_MEMORY))
    CRS("EPSG:4326")  # PROJ's database opened now, not inside the first request's deadline
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            answer = {"crs": _normalize(request["value"], request["argument"])}
        except CrsError as exc:
            answer = {"error": exc.message, "fix": exc.fix or _CRS_FIX}
        except Exception as exc:  # PROJ's own failure on this text: the text's fault, as parse_crs says
            answer = {"error": f"Unknown CRS ({type(exc).__name__}).", "fix": _CRS_FIX}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def clear_cache() -> None:
    """Forget every cached normalization (tests that count what reaches PROJ)."""
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0


def _normalize(value: str, argument: str) -> str:
    crs = parse_crs(value, argument)
    _, authority = identify(crs)
    return authority if authority is not None else crs.to_wkt()
