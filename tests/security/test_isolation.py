"""What crosses into the sandbox, what the worker can reach, and how sessions and workers are kept apart.

Two vantage points. In-process, a :class:`Session` built exactly as the worker builds it (with a
host that serves the gate locally) lets us inspect the very objects agent code receives. Through
the real MCP ``Client`` against a code-mode server we check the worker process from outside: its
environment, its file descriptors, its limits, its death and replacement.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from llmc_mcp.config import Settings
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.reflection.gate import Gate
from llmc_mcp.reflection.prompts import PromptLibrary
from llmc_mcp.reflection.store import JustificationStore
from llmc_mcp.runtime_files import runtime_paths
from llmc_mcp.sandbox.bindings import ApiError, ReflectionRequired, build_modules
from llmc_mcp.sandbox.executor import Session
from llmc_mcp.sandbox.policy import STDLIB_MEMBERS, ModuleProxy, PolicyError, guarded_getattr
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import Workspace

pytestmark = pytest.mark.anyio

PLAIN_TYPES = (dict, list, str, int, float, bool, type(None))
FORBIDDEN = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType)
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIA-LLMC-TEST",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-llmc-test",
    "AWS_SESSION_TOKEN": "aws-token-llmc-test",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secret/google-llmc-test.json",
    "AZURE_STORAGE_ACCOUNT_KEY": "azure-secret-llmc-test",
}


# ------------------------------------------------------------------------------------------ helpers


class LocalHost:
    """The server's side of the worker channel, served in-process by a real gate."""

    def __init__(self, workspace: Workspace):
        self.gate = Gate(
            JustificationStore(workspace.preflight_dir), PromptLibrary.default(), next_action="x"
        )

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        if method == "gate.check":
            op = get_operation(params["operation"])
            hints = self.gate.check(op, op.validate(params["args"]))
            return {"hints": [h.model_dump() for h in hints], "next_action": "x"}
        raise AssertionError(f"unexpected request {method}")


@pytest.fixture
def session(workspace: Workspace) -> Session:
    modules = build_modules(OperationContext(workspace, 2), LocalHost(workspace), PromptLibrary.default())
    return Session(modules, output_limit=20_000)


def api(session: Session, name: str) -> ModuleProxy:
    return session.globals[name]


def raised(function: Any, *args: Any, **kwargs: Any) -> BaseException:
    try:
        function(*args, **kwargs)
    except BaseException as exc:
        return exc
    raise AssertionError("no exception")


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def impure(value: Any) -> list[str]:
    """Every node of ``value`` whose exact type is not a JSON type (subclasses count as impure)."""
    return [f"{type(node).__name__}: {node!r}"[:100] for node in walk(value) if type(node) not in PLAIN_TYPES]


