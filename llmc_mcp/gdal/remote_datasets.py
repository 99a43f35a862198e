"""Opening a remote raster (an allowed URL) for reading, with the checks a workspace raster gets.

The URL is checked against the allowlist here and again by the server, which alone reaches the
network; GDAL sees the bytes through :class:`~llmc_mcp.remote.reader.RemoteOpener`, which answers
for the one URL and reports every sidecar GDAL probes for as absent. So a remote raster is exactly
its own bytes: the drivers are those that read by ranges, and the dataset checks (a CRS that names
a grid file, metadata that names another file or URL for GDAL to open) run as on a local file.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import rasterio
from rasterio.io import DatasetReader

from llmc_mcp.capture import note_remote_input
from llmc_mcp.crs_text import check_file_crs
from llmc_mcp.errors import RasterError
from llmc_mcp.gdal.environment import GdalContext
from llmc_mcp.gdal.messages import GDAL_ERRORS
from llmc_mcp.gdal.pointing import check_pointing_metadata
from llmc_mcp.remote.access import remote_access
from llmc_mcp.remote.allowlist import RemoteUrl, looks_remote, parse_url
from llmc_mcp.remote.reader import RemoteOpener, RemoteSource, take_failure

REMOTE_DRIVERS: tuple[str, ...] = ("GTiff", "JP2OpenJPEG")
"""Formats that read a window by ranges: (cloud-optimized) GeoTIFF and JPEG 2000. The others read
whole files and are refused remotely (copy them into the workspace)."""


_names: weakref.WeakKeyDictionary[DatasetReader, str] = weakref.WeakKeyDictionary()
_sources: weakref.WeakKeyDictionary[DatasetReader, RemoteSource] = weakref.WeakKeyDictionary()


def remote_name(dataset: DatasetReader) -> str | None:
    """The URL ``dataset`` was opened from, as it was given; None for a workspace file."""
    return _names.get(dataset)


def input_location(ctx: GdalContext, name: object, argument: str) -> InputLocation:
    """An input's resolved workspace path, or, for a URL, the URL in normal form once the allowlist
    allows it: the check every input gets before any gate or GDAL work."""
    if looks_remote(name):
        return remote_access().check(name, argument)
    return ctx.workspace.input_path(name, argument=argument)


InputLocation = Path | RemoteUrl
"""Where an input is: its resolved workspace path, or an allowed URL in normal form."""


def shown_location(ctx: GdalContext, location: InputLocation) -> str:
    """An input as agents see it: workspace-relative, or the redacted URL."""
    return location.redacted if isinstance(location, RemoteUrl) else ctx.workspace.relative(location)


def remote_size(dataset: DatasetReader) -> int:
    """The size in bytes of the remote file ``dataset`` reads (as the server declared it)."""
    return _sources[dataset].file.size


def dataset_location(dataset: DatasetReader) -> InputLocation:
    """Where an open dataset was read from: its URL (normal form) or its path."""
    url = _names.get(dataset)
    return parse_url(url) if url is not None else Path(dataset.name)


def shown_dataset(ctx: GdalContext, dataset: DatasetReader) -> str:
    """An open input as agents see it: workspace-relative, or its redacted URL."""
    return shown_location(ctx, dataset_location(dataset))


def same_file(location: InputLocation, dst: Path) -> bool:
    """Whether writing ``dst`` would replace the input at ``location`` (never, for a URL)."""
    if not isinstance(location, Path):
        return False
    return location == dst or (dst.exists() and os.path.samefile(location, dst))


def open_remote(ctx: GdalContext, name: str, argument: str) -> DatasetReader:
    """Open the allowed URL ``name`` read-only with the remote drivers; errors name it redacted."""
    access = remote_access()
    url = access.check(name, argument)
    shown = url.redacted
    file = access.transport.stat(str(url))
    source = RemoteSource(access.transport, file)
    dataset = _open_with_remote_drivers(url_text := str(url), RemoteOpener(url_text, source), shown, argument)
    try:
        check_file_crs(dataset.crs.to_wkt() if dataset.crs else None, argument, shown)
        check_pointing_metadata(dataset, shown, shown, argument)
    except BaseException:
        dataset.close()
        raise
    note_remote_input(shown, source, dataset.crs.to_wkt() if dataset.crs else None)
    _names[dataset] = name
    _sources[dataset] = source
    return dataset


def _open_with_remote_drivers(url: str, opener: RemoteOpener, shown: str, argument: str) -> DatasetReader:
    """rasterio.open takes one driver at a time with an opener: each remote driver is tried in turn
    (a failed try costs no request: the header is in the block cache by then)."""
    text = ""
    for driver in REMOTE_DRIVERS:
        try:
            return rasterio.open(url, opener=opener, driver=driver, sharing=False)
        except GDAL_ERRORS as exc:
            failure = take_failure()
            if failure is not None:
                raise failure from None
            text = str(exc).replace(url, shown)
            if "not recognized as being in a supported file format" not in text:
                break
    else:
        text = "not a GeoTIFF or JPEG 2000, the formats read by ranges"
    raise RasterError(
        f"{argument}: '{shown}' could not be opened as a remote raster ({text[:300]}).",
        fix="Pass the URL of a (cloud-optimized) GeoTIFF or JPEG 2000; copy other formats into the "
        "workspace first.",
    )
