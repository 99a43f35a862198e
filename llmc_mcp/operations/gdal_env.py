"""The one hardened GDAL/PROJ configuration every operation runs under.

Paths are already confined to the workspace, but GDAL can reach further than
the file it is given: a VRT names other files (or Python code), MEM:::
reads raw memory, network drivers and /vsicurl/ fetch URLs, a GeoTIFF's own
metadata names an overview file GDAL opens by itself (with every registered
driver), sidecars are found by name, and PROJ may download grids. So:

- only the drivers of :data:`REGISTERED_DRIVERS` are registered at all in a
  process that opens agent-named files (``GDAL_SKIP`` for workers, from
  :func:`worker_gdal_environment`; deregistration for this process, in
  :func:`disable_network`);
- every network path is switched off and curl is sent to a dead proxy, both
  per operation (:func:`gdal_env`) and process-wide (:func:`disable_network`);
- :func:`open_for_read`, the one place agent-named rasters are opened, refuses
  a dataset whose metadata points at another file and checks every file GDAL
  says the dataset uses against the path policy, before any pixel is read.

GDAL messages embed absolute paths; :func:`translate_gdal_error` rewrites
them to workspace-relative names before anything reaches an agent.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyproj.network
import rasterio
from rasterio._err import CPLE_BaseError
from rasterio.env import set_gdal_config
from rasterio.errors import RasterioError, RasterioIOError
from rasterio.io import DatasetReader

from llmc_mcp.errors import NotFound, PathRefused, RasterError

if TYPE_CHECKING:
    from llmc_mcp.operations.catalog import OperationContext

GDAL_ERRORS: tuple[type[Exception], ...] = (RasterioError, CPLE_BaseError)
"""How GDAL failures surface: rasterio wraps most, but some calls (CreateCopy) raise GDAL's own classes."""

REGISTERED_DRIVERS: frozenset[str] = frozenset({
    "GTiff", "PNG", "JPEG", "GIF", "BMP", "HFA", "ENVI", "EHdr", "AAIGrid", "JP2OpenJPEG", "netCDF",
    "COG",  # writing
    "MEM",  # in-memory work inside GDAL and rasterio; agents cannot name it (MEM::: has a ':')
    "ESRI Shapefile", "GPKG", "GeoJSON",  # vector zones
})  # fmt: skip
"""The only GDAL drivers a process that opens agent-named files may have registered.

GDAL opens the files a dataset points at (external overviews, masks, an ``OVERVIEW_FILE``) with
*every* registered driver, not with the list given to open, so what is not registered is what no
hostile file can reach: no network driver (WMS, WMTS, WCS, HTTP, DAAS, EEDA, EEDAI, PLMOSAIC, STACIT,
STACTA, NGW, OGCAPI...), no VRT (it names any file), no container that names other files (NITF, ...).
Each of these opens a plain local file by a name it is given and nothing else."""

_READ = ("GTiff", "PNG", "JPEG", "GIF", "BMP", "HFA", "ENVI", "EHdr", "AAIGrid", "JP2OpenJPEG", "netCDF")


def registered_drivers() -> frozenset[str]:
    """Short names of the drivers GDAL has registered in this process."""
    with rasterio.Env() as env:
        return frozenset(env.drivers())


_PRESENT_AT_IMPORT = registered_drivers()

SKIPPED_DRIVERS: tuple[str, ...] = tuple(sorted(_PRESENT_AT_IMPORT - REGISTERED_DRIVERS))
"""Every driver this GDAL build has beyond the allowlist: the workers' ``GDAL_SKIP``. Computed at
import, before :func:`disable_network` deregisters them here."""

READ_DRIVERS: tuple[str, ...] = tuple(name for name in _READ if name in _PRESENT_AT_IMPORT)
"""File-based drivers allowed for reading. Never VRT (it can reference any file or run Python), MEM
(MEM::: opens raw pointers) or a network driver (WMS, WCS, HTTP, ...)."""

