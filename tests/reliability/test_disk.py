"""Disk and inodes are bounded, and nothing half-written survives (issue 9, section 4).

Each test drives the real server (the SDK's in-process ``Client`` over ``build_server``, code and
classic mode, both running operations in confined workers) with real GDAL writes:

- quotas of bytes and files per session and per workspace refuse a write with an error that names
  the limit, the usage and the flag, and the justification store can still write afterwards;
- a loop of uncompressed conversions cannot fill a small disk (a tmpfs: root only, else skipped)
  past the free-space reserve;
- a write killed by the wall clock leaves no temporary file; those a previous server left are
  swept when the next one starts;
- a write that fails on a nearly full disk, or writes a file that does not read back whole, leaves
  an existing destination byte-identical and reports the failure;
- refused calls create no folder, a failed write removes the folders it created, and output paths
  have a depth limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import rasterio
from mcp import Client

from llmc_mcp.compute.output import write_output
from llmc_mcp.config import Settings
from llmc_mcp.errors import RasterError
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.outputs import OutputLedger
from llmc_mcp.server.app import build_server
from llmc_mcp.workspace import RESERVED_DIRS
from tests.conftest import DATA, SHARED_FILES
from tests.mcp_helpers import justification_for, structured
from tests.reliability._fs import tmpfs

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
RGB_BYTES = 791 * 718 * 3
"""RGB.byte.tif written without compression in strips: about 1.6 MiB of pixels."""


# ------------------------------------------------------------------------------------------ helpers


def settings_for(workspace: Path, mode: str = "code", **overrides: Any) -> Settings:
    values: dict[str, Any] = {"mode": mode, "workspace": workspace, "exec_timeout": 30, "memory_mb": 1024}
    return Settings(**{**values, **overrides})


@contextlib.asynccontextmanager
async def client_for(settings: Settings) -> AsyncIterator[Client]:
    async with Client(build_server(settings)) as client:
        yield client


async def convert(client: Client, mode: str, dst: str, **options: Any) -> dict[str, Any] | None:
    """``raster.convert('RGB.byte.tif', dst, ...)`` through either face; the error, or None."""
    args = {"src": "RGB.byte.tif", "dst": dst, **options}
    if mode == "classic":
        result = await client.call_tool("raster_convert", args)
        return structured(result) if result.is_error else None
    code = f"raster.convert(**{args!r})\nNone"
    out = structured(await client.call_tool("execute_code", {"code": code}))
    return None if out["ok"] else out["error"]


async def run(client: Client, code: str) -> dict[str, Any]:
    return structured(await client.call_tool("execute_code", {"code": textwrap.dedent(code)}))


async def persist_a_justification(client: Client, mode: str) -> None:
    """Hit the gate, persist its justifications: the store must write, whatever the outputs used."""
    args = {"src": "RGB.byte.tif", "dst": "gated.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}
    if mode == "classic":
        miss = structured(await client.call_tool("raster_reproject", args))
        hints = miss["details"]["reflection_required"] if "details" in miss else miss["reflection_required"]
        for hint in hints:
            params = {
                "hash": hint["hash"],
                "domain": hint["domain"],
                "justification": justification_for(hint),
            }
            result = await client.call_tool("persist_justification", params)
            assert not result.is_error, structured(result)
        return
    template = json.dumps(justification_for({"prompt_args": {"x": "METHOD"}}))
    out = await run(
        client,
        f"""
        import json
        stored = []
        try:
            raster.reproject(**{args!r})
        except reflection.ReflectionRequired as miss:
            for hint in miss.hints:
                answer = json.loads({template!r}.replace("METHOD", list(hint["prompt_args"].values())[0]))
                stored.append(reflection.persist(hint["hash"], hint["domain"], answer))
        len(stored)
        """,
    )
    assert out["ok"] and out["result"] == 2, out


def partials(workspace: Path) -> list[str]:
    return sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*.partial-*"))


def journal_entries(workspace: Path) -> list[Path]:
    return list((workspace / ".llmc" / "outputs" / "journal").glob("*/*.json"))


def folders(workspace: Path) -> set[str]:
    return {str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_dir()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records(workspace: Path) -> list[Path]:
    return list((workspace / ".preflight" / "justifications").glob("*/*.json"))


def populate(workspace: Path) -> Path:
    for name in SHARED_FILES:
        shutil.copy(DATA / name, workspace / name)
    return workspace


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


# ------------------------------------------------------------------------------------------- quotas


@pytest.mark.parametrize("mode", ["code", "classic"])
async def test_a_session_over_its_byte_quota_is_refused_clearly_and_the_store_still_writes(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against: nothing bounding what one session writes (a loop filled the disk)."""
    settings = settings_for(workspace_dir, mode, quota_session_mb=4, disk_reserve_mb=0)
    async with client_for(settings) as client:
        errors = [await convert(client, mode, f"out{i}.tif", compress="NONE", tiled=False) for i in range(5)]
        assert errors[:2] == [None, None], errors
        refused = [e for e in errors[2:] if e is not None]
        assert len(refused) == 3, errors
        for error in refused:
            assert error["type"] == "quota_exceeded", error
            assert "--quota-session-mb 4" in error["message"] and "used by 2 files" in error["message"]
            assert "raise --quota-session-mb" in error["fix"] and "compress" in error["fix"]
        kept = sum(p.stat().st_size for p in workspace_dir.glob("out*.tif"))
        assert kept <= 4 * MiB
        # Overwriting an output reuses its space: still allowed at the quota.
        assert await convert(client, mode, "out0.tif", compress="NONE", tiled=False) is None
        await persist_a_justification(client, mode)
    assert len(records(workspace_dir)) == 2
    assert partials(workspace_dir) == [] and journal_entries(workspace_dir) == []


