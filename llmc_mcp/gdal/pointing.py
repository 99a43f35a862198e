"""Metadata that makes GDAL open another file or URL by itself, refused wherever a dataset comes from
(a workspace file, its sidecars, a remote file)."""

from __future__ import annotations

from typing import Any

from llmc_mcp.errors import PathRefused

POINTING_DOMAINS = ("OVERVIEWS",)
"""Metadata domains whose items GDAL follows by itself. ``OVERVIEWS`` holds ``OVERVIEW_FILE``: any
name or URL (``:::BASE:::`` for one relative to the raster), opened with every registered driver as
soon as overviews, masks or the file list are asked for. A dataset carrying one is refused."""


def check_pointing_metadata(dataset: Any, shown: str, holder: str, argument: str) -> None:
    """Refuse ``dataset`` (``shown``, or its sidecar ``holder``) naming a file or URL for GDAL to open."""
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
