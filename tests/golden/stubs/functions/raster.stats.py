from typing import TypedDict
class Histogram(TypedDict):
    edges: list[float]
    counts: list[int]
class RawStats(TypedDict):
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    percentiles: dict[str, float]
class BandStats(TypedDict):
    band: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None  # Population standard deviation of valid values (ddof=0)
    valid_count: int
    nodata_count: int
    percentiles: dict[str, float]  # Requested percentiles keyed like 'p50' or 'p2.5'
    histogram: Histogram | None
    scale: float  # The band's declared scale (1 when none)
    offset: float  # The band's declared offset (0 when none)
    raw: RawStats | None
class RasterStats(TypedDict):
    path: str
    bands: list[BandStats]
    approx: bool
    method: str
def stats(
    path: str,  # Workspace-relative raster file.
    bands: list[int] | None = None,  # Band numbers (1-based) to summarise; default: all bands.
    percentiles: list[float] = [2.0, 25.0, 50.0, 75.0, 98.0],  # Percentiles to compute, each in [0, 100]; [] for none.
    histogram_bins: int | None = None,  # Also count valid values in this many equal bins over [min, max] (1-10000).
    approx: bool = False,  # Summarise a decimated read of at most ~1 M pixels per band (using overviews where the file has them) instead of every pixel: fast on huge files, but not exact.
    physical: bool = True,  # Report bands that declare a scale/offset in physical values (raw * scale + offset), with the stored-value statistics in 'raw'; False reports stored values only.
) -> RasterStats:
    """Per-band statistics of valid pixels: min, max, mean, std, counts, percentiles, optional histogram.
    Errors (ApiError, by e.type): invalid_argument for a band outside 1..count, a percentile outside [0, 100] or histogram_bins outside 1..10000; raster_error when pixel data cannot be read (damaged file).
    """
    ...