async def test_the_workspace_quota_counts_every_session(workspace_dir: Path) -> None:
    """Guards against: per-session limits alone, which many sessions add up past."""
    settings = settings_for(workspace_dir, quota_session_mb=100, quota_workspace_mb=4, disk_reserve_mb=0)
    server = build_server(settings)
    async with Client(server) as first, Client(server) as second:
        assert await convert(first, "code", "a.tif", compress="NONE", tiled=False) is None
        assert await convert(second, "code", "b.tif", compress="NONE", tiled=False) is None
        error = await convert(second, "code", "c.tif", compress="NONE", tiled=False)
        assert error is not None and error["type"] == "quota_exceeded", error
        assert "--quota-workspace-mb 4" in error["message"] and "raise --quota-workspace-mb" in error["fix"]
    assert not (workspace_dir / "c.tif").exists() and partials(workspace_dir) == []


@pytest.mark.parametrize("mode", ["code", "classic"])
@pytest.mark.parametrize("limit", ["session", "workspace"])
async def test_the_file_quota_refuses_new_names_but_not_overwrites(
    workspace_dir: Path, mode: str, limit: str
) -> None:
    """Guards against: inodes unbounded (a loop of tiny outputs under ever new names)."""
    quotas = {
        f"quota_{limit}_files": 2,
        f"quota_{'workspace' if limit == 'session' else 'session'}_files": 10,
    }
    async with client_for(settings_for(workspace_dir, mode, **quotas)) as client:
        assert await convert(client, mode, "one.tif") is None
        assert await convert(client, mode, "two.tif") is None
        error = await convert(client, mode, "three.tif")
        assert error is not None and error["type"] == "quota_exceeded", error
        assert f"--quota-{limit}-files 2" in error["message"] and f"--quota-{limit}-files" in error["fix"]
        assert await convert(client, mode, "two.tif", compress="ZSTD") is None
    assert not (workspace_dir / "three.tif").exists()


async def test_a_loop_of_uncompressed_conversions_cannot_fill_a_small_disk(tmp_path: Path) -> None:
    """Guards against: a full disk, after which every session and the store failed."""
    with tmpfs(tmp_path / "disk", "24m") as mount:
        workspace = populate(mount)
        reserve = 6
        settings = settings_for(workspace, disk_reserve_mb=reserve)
        async with client_for(settings) as client:
            out = await run(
                client,
                """
                outcome = []
                for i in range(20):
                    try:
                        raster.convert("RGB.byte.tif", "loop%d.tif" % i, compress="NONE", tiled=False)
                        outcome.append("ok")
                    except reflection.ApiError as error:
                        outcome.append(error.type + ": " + error.message)
                outcome
                """,
            )
            assert out["ok"], out
            outcome = out["result"]
            assert outcome[0] == "ok" and outcome.count("ok") < 20, outcome
            refusals = [o for o in outcome if o != "ok"]
            assert all(o.startswith("quota_exceeded") for o in refusals), refusals
            assert all(f"--disk-reserve-mb {reserve}" in o for o in refusals), refusals
            assert free_bytes(mount) >= reserve * MiB - MiB, "the writes ate into the reserve"
            await persist_a_justification(client, "code")
        assert len(records(workspace)) == 2
        assert partials(workspace) == []


