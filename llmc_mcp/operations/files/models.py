"""Result models of the ``files`` namespace."""

from __future__ import annotations

from pydantic import Field

from llmc_mcp.results import ResultModel


class RasterSummary(ResultModel):
    """A raster in one line, from its header: what ``files.list`` shows beside each raster file."""

    driver: str = Field(
        description="GDAL driver that read the file, e.g. 'GTiff' (a COG too: raster.info's layout says so)."
    )
    width: int = Field(description="Number of columns (pixels).")
    height: int = Field(description="Number of rows (pixels).")
    count: int = Field(description="Number of bands.")
    dtype: str = Field(description="Data type of the bands, e.g. 'uint8'; comma-separated when they differ.")
    crs: str | None = Field(
        description="'EPSG:<code>' when the CRS is exactly an EPSG definition, else its name; null when the "
        "file has none."
    )


class FileEntry(ResultModel):
    """One file of the workspace, as ``files.list`` shows it."""

    name: str = Field(description="Workspace-relative name, as every operation takes it.")
    size_bytes: int = Field(description="Size in bytes (of the link itself for a link that is not followed).")
    modified: str = Field(description="Last modification time, ISO 8601 in UTC.")
    written_by_llmc: bool = Field(
        description="True when llmc-mcp wrote the file and nobody changed it since: files.remove accepts it."
    )
    raster: RasterSummary | None = Field(
        description="For a raster file (by suffix) that passed the input checks: its summary; else null."
    )
    refused: str | None = Field(
        description="Why the file cannot be used as an input: a link not followed, a raster refused by the "
        "hostile-file checks or one GDAL cannot open, with the fix; null otherwise."
    )
    provenance: str | None = Field(
        None,
        description="Its provenance record ('<name>.provenance.json': how it was made, from what, why; "
        "provenance.lineage walks it), when there is one; records are not listed apart.",
    )


class FileListing(ResultModel):
    """What ``files.list`` found, bounded."""

    files: list[FileEntry] = Field(description="Matching files, sorted by name; at most 1,000.")
    truncated: int = Field(description="How many more files matched and are not shown (0 when none).")
    summaries_skipped: int = Field(
        description="How many raster files are shown without a summary because at most 200 are read per call."
    )
    note: str | None = Field(description="What was left out and how to narrow the pattern; else null.")


class RemovedFile(ResultModel):
    """What ``files.remove`` deleted."""

    path: str = Field(description="The file removed.")
    removed: list[str] = Field(
        description="Every file deleted: the file, then its sidecars (.aux.xml, .ovr, .msk) and its record."
    )
    freed_bytes: int = Field(description="Quota bytes freed: the file and its sidecars, as written.")
    session_bytes: int = Field(description="Bytes of outputs this session still holds against its quota.")
    session_files: int = Field(description="Output files this session still holds against its quota.")
