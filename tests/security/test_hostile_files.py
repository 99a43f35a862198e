"""Hostile rasters: files whose own content or neighbours make GDAL open what the path policy never saw.

A GeoTIFF can name an overview file in its metadata (``OVERVIEWS/OVERVIEW_FILE``, in its GDAL_METADATA
tag or in a hand-written ``.aux.xml``), and GDAL opens that name by itself, with every registered
driver, as soon as overviews, masks or the file list are asked for. Sidecars found by derived names
(``.ovr``, ``.msk``, ``.aux.xml``, ``_RPC.TXT``, ``_MTL.txt``...) can be links leading out, or plain
files holding a ``<GDAL_WMS>`` or ``<VRTDataset>`` document. Each case here points at a secret file
outside the workspace, the store's key, ``/etc/passwd``, a ``/vsicurl/`` URL or an inline WMS served
by a local HTTP server that records every request. Each is run through both faces with the real SDK
client (``raster.info``, ``raster.stats(approx=True)``, ``raster.convert`` in code mode; the matching
classic tools), and must end refused with an error that names what was refused, or (where the only
harm is a driver that is no longer registered) harmlessly: no secret byte in any answer and no
request at the server, ever.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from mcp import Client
from rasterio.transform import from_origin

from llmc_mcp.config import Settings
from llmc_mcp.errors import PathRefused, StoreError
from llmc_mcp.gdal.datasets import check_dataset
from llmc_mcp.gdal.environment import REGISTERED_DRIVERS, worker_gdal_environment
from llmc_mcp.operations import OperationContext
from llmc_mcp.reflection.store import LEGACY_KEY_NAME, JustificationStore, Record
from llmc_mcp.sandbox.channel import SyncChannel
from llmc_mcp.sandbox.worker import WorkerConfig
from llmc_mcp.sandbox.workers import worker_command, worker_environment
from llmc_mcp.server.app import build_server
from llmc_mcp.server.results import result_data
from llmc_mcp.state import STATE_DIR_ENV, key_path
from llmc_mcp.workspace import Workspace
from tests.conftest import DATA
from tests.mcp_helpers import structured, text
from tests.security.sink import Sink

pytestmark = pytest.mark.anyio

OUTSIDE_SECRET = "LLMC-OUTSIDE-SECRET-7f3a"
KEY_MARKER = "LLMC-STORE-KEY-5c91"
PASSWD_MARKER = "root:x:0:0"
SECRETS = (OUTSIDE_SECRET, KEY_MARKER, PASSWD_MARKER)
SECRET_PIXEL = 201.0
"""The value of every pixel of the raster outside; the hostile rasters hold 7."""


# ------------------------------------------------------------------------------------------ the sink


def wms_document(url: str) -> str:
    return (
        f'<GDAL_WMS><Service name="WMS"><ServerUrl>{url}?</ServerUrl><Layers>x</Layers></Service>'
        "<DataWindow><UpperLeftX>0</UpperLeftX><UpperLeftY>0</UpperLeftY><LowerRightX>1</LowerRightX>"
        "<LowerRightY>1</LowerRightY><SizeX>100</SizeX><SizeY>100</SizeY></DataWindow>"
        "<BandsCount>1</BandsCount></GDAL_WMS>"
    )


def vrt_document(source: Path) -> str:
    return (
        '<VRTDataset rasterXSize="32" rasterYSize="32"><VRTRasterBand dataType="Byte" band="1">'
        f"<SimpleSource><SourceFilename>{source}</SourceFilename><SourceBand>1</SourceBand></SimpleSource>"
        "</VRTRasterBand></VRTDataset>"
    )


# ------------------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class Case:
    """One hostile raster: ``folder/raster.tif`` and what a refusal must name (None: not refused)."""

    id: str
    names: str | None


def write_raster(path: Path, value: int = 7, size: int = 64, **overviews: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "uint8",
               "crs": "EPSG:32618", "transform": from_origin(500000, 4000000, 30, 30)}  # fmt: skip
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((1, size, size), value, dtype="uint8"))
        if overviews:
            dst.update_tags(ns="OVERVIEWS", **overviews)


def pam_with_overview_file(target: str) -> str:
    return (
        '<PAMDataset><Metadata domain="OVERVIEWS">'
        f'<MDI key="OVERVIEW_FILE">{target.replace("&", "&amp;").replace("<", "&lt;")}</MDI>'
        "</Metadata></PAMDataset>"
    )


@dataclass
class World:
    workspace: Path
    outside: Path
    key: Path
    sink: Sink
    cases: list[Case]


def lay_out(workspace: Path, outside: Path, sink: Sink) -> World:
    """Every hostile raster in a folder of its own (a link out refuses its whole folder)."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text(f"{OUTSIDE_SECRET}\n")
    write_raster(outside / "secret.tif", value=int(SECRET_PIXEL), size=32)  # the size of an overview
    shutil.copy(DATA / "RGB.byte.tif", workspace / "RGB.byte.tif")
    key = key_path(workspace)
    key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key.write_text(KEY_MARKER)
    targets = {
        "outside-raster": str(outside / "secret.tif"),
        "outside-text": str(outside / "secret.txt"),
        "store-key": str(key),
        "passwd": "/etc/passwd",
        "vsicurl": "/vsicurl/" + sink.url("x.llmc-network-disabled"),
        "inline-wms": wms_document(sink.url("wms")),
    }
    cases: list[Case] = []

    def case(id: str, names: str | None, build: Callable[[Path], None]) -> None:
        build(workspace / id / "raster.tif")
        cases.append(Case(id, names))

    for label, target in targets.items():
        case(f"tag-{label}", "OVERVIEW_FILE", lambda p, t=target: write_raster(p, OVERVIEW_FILE=t))

        def in_pam(p: Path, t: str = target) -> None:
            write_raster(p)
            Path(f"{p}.aux.xml").write_text(pam_with_overview_file(t))

        case(f"pam-{label}", "OVERVIEW_FILE", in_pam)
    case("base-relative-outside", "OVERVIEW_FILE",
         lambda p: write_raster(p, OVERVIEW_FILE=f":::BASE:::../../{outside.name}/secret.tif"))  # fmt: skip

    links = {
        "link-ovr-outside": ("raster.tif.ovr", outside / "secret.tif"),
        "link-ovr-key": ("raster.tif.ovr", key),
        "link-msk-passwd": ("raster.tif.msk", Path("/etc/passwd")),
        "link-aux-xml-outside": ("raster.tif.aux.xml", outside / "secret.txt"),
        "link-rpc-upper": ("raster_RPC.TXT", Path("/etc/passwd")),
        "link-rpc-lower": ("raster_rpc.txt", outside / "secret.txt"),
        "link-mtl": ("raster_MTL.txt", outside / "secret.txt"),
        "link-imd": ("raster.IMD", key),
        "link-dim": ("METADATA.DIM", outside / "secret.txt"),
        "link-dangling": ("raster.tfw", outside / "not-there.tfw"),
        "link-into-preflight": ("raster.tif.aux.xml", workspace / ".preflight" / "planted.aux.xml"),
    }
    (workspace / ".preflight").mkdir(exist_ok=True)
    (workspace / ".preflight" / "planted.aux.xml").write_text(pam_with_overview_file("/etc/passwd"))
    for id, (name, target) in links.items():

        def linked(p: Path, name: str = name, target: Path = target) -> None:
            write_raster(p)
            (p.parent / name).symlink_to(target)

        case(id, name, linked)

    def plain(name: str, content: str) -> Callable[[Path], None]:
        def build(p: Path) -> None:
            write_raster(p)
            (p.parent / name).write_text(content)

        return build

    # Plain files holding documents only unregistered drivers read: GDAL cannot open them at all.
    case("file-ovr-wms", None, plain("raster.tif.ovr", wms_document(sink.url("ovr-wms"))))
    case("file-ovr-vrt", None, plain("raster.tif.ovr", vrt_document(outside / "secret.tif")))
    case("file-msk-vrt", None, plain("raster.tif.msk", vrt_document(outside / "secret.tif")))

    def nested(p: Path) -> None:
        # An overview file that is itself a GeoTIFF pointing further: GDAL follows it while listing files.
        write_raster(p)
        write_raster(
            Path(f"{p}.ovr"), size=32, OVERVIEW_FILE="/vsicurl/" + sink.url("nested.llmc-network-disabled")
        )

    case("nested-ovr-pointing", "OVERVIEW_FILE", nested)
    return World(workspace, outside, key, sink, cases)