def test_the_ledger_records_what_llmc_wrote_and_forgets_what_someone_else_replaced(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against: a ledger that would let a future files.remove delete a file llmc-mcp did not write."""
    for dst in ("a.tif", "sub/b.tif"):
        write_output(ctx, "RGB.byte.tif", dst, lambda ctx, source: CopyPlan())
    ledger = OutputLedger(ctx.workspace)
    kept = ledger.outputs()
    assert sorted(kept) == ["a.tif", "sub/b.tif"]
    assert (
        kept["a.tif"].bytes == (workspace_dir / "a.tif").stat().st_size and kept["a.tif"].session == "local"
    )
    (workspace_dir / "a.tif").unlink()
    shutil.copy(workspace_dir / "shade.tif", workspace_dir / "a.tif")  # the user's own file now
    os.utime(workspace_dir / "sub" / "b.tif", ns=(1, 1))
    assert ledger.outputs() == {}, "files changed by someone else are still taken for llmc-mcp outputs"
    assert ledger.outputs() == OutputLedger(ctx.workspace).outputs()


class CopyPlan:
    def write(self, source: Any, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **{**source.profile, "compress": "DEFLATE"}) as out:
            out.write(source.read())


# ------------------------------------------------------------------------------ nothing half-written


def big_raster(path: Path, side: int = 4096) -> None:
    """Noise compresses poorly, so a DEFLATE conversion of it takes a while (seconds)."""
    rng = np.random.default_rng(1)
    grid = {"crs": "EPSG:32633", "transform": rasterio.transform.from_origin(500000, 5000000, 10, 10)}
    profile = {"driver": "GTiff", "width": side, "height": side, "count": 1, "dtype": "float32", **grid}
    with rasterio.open(path, "w", **profile, tiled=True, blockxsize=512, blockysize=512) as ds:
        for top in range(0, side, 512):
            ds.write(rng.random((512, side), dtype=np.float32), 1, window=((top, top + 512), (0, side)))


async def test_a_write_killed_by_the_wall_clock_leaves_no_temporary_file(workspace_dir: Path) -> None:
    """Guards against: the cleanup running in the worker that was killed, so the temp file stayed.

    A loop of conversions outlasts any wall clock, on any machine, so the kill lands mid-write. The
    clock is long enough for the next call (a fresh worker, a small write) on a loaded machine: at
    0.7 s a loaded CI machine's next call timed out too.
    """
    big_raster(workspace_dir / "big.tif")
    settings = settings_for(workspace_dir, "code", exec_timeout=5)
    async with client_for(settings) as client:
        out = await run(
            client,
            """
            for i in range(1000):
                raster.convert("big.tif", "slow/out.tif", compress="DEFLATE", predictor=1)
            """,
        )
        assert out["error"]["type"] == "Timeout", out
        assert partials(workspace_dir) == [] and journal_entries(workspace_dir) == []
        assert await convert(client, "code", "after.tif") is None, "the session does not write after a kill"


async def test_a_classic_write_whose_worker_is_killed_mid_write_leaves_no_temporary_file(
    workspace_dir: Path,
) -> None:
    """Guards against the same leak in classic mode: the worker is killed once its temp file exists."""
    big_raster(workspace_dir / "big.tif")
    server = build_server(settings_for(workspace_dir, "classic"))
    pool: Any = server.pool  # type: ignore[attr-defined]
    args = {"src": "big.tif", "dst": "slow/out.tif", "compress": "DEFLATE", "predictor": 1}
    async with Client(server) as client:
        assert await convert(client, "classic", "warm.tif") is None
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(structured(await client.call_tool("raster_convert", args)))

            tg.start_soon(call)
            with anyio.fail_after(60):
                while not journal_entries(workspace_dir) and not results:
                    await anyio.sleep(0.005)
            assert journal_entries(workspace_dir) and not results, "the write ended before it was seen"
            for pid in pool.worker_pids().values():
                os.kill(pid, signal.SIGKILL)
        assert results[0].get("type") == "WorkerCrashed", results
        assert partials(workspace_dir) == [] and journal_entries(workspace_dir) == []


def test_temporary_files_a_previous_server_left_are_swept_at_start(workspace_dir: Path) -> None:
    """Guards against: temp files of a killed server process staying forever."""
    script = textwrap.dedent(
        f"""
        import os
        from llmc_mcp.outputs import LocalOutputs, OutputLedger
        from llmc_mcp.workspace import Workspace
        grant = LocalOutputs(OutputLedger(Workspace({str(workspace_dir)!r}))).begin("new/deeper/x.tif")
        path = os.path.join({str(workspace_dir)!r}, grant.tmp)
        for name in (path, path + ".aux.xml", path + ".ovr.tmp"):
            open(name, "wb").write(b"half a GeoTIFF")
        os._exit(0)  # dies mid-write: no commit, no abort
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True)
    assert len(partials(workspace_dir)) == 3 and len(journal_entries(workspace_dir)) == 1
    build_server(settings_for(workspace_dir, "classic"))
    assert partials(workspace_dir) == [] and journal_entries(workspace_dir) == []
    assert not (workspace_dir / "new").exists(), "the folders the dead write created were kept"


