"""``files.list``: which files an agent may work on.

``files.list`` walks the workspace where the operation runs (the session's worker), headers only, and
bounded three ways: entries shown (:data:`MAX_ENTRIES`), raster headers read (:data:`MAX_SUMMARIES`)
and directory entries looked at (:data:`MAX_SCANNED`). Rasters are opened through
:func:`~llmc_mcp.gdal.datasets.open_for_read`, so a hostile file is listed with the reason it
is refused, never opened further and never failing the listing.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import Field
from rasterio.crs import CRS as RioCRS

from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.errors import LlmcError, PathRefused
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.messages import GDAL_ERRORS, translate_gdal_error
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.files.models import FileEntry, FileListing, RasterSummary
from llmc_mcp.provenance.record import RECORD_SUFFIX
from llmc_mcp.walk import MAX_SCANNED, compile_glob, walk

MAX_ENTRIES = 1000
MAX_SUMMARIES = 200
"""Raster headers read per listing: each costs an open and the hostile-file checks (a few ms)."""

RASTER_SUFFIXES = frozenset({
    ".tif", ".tiff", ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".img", ".bil", ".bip", ".bsq", ".asc",
    ".jp2", ".j2k", ".nc",
})  # fmt: skip
"""Files summarised as rasters: the usual names of the formats the read drivers take. Probing every
file with GDAL instead would open (and parse) whatever the workspace holds, for a summary of none."""

_LINK_REFUSED = (
    "a symbolic link that leads outside the workspace, into a server folder, to a folder or nowhere; "
    "not followed. Fix: use the file it points at, if it is inside the workspace."
)


def _summary(ctx: OperationContext, name: str) -> tuple[RasterSummary | None, str | None]:
    """The raster's one-line summary from its header, or why it is refused; never raises."""
    try:
        with open_for_read(ctx, name, "path", georeferencing="unchecked") as ds:
            return (
                RasterSummary(
                    driver=ds.driver,
                    width=ds.width,
                    height=ds.height,
                    count=ds.count,
                    dtype=",".join(dict.fromkeys(ds.dtypes)),
                    crs=_crs_label(ds.crs),
                ),
                None,
            )
    except LlmcError as exc:
        return None, str(exc)
    except GDAL_ERRORS as exc:
        text = translate_gdal_error(exc, ctx, ctx.workspace.root / name)
        return None, f"path: '{name}' could not be described ({text})."


def _crs_label(crs: RioCRS | None) -> str | None:
    if not crs:
        return None
    parsed = parse_crs(crs.to_wkt())
    epsg, _ = identify(parsed)  # strict, as raster.info: a 70% match would name another datum
    return f"EPSG:{epsg}" if epsg is not None else parsed.name


def _entry(
    ctx: OperationContext, name: str, entry: os.DirEntry, followed: bool, owned: bool, summarise: bool
) -> FileEntry:
    info = entry.stat(follow_symlinks=followed)
    raster, refused = None, None if followed else _LINK_REFUSED
    if summarise:
        raster, refused = _summary(ctx, name)
    record = f"{entry.path}{RECORD_SUFFIX}"
    return FileEntry(
        name=name,
        size_bytes=info.st_size,
        modified=datetime.fromtimestamp(info.st_mtime, UTC).isoformat(timespec="seconds"),
        written_by_llmc=owned,
        raster=raster,
        refused=refused,
        provenance=f"{name}{RECORD_SUFFIX}" if not entry.is_symlink() and os.path.isfile(record) else None,
    )


def _is_record_of_a_file(entry: os.DirEntry) -> bool:
    return entry.name.endswith(RECORD_SUFFIX) and os.path.isfile(entry.path[: -len(RECORD_SUFFIX)])


