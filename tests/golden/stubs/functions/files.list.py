from typing import TypedDict
class RasterSummary(TypedDict):
    driver: str
    width: int  # Number of columns (pixels)
    height: int  # Number of rows (pixels)
    count: int
    dtype: str
    crs: str | None  # 'EPSG:<code>' when the CRS is exactly an EPSG definition
class FileEntry(TypedDict):
    name: str
    size_bytes: int
    modified: str
    written_by_llmc: bool
    raster: RasterSummary | None  # For a raster file (by suffix) that passed the input checks
    refused: str | None
    provenance: str | None  # Its provenance record ('<name>.provenance.json'
class FileListing(TypedDict):
    files: list[FileEntry]
    truncated: int  # How many more files matched and are not shown (0 when none)
    summaries_skipped: int
    note: str | None
def list(
    pattern: str = '*',  # Glob over workspace-relative names: '*' and '?' within one name, '[abc]'/'[!abc]' sets, '**' for any number of folders; without a '/', matched against file names in every folder (when recursive); 'data/' lists a folder. Wildcards never match a leading '.'.
    recursive: bool = True,  # Look in sub-folders too; False: only the folder the pattern starts in.
) -> FileListing:
    """List the files you may work on: name, size, modification time and, for rasters, a summary.
    Errors (ApiError, by e.type): path_refused for a pattern with '..', an absolute path, a URL, a server folder, or leading folders that are a link.
    """
    ...