# ---------------------------------------------------------------------------------------- the faces


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("hostile")
    sink = Sink()
    workspace = root / "ws"
    workspace.mkdir()
    yield lay_out(workspace, root / "outside", sink)
    sink.server.shutdown()


@pytest.fixture(scope="module")
async def code_client(world: World) -> AsyncIterator[Client]:
    settings = Settings(mode="code", workspace=world.workspace, exec_timeout=30, memory_mb=2048)
    async with Client(build_server(settings)) as client:
        yield client


@pytest.fixture(scope="module")
async def classic_client(world: World) -> AsyncIterator[Client]:
    async with Client(build_server(Settings(mode="classic", workspace=world.workspace))) as client:
        yield client


def test_the_sink_records_a_request_gdal_makes_when_nothing_stops_it(world: World) -> None:
    """The positive control of every "no request reached the sink" check: unhardened GDAL, in a
    process of its own, does reach it through /vsicurl/, so an empty sink means the request was
    stopped, not that the sink cannot hear."""
    url = "/vsicurl/" + world.sink.url("control.tif")
    code = f"import rasterio, contextlib\nwith contextlib.suppress(Exception):\n    rasterio.open({url!r})"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    subprocess.run([sys.executable, "-I", "-c", code], env=env, timeout=60, check=True)
    assert any("control.tif" in request for request in world.sink.requests)


