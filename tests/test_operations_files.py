"""The ``files`` namespace: an agent sees the files it may work on, and removes only what llmc-mcp wrote.

Listings run in-process on real files with real GDAL (checked against rasterio); removal and the
not-found hint run through the SDK's ``Client`` in both faces, where the worker asks the server.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from mcp import Client
from rasterio.transform import from_origin

from llmc_mcp.config import Settings
from llmc_mcp.errors import PathRefused
from llmc_mcp.operations import OperationContext, get_operation
from llmc_mcp.operations.files import listing as files_listing
from llmc_mcp.server.app import build_server
from tests.conftest import DATA
from tests.mcp_helpers import structured

MODES = ["code", "classic"]


def listing(ctx: OperationContext, **args: Any) -> dict[str, Any]:
    op = get_operation("files.list")
    return op.run(ctx, op.validate(args)).model_dump(mode="json")


def names(ctx: OperationContext, **args: Any) -> list[str]:
    return [entry["name"] for entry in listing(ctx, **args)["files"]]


def write_raster(path: Path, **overviews: str) -> None:
    """A small GeoTIFF; ``overviews`` become items of its OVERVIEWS metadata domain (hostile)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {"driver": "GTiff", "width": 16, "height": 16, "count": 1, "dtype": "uint8",
               "crs": "EPSG:32618", "transform": from_origin(500000, 4000000, 30, 30)}  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((1, 16, 16), 7, dtype="uint8"))
        if overviews:
            dst.update_tags(ns="OVERVIEWS", **overviews)


# ------------------------------------------------------------------------------------------ listing