def _note(start: str, exists: bool, truncated: int, stopped: bool, skipped: int) -> str | None:
    notes = []
    if not exists:
        notes.append(f"The folder '{start}' does not exist.")
    if stopped:
        notes.append(
            f"The walk stopped after {MAX_SCANNED:,} entries, so more files may match than shown "
            "(truncated is a lower bound): name a folder in the pattern, e.g. 'data/**/*.tif'."
        )
    elif truncated:
        notes.append(
            f"{truncated} more files match than the {MAX_ENTRIES:,} shown: narrow the pattern (e.g. "
            "'data/*.tif') or pass recursive=False."
        )
    if skipped:
        notes.append(
            f"{skipped} raster files have no summary (at most {MAX_SUMMARIES} are read per call): narrow "
            "the pattern, or call raster.info on a file."
        )
    return " ".join(notes) or None


# Named ``list`` because agents call ``files.list``; below this definition the module's ``list`` is
# the operation, so nothing in this module calls the builtin.
@operation("files", read_only=True)
def list(
    ctx: OperationContext,
    pattern: Annotated[
        str,
        Field(
            description="Glob over workspace-relative names: '*' and '?' within one name, '[abc]'/'[!abc]' "
            "sets, '**' for any number of folders; without a '/', matched against file names in every "
            "folder (when recursive); 'data/' lists a folder. Wildcards never match a leading '.'."
        ),
    ] = "*",
    recursive: Annotated[
        bool, Field(description="Look in sub-folders too; False: only the folder the pattern starts in.")
    ] = True,
) -> FileListing:
    """List the files you may work on: name, size, modification time and, for rasters, a summary.

    The pattern is a glob relative to the workspace: '*.tif' finds GeoTIFFs in every folder,
    'data/*.tif' only in data/, 'data/**/*.tif' in data/ and below it; recursive=False looks only in
    the folder the pattern starts in (its leading folders without wildcards). Hidden files are listed
    only when the pattern spells the leading dot; the server's folders (.preflight/, .llmc/) and
    outputs still being written are never listed. Links are not followed into folders; a link leading
    out of the workspace is listed with ``refused`` and its own size.

    Raster files (.tif, .tiff, .png, .jpg, .jpeg, .gif, .bmp, .img, .bil, .bip, .bsq, .asc, .jp2,
    .j2k, .nc) get ``raster``: driver, size, bands, data type and CRS, read from the header only and
    through the same checks as every input, so a refused file shows why in ``refused`` instead. At
    most 1,000 files are shown (``truncated`` counts the rest) and 200 summaries are read per call
    (``summaries_skipped``); ``note`` says how to narrow the pattern. ``written_by_llmc`` marks the
    files files.remove accepts.

    Errors (ApiError, by e.type): path_refused for a pattern with '..', an absolute path, a URL, a
    server folder, or leading folders that are a link.
    """
    glob = compile_glob(pattern, recursive)
    root = ctx.workspace.root
    start = root.joinpath(*glob.start)
    if start.resolve() != start:
        raise PathRefused(
            f"pattern: '{'/'.join(glob.start)}' goes through a symbolic link; links are not followed.",
            fix="Name the folder the link points at, if it is inside the workspace.",
        )
    exists = start.is_dir()
    found, stopped = walk(root, start, glob, recursive) if exists else ([], False)
    # A provenance record belongs to the file beside it (it goes with it on replace and remove): shown
    # on that file's entry, not as a file of its own, unless the file it describes is gone.
    found = [item for item in found if not _is_record_of_a_file(item[1])]
    found.sort(key=lambda item: item[0])
    shown = found[:MAX_ENTRIES]
    assert ctx.outputs is not None
    owned = set(ctx.outputs.owned()) if shown else set()
    entries, summaries, skipped = [], 0, 0
    for name, entry in shown:
        link = entry.is_symlink()
        followed = not link or ctx.workspace.allows(Path(entry.path))
        raster_file = followed and Path(name).suffix.lower() in RASTER_SUFFIXES
        summarise = raster_file and summaries < MAX_SUMMARIES
        summaries += summarise
        skipped += raster_file and not summarise
        # llmc-mcp never writes links: a link to an output is not the output
        entries.append(_entry(ctx, name, entry, followed, not link and name in owned, summarise))
    truncated = len(found) - len(shown)
    return FileListing(
        files=entries,
        truncated=truncated,
        summaries_skipped=skipped,
        note=_note("/".join(glob.start), exists, truncated, stopped, skipped),
    )
