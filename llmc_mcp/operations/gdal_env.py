"""The one hardened GDAL/PROJ configuration every operation runs under.

Paths are already confined to the workspace, but GDAL can reach further than
the file it is given: a VRT names other files (or Python code), MEM:::
reads raw memory, network drivers and /vsicurl/ fetch URLs, and PROJ may
download grids. So reading is restricted to an allowlist of file-based
drivers, and every network path is switched off, both per operation
(:func:`gdal_env`) and process-wide (:func:`disable_network`, called once at
server start).

GDAL messages embed absolute paths; :func:`translate_gdal_error` rewrites
them to workspace-relative names before anything reaches an agent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyproj.network
import rasterio
from rasterio._err import CPLE_BaseError
from rasterio.env import set_gdal_config
from rasterio.errors import RasterioError, RasterioIOError
from rasterio.io import DatasetReader

from llmc_mcp.errors import NotFound, RasterError

if TYPE_CHECKING:
    from llmc_mcp.operations.catalog import OperationContext

GDAL_ERRORS: tuple[type[Exception], ...] = (RasterioError, CPLE_BaseError)
"""How GDAL failures surface: rasterio wraps most, but some calls (CreateCopy) raise GDAL's own classes."""

_WANTED_DRIVERS = (
    "GTiff",
    "PNG",
    "JPEG",
    "GIF",
    "BMP",
    "HFA",
    "ENVI",
    "EHdr",
    "AAIGrid",
    "JP2OpenJPEG",
    "netCDF",
)


def _available_drivers() -> tuple[str, ...]:
    with rasterio.Env() as env:
        present = env.drivers()
    return tuple(name for name in _WANTED_DRIVERS if name in present)


READ_DRIVERS: tuple[str, ...] = _available_drivers()
"""File-based drivers allowed for reading. Never VRT (it can reference any file or run Python), MEM
(MEM::: opens raw pointers) or a network driver (WMS, WCS, HTTP, ...)."""

_NETWORK_OFF: dict[str, str] = {
    # A suffix no URL has: /vsicurl/ and friends refuse every file.
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".llmc-network-disabled",
    "GDAL_HTTP_MAX_RETRY": "0",
    "GDAL_HTTP_TIMEOUT": "1",
    "GDAL_HTTP_CONNECTTIMEOUT": "1",
    "GDAL_HTTP_UNSAFESSL": "NO",
    "CPL_VSIL_CURL_USE_HEAD": "NO",
    "AWS_NO_SIGN_REQUEST": "YES",
    "PROJ_NETWORK": "OFF",
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
    return rasterio.Env(**HARDENED_CONFIG, GDAL_NUM_THREADS=str(ctx.num_threads), GDAL_CACHEMAX=GDAL_CACHE_MB)


def disable_network() -> None:
    """Switch PROJ grid downloads and GDAL network access off for the whole process."""
    pyproj.network.set_network_enabled(False)
    # GDAL's own PROJ contexts are created lazily and read PROJ_NETWORK from the environment.
    os.environ["PROJ_NETWORK"] = "OFF"
    for key, value in _NETWORK_OFF.items():
        set_gdal_config(key, value)


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
        return DatasetReader(str(path), driver=list(READ_DRIVERS), sharing=False)
    except RasterioIOError as exc:
        text = translate_gdal_error(exc, ctx, path)
        if "No such file" in text:
            raise NotFound(
                f"{argument}: '{shown}' does not exist in the workspace.", fix="Check the name."
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