def test_listing_shows_names_sizes_times_and_header_summaries(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against: a summary that disagrees with the file (driver, size, bands, dtype, CRS), or sizes
    and times that are not the file's."""
    (workspace_dir / "notes.txt").write_text("field notes")
    entries = {e["name"]: e for e in listing(ctx)["files"]}
    assert "notes.txt" in entries and entries["notes.txt"]["raster"] is None
    for name in ("RGB.byte.tif", "shade.tif", "RGBA.uint16.tif", "float_nan.tif"):
        entry, path = entries[name], workspace_dir / name
        info = path.stat()
        assert entry["size_bytes"] == info.st_size
        assert datetime.fromisoformat(entry["modified"]).timestamp() == pytest.approx(info.st_mtime, abs=1)
        assert entry["modified"].endswith("+00:00")
        assert entry["written_by_llmc"] is False and entry["refused"] is None
        with rasterio.open(path) as ds:
            epsg = ds.crs.to_epsg() if ds.crs else None
            expected = {
                "driver": ds.driver,
                "width": ds.width,
                "height": ds.height,
                "count": ds.count,
                "dtype": ds.dtypes[0],
                "crs": f"EPSG:{epsg}" if epsg else None,
            }
        assert entry["raster"] == expected, name


def test_server_folders_and_outputs_being_written_are_never_listed(
    ctx: OperationContext, workspace_dir: Path
) -> None:
    """Guards against: the store, the ledger, the stubs or a half-written output shown as files to use."""
    for name in (".preflight/justifications/x.json", ".llmc/outputs/ledger.json", ".llmc/stubs/raster.py"):
        (workspace_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace_dir / name).write_text("{}")
    shutil.copy(DATA / "shade.tif", workspace_dir / ".out.tif.partial-0123456789ab.tif")
    (workspace_dir / ".hidden.txt").write_text("x")
    for pattern in ("*", "**", ".*", "**/*.json", "**/*.py", "*.tif"):
        shown = names(ctx, pattern=pattern)
        hidden = [n for n in shown if n.startswith((".preflight", ".llmc")) or ".partial-" in n]
        assert hidden == [], pattern
    assert ".hidden.txt" not in names(ctx), "a wildcard matched a leading dot"
    assert names(ctx, pattern=".*") == [".hidden.txt"]


def test_pattern_and_recursive_choose_what_is_listed(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against: '*' crossing folders, recursive ignored, or '**' and sets misread."""
    for name in ("sub/a.tif", "sub/deep/b.tif", "sub/deep/c.txt"):
        (workspace_dir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / "float_nan.tif", workspace_dir / name)
    top = sorted(p.name for p in workspace_dir.glob("*.tif"))
    assert names(ctx, pattern="*.tif", recursive=False) == top
    assert names(ctx, pattern="*.tif") == sorted([*top, "sub/a.tif", "sub/deep/b.tif"])
    assert names(ctx, pattern="sub/*.tif") == ["sub/a.tif"], "'*' crossed a folder"
    assert names(ctx, pattern="sub/**/*.tif") == ["sub/a.tif", "sub/deep/b.tif"]
    assert names(ctx, pattern="sub/**") == ["sub/a.tif", "sub/deep/b.tif", "sub/deep/c.txt"]
    assert names(ctx, pattern="sub/*", recursive=False) == ["sub/a.tif"]
    assert names(ctx, pattern="sub/") == ["sub/a.tif", "sub/deep/b.tif", "sub/deep/c.txt"]
    assert names(ctx, pattern="sub/", recursive=False) == ["sub/a.tif"]
    assert names(ctx, pattern="sub/deep/?.t[!i]t") == ["sub/deep/c.txt"]
    assert names(ctx, pattern="[RS]*.tif", recursive=False) == [n for n in top if n[0] in "RS"]
    assert names(ctx, pattern="missing/*.tif") == []
    assert "does not exist" in listing(ctx, pattern="missing/*.tif")["note"]


@pytest.mark.parametrize(
    "pattern", ["../*", "/etc/*", "sub/../../*", ".llmc/**", ".preflight/*", "http://x/*", "", "."]
)
def test_a_pattern_outside_the_workspace_is_refused(ctx: OperationContext, pattern: str) -> None:
    """Guards against: a listing that reveals files outside the workspace or in the server's folders."""
    with pytest.raises(PathRefused):
        listing(ctx, pattern=pattern)


@pytest.mark.parametrize("pattern", ["**/" * 300 + "x", "*a" * 300 + "b", "[z-a]*", "[", "a[!]b"])
def test_a_pathological_pattern_is_answered_quickly(
    ctx: OperationContext, workspace_dir: Path, pattern: str
) -> None:
    """Guards against: a glob turned into a backtracking regex, where a crafted pattern costs exponential
    time on long or deep names (a CPU bomb through an argument), or a set that crashes the listing."""
    deep = workspace_dir.joinpath(*["a" * 40] * 12)
    deep.mkdir(parents=True)
    (deep / ("a" * 200)).write_bytes(b"")
    # No clock here: a backtracking matcher would not finish at all on these names.
    assert listing(ctx, pattern=pattern)["files"] == []


def test_links_out_of_the_workspace_are_listed_as_refused_and_never_followed(
    ctx: OperationContext, workspace_dir: Path, tmp_path: Path
) -> None:
    """Guards against: a listing that follows links out (revealing, or summarising, outside files)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(DATA / "shade.tif", outside / "secret.tif")
    links = workspace_dir / "links"
    links.mkdir()
    (links / "escape.tif").symlink_to(outside / "secret.tif")
    (links / "folder").symlink_to(outside)
    (workspace_dir / "inside.tif").symlink_to(workspace_dir / "shade.tif")
    entries = {e["name"]: e for e in listing(ctx)["files"]}
    assert not any("secret" in name for name in entries), "the walk followed a link to a folder"
    assert "links/folder" in entries and "not followed" in entries["links/folder"]["refused"]
    escape = entries["links/escape.tif"]
    assert escape["raster"] is None and "not followed" in escape["refused"]
    assert escape["size_bytes"] == os.lstat(links / "escape.tif").st_size, "the outside file's size leaked"
    assert entries["inside.tif"]["raster"]["width"] == 1024, "a link inside the workspace is usable"
    with pytest.raises(PathRefused, match="symbolic link"):
        listing(ctx, pattern="links/folder/*.tif")


def test_a_hostile_raster_is_listed_with_its_refusal(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against: a listing that opens what a hostile file points at, or fails as a whole on it."""
    write_raster(workspace_dir / "trap" / "pointing.tif", OVERVIEW_FILE="/etc/passwd")
    (workspace_dir / "trap" / "broken.tif").write_bytes(b"II*\x00 not really a tiff")
    write_raster(workspace_dir / "trap" / "fine.tif")
    entries = {e["name"]: e for e in listing(ctx, pattern="trap/*")["files"]}
    pointing = entries["trap/pointing.tif"]
    assert pointing["raster"] is None and "OVERVIEW_FILE" in pointing["refused"]
    assert "passwd" not in json.dumps(pointing)
    assert entries["trap/broken.tif"]["raster"] is None and entries["trap/broken.tif"]["refused"]
    fine = entries["trap/fine.tif"]
    assert fine["raster"]["crs"] == "EPSG:32618" and fine["refused"] is None


def test_the_listing_is_bounded_and_says_how_to_narrow_it(ctx: OperationContext, workspace_dir: Path) -> None:
    """Guards against: an unbounded listing (tokens, time) or one cut short without saying so."""
    many = workspace_dir / "many"
    many.mkdir()
    for i in range(files_listing.MAX_ENTRIES + 30):
        (many / f"f{i:04d}.txt").write_bytes(b"")
    for i in range(files_listing.MAX_SUMMARIES + 5):
        shutil.copy(DATA / "float_nan.tif", many / f"r{i:04d}.tif")
    result = listing(ctx, pattern="many/*")
    total = files_listing.MAX_ENTRIES + 30 + files_listing.MAX_SUMMARIES + 5
    assert len(result["files"]) == files_listing.MAX_ENTRIES
    assert result["truncated"] == total - files_listing.MAX_ENTRIES
    assert "narrow the pattern" in result["note"]
    rasters = listing(ctx, pattern="many/*.tif")
    assert sum(e["raster"] is not None for e in rasters["files"]) == files_listing.MAX_SUMMARIES
    assert rasters["summaries_skipped"] == 5 and "raster.info" in rasters["note"]
    assert listing(ctx, pattern="many/f000?.txt") == {
        "files": listing(ctx, pattern="many/f000?.txt")["files"],
        "truncated": 0,
        "summaries_skipped": 0,
        "note": None,
    }


# ------------------------------------------------------------------------------ through both faces


def settings_for(workspace: Path, mode: str, **overrides: Any) -> Settings:
    return Settings(mode=mode, workspace=workspace, exec_timeout=30, memory_mb=2048, **overrides)


async def call(client: Client, mode: str, qualname: str, **args: Any) -> dict[str, Any]:
    """One operation through either face: ``{"ok", "result"}`` or ``{"ok", "error"}``."""
    if mode == "classic":
        result = await client.call_tool(qualname.replace(".", "_"), args)
        data = structured(result)
        return {"ok": False, "error": data} if result.is_error else {"ok": True, "result": data}
    code = f"{qualname}(**{args!r})"
    out = structured(await client.call_tool("execute_code", {"code": code}))
    return {"ok": out["ok"], "result": out.get("result"), "error": out.get("error")}


async def convert(client: Client, mode: str, dst: str) -> dict[str, Any]:
    return await call(client, mode, "raster.convert", src="RGB.byte.tif", dst=dst)


def ledger(workspace: Path) -> dict[str, Any]:
    return json.loads((workspace / ".llmc" / "outputs" / "ledger.json").read_text())


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_remove_deletes_an_output_and_its_sidecars_and_frees_its_quota(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against: an output that cannot be removed, sidecars left behind (read later as belonging to
    another file at that name), or a quota that stays used after the file is gone."""
    async with Client(build_server(settings_for(workspace_dir, mode, quota_session_files=1))) as client:
        assert (await convert(client, mode, "out/a.tif"))["ok"]
        listed = await call(client, mode, "files.list", pattern="out/*")
        assert [(e["name"], e["written_by_llmc"]) for e in listed["result"]["files"]] == [("out/a.tif", True)]
        refused = await convert(client, mode, "out/b.tif")
        assert not refused["ok"] and refused["error"]["type"] == "quota_exceeded"
        assert "files.remove" in refused["error"]["fix"], "the refusal does not say how to free the quota"
        output = workspace_dir / "out" / "a.tif"
        size = output.stat().st_size + Path(f"{output}.provenance.json").stat().st_size  # as committed
        shutil.copy(DATA / "float_nan.tif", f"{output}.ovr")  # as GDAL leaves them beside a raster
        Path(f"{output}.aux.xml").write_text("<PAMDataset/>")
        removed = await call(client, mode, "files.remove", path="out/a.tif")
        assert removed["ok"], removed
        sidecars = ["out/a.tif.aux.xml", "out/a.tif.ovr", "out/a.tif.provenance.json"]
        assert removed["result"]["removed"] == ["out/a.tif", *sidecars]
        assert removed["result"]["freed_bytes"] == size
        assert (removed["result"]["session_bytes"], removed["result"]["session_files"]) == (0, 0)
        assert sorted(p.name for p in (workspace_dir / "out").iterdir()) == []
        assert ledger(workspace_dir)["outputs"] == []
        assert (await convert(client, mode, "out/b.tif"))["ok"], "the quota was not freed"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_remove_refuses_everything_llmc_did_not_write(workspace_dir: Path, mode: str) -> None:
    """Guards against: files.remove deleting a user's file, a server record or anything outside."""
    outside = workspace_dir.parent / "outside.tif"
    shutil.copy(DATA / "shade.tif", outside)
    async with Client(build_server(settings_for(workspace_dir, mode))) as client:
        assert (await convert(client, mode, "mine.tif"))["ok"]
        (workspace_dir / "link.tif").symlink_to(workspace_dir / "mine.tif")
        cases = {
            "RGB.byte.tif": ("remove_refused", "not written by llmc-mcp"),
            ".llmc/outputs/ledger.json": ("path_refused", "reserved for the server"),
            ".preflight/x.json": ("path_refused", "reserved for the server"),
            "../outside.tif": ("path_refused", "'..'"),
            str(outside): ("path_refused", "absolute"),
            "link.tif": ("remove_refused", "symbolic link"),
            ".": ("remove_refused", "folders are never removed"),
            "nope.tif": ("not_found", "does not exist"),
        }
        for path, (kind, words) in cases.items():
            answer = await call(client, mode, "files.remove", path=path)
            assert not answer["ok"] and answer["error"]["type"] == kind, (path, answer)
            assert words in answer["error"]["message"] and answer["error"].get("fix"), (path, answer)
        assert (workspace_dir / "RGB.byte.tif").is_file() and outside.is_file()
        assert (workspace_dir / ".llmc" / "outputs" / "ledger.json").is_file()
        assert (workspace_dir / "mine.tif").is_file()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_file_the_user_replaced_after_llmc_wrote_it_is_not_removed(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against: identity by name (or by inode and mtime alone): the user rewrote the output in
    place (same inode) and its mtime was set back, yet it is now the user's content."""
    async with Client(build_server(settings_for(workspace_dir, mode))) as client:
        assert (await convert(client, mode, "a.tif"))["ok"] and (await convert(client, mode, "b.tif"))["ok"]
        in_place, replaced = workspace_dir / "a.tif", workspace_dir / "b.tif"
        before = in_place.stat()
        with open(in_place, "r+b") as handle:  # same inode
            handle.write((DATA / "shade.tif").read_bytes())
        os.utime(in_place, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (in_place.stat().st_ino, in_place.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        replaced.unlink()
        shutil.copy(DATA / "shade.tif", replaced)
        listed = await call(client, mode, "files.list", pattern="?.tif")
        assert [e["written_by_llmc"] for e in listed["result"]["files"]] == [False, False]
        for name in ("a.tif", "b.tif"):
            answer = await call(client, mode, "files.remove", path=name)
            assert not answer["ok"] and answer["error"]["type"] == "remove_refused", answer
            assert "replaced or modified since" in answer["error"]["message"]
            assert (workspace_dir / name).is_file()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_forged_ledger_entry_does_not_make_a_user_file_removable(
    workspace_dir: Path, mode: str
) -> None:
    """Guards against: a worker (which can write .llmc/) forging ledger entries so that the server deletes a
    user's file: entries are signed with a key only the server reads."""
    async with Client(build_server(settings_for(workspace_dir, mode))) as client:
        assert (await convert(client, mode, "real.tif"))["ok"]
        data = ledger(workspace_dir)
        genuine = data["outputs"][0]
        victim = (workspace_dir / "RGB.byte.tif").stat()
        forged = {
            **genuine,
            "path": "RGB.byte.tif",
            "inode": victim.st_ino,
            "mtime_ns": victim.st_mtime_ns,
            "ctime_ns": victim.st_ctime_ns,
        }
        unsigned = {**forged, "path": "shade.tif", "digest": "hmac-sha256:" + "0" * 64}
        shade = (workspace_dir / "shade.tif").stat()
        unsigned.update(inode=shade.st_ino, mtime_ns=shade.st_mtime_ns, ctime_ns=shade.st_ctime_ns)
        data["outputs"] += [forged, unsigned]
        (workspace_dir / ".llmc" / "outputs" / "ledger.json").write_text(json.dumps(data))
        listed = await call(client, mode, "files.list", pattern="*.tif", recursive=False)
        flags = {e["name"]: e["written_by_llmc"] for e in listed["result"]["files"]}
        assert flags["real.tif"] is True and flags["RGB.byte.tif"] is False and flags["shade.tif"] is False
        for name in ("RGB.byte.tif", "shade.tif"):
            answer = await call(client, mode, "files.remove", path=name)
            assert not answer["ok"] and answer["error"]["type"] == "remove_refused", answer
            assert (workspace_dir / name).is_file()
        assert (await call(client, mode, "files.remove", path="real.tif"))["ok"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_not_found_error_points_at_files_list(workspace_dir: Path, mode: str) -> None:
    """Guards against: a not-found error that sends the agent to raster.info on a file it cannot name."""
    async with Client(build_server(settings_for(workspace_dir, mode))) as client:
        answer = await call(client, mode, "raster.info", path="missing.tif")
    assert not answer["ok"] and answer["error"]["type"] == "not_found"
    assert "files.list()" in answer["error"]["fix"] and "raster.info" not in answer["error"]["fix"]


@pytest.mark.anyio
async def test_code_mode_lists_with_the_stubbed_shape(workspace_dir: Path) -> None:
    """Guards against: a files module missing from the sandbox or returning another shape than its stub."""
    code = textwrap.dedent(
        """
        import files
        listing = files.list("*.tif", recursive=False)
        [(f["name"], f["raster"]["count"]) for f in listing["files"] if f["name"].startswith("RGB")]
        """
    )
    async with Client(build_server(settings_for(workspace_dir, "code"))) as client:
        out = structured(await client.call_tool("execute_code", {"code": code}))
        stub = (await client.call_tool("read_stubs", {"module": "files"})).content[0].text
    assert out["ok"], out
    assert out["result"] == [["RGB.byte.tif", 3], ["RGBA.uint16.tif", 4]]
    assert "def list(pattern: str = '*', recursive: bool = True) -> FileListing:" in stub
    assert "def remove(path: str) -> RemovedFile:" in stub


@pytest.mark.anyio
async def test_classic_tools_say_which_one_deletes(workspace_dir: Path) -> None:
    """Guards against: a host auto-approving files_remove because it is annotated like a read."""
    async with Client(build_server(settings_for(workspace_dir, "classic"))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["files_list"].annotations.read_only_hint is True
    assert tools["files_list"].annotations.destructive_hint is False
    assert tools["files_remove"].annotations.read_only_hint is False
    assert tools["files_remove"].annotations.destructive_hint is True
    assert tools["files_remove"].input_schema["required"] == ["path"]