_NETWORK_OFF: dict[str, str] = {
    # /vsicurl/ and friends refuse URLs without this suffix; any URL can end with it, hence the proxy.
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".llmc-network-disabled",
    "GDAL_HTTP_MAX_RETRY": "0",
    "GDAL_HTTP_TIMEOUT": "1",
    "GDAL_HTTP_CONNECTTIMEOUT": "1",
    "GDAL_HTTP_UNSAFESSL": "NO",
    "CPL_VSIL_CURL_USE_HEAD": "NO",
    "AWS_NO_SIGN_REQUEST": "YES",
    "PROJ_NETWORK": "OFF",
    # Every request curl makes goes to a port nobody serves.
    "GDAL_HTTP_PROXY": "http://127.0.0.1:9",
    "GDAL_HTTPS_PROXY": "http://127.0.0.1:9",
}

HARDENED_CONFIG: dict[str, str] = {
    **_NETWORK_OFF,
    "GDAL_VRT_ENABLE_PYTHON": "NO",
    "GDAL_MEM_ENABLE_OPEN": "NO",
    # TRUE rather than EMPTY_DIR: no directory listing, but sidecars are still probed by name, which
    # ENVI/EHdr headers and .msk/.ovr files need (EMPTY_DIR makes ENVI and EHdr unreadable).
    "GDAL_DISABLE_READDIR_ON_OPEN": "TRUE",
    "CPL_DEBUG": "OFF",
    "GDAL_TIFF_INTERNAL_MASK": "YES",
}


GDAL_CACHE_MB = 256
"""GDAL's block cache, in MiB. Its default (5% of RAM) let one stats call on a large file grow the
classic-mode server by 1.2 GB; streaming reads need only a few blocks in cache."""


def gdal_env(ctx: OperationContext) -> rasterio.Env:
    """A ``rasterio.Env`` with the hardened options and the context's thread budget; nestable."""
    # The warper's NUM_THREADS falls back to GDAL_NUM_THREADS, so this also bounds warping.
    # rasterio hands an int to GDALSetCacheMax64: bytes, not MiB as in GDAL's config option.
    cache = GDAL_CACHE_MB << 20
    return rasterio.Env(**HARDENED_CONFIG, GDAL_NUM_THREADS=str(ctx.num_threads), GDAL_CACHEMAX=cache)


def worker_gdal_environment() -> dict[str, str]:
    """The GDAL/PROJ environment of a worker: the hardened options, in force when GDAL loads, and
    ``GDAL_SKIP`` so that no driver beyond :data:`REGISTERED_DRIVERS` is ever registered there."""
    return {**HARDENED_CONFIG, "GDAL_SKIP": ",".join(SKIPPED_DRIVERS)}


def unexpected_drivers() -> list[str]:
    """Registered drivers beyond the allowlist; a worker that has any refuses to start."""
    return sorted(registered_drivers() - REGISTERED_DRIVERS)


def disable_network() -> None:
    """Switch PROJ grid downloads, GDAL network access and every driver beyond the allowlist off for
    the whole process: a worker, or the server, which also runs operations in-process (CLI, tests)."""
    pyproj.network.set_network_enabled(False)
    # GDAL's own PROJ contexts are created lazily and read PROJ_NETWORK from the environment.
    os.environ["PROJ_NETWORK"] = "OFF"
    # curl honours NO_PROXY even with a proxy set: a loopback exception would reach a local service.
    for name in ("NO_PROXY", "no_proxy"):
        os.environ.pop(name, None)
    for key, value in _NETWORK_OFF.items():
        set_gdal_config(key, value)
    _deregister_drivers(unexpected_drivers())


def _deregister_drivers(names: list[str]) -> None:
    """Remove drivers from GDAL's driver manager in this process.

    ``GDAL_SKIP`` acts only when GDAL registers its drivers, which rasterio has done by the time this
    process can list them, and rasterio has no call to undo it; GDAL's own C API does. A dataset opened
    later never sees them. They are deregistered, not destroyed: nothing can hold a dangling handle.
    """
    if not names:
        return
    library = _libgdal()
    library.GDALGetDriverByName.restype = ctypes.c_void_p
    library.GDALGetDriverByName.argtypes = [ctypes.c_char_p]
    library.GDALDeregisterDriver.argtypes = [ctypes.c_void_p]
    for name in names:
        handle = library.GDALGetDriverByName(name.encode())
        if handle:
            library.GDALDeregisterDriver(handle)
    left = unexpected_drivers()
    if left:
        raise RuntimeError(f"GDAL drivers could not be deregistered: {', '.join(left)}")


