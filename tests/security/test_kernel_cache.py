"""The routing kernels' compiled code: written by the server's warm-up only, read by confined workers,
never written by them, and not used from anywhere others could write (DD-MCP-100).

numba's cache is pickles and object code: a worker that could write it, or a cache directory another
user or the agent's workspace could write, would let one party plant code that another runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmc_mcp.config import Settings, default_kernel_cache
from llmc_mcp.operations.hydrology import compiled
from llmc_mcp.sandbox.worker import landlock_abi

WARM_WAIT_SECONDS = 900
"""How long a test waits for the run's warm-up (about 30 s of CPU at nice 19 on a loaded host)."""

ROUTE_CONFINED = """
import json, os, sys
import numpy as np
from llmc_mcp.operations.hydrology import compiled
from llmc_mcp.operations.hydrology._grid import pyflwdir
from llmc_mcp.operations.hydrology._routing import kernels
from llmc_mcp.runtime_files import runtime_paths
from llmc_mcp.sandbox.worker import confine

cache, workspace, method = sys.argv[1], sys.argv[2], sys.argv[3]
compiled.read_from(cache)
landlock = confine(workspace, [*runtime_paths(), cache])
rows, cols = np.mgrid[0:16, 0:16]
dem = (100.0 - rows - cols).astype("float32")  # as hydrology.condition reads a DEM: float32, NaN nodata
dem[8, 8] -= 5.0
if method == "fill_flats":
    kernel = kernels().fill_flats
    kernel(dem, ~np.isnan(dem))
else:
    kernel = pyflwdir().dem.fill_depressions
    kernel(dem, nodata=np.nan, max_depth=-1.0)
try:
    with open(os.path.join(cache, "planted.nbi"), "w"):
        planted = True
except PermissionError:
    planted = False
print(json.dumps({
    "landlock": landlock,
    "hits": sum(kernel.stats.cache_hits.values()),
    "misses": sum(kernel.stats.cache_misses.values()),
    "planted": planted,
}))
"""


def warmed_cache() -> Path:
    """This run's kernel cache (``tests/conftest.py`` names it), warmed by the server's own warm-up."""
    root = default_kernel_cache()
    assert root is not None and "llmc-mcp-test-kernels-" in str(root), root
    compiled.start_warming(root)
    deadline = time.monotonic() + WARM_WAIT_SECONDS
    while (path := compiled.ready(root)) is None:
        assert time.monotonic() < deadline, "the warm-up did not finish"
        time.sleep(0.5)
    return path


def route_confined(cache: Path, workspace: Path, method: str = "fill") -> dict[str, object]:
    """Run one kernel the way hydrology.condition does, in a process confined as a worker is."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", ROUTE_CONFINED, str(cache), str(workspace), method],
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.skipif(landlock_abi() < 1, reason="needs Landlock to confine the reading process")
def test_a_confined_worker_takes_the_routing_kernels_from_the_cache_and_cannot_write_it(
    tmp_path: Path,
) -> None:
    """Guards against a session's first routing compiling pyflwdir's flood and our kernels (7 s of CPU,
    30-40 s on a loaded host, inside --exec-timeout), and against a cache a worker could write: the
    confined process finds both functions in the cache, compiles nothing, and cannot plant a file."""
    cache = warmed_cache()
    before = listing(cache)
    for method in ("fill", "fill_flats"):
        answer = route_confined(cache, tmp_path, method)
        assert answer == {"landlock": landlock_abi(), "hits": 1, "misses": 0, "planted": False}, method
    assert listing(cache) == before


@pytest.mark.skipif(landlock_abi() < 1, reason="needs Landlock to confine the reading process")
def test_a_worker_without_the_functions_in_its_cache_compiles_them_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Guards against a reader that saves what it compiled: a worker given a cache without a function
    compiles it in memory, and the cache stays as it was (empty here)."""
    empty = tmp_path / "empty-cache"
    empty.mkdir(mode=0o700)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    answer = route_confined(empty, workspace)
    assert answer["hits"] == 0 and answer["misses"] == 1
    assert list(empty.iterdir()) == []


def test_a_cache_that_others_may_write_is_not_read(tmp_path: Path) -> None:
    """Guards against reading compiled code from a folder another user (or group) could have written:
    a complete cache whose root or own folder is group- or world-writable, or a link, is not used."""
    root = tmp_path / "kernels"
    root.mkdir(mode=0o700)
    (root / compiled.cache_key()).mkdir(mode=0o700)
    assert compiled.ready(root) == root / compiled.cache_key()
    os.chmod(root / compiled.cache_key(), 0o770)
    assert compiled.ready(root) is None
    os.chmod(root / compiled.cache_key(), 0o700)
    os.chmod(root, 0o777)
    assert compiled.ready(root) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    (linked / compiled.cache_key()).symlink_to(elsewhere)
    assert compiled.ready(linked) is None


def test_a_root_others_may_write_gets_no_warm_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Guards against the server writing compiled code where others could replace it before a worker
    reads it: the warm-up is not started, and the log says why."""
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)
    with caplog.at_level("WARNING", logger=compiled.__name__):
        compiled.start_warming(root)
    assert "not a directory only this user may write" in caplog.text
    assert list(root.iterdir()) == []


def test_a_kernel_cache_inside_the_workspace_is_not_used(tmp_path: Path) -> None:
    """Guards against a cache the workers could write: every worker may write the workspace (Landlock
    allows it), so a cache there would let one session's code plant machine code for the next."""
    inside = Settings(workspace=tmp_path, kernel_cache=tmp_path / ".cache" / "kernels")
    outside = Settings(workspace=tmp_path / "ws", kernel_cache=tmp_path / "kernels")
    assert inside.kernel_cache_root is None
    assert outside.kernel_cache_root == (tmp_path / "kernels").resolve()


def test_off_turns_the_kernel_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards against an operator's 'off' being read as a folder named 'off'."""
    monkeypatch.setenv("LLMC_MCP_KERNEL_CACHE", "off")
    assert Settings(workspace=tmp_path).kernel_cache is None
    assert Settings(workspace=tmp_path, kernel_cache="off").kernel_cache is None  # type: ignore[arg-type]


def test_a_lock_file_planted_as_a_link_stops_the_warm_up_not_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Guards against the warm-up's lock file followed through a link (creating or truncating a file
    elsewhere) and against the server's start failing on it: the warm-up is skipped and logged."""
    root = tmp_path / "kernels"
    root.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept")
    (root / compiled.LOCK_NAME).symlink_to(target)
    with caplog.at_level("WARNING", logger=compiled.__name__):
        compiled.start_warming(root)
    assert "cannot be locked" in caplog.text
    assert target.read_text() == "kept" and sorted(p.name for p in root.iterdir()) == [compiled.LOCK_NAME]