OPERATIONS = ("info", "stats", "convert")
CASE_IDS = [
    *(f"{kind}-{label}" for kind in ("tag", "pam")
      for label in ("outside-raster", "outside-text", "store-key", "passwd", "vsicurl", "inline-wms")),
    "base-relative-outside", "link-ovr-outside", "link-ovr-key", "link-msk-passwd", "link-aux-xml-outside",
    "link-rpc-upper", "link-rpc-lower", "link-mtl", "link-imd", "link-dim", "link-dangling",
    "link-into-preflight", "file-ovr-wms", "file-ovr-vrt", "file-msk-vrt", "nested-ovr-pointing",
]  # fmt: skip


def the_case(world: World, id: str) -> Case:
    return next(case for case in world.cases if case.id == id)


def statistics(value: Any) -> Iterator[float]:
    """Every min/max/mean anywhere in an answer."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("min", "max", "mean") and isinstance(item, int | float):
                yield float(item)
            else:
                yield from statistics(item)
    elif isinstance(value, list):
        for item in value:
            yield from statistics(item)


def judge(
    world: World, case: Case, ok: bool, error: dict[str, Any] | None, answer: str, data: Any, sent: int
) -> None:
    """``sent``: how many requests the sink had seen before the call."""
    for secret in SECRETS:
        assert secret not in answer, f"{case.id}: {secret} reached the agent"
    assert SECRET_PIXEL not in set(statistics(data)), f"{case.id}: pixels of the raster outside were read"
    made = world.sink.requests[sent:]
    assert made == [], f"{case.id}: GDAL made HTTP requests {made}"
    if case.names is None:
        return  # the only door was a driver that is not registered: opening it fails, nothing leaks
    assert not ok, f"{case.id}: accepted: {answer[:300]}"
    assert error is not None and error.get("type") == "path_refused", f"{case.id}: {error}"
    assert case.names in error["message"], f"{case.id}: the refusal does not name {case.names}: {error}"
    assert error.get("fix"), f"{case.id}: the refusal says no fix"


def test_the_layout_covers_every_case(world: World) -> None:
    """Guards against a case built but never run through the faces (or run but never built)."""
    assert sorted(CASE_IDS) == sorted(case.id for case in world.cases)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("case_id", CASE_IDS)
async def test_code_mode_refuses_the_hostile_raster(
    code_client: Client, world: World, case_id: str, operation: str
) -> None:
    """Guards against GDAL following a hostile raster's metadata or sidecars from agent code: reading
    the store's key or a file outside through ``raster.stats(approx=True)``, or fetching a URL."""
    case = the_case(world, case_id)
    src = f"{case.id}/raster.tif"
    code = {
        "info": f"raster.info({src!r})",
        "stats": f"raster.stats({src!r}, approx=True)",
        "convert": f"raster.convert({src!r}, 'out/{case.id}.tif')",
    }[operation]
    sent = len(world.sink.requests)
    result = await code_client.call_tool("execute_code", {"code": code, "reset": True})
    data = structured(result)
    judge(world, case, bool(data.get("ok")), data.get("error"), text(result) + json.dumps(data), data, sent)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("case_id", CASE_IDS)