def _libgdal() -> ctypes.CDLL:
    """The GDAL library rasterio already loaded (its wheel bundles its own copy under a hashed name).

    pyogrio's wheel loads a second GDAL (:mod:`llmc_mcp.operations.vectors` hardens that one)."""
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "/libgdal" in line and "/pyogrio.libs/" not in line}
    if len(loaded) != 1:
        raise RuntimeError(f"expected one loaded GDAL library, found {len(loaded)}")
    return ctypes.CDLL(loaded.pop(), mode=os.RTLD_NOLOAD)


def open_for_read(
    ctx: OperationContext, name: str, argument: str = "path", *, resolved: Path | None = None
) -> DatasetReader:
    """Open a workspace raster for reading with the allowed drivers only; errors name the relative file.

    Call inside :func:`gdal_env` (the drivers are registered there) and close the dataset (``with``).
    ``resolved`` is the path :meth:`Workspace.input_path` already returned for ``name``, so a caller
    that checked it does not pay for the policy's checks (a directory listing) again.
    """
    path = resolved or ctx.workspace.input_path(name, argument=argument)
    shown = ctx.workspace.relative(path)
    try:
        # rasterio.open() refuses a driver list; DatasetReader passes it to GDALOpenEx as allowed drivers.
        dataset = DatasetReader(str(path), driver=list(READ_DRIVERS), sharing=False)
    except RasterioIOError as exc:
        text = translate_gdal_error(exc, ctx, path)
        if "No such file" in text:
            raise NotFound(
                f"{argument}: '{shown}' does not exist in the workspace.",
                fix="Check the name; files.list() (classic: files_list) shows what the workspace holds.",
            ) from None
        if "not recognized as being in a supported file format" in text:
            text = "not recognized as a supported raster format"
        raise RasterError(
            f"{argument}: '{shown}' is not a raster GDAL can read ({text}).",
            fix=f"Pass a raster in one of these formats: {', '.join(READ_DRIVERS)}.",
        ) from None
    except GDAL_ERRORS as exc:
        raise RasterError(
            f"{argument}: '{shown}' could not be opened ({translate_gdal_error(exc, ctx, path)}).",
            fix="Check that the file is a complete raster; re-create it if it was truncated.",
        ) from None
    try:
        check_dataset(ctx, dataset, path, argument)
    except BaseException:
        dataset.close()
        raise
    return dataset


POINTING_DOMAINS = ("OVERVIEWS",)
"""Metadata domains whose items GDAL follows by itself. ``OVERVIEWS`` holds ``OVERVIEW_FILE``: any
name or URL (``:::BASE:::`` for one relative to the raster), opened with every registered driver as
soon as overviews, masks or the file list are asked for. A dataset carrying one is refused."""

MAX_SIDECAR_DEPTH = 4
"""How deep overviews of overviews (``x.tif.ovr.ovr``...) are checked before GDAL lists them."""


def check_dataset(ctx: OperationContext, dataset: Any, path: Path, argument: str = "path") -> None:
    """Refuse a dataset that would make GDAL open anything the path policy has not allowed.

    First the metadata that names files (:data:`POINTING_DOMAINS`), in the dataset and in the overview
    and mask files GDAL will open beside it: listing the dataset's files opens those (and follows what
    they name), so this must come first. Then every file GDAL says the dataset uses (``.aux.xml``,
    ``.ovr``, ``.msk``, world files, RPC/IMD metadata files, HFA spill files...) gets the policy of a
    named input: a regular file inside the workspace, outside the server's folders.
    """
    shown = ctx.workspace.relative(path)
    _check_pointing_metadata(dataset, shown, shown, argument)
    _check_side_datasets(ctx, path, shown, argument, MAX_SIDECAR_DEPTH)
    try:
        files = dataset.files
    except GDAL_ERRORS as exc:
        raise RasterError(
            f"{argument}: '{shown}': the files it uses could not be listed "
            f"({translate_gdal_error(exc, ctx, path)}).",
            fix="Pass a raster without sidecar files, or re-create the sidecars.",
        ) from None
    for listed in files:
        _check_used_file(ctx, Path(listed), path, shown, argument)