def reachable(roots: Mapping[str, Any], get: Any, depth: int = 5) -> dict[str, Any]:
    """Breadth-first over non-underscore attribute names, ``get`` doing the lookup; path -> value."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    frontier = list(roots.items())
    for _ in range(depth):
        following = []
        for path, value in frontier:
            if id(value) in seen:
                continue
            seen.add(id(value))
            found[path] = value
            try:
                names = [name for name in dir(value) if not name.startswith("_")]
            except Exception:
                continue
            for name in names:
                try:
                    following.append((f"{path}.{name}", get(value, name)))
                except Exception:
                    continue
        frontier = following
    return found


async def run(client: Client, code: str, reset: bool = False) -> dict[str, Any]:
    result = await client.call_tool("execute_code", {"code": code, "reset": reset})
    assert result.structured_content is not None, result.content
    return result.structured_content


def worker_pids(server: Any) -> list[int]:
    pool = server.pool
    if hasattr(pool, "worker_pids"):
        return list(pool.worker_pids().values())
    return [worker.process.pid for worker in pool._workers.values()]


def settings_for(workspace_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "mode": "code",
        "workspace": workspace_dir,
        "exec_timeout": 20,
        "memory_mb": 1024,
    }
    return Settings(**{**values, **overrides})


# --------------------------------------------------------------------------- what crosses the boundary


@pytest.mark.parametrize(
    ("namespace", "operation", "arguments"),
    [
        ("raster", "info", {"path": "RGB.byte.tif", "include_wkt": True}),
        ("raster", "stats", {"path": "RGB.byte.tif", "histogram_bins": 8}),
        ("crs", "info", {"crs": "EPSG:6933", "include_wkt": True}),
    ],
    ids=["raster.info", "raster.stats", "crs.info"],
)
def test_api_results_are_plain_json_data(
    session: Session, namespace: str, operation: str, arguments: dict
) -> None:
    result = getattr(api(session, namespace), operation)(**arguments)
    assert impure(result) == []


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        (("missing.tif",), "not_found"),
        (("RGB.byte.tif", "extra"), "invalid_argument"),
        ((7,), "invalid_argument"),
    ],
    ids=["missing-file", "wrong-signature", "not-a-string"],
)
def test_api_errors_carry_only_plain_data_and_no_chained_exception(
    session: Session, arguments: tuple, kind: str
) -> None:
    error = raised(api(session, "raster").info, *arguments)
    assert isinstance(error, ApiError) and error.type == kind
    assert impure([error.type, error.message, error.fix, error.details, list(error.args)]) == []
    # Raised outside any except block: the library exception is not even a private attribute away.
    assert error.__cause__ is None and error.__context__ is None


def test_reflection_hints_carry_only_plain_data(session: Session) -> None:
    error = raised(api(session, "raster").reproject, "RGB.byte.tif", "out.tif", dst_crs="EPSG:3857")
    assert isinstance(error, ReflectionRequired)
    assert impure([error.hints, error.next_action, error.details]) == []
    assert error.__cause__ is None and error.__context__ is None


def test_api_namespaces_and_stdlib_modules_are_read_only_proxies(session: Session) -> None:
    for name, namespace in session._importable.items():
        assert isinstance(namespace, ModuleProxy) and not isinstance(namespace, types.ModuleType), name
        with pytest.raises(PolicyError):
            namespace.anything = 1
    assert session.execute("import json\nrepr(json)")["result"] == "<module json>"


@pytest.mark.parametrize("module", sorted(STDLIB_MEMBERS))
def test_stdlib_proxies_expose_their_allowlist_and_no_module(session: Session, module: str) -> None:
    proxy = session._importable[module]
    assert set(dir(proxy)) <= set(STDLIB_MEMBERS[module])
    assert not [name for name in dir(proxy) if isinstance(getattr(proxy, name), FORBIDDEN)]


def _roots(session: Session) -> dict[str, Any]:
    raster = api(session, "raster")
    return {
        **session._importable,
        "ApiError": ApiError,
        "ReflectionRequired": ReflectionRequired,
        "api_error": raised(raster.info, "missing.tif"),
        "reflection_required": raised(raster.reproject, "RGB.byte.tif", "o.tif", dst_crs="EPSG:3857"),
        "policy_error": raised(guarded_getattr, raster, "_members"),
        "raster_info": raster.info("RGB.byte.tif"),
    }


def test_no_attribute_chain_through_the_guard_reaches_a_module_frame_or_code(session: Session) -> None:
    found = reachable(_roots(session), guarded_getattr)
    assert len(found) > 500  # the walk really explored the API and the stdlib proxies
    assert [path for path, value in found.items() if isinstance(value, FORBIDDEN)] == []


def test_no_public_attribute_chain_reaches_a_module_even_unguarded(session: Session) -> None:
    # The guard's check on values is a second line: the names alone lead nowhere either.
    found = reachable(_roots(session), getattr)
    assert [path for path, value in found.items() if isinstance(value, FORBIDDEN)] == []


def test_printed_is_the_text_printed_so_far(session: Session) -> None:
    answer = session.execute("print('a')\nprint('b')\nprinted")
    assert answer["result"] == "a\nb\n" and answer["stdout"] == "a\nb\n"


def test_print_as_the_last_expression_prints_to_this_call(session: Session) -> None:
    session.execute("def shout(x):\n    print(x)\nprint('first call')")
    answer = session.execute("shout('from an earlier function')\nprint('last')")
    assert answer["ok"] and answer["stdout"] == "from an earlier function\nlast\n"


def test_output_that_is_not_valid_utf8_is_replaced_not_fatal(session: Session) -> None:
    answer = session.execute("kept = 1\nprint('\\ud800')\n'\\udfff'")
    assert answer["ok"] and answer["stdout"] == "?\n" and answer["result"] == "?"
    assert json.dumps(answer).encode("utf-8")


def test_an_api_error_raised_by_agent_code_is_read_as_data_only(session: Session) -> None:
    # A subclass's methods never run in the trusted error handler, and its attributes are bounded.
    code = """