async def test_a_failed_write_on_a_nearly_full_disk_keeps_the_existing_destination(tmp_path: Path) -> None:
    """Guards against: a truncated GeoTIFF renamed over dst and reported as success, or dst destroyed."""
    with tmpfs(tmp_path / "disk", "16m") as mount:
        workspace = populate(mount)
        settings = settings_for(workspace, "classic", disk_reserve_mb=0)
        async with client_for(settings) as client:
            assert await convert(client, "classic", "keep.tif") is None
            before = digest(workspace / "keep.tif")
            with open(workspace / "filler", "wb") as filler:  # leave less than the write needs
                filler.write(b"\0" * (free_bytes(mount) - RGB_BYTES // 2))
            error = await convert(client, "classic", "keep.tif", compress="NONE", tiled=False)
            assert error is not None and error["type"] in ("quota_exceeded", "raster_error"), error
            assert "Nothing was written under 'keep.tif'" in error["message"] or (
                "nothing was written under 'keep.tif'" in error["message"]
            ), error
            assert digest(workspace / "keep.tif") == before
            assert partials(workspace) == [] and journal_entries(workspace) == []
            os.remove(workspace / "filler")
            assert await convert(client, "classic", "keep.tif", compress="NONE", tiled=False) is None


@pytest.mark.parametrize("damage", ["truncate", "zero-tail"])
def test_a_geotiff_that_does_not_read_back_whole_is_never_renamed_onto_dst(
    ctx: OperationContext, workspace_dir: Path, damage: str
) -> None:
    """Guards against: trusting a write that GDAL closed without an exception (a disk that lost the tail)."""
    convert = get_operation("raster.convert")  # an earlier output: only llmc-mcp's own may be replaced
    convert.run(ctx, convert.validate({"src": "shade.tif", "dst": "dst.tif"}))
    before = digest(workspace_dir / "dst.tif")

    class DamagedPlan:
        def write(self, source: Any, tmp: Path) -> None:
            profile = {
                **source.profile,
                "compress": "DEFLATE",
                "tiled": True,
                "blockxsize": 256,
                "blockysize": 256,
            }
            with rasterio.open(tmp, "w", **profile) as out:
                out.write(source.read())
            size = tmp.stat().st_size
            with open(tmp, "r+b") as handle:
                if damage == "truncate":
                    handle.truncate(size * 2 // 3)
                else:
                    handle.seek(size // 2)
                    handle.write(b"\0" * (size // 2))

    with pytest.raises(RasterError, match=r"nothing was written under 'dst\.tif'"):
        write_output(ctx, "RGB.byte.tif", "dst.tif", lambda ctx, source: DamagedPlan())
    assert digest(workspace_dir / "dst.tif") == before
    assert partials(workspace_dir) == [] and journal_entries(workspace_dir) == []


# ------------------------------------------------------------------------------------------ folders


@pytest.mark.parametrize("mode", ["code", "classic"])
async def test_refused_calls_create_no_folder_and_a_failed_write_removes_its_own(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against: output_path making folders before the checks (60,000 folders from a loop)."""
    before = folders(workspace_dir)
    async with client_for(settings_for(workspace_dir, mode)) as client:
        for i in range(20):
            refusals = [
                await convert(client, mode, f"a{i}/b/x.png"),  # not a GeoTIFF name
                await convert(client, mode, f"c{i}/d/x.tif", compress="JPEG", quality=500),  # bad option
                await convert(client, mode, f"e{i}/f/x.tif", compress="JPEG"),  # the gate: lossy
            ]
            assert all(r is not None for r in refusals), refusals
        args = {"src": "corrupt.tif", "dst": "g/h/x.tif"}
        if mode == "classic":
            failed = structured(await client.call_tool("raster_convert", args))
        else:
            failed = (await run(client, f"raster.convert(**{args!r})"))["error"]
        assert failed["type"] == "raster_error", failed
    created = {f for f in folders(workspace_dir) - before if f.split("/")[0] not in RESERVED_DIRS}
    assert created == set(), created


async def test_output_paths_have_a_depth_limit(workspace_dir: Path) -> None:
    """Guards against: unbounded nesting (every level a directory inode, paths past PATH_MAX)."""
    async with client_for(settings_for(workspace_dir, "classic")) as client:
        deepest = "/".join(f"d{i}" for i in range(15)) + "/x.tif"
        assert await convert(client, "classic", deepest) is None
        error = await convert(client, "classic", "/".join(f"d{i}" for i in range(16)) + "/x.tif")
        assert error is not None and error["type"] == "path_refused", error
        assert "17 path components; at most 16" in error["message"]
        error = await convert(client, "classic", "a/" * 600 + "x.tif")
        assert error is not None and error["type"] in ("path_refused", "invalid_argument"), error
    assert not (workspace_dir / "d0" / "d1" / "d2" / "d3" / "d4" / "d5" / "d6" / "d7" / "d8" / "d9" / "d10"
                / "d11" / "d12" / "d13" / "d14" / "d15").exists()  # fmt: skip
