"""GDAL's ``CreateCopy`` with a progress callback, which ``rasterio.shutil.copy`` does not take.

``raster.convert`` is one ``CreateCopy`` (GDAL writes the GeoTIFF or COG, overviews included), so its
progress can only come from GDAL. The source is reopened here through GDAL's C API by the same
rasterio-loaded library, with the same allowed drivers and the same open options as the checked
dataset (the georeferencing choice is an open option), and the callback hands GDAL's completed
fraction to :mod:`llmc_mcp.compute.progress`. Errors take GDAL's own path: rasterio's error handler
sees them (so the write's message collector does), and a failed copy raises ``RasterioIOError`` with
GDAL's last message, as rasterio's copy would.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rasterio.errors import RasterioIOError

from llmc_mcp.gdal.environment import READ_DRIVERS, libgdal

_GDAL_OF_RASTER = 0x02
_GDAL_OF_READONLY = 0x00
_GDAL_OF_VERBOSE_ERROR = 0x40
_Progress = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p)


def create_copy(
    source: str,
    open_options: Mapping[str, str],
    dst: Path,
    driver: str,
    creation_options: Mapping[str, str],
    on_fraction: Callable[[float], None],
) -> None:
    """Copy the raster ``source`` to ``dst`` with ``driver``, calling ``on_fraction`` as GDAL advances."""
    library = _declare(libgdal())
    handle = library.GDALOpenEx(
        source.encode(),
        _GDAL_OF_RASTER | _GDAL_OF_READONLY | _GDAL_OF_VERBOSE_ERROR,
        _strings(READ_DRIVERS),
        _strings(f"{k}={v}" for k, v in open_options.items()),
        None,
    )
    if not handle:
        raise RasterioIOError(_last_error(library) or f"could not reopen {source}")
    try:

        def progress(fraction: float, _message: bytes | None, _data: int | None) -> int:
            on_fraction(min(1.0, max(0.0, fraction)))
            return 1

        callback = _Progress(progress)
        options = _strings(f"{k}={v}" for k, v in creation_options.items())
        copied = library.GDALCreateCopy(
            library.GDALGetDriverByName(driver.encode()),
            str(dst).encode(),
            handle,
            1,
            options,
            callback,
            None,
        )
        if not copied:
            raise RasterioIOError(_last_error(library) or f"GDAL could not write {dst.name}")
        library.GDALClose(copied)
    finally:
        library.GDALClose(handle)


def _strings(values: Sequence[str] | object) -> ctypes.Array[ctypes.c_char_p]:
    items = [str(v).encode() for v in values]  # type: ignore[attr-defined]
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


def _last_error(library: ctypes.CDLL) -> str:
    message = library.CPLGetLastErrorMsg()
    return message.decode(errors="replace") if message else ""


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    library.GDALOpenEx.restype = ctypes.c_void_p
    library.GDALOpenEx.argtypes = [
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
    ]
    library.GDALGetDriverByName.restype = ctypes.c_void_p
    library.GDALGetDriverByName.argtypes = [ctypes.c_char_p]
    library.GDALCreateCopy.restype = ctypes.c_void_p
    library.GDALCreateCopy.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_char_p),
        _Progress,
        ctypes.c_void_p,
    ]
    library.GDALClose.argtypes = [ctypes.c_void_p]
    library.CPLGetLastErrorMsg.restype = ctypes.c_char_p
    return library