class Forged(reflection.ReflectionRequired):
    def as_dict(self):
        raise ValueError('ran inside the handler')
forged = Forged({})
forged.type = 't' * 10 ** 6
forged.hints = ['h' * 10 ** 6] * 100
kept = 1
raise forged
"""
    answer = session.execute(code)
    assert answer["error"]["type"] == "reflection_required"
    assert len(json.dumps(answer)) < 100_000
    assert session.execute("kept")["result"] == 1


def test_the_error_classes_are_where_the_stubs_say(session: Session) -> None:
    # Every stub says its functions raise ApiError: reachable from every module, by import and as a
    # builtin, always the one class; its type is the snake_case kind classic results carry.
    code = """
from raster import ApiError as imported
same = [raster.ApiError, crs.ApiError, files.ApiError, reflection.ApiError, imported]
try:
    raster.info("missing.tif")
except raster.ApiError as e:
    kind = e.type
(all(c is ApiError for c in same), issubclass(reflection.ReflectionRequired, ApiError), kind)
"""
    assert session.execute(code)["result"] == [True, True, "not_found"]
    miss = session.execute('raster.reproject("RGB.byte.tif", "o.tif", dst_crs="EPSG:3857")')
    assert miss["error"]["type"] == "reflection_required" and miss["reflection_required"]


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        ("try:\n    1 / 0\nexcept Exception as e:\n    print(type(e).__name__)", "e.type"),
        ("try:\n    1 / 0\nexcept Exception as e:\n    print(e.__class__)", "isinstance(e, ApiError)"),
        ("type(1)", "isinstance(x, SomeClass)"),
        ("dir(raster)", "read_stubs()"),
        ("open('RGB.byte.tif')", "through the API"),
        ("_hidden = 1", "without the leading underscore"),
        ("[1].__len__()", "len(x)"),
        ("getattr(raster, '__doc__')", "read_stubs("),
    ],
)
def test_a_refusal_says_what_to_use_instead(session: Session, code: str, advice: str) -> None:
    answer = session.execute(code)
    assert not answer["ok"] and advice in answer["error"]["message"], answer["error"]
    assert answer["error"]["type"] in ("PolicyError", "NameError")


def test_a_refusal_with_no_allowed_way_offers_none(session: Session) -> None:
    answer = session.execute("(lambda: 1).__code__")
    assert answer["error"]["type"] == "PolicyError" and "Instead" not in answer["error"]["message"]


def test_c_code_gets_its_helper_modules_and_agent_code_does_not(session: Session) -> None:
    # datetime's strftime/strptime import `time`/`_strptime` through the caller's __import__.
    dates = session.execute("import datetime\ndatetime.date(2020, 1, 2).strftime('%Y-%m-%d')")
    assert dates["result"] == "2020-01-02"
    assert session.execute("import time")["error"]["type"] == "ImportError"


def test_collections_are_cut_with_a_marker_not_silently(session: Session) -> None:
    answer = session.execute("list(range(5000))")
    assert len(answer["result"]) == 1001 and answer["result"][-1] == "… [4000 more items]"


# ------------------------------------------------------------------------------- the worker process


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    return CREDENTIALS


async def test_cloud_credentials_of_the_server_never_reach_the_worker(
    workspace_dir: Path, credentials: dict[str, str]
) -> None:
    server = build_server(settings_for(workspace_dir))
    async with Client(server) as client:
        imported = await run(client, "import os")
        vsis3 = await run(client, "raster.info('/vsis3/bucket/key.tif')")
        (pid,) = worker_pids(server)
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    assert imported["error"]["type"] == "ImportError"
    assert vsis3["error"]["type"] == "path_refused"
    assert not [name for name in credentials if f"{name}=" in environ]
    assert not [value for value in credentials.values() if value in environ]


async def test_the_channel_is_not_on_the_workers_stdin_or_stdout(workspace_dir: Path) -> None:
    server = build_server(settings_for(workspace_dir))
    async with Client(server) as client:
        await run(client, "1")
        (pid,) = worker_pids(server)
        fds = {n: os.readlink(f"/proc/{pid}/fd/{n}") for n in (0, 1, 2)}
    assert fds[0] == "/dev/null"
    assert fds[1] == fds[2]


async def test_the_worker_runs_under_its_resource_limits(workspace_dir: Path) -> None:
    server = build_server(settings_for(workspace_dir, memory_mb=768))
    async with Client(server) as client:
        await run(client, "1")
        (pid,) = worker_pids(server)
        limits = Path(f"/proc/{pid}/limits").read_text()
    rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
    assert rows["Max address space"][:2] == [str(768 * 1024 * 1024)] * 2
    assert rows["Max core file size"][:2] == ["0", "0"]
    assert rows["Max open files"][:2] == ["256", "256"]
    assert rows["Max processes"][0] != "unlimited"
    assert rows["Max file size"][0] != "unlimited" and rows["Max cpu time"][0] != "unlimited"


async def test_a_killed_worker_is_reported_as_crashed_and_the_next_call_gets_a_fresh_one(
    workspace_dir: Path,
) -> None:
    server = build_server(settings_for(workspace_dir))
    async with Client(server) as client:
        await run(client, "kept = 1")
        (doomed,) = worker_pids(server)
        answers: list[dict[str, Any]] = []

        async def busy() -> None:
            answers.append(await run(client, "while True:\n    pass"))

        async with anyio.create_task_group() as group:
            group.start_soon(busy)
            await anyio.sleep(1.0)
            os.kill(doomed, signal.SIGKILL)
        after = await run(client, "kept")
        fresh = await run(client, "1 + 1")
        (replacement,) = worker_pids(server)
    (crashed,) = answers
    assert crashed["error"]["type"] == "WorkerCrashed" and "reset" in crashed["error"]["message"]
    assert after["error"]["type"] == "NameError"
    assert fresh["result"] == 2 and replacement != doomed


async def test_two_sessions_have_their_own_workers_and_variables(workspace_dir: Path) -> None:
    server = build_server(settings_for(workspace_dir))
    async with Client(server) as first, Client(server) as second:
        await run(first, "secret = 'first'\nshared = []")
        await run(second, "shared = ['second']")
        seen = await run(second, "secret")
        mine = await run(first, "[secret, shared]")
        pids = worker_pids(server)
    assert seen["error"]["type"] == "NameError"
    assert mine["result"] == ["first", []]
    assert len(set(pids)) == 2


async def test_agent_code_cannot_flood_the_servers_log(
    workspace_dir: Path, capfd: pytest.CaptureFixture
) -> None:
    # Collected generators whose finally raises are reported on stderr, the host's log, one by one.
    flood = "def g():\n    try:\n        yield 1\n    finally:\n        raise ValueError('x' * 200)\n"
    flood += "for i in range(5000):\n    it = g()\n    next(it)\n    del it\n"
    server = build_server(settings_for(workspace_dir))
    async with Client(server) as client:
        capfd.readouterr()
        answer = await run(client, flood)
        await run(client, "1")
    logged = capfd.readouterr().err
    assert answer["ok"]
    assert len(logged) < 30_000 and "characters of stderr output dropped" in logged


async def test_a_memory_error_resets_the_session_and_frees_its_memory(workspace_dir: Path) -> None:
    server = build_server(settings_for(workspace_dir, memory_mb=512))
    async with Client(server) as client:
        await run(client, "kept = 1")
        bomb = await run(client, "hoard = []\nwhile True:\n    hoard.append('x' * 10 ** 6)")
        after = await run(client, "kept")
        info = await run(client, "raster.info('RGB.byte.tif')['crs']['epsg']")
    assert bomb["error"]["type"] == "MemoryError" and "reset" in bomb["error"]["message"]
    assert after["error"]["type"] == "NameError"
    assert info["result"] == 32618


# ------------------------------------------------------------------------------------------ Landlock

_CONFINED = """
import json, os, socket, sys
from llmc_mcp.sandbox.worker import confine
workspace, outside = sys.argv[1], sys.argv[2]
report = {"abi": confine(workspace)}