async def test_classic_mode_refuses_the_hostile_raster(
    classic_client: Client, world: World, case_id: str, operation: str
) -> None:
    """Guards against the classic tools (wherever they run GDAL) following what the raster names."""
    case = the_case(world, case_id)
    src = f"{case.id}/raster.tif"
    tool, args = {
        "info": ("raster_info", {"path": src}),
        "stats": ("raster_stats", {"path": src, "approx": True}),
        "convert": ("raster_convert", {"src": src, "dst": f"out/classic-{case.id}.tif"}),
    }[operation]
    sent = len(world.sink.requests)
    result = await classic_client.call_tool(tool, args)
    data = result_data(result)
    error = data if result.is_error else None
    judge(world, case, not result.is_error, error, text(result) + json.dumps(data), data, sent)


async def test_a_clean_raster_beside_the_hostile_ones_still_works(code_client: Client, world: World) -> None:
    """Guards against a fix that refuses everything: a plain GeoTIFF with no pointers is read."""
    data = structured(
        await code_client.call_tool("execute_code", {"code": "raster.info('RGB.byte.tif')['count']"})
    )
    assert data["ok"] and data["result"] == 3


# ------------------------------------------------------------------------------------- the worker


def start_worker(workspace: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], SyncChannel]:
    config = WorkerConfig(workspace=str(workspace), memory_mb=2048, output_limit=20_000, num_threads=1,
                          cpu_seconds=30)  # fmt: skip
    process = subprocess.Popen(worker_command(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd="/")  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    return process, SyncChannel(process.stdout, process.stdin)


def test_a_worker_registers_only_allowlisted_drivers(tmp_path: Path) -> None:
    """Guards against network or file-naming drivers (WMS, HTTP, VRT...) being registered where agent
    files are opened: GDAL opens overview and mask files with every registered driver."""
    script = "import rasterio\nwith rasterio.Env() as env:\n    print(','.join(sorted(env.drivers())))"
    out = subprocess.run([sys.executable, "-I", "-c", script], env=worker_environment(), cwd="/",
                         capture_output=True, text=True, check=True)  # fmt: skip
    drivers = set(out.stdout.strip().split(","))
    assert drivers <= REGISTERED_DRIVERS, drivers - REGISTERED_DRIVERS
    assert {"GTiff", "COG", "MEM"} <= drivers
    assert not {"VRT", "WMS", "WMTS", "WCS", "HTTP", "DAAS", "EEDAI", "PLMOSAIC", "STACIT"} & drivers


def test_a_real_worker_starts_confined_and_reports_its_network_namespace(tmp_path: Path) -> None:
    """Guards against a worker that silently starts without its network namespace (or its Landlock
    report), where a GDAL fetch could reach a local service."""
    process, channel = start_worker(tmp_path, worker_environment())
    try:
        ready = channel.receive()["result"]
    finally:
        process.kill()
        process.wait()
    assert ready["ready"] is True and "landlock" in ready
    assert isinstance(ready["netns"], bool)
    if os.geteuid() == 0:
        assert ready["netns"] is True


def test_a_worker_without_the_driver_skip_list_refuses_to_start(tmp_path: Path) -> None:
    """Guards against failing open: a worker whose GDAL registered drivers beyond the allowlist (its
    GDAL_SKIP lost) must not serve agent code."""
    env = {k: v for k, v in worker_environment().items() if k != "GDAL_SKIP"}
    process, _channel = start_worker(tmp_path, env)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 3
    assert b"beyond the allowlist" in err


def test_the_worker_environment_sends_curl_to_a_dead_proxy_without_exceptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards against /vsicurl/ reaching a loopback service: a URL suffix is no allowlist, and a
    NO_PROXY exception for 127.0.0.1 would bypass the dead proxy."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    env = worker_environment()
    assert env["GDAL_HTTP_PROXY"] == env["GDAL_HTTPS_PROXY"] == "http://127.0.0.1:9"
    assert not {"NO_PROXY", "no_proxy", "http_proxy", "HTTPS_PROXY"} & set(env)
    assert env["GDAL_SKIP"] == worker_gdal_environment()["GDAL_SKIP"] and "WMS" in env["GDAL_SKIP"].split(",")


# ---------------------------------------------------------------------------------- the sidecars


@pytest.mark.parametrize("name", ["RGB.byte_MTL.txt", "RGB_MTL.txt", "RGB.byte_RPC.TXT", "RGB.byte_rpc.txt",
                                  "METADATA.DIM", "summary.txt", "anything.at.all"])  # fmt: skip
def test_a_link_out_beside_a_raster_refuses_it_whatever_its_name(tmp_path: Path, name: str) -> None:
    """Guards against a sidecar rule that knows patterns: GDAL's metadata readers probe names like
    ``<stem>_MTL.txt`` (band suffix stripped) or ``<stem>_RPC.TXT`` that no ``<stem>.*`` rule sees."""
    workspace = Workspace(tmp_path / "ws")
    shutil.copy(DATA / "RGB.byte.tif", workspace.root / "RGB.byte.tif")
    (workspace.root / name).symlink_to("/etc/passwd")
    with pytest.raises(PathRefused, match=f"sidecar '{name}'"):
        workspace.input_path("RGB.byte.tif")


def test_links_inside_the_workspace_and_links_to_folders_are_allowed(tmp_path: Path) -> None:
    """Guards against a rule so broad that ordinary layouts (a link to a sibling file, a linked data
    folder) make every raster unreadable."""
    workspace = Workspace(tmp_path / "ws")
    shutil.copy(DATA / "RGB.byte.tif", workspace.root / "RGB.byte.tif")
    (workspace.root / "notes.txt").write_text("x")
    (workspace.root / "RGB.byte_MTL.txt").symlink_to(workspace.root / "notes.txt")
    (tmp_path / "elsewhere").mkdir()
    (workspace.root / "data").symlink_to(tmp_path / "elsewhere")
    assert workspace.input_path("RGB.byte.tif") == workspace.root / "RGB.byte.tif"


class ListedFiles:
    """A dataset as :func:`check_dataset` sees it: no CRS, no pointing metadata, and a file list."""

    crs = None

    def __init__(self, files: list[str]):
        self.files = files

    def tags(self, ns: str | None = None) -> dict[str, str]:
        return {}


LISTED = ["/etc/passwd", "../outside.ige", ".preflight/justifications/x.json", "missing.ige",
          "/vsicurl/http://127.0.0.1:9/x.llmc-network-disabled"]  # fmt: skip


@pytest.mark.parametrize("listed", LISTED)
def test_every_file_gdal_lists_gets_the_input_policy(tmp_path: Path, listed: str) -> None:
    """Guards against trusting GDAL's own file list: names found inside files (an HFA spill file, an
    RPC file, an overview named in metadata) must meet the policy of a named input, before pixels."""
    workspace = Workspace(tmp_path / "ws")
    shutil.copy(DATA / "RGB.byte.tif", workspace.root / "RGB.byte.tif")
    (tmp_path / "outside.ige").write_text("x")
    (workspace.root / ".preflight" / "justifications").mkdir(parents=True)
    (workspace.root / ".preflight" / "justifications" / "x.json").write_text("{}")
    path = workspace.root / "RGB.byte.tif"
    files = [str(path), listed if listed.startswith("/") else str(workspace.root / listed)]
    with pytest.raises(PathRefused, match="uses a sidecar file"):
        check_dataset(OperationContext(workspace, 1), ListedFiles(files), path)
    check_dataset(OperationContext(workspace, 1), ListedFiles([str(path)]), path)


# -------------------------------------------------------------------------------------- the key


def test_the_store_key_lives_outside_the_workspace_with_private_modes(tmp_path: Path) -> None:
    """Guards against a key the worker can read: it was ``.preflight/secret.key``, inside the folder
    Landlock lets every worker read, and GDAL reached it through a sidecar."""
    workspace = tmp_path / "ws"
    store = JustificationStore(workspace / ".preflight")
    store.records_dir.mkdir(parents=True)
    list(store.records())
    store._key()
    key = key_path(workspace)
    assert key.is_file() and not key.resolve().is_relative_to(workspace.resolve())
    assert key.parent == Path(os.environ[STATE_DIR_ENV]).resolve()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert not (workspace / ".preflight" / LEGACY_KEY_NAME).exists()
    assert key_path(tmp_path / "other") != key


def test_an_old_key_in_the_workspace_is_moved_out_and_old_records_stay_valid(tmp_path: Path) -> None:
    """Guards against a migration that loses the key (every stored justification would stop
    verifying) or leaves a copy in the workspace."""
    workspace = tmp_path / "ws"
    old = b"o" * 32
    signed = JustificationStore(workspace / ".preflight", secret=old).put(sample_record())
    (workspace / ".preflight" / LEGACY_KEY_NAME).write_bytes(old)
    store = JustificationStore(workspace / ".preflight")
    assert store.get(signed.domain, signed.key) == signed
    assert key_path(workspace).read_bytes() == old
    assert not (workspace / ".preflight" / LEGACY_KEY_NAME).exists()


def test_a_state_folder_a_worker_could_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a state folder configured inside the workspace (or under the worker's runtime
    read list), which would hand the key back to the sandbox."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.setenv(STATE_DIR_ENV, str(workspace / "state"))
    with pytest.raises(StoreError, match="workers can read"):
        JustificationStore(workspace / ".preflight")
    import llmc_mcp

    monkeypatch.setenv(STATE_DIR_ENV, str(Path(llmc_mcp.__file__).parent / "state"))
    with pytest.raises(StoreError, match="workers can read"):
        JustificationStore(workspace / ".preflight")


def sample_record() -> Record:
    justification = {
        "intent": "A web map overlay in geographic coordinates.",
        "alternatives": [{"method": "EPSG:3857", "why_not": "The layers are stored in lat/lon."}],
        "choice": {"method": "EPSG:4326", "rationale": "It matches the layers.", "tradeoffs": "Area varies."},
        "confidence": "high",
    }
    return Record(key="sha256:" + "a" * 64, domain="crs_datum", operation="raster.reproject",
                  prompt="justify_crs_selection", prompt_args={"dst_crs": "EPSG:4326"},
                  prompt_hash="sha256:x", justification=justification)  # fmt: skip