def _check_pointing_metadata(dataset: Any, shown: str, holder: str, argument: str) -> None:
    for domain in POINTING_DOMAINS:
        items = dataset.tags(ns=domain)
        if items:
            item = sorted(items)[0]
            where = "" if holder == shown else f" (in its sidecar '{holder}')"
            raise PathRefused(
                f"{argument}: '{shown}' has metadata {domain}/{item}{where} that names another file or URL "
                "for GDAL to open by itself; such rasters are refused.",
                fix=f"Remove the {item} item (it lives in the file's GDAL metadata or in its .aux.xml), or "
                "pass a copy of the raster written without it.",
            )


def _check_side_datasets(ctx: OperationContext, path: Path, shown: str, argument: str, depth: int) -> None:
    """Check the pointing metadata of the overview, mask and .aux files GDAL opens beside ``path``.

    These are the names GDAL's overview manager probes (``x.ovr``/``x.OVR``, ``x.msk``/``x.MSK``, and
    ``x.aux`` for ERDAS overviews); they are opened here the way GDAL would, with metadata read only.
    """
    if depth == 0:
        return
    candidates = [Path(f"{path}{suffix}") for suffix in (".ovr", ".OVR", ".msk", ".MSK", ".aux", ".AUX")]
    candidates += [path.with_suffix(".aux"), path.with_suffix(".AUX")]
    for candidate in dict.fromkeys(candidates):
        if not candidate.is_file():
            continue
        _check_used_file(ctx, candidate, path, shown, argument)
        try:
            side = DatasetReader(str(candidate), driver=list(REGISTERED_DRIVERS), sharing=False)
        except GDAL_ERRORS:
            continue  # GDAL will not open it either
        with side:
            _check_pointing_metadata(side, shown, candidate.name, argument)
        _check_side_datasets(ctx, candidate, shown, argument, depth - 1)


def _check_used_file(ctx: OperationContext, listed: Path, path: Path, shown: str, argument: str) -> None:
    if listed == path:
        return
    if not ctx.workspace.allows(listed):
        inside = listed.is_relative_to(ctx.workspace.root)
        label = ctx.workspace.relative(listed) if inside else listed.name
        raise PathRefused(
            f"{argument}: '{shown}' uses a sidecar file '{label}' that is not a regular file inside the "
            "workspace (a link leading out, a server folder, a URL or a device); GDAL would read it.",
            fix="Remove or replace that sidecar, or pass a copy of the raster without it.",
        )


_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s'\",:/]+/)+[^\s'\",:]*")
_UNHELPFUL = ("See previous exception for details.",)
MAX_MESSAGE_CHARS = 500


def translate_gdal_error(
    exc: BaseException, ctx: OperationContext, path: Path, shown: str | None = None
) -> str:
    """GDAL's message for ``exc``, with absolute paths replaced by what agents see.

    ``path`` is shown as ``shown`` (default: its workspace-relative name; pass the destination name
    for a temporary file); other workspace paths become relative and any other absolute path
    becomes ``<path>``. rasterio often wraps the real GDAL error ("Read failed. See previous
    exception"), so the chained causes are included.
    """
    messages: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        for filler in _UNHELPFUL:
            text = text.replace(filler, "").strip()
        if text and text not in messages:
            messages.append(text)
        current = current.__cause__ or current.__context__
    # GDAL repeats its root cause inside the wrapping messages; keep each fact once.
    distinct = [m for m in messages if not any(m != other and m in other for other in messages)]
    text = "; ".join(reversed(distinct)) or type(exc).__name__
    label = shown if shown is not None else _relative_or_name(ctx, path)
    text = text.replace(str(path), label)
    root = str(ctx.workspace.root)
    text = text.replace(root + os.sep, "").replace(root, ".")
    text = _ABSOLUTE_PATH.sub("<path>", text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."


def _relative_or_name(ctx: OperationContext, path: Path) -> str:
    try:
        return ctx.workspace.relative(path)
    except ValueError:
        return path.name
