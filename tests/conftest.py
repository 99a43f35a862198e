"""Shared fixtures: real rasters copied into a temporary workspace, and settings for each mode.

The rasters live in ``tests/data/`` (small files from rasterio's test data, licence beside them), so
a clone runs the whole suite with nothing outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmc_mcp.compute.engine import local_engine
from llmc_mcp.config import Settings
from llmc_mcp.operations import OperationContext
from llmc_mcp.operations.hydrology import compiled
from llmc_mcp.provenance.conformance import problems
from llmc_mcp.state import STATE_DIR_ENV
from llmc_mcp.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

SHARED_FILES = (
    "RGB.byte.tif",
    "shade.tif",
    "world.byte.tif",
    "RGBA.uint16.tif",
    "goes.tif",
    "float_nan.tif",
    "rotated.tif",
    "corrupt.tif",
)


@pytest.fixture(autouse=True, scope="session")
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The store's keys go to a folder of this test run, never into the user's ~/.local/state."""
    folder = tmp_path_factory.mktemp("state")
    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop(STATE_DIR_ENV, None)
    else:
        os.environ[STATE_DIR_ENV] = previous


_RECORDS_CHECKED: list[int] = []


@pytest.fixture(autouse=True, scope="session")
def every_provenance_record_conforms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the run, every provenance record any test wrote is checked against the manifest format.

    Guards against a record that only the provenance tests look at: reprojections, conversions,
    terrain and hydrology outputs written by other tests get theirs checked too. The count is shown in
    the run's summary.
    """
    yield
    bad = {}
    records = sorted(tmp_path_factory.getbasetemp().rglob("*.provenance.json"))
    for path in records:
        try:
            found = problems(json.loads(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            found = [f"not JSON: {exc}"]
        if found:
            bad[str(path)] = found
    _RECORDS_CHECKED.append(len(records))
    assert not bad, bad


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, not in tests/clients/, because tests/test_installs.py marks client runs too.
    config.addinivalue_line(
        "markers",
        "clients: drives the server with third-party clients (Node: Inspector, TS SDK, conformance; "
        "Python: openai-agents, pydantic-ai, langchain-mcp-adapters, fastmcp)",
    )
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        # One kernel cache for the run, never the user's ~/.cache: pytest-xdist's workers inherit this
        # variable, so every test process and every server they start read it (DD-MCP-100). Warmed
        # before any test runs (about 30 s of CPU), so that no test compiles the routing kernels
        # itself: four test processes and their servers' workers each did, on two cores.
        folder = tempfile.mkdtemp(prefix="llmc-mcp-test-kernels-")
        _KERNEL_CACHE.append(folder)
        root = Path(folder) / "kernels"
        os.environ[KERNEL_CACHE_ENV] = str(root)
        compiled.start_warming(root)
        deadline = time.monotonic() + KERNEL_WARM_SECONDS
        while compiled.ready(root) is None and time.monotonic() < deadline:
            time.sleep(0.2)
    root_text = os.environ.get(KERNEL_CACHE_ENV)
    ready = compiled.ready(Path(root_text)) if root_text and root_text != "off" else None
    compiled.read_from(None if ready is None else str(ready))  # operations the tests call in-process


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _KERNEL_CACHE:
        shutil.rmtree(folder, ignore_errors=True)


KERNEL_CACHE_ENV = "LLMC_MCP_KERNEL_CACHE"
KERNEL_WARM_SECONDS = 600
"""How long the run waits for its kernel cache; past it, tests compile the kernels as workers would."""
_KERNEL_CACHE: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """In a pytest-xdist worker of a ``--dist loadgroup`` run, each ``xdist_group`` reaches the
    scheduler as the ``@group`` suffix of its tests' nodeids.

    pytest-xdist 3.8 writes that suffix to ``item._nodeid``, which pytest 9.2 no longer reads (it keeps
    a structured ``NodeId``): every group was silently dealt out test by test, so the packaging module
    built its wheel and venv once per process and each client module started its servers once per
    process (pytest-xdist issue 1386). This runs after every other implementation (xdist's included)
    and sets the suffix only where it is missing, so it does nothing once xdist's own write works.
    """
    yield
    if not getattr(config.option, "loadgroup", False):  # set by xdist in its workers only
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = type(item._id).parse(item.nodeid + suffix)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, hand this worker's count of checked records to the controller (the
    session fixture above has been torn down by now)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["provenance_records_checked"] = sum(_RECORDS_CHECKED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller adds up what each pytest-xdist worker checked. A worker that died (``error``
    set) sent no output: xdist reports its crash, and this hook must not turn that into an
    INTERNALERROR that ends the whole run."""
    output = getattr(node, "workeroutput", None) or {}
    _RECORDS_CHECKED.append(int(output.get("provenance_records_checked", 0)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _RECORDS_CHECKED:
        count = sum(_RECORDS_CHECKED)
        terminalreporter.write_line(f"provenance records checked against the manifest format: {count}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    """A workspace holding copies of the test rasters of ``tests/data`` (they are read-only inputs)."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in SHARED_FILES:
        shutil.copy(DATA / name, root / name)
    return root


@pytest.fixture
def workspace(workspace_dir: Path) -> Workspace:
    return Workspace(workspace_dir)


@pytest.fixture
def ctx(workspace: Workspace) -> OperationContext:
    """The context a worker with two threads gives operations: its local engine computes one piece
    ahead in a helper thread."""
    return OperationContext(workspace, num_threads=2, engine=local_engine(2))


@pytest.fixture
def classic_settings(workspace_dir: Path) -> Settings:
    return Settings(mode="classic", workspace=workspace_dir)


@pytest.fixture
def code_settings(workspace_dir: Path) -> Settings:
    return Settings(mode="code", workspace=workspace_dir, exec_timeout=20, memory_mb=2048)


BIG_DEM = 4096
"""The side of :func:`big_dem`: its slope takes about a second on two cores, long enough that a cancel
or a kill sent as soon as its job is handed out lands while it runs, and longer than the sub-second
``--exec-timeout`` the task tests set."""


@pytest.fixture(scope="session")
def big_dem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4096 x 4096 float32 DEM (64 MiB, tiled 512), written once per test process."""
    from tests.rasters import write

    rows, cols = np.mgrid[0:BIG_DEM, 0:BIG_DEM].astype("float32")
    return write(tmp_path_factory.mktemp("dem") / "big.tif", rows * 0.5 + np.sin(cols / 50) * 20, block=512)


@pytest.fixture
def workspace_with_dem(workspace_dir: Path, big_dem: Path) -> Path:
    """The test workspace with ``big.tif`` (a hard link to :func:`big_dem` where the file system allows)."""
    from tests.rasters import link_or_copy

    link_or_copy(big_dem, workspace_dir / "big.tif")
    return workspace_dir
