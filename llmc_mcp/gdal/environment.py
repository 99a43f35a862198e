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
- :func:`~llmc_mcp.gdal.datasets.open_for_read`, the one place agent-named rasters are opened, refuses
  a dataset whose metadata points at another file and checks every file GDAL
  says the dataset uses against the path policy, before any pixel is read.

GDAL messages embed absolute paths; :func:`~llmc_mcp.gdal.messages.translate_gdal_error` rewrites
them to workspace-relative names before anything reaches an agent.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Protocol

import pyproj.network
import rasterio
from rasterio.env import set_gdal_config

from llmc_mcp.workspace import Workspace


class GdalContext(Protocol):
    """What GDAL work needs from its caller: the workspace (paths shown relative to it, and its path
    policy for every file a dataset uses) and a thread budget. An operation's context is one."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def num_threads(self) -> int: ...


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
"""GDAL's block cache at most, in MiB. Its default (5% of RAM) let one stats call on a large file grow the
classic-mode server by 1.2 GB; streaming reads need only a few blocks in cache."""
CACHE_SHARE = 8
"""A worker's block cache is this fraction (1/8) of its memory budget: at ``--memory-mb 512`` a fixed
256 MiB cache, filled by one pass over a 256 MiB raster, left too little for the reads themselves."""
_cache_mb = GDAL_CACHE_MB


def size_block_cache(memory_mb: int) -> int:
    """Size GDAL's block cache in this process from its memory budget; the size, in MiB."""
    global _cache_mb
    _cache_mb = max(1, min(GDAL_CACHE_MB, memory_mb // CACHE_SHARE))
    return _cache_mb


def gdal_env(ctx: GdalContext) -> rasterio.Env:
    """A ``rasterio.Env`` with the hardened options and the context's thread budget; nestable."""
    # The warper's NUM_THREADS falls back to GDAL_NUM_THREADS, so this also bounds warping.
    # rasterio hands an int to GDALSetCacheMax64: bytes, not MiB as in GDAL's config option.
    cache = _cache_mb << 20
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


def deregister_in(library: ctypes.CDLL, names: list[str]) -> None:
    """Deregister ``names`` from the GDAL ``library`` (rasterio's, or pyogrio's own copy)."""
    library.GDALGetDriverByName.restype = ctypes.c_void_p
    library.GDALGetDriverByName.argtypes = [ctypes.c_char_p]
    library.GDALDeregisterDriver.argtypes = [ctypes.c_void_p]
    for name in names:
        handle = library.GDALGetDriverByName(name.encode())
        if handle:
            library.GDALDeregisterDriver(handle)


def _deregister_drivers(names: list[str]) -> None:
    """Remove drivers from GDAL's driver manager in this process.

    ``GDAL_SKIP`` acts only when GDAL registers its drivers, which rasterio has done by the time this
    process can list them, and rasterio has no call to undo it; GDAL's own C API does. A dataset opened
    later never sees them. They are deregistered, not destroyed: nothing can hold a dangling handle.
    """
    if not names:
        return
    deregister_in(libgdal(), names)
    left = unexpected_drivers()
    if left:
        raise RuntimeError(f"GDAL drivers could not be deregistered: {', '.join(left)}")


@functools.cache
def libgdal() -> ctypes.CDLL:
    """The GDAL library rasterio already loaded (its wheel bundles its own copy under a hashed name).

    Found in rasterio's wheel (``rasterio.libs/``), which a confined worker may read, else in the
    process's map of loaded files (a rasterio built against a system GDAL). pyogrio's wheel loads a
    second GDAL (:mod:`llmc_mcp.compute.polygons` hardens that one)."""
    bundled = sorted((Path(rasterio.__file__).parent.parent / "rasterio.libs").glob("libgdal*.so*"))
    if len(bundled) == 1:
        return ctypes.CDLL(str(bundled[0]), mode=os.RTLD_NOLOAD)
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "/libgdal" in line and "/pyogrio.libs/" not in line}
    if len(loaded) != 1:
        raise RuntimeError(f"expected one loaded GDAL library, found {len(loaded)}")
    return ctypes.CDLL(loaded.pop(), mode=os.RTLD_NOLOAD)