def attempt(name, action):
    try:
        action()
        report[name] = "allowed"
    except OSError as exc:
        report[name] = type(exc).__name__

attempt("read_inside", lambda: open(os.path.join(workspace, "inside.txt")).read())
attempt("write_inside", lambda: open(os.path.join(workspace, "new.txt"), "w").write("x"))
attempt("read_outside", lambda: open(os.path.join(outside, "secret.txt")).read())
attempt("read_through_link", lambda: open(os.path.join(workspace, "link.txt")).read())
attempt("write_outside", lambda: open(os.path.join(outside, "new.txt"), "w").write("x"))
attempt("read_etc_passwd", lambda: open("/etc/passwd").read())
attempt("make_symlink", lambda: os.symlink("/etc/passwd", os.path.join(workspace, "made.txt")))
attempt("tcp_connect", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
print(json.dumps(report))
"""


def test_landlock_confines_a_worker_to_the_runtime_and_its_workspace(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "inside.txt").write_text("inside")
    (outside / "secret.txt").write_text("secret")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    script = textwrap.dedent(_CONFINED)
    done = subprocess.run(
        [sys.executable, "-c", script, str(workspace), str(outside)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.splitlines()[-1])
    if report["abi"] == 0:
        pytest.skip("this kernel has no Landlock; the path policy stands alone")
    assert report["read_inside"] == report["write_inside"] == "allowed"
    denied = ("read_outside", "read_through_link", "write_outside", "read_etc_passwd", "make_symlink")
    assert {name: report[name] for name in denied} == dict.fromkeys(denied, "PermissionError")
    if report["abi"] >= 4:
        assert report["tcp_connect"] == "PermissionError"
    if report["abi"] >= 6:
        assert report["signal_parent"] == "PermissionError"


def test_landlock_does_not_open_arbitrary_sys_path_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python -m` from a home directory puts it on sys.path; the worker must not be able to read it.
    monkeypatch.syspath_prepend(str(tmp_path))
    readable = runtime_paths()
    assert str(tmp_path) not in readable
    assert sys.base_prefix in readable


_CONNECTING = """
import json, socket, sys
from llmc_mcp.sandbox.worker import confine
workspace, allowed, other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
report = {"abi": confine(workspace, connect_ports=[allowed])}
for name, port in (("allowed", allowed), ("other", other)):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        report[name] = "connected"
    except OSError as exc:
        report[name] = type(exc).__name__
print(json.dumps(report))
"""


def test_an_engine_worker_may_connect_to_its_clusters_ports_and_no_other(tmp_path: Path) -> None:
    """Guards against the ports an engine worker is given for its Dask scheduler and workers opening
    every TCP port, or against those ports staying shut (results would wait out Dask's connect
    timeout): both listeners are up, one port is allowed."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as allowed, socket.create_server(("127.0.0.1", 0)) as other:
        ports = [str(listener.getsockname()[1]) for listener in (allowed, other)]
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_CONNECTING), str(tmp_path), *ports],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    report = json.loads(done.stdout.splitlines()[-1])
    if report["abi"] < 4:
        pytest.skip("this kernel's Landlock does not confine TCP")
    assert report == {"abi": report["abi"], "allowed": "connected", "other": "PermissionError"}
