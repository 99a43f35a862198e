"""Raster operations: describe, summarise, reproject and convert workspace rasters.

Every operation streams: statistics read windows of at most ~1 M pixels, and
reprojection and conversion write block by block, so memory does not grow
with the raster. Outputs are written to a hidden temporary file beside the
destination and renamed over it only once complete, so a failure never
leaves a partial raster under the destination name.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import rasterio
import rasterio.shutil
from affine import Affine
from pydantic import Field
from rasterio.crs import CRS as RioCRS
from rasterio.enums import ColorInterp
from rasterio.enums import OverviewResampling as RioOverviewResampling
from rasterio.enums import Resampling as RioResampling
from rasterio.io import DatasetReader
from rasterio.vrt import WarpedVRT
from rasterio.windows import Window

from llmc_mcp.errors import InvalidArgument, RasterError
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.crs import parse_crs
from llmc_mcp.operations.gdal_env import GDAL_ERRORS, gdal_env, open_for_read, translate_gdal_error
from llmc_mcp.operations.models import (
    BandStats,
    Bounds,
    Compression,
    CrsRef,
    Histogram,
    OverviewResampling,
    RasterInfo,
    RasterStats,
    Resampling,
)
from llmc_mcp.reflection.specs import (
    CONVERT_LOSSY,
    CONVERT_OVERVIEWS,
    REPROJECT_CRS,
    REPROJECT_RESAMPLING,
    normalize_crs,
)

MAX_TAGS = 50
MAX_TAG_CHARS = 500
CHUNK_PIXELS = 1 << 20
"""Pixels per band read at once by stats (and the pixel budget of approx=True)."""
FINE_BINS = 1 << 16
EXACT_RANGE = 1 << 20
"""Integer rasters whose value range is at most this wide get exact percentiles by counting."""
OUTPUT_BLOCK = 512
WRITE_CHUNK_BYTES = 16 << 20
"""Pixel bytes (data and mask) reprojection holds per output window."""
MAX_OUTPUT_PIXELS = 1 << 32
"""Per band. A typo in a resolution (metres vs degrees) should fail fast, not fill the disk."""
WARP_MEM_MB = 256
MAX_HISTOGRAM_BINS = 10_000
AUTO_OVERVIEW_MIN_SIDE = 256
GEOTIFF_SUFFIXES = (".tif", ".tiff")

_PREDICTABLE = frozenset({"DEFLATE", "LZW", "ZSTD"})
_COG_PREDICTOR = {2: "STANDARD", 3: "FLOATING_POINT"}
_COUNTABLE = frozenset({"uint8", "int8", "uint16", "int16"})


# ---------------------------------------------------------------------------------------------- info


@operation("raster", read_only=True, inputs=("path",))
def info(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file, e.g. 'data/dem.tif'.")],
    include_wkt: Annotated[bool, Field(description="Also return the CRS as WKT2 (long).")] = False,
) -> RasterInfo:
    """Describe a raster: size, bands, data types, CRS, grid, nodata, layout, overviews and metadata.

    Reads the header only, never pixels, so it is cheap on a file of any size and works on files
    whose pixel data is damaged. The CRS is reported by EPSG code where the file's CRS is one
    (``crs.epsg``), else by name; ask for ``include_wkt`` to get the full definition. ``transform``
    is the affine geotransform: non-zero b/d mean a rotated grid, which some tools ignore.
    ``mask_flags`` say where validity comes from (nodata value, internal mask or alpha band).
    Metadata tags are capped at 50 keys and 500 characters per value (``tags_truncated``).

    Errors: NotFound if the file does not exist, RasterError if it is not a raster GDAL can read.
    """
    with gdal_env(ctx), open_for_read(ctx, path, "path") as ds:
        return _describe(ctx, ds, include_wkt)


def _describe(ctx: OperationContext, ds: DatasetReader, include_wkt: bool) -> RasterInfo:
    file = Path(ds.name)
    t = ds.transform
    corners = [t @ (col, row) for col, row in ((0, 0), (ds.width, 0), (0, ds.height), (ds.width, ds.height))]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    structure = ds.tags(ns="IMAGE_STRUCTURE")
    tags, truncated = _bounded_tags(ds.tags())
    return RasterInfo(
        path=ctx.workspace.relative(file),
        driver=ds.driver,
        width=ds.width,
        height=ds.height,
        count=ds.count,
        dtypes=list(ds.dtypes),
        crs=_crs_ref(ds.crs, include_wkt),
        transform=(t.a, t.b, t.c, t.d, t.e, t.f),
        bounds=Bounds(left=min(xs), bottom=min(ys), right=max(xs), top=max(ys)),
        res=(float(ds.res[0]), float(ds.res[1])),
        nodata=[None if v is None else float(v) for v in ds.nodatavals],
        mask_flags=[[flag.name for flag in flags] for flags in ds.mask_flag_enums],
        block_shapes=[(int(h), int(w)) for h, w in ds.block_shapes],
        compression=structure.get("COMPRESSION"),
        interleave=structure.get("INTERLEAVE"),
        overviews=[ds.overviews(i) for i in ds.indexes],
        descriptions=list(ds.descriptions),
        colorinterp=[ci.name for ci in ds.colorinterp],
        tags=tags,
        tags_truncated=truncated,
        file_size_bytes=file.stat().st_size,
    )


def _crs_ref(crs: RioCRS | None, include_wkt: bool) -> CrsRef | None:
    if crs is None:
        return None
    parsed = parse_crs(crs.to_wkt())
    return CrsRef(epsg=crs.to_epsg(), name=parsed.name, wkt=parsed.to_wkt() if include_wkt else None)


def _bounded_tags(tags: dict[str, str]) -> tuple[dict[str, str], bool]:
    kept = dict(list(tags.items())[:MAX_TAGS])
    truncated = len(kept) < len(tags)
    for key, value in kept.items():
        if len(value) > MAX_TAG_CHARS:
            kept[key] = value[:MAX_TAG_CHARS]
            truncated = True
    return kept, truncated


# --------------------------------------------------------------------------------------------- stats


@operation("raster", read_only=True, inputs=("path",))
def stats(
    ctx: OperationContext,
    path: Annotated[str, Field(description="Workspace-relative raster file.")],
    bands: Annotated[
        list[int] | None, Field(description="Band numbers (1-based) to summarise; default: all bands.")
    ] = None,
    percentiles: Annotated[
        list[float], Field(description="Percentiles to compute, each in [0, 100]; [] for none.")
    ] = (2.0, 25.0, 50.0, 75.0, 98.0),  # type: ignore[assignment]  # immutable default, validated as a list
    histogram_bins: Annotated[
        int | None,
        Field(description="Also count valid pixels in this many equal bins over [min, max] (1-10000)."),
    ] = None,
    approx: Annotated[
        bool,
        Field(
            description="Summarise a decimated read of at most ~1 M pixels per band (using overviews where "
            "the file has them) instead of every pixel: fast on huge files, but not exact."
        ),
    ] = False,
) -> RasterStats:
    """Per-band statistics of valid pixels: min, max, mean, std, counts, percentiles, optional histogram.

    Valid means not nodata: pixels equal to the band's nodata value, masked by an internal mask or
    alpha band, and (for floating-point bands) NaN or ±Inf are counted in ``nodata_count`` and
    excluded from everything else. Streams over windows of ~1 M pixels, so memory stays flat on any
    file size; mean and std are merged per window in float64 (numerically stable). Percentiles use
    numpy's default linear interpolation and are exact for 8/16-bit integer bands and integer bands
    with a value range under ~1 M; other bands take a second pass through a 65536-bin histogram, so
    a percentile may be off by (max - min) / 65536. ``method`` says which applied. With
    ``approx=True`` the answer describes a decimated sample (``approx`` and ``method`` say so).

    Errors: InvalidArgument for a band outside 1..count, a percentile outside [0, 100] or
    histogram_bins outside 1..10000; RasterError when pixel data cannot be read (damaged file).
    """
    wanted = _check_percentiles(percentiles)
    if histogram_bins is not None and not 1 <= histogram_bins <= MAX_HISTOGRAM_BINS:
        raise InvalidArgument(
            f"histogram_bins={histogram_bins} is outside 1..{MAX_HISTOGRAM_BINS}.",
            fix="Pass a bin count such as 256, or null for no histogram.",
        )
    with gdal_env(ctx), open_for_read(ctx, path, "path") as ds:
        shown = ctx.workspace.relative(Path(ds.name))
        indexes = _check_bands(ds, bands, shown)
        complex_bands = [b for b in indexes if np.dtype(ds.dtypes[b - 1]).kind == "c"]
        if complex_bands:
            raise InvalidArgument(
                f"bands {complex_bands} of '{shown}' are complex-valued: they have no order or percentiles.",
                fix="Summarise the other bands (pass bands=[...]).",
            )
        reads, how, approximate = _plan_reads(ds, approx)
        accumulators = {
            b: _BandAccumulator(np.dtype(ds.dtypes[b - 1]), bool(wanted), histogram_bins) for b in indexes
        }
        for window, shape in reads:
            for b in indexes:
                values, excluded = _read_valid(ctx, ds, b, window, shape)
                accumulators[b].first(values, excluded)
        second = [b for b in indexes if accumulators[b].begin_second()]
        if second:
            for window, shape in reads:
                for b in second:
                    accumulators[b].second(_read_valid(ctx, ds, b, window, shape)[0])
        results = [accumulators[b].result(b, wanted, histogram_bins) for b in indexes]
        mean_methods = sorted({accumulators[b].mean_method for b in indexes})
        percentile_methods = sorted({accumulators[b].percentile_method for b in indexes if wanted})
    method = how + " Nodata values, mask/alpha-masked pixels and (float bands) NaN/±Inf are excluded."
    method += " Mean/std: " + "; ".join(mean_methods) + "."
    if percentile_methods:
        method += " Percentiles: " + "; ".join(percentile_methods) + "."
    return RasterStats(path=shown, bands=results, approx=approximate, method=method)


def _check_percentiles(percentiles: Sequence[float]) -> list[float]:
    bad = [p for p in percentiles if not (math.isfinite(p) and 0 <= p <= 100)]
    if bad:
        raise InvalidArgument(
            f"percentiles {bad} are outside [0, 100].",
            fix="Pass values such as [5, 50, 95] (50 is the median).",
        )
    return list(dict.fromkeys(float(p) for p in percentiles))


def _check_bands(ds: DatasetReader, bands: Sequence[int] | None, shown: str) -> list[int]:
    if bands is None:
        return list(ds.indexes)
    if not bands:
        raise InvalidArgument("bands is an empty list.", fix="Omit bands (null) for all bands, or list some.")
    bad = [b for b in bands if not 1 <= b <= ds.count]
    if bad:
        raise InvalidArgument(
            f"bands {bad} do not exist in '{shown}', which has {ds.count} band(s).",
            fix=f"Band numbers start at 1: pass values in 1..{ds.count}.",
        )
    if len(set(bands)) != len(bands):
        raise InvalidArgument(f"bands {list(bands)} lists a band twice.", fix="List each band once.")
    return list(bands)


Read = tuple[Window | None, tuple[int, int] | None]


def _plan_reads(ds: DatasetReader, approx: bool) -> tuple[list[Read], str, bool]:
    """The windows (or the single decimated read) to make, a sentence saying so, and whether it samples."""
    pixels = ds.width * ds.height
    if approx:
        factor = math.ceil(math.sqrt(pixels / CHUNK_PIXELS))
        if factor > 1:
            shape = (math.ceil(ds.height / factor), math.ceil(ds.width / factor))
            overviews = ds.overviews(1)
            source = (
                f"GDAL served it from the file's overviews {overviews} where one fits"
                if overviews
                else "the file has no overviews, so GDAL subsampled the full-resolution pixels"
            )
            how = (
                f"Approximate: a 1/{factor} nearest-neighbour decimated read of {shape[1]}x{shape[0]} pixels "
                f"per band instead of {ds.width}x{ds.height} ({source}); all figures describe that sample."
            )
            return [(None, shape)], how, True
    windows = list(_windows(ds))
    how = f"Exact: every pixel read in {len(windows)} window(s) of at most ~{CHUNK_PIXELS} pixels."
    if approx:
        how += " (approx=True had nothing to save: the raster is already this small.)"
    return [(w, None) for w in windows], how, False


def _windows(ds: DatasetReader) -> Iterator[Window]:
    """Windows of about CHUNK_PIXELS, aligned to blocks where blocks are smaller than that.

    Alignment lets each block be decoded once per pass; a block larger than the budget is read in
    several windows (GDAL's block cache decodes it once) rather than blowing the budget.
    """
    block_h, block_w = ds.block_shapes[0]
    if block_w >= ds.width:
        cols = min(ds.width, CHUNK_PIXELS)
    else:
        cols = min(ds.width, CHUNK_PIXELS, max(1, math.isqrt(CHUNK_PIXELS) // block_w) * block_w)
    rows_fit = max(1, CHUNK_PIXELS // cols)
    rows = min(ds.height, (rows_fit // block_h) * block_h or rows_fit)
    for row in range(0, ds.height, rows):
        for col in range(0, ds.width, cols):
            yield Window(col, row, min(cols, ds.width - col), min(rows, ds.height - row))


def _read_valid(
    ctx: OperationContext, ds: DatasetReader, band: int, window: Window | None, shape: tuple[int, int] | None
) -> tuple[np.ndarray, int]:
    """The valid values of one band in one read, flattened, and how many pixels were excluded."""
    try:
        data = ds.read(band, window=window, out_shape=shape, masked=True)
    except GDAL_ERRORS as exc:
        shown = ctx.workspace.relative(Path(ds.name))
        raise RasterError(
            f"'{shown}': the pixel data of band {band} could not be read "
            f"({translate_gdal_error(exc, ctx, Path(ds.name))}).",
            fix="The file is damaged or truncated: re-create or re-download it. raster.info still works "
            "on it because it reads only the header.",
        ) from None
    valid = ~np.ma.getmaskarray(data)
    raw = np.ma.getdata(data)
    if raw.dtype.kind in "fc":
        valid &= np.isfinite(raw)
    values = raw[valid]
    return values, int(valid.size - values.size)


class _Counts:
    """Exact value counts of an integer band over [offset, offset + size)."""

    def __init__(self, offset: int, size: int):
        self.offset = offset
        self.counts = np.zeros(size, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        if values.size:
            index = values if self.offset == 0 else values.astype(np.int64) - self.offset
            self.counts += np.bincount(index, minlength=self.counts.size)

    def values_and_counts(self) -> tuple[np.ndarray, np.ndarray]:
        present = np.flatnonzero(self.counts)
        return present.astype(np.int64) + self.offset, self.counts[present]


@dataclass
class _Moments:
    """Streaming count/mean/M2/min/max, merged per window (Chan et al.) in float64."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf

    def add(self, values: np.ndarray) -> None:
        if not values.size:
            return
        v = values.astype(np.float64, copy=False)
        n_b = int(v.size)
        mean_b = float(v.mean())
        centred = v - mean_b
        m2_b = float(centred @ centred)
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        self.lo = min(self.lo, float(values.min()))
        self.hi = max(self.hi, float(values.max()))


class _BandAccumulator:
    """Statistics of one band, over one or two passes of the same reads."""

    def __init__(self, dtype: np.dtype, want_percentiles: bool, bins: int | None):
        self.dtype = dtype
        self.want_percentiles = want_percentiles
        self.wants_distribution = want_percentiles or bins is not None
        self.bins = bins
        self.excluded = 0
        self.counts: _Counts | None = None
        self.moments = _Moments()
        self.fine: np.ndarray | None = None
        self.histogram: np.ndarray | None = None
        if dtype.name in _COUNTABLE:
            limits = np.iinfo(dtype)
            self.counts = _Counts(int(limits.min), int(limits.max) - int(limits.min) + 1)
            self.percentile_method = f"exact, from value counts ({dtype.name})"
            self.mean_method = f"from exact value counts ({dtype.name})"
        else:
            self.mean_method = f"per-window moments merged in float64, Chan et al. ({dtype.name})"
            self.percentile_method = (
                f"two passes ({dtype.name}): min/max, then a {FINE_BINS}-bin histogram over [min, max] with "
                f"interpolation inside the bin, off by at most (max - min) / {FINE_BINS}"
            )

    def first(self, values: np.ndarray, excluded: int) -> None:
        self.excluded += excluded
        if self.counts is not None:
            self.counts.add(values)
        else:
            self.moments.add(values)

    def begin_second(self) -> bool:
        """Prepare the second pass; False when none is needed."""
        if self.counts is not None or not self.wants_distribution or self.moments.n == 0:
            return False
        lo, hi = self.moments.lo, self.moments.hi
        if self.dtype.kind in "iu" and hi - lo < EXACT_RANGE:
            self.counts = _Counts(int(lo), int(hi - lo) + 1)
            self.percentile_method = f"exact, from value counts in a second pass ({self.dtype.name})"
            return True
        if self.want_percentiles:
            self.fine = np.zeros(FINE_BINS, dtype=np.int64)
        if self.bins is not None:
            self.histogram = np.zeros(self.bins, dtype=np.int64)
        return True

    def second(self, values: np.ndarray) -> None:
        if self.counts is not None:
            self.counts.add(values)
            return
        lo, hi = self.moments.lo, self.moments.hi
        if self.fine is not None and hi > lo:
            self.fine += np.histogram(values, bins=FINE_BINS, range=(lo, hi))[0]
        if self.histogram is not None:
            self.histogram += np.histogram(values, bins=self.bins, range=(lo, hi))[0]

    def result(self, band: int, percentiles: list[float], bins: int | None) -> BandStats:
        if self.counts is not None and self.moments.n == 0:
            return self._from_counts(band, percentiles, bins)
        m = self.moments
        if m.n == 0:
            return self._empty(band, bins)
        if self.counts is not None:
            # Second-pass counts: exact percentiles and histogram; moments still come from pass one.
            exact = self._from_counts(band, percentiles, bins)
            return exact.model_copy(update={"mean": m.mean, "std": math.sqrt(m.m2 / m.n)})
        pct = {_key(p): _fine_percentile(self.fine, m.lo, m.hi, m.n, p) for p in percentiles}
        return BandStats(
            band=band,
            min=m.lo,
            max=m.hi,
            mean=m.mean,
            std=math.sqrt(m.m2 / m.n),
            valid_count=m.n,
            nodata_count=self.excluded,
            percentiles=pct,
            histogram=_histogram(self.histogram, m.lo, m.hi, bins) if bins is not None else None,
        )

    def _from_counts(self, band: int, percentiles: list[float], bins: int | None) -> BandStats:
        assert self.counts is not None
        values, counts = self.counts.values_and_counts()
        n = int(counts.sum())
        if n == 0:
            return self._empty(band, bins)
        mean = float((values * counts).sum()) / n
        centred = values - mean
        std = math.sqrt(float((counts * centred * centred).sum()) / n)
        cumulative = np.cumsum(counts)
        pct = {_key(p): _exact_percentile(values, cumulative, n, p) for p in percentiles}
        histogram = None
        if bins is not None:
            lo, hi = float(values[0]), float(values[-1])
            weighted = np.histogram(values, bins=bins, range=(lo, hi), weights=counts)[0]
            histogram = _histogram(np.rint(weighted).astype(np.int64), lo, hi, bins)
        return BandStats(
            band=band,
            min=float(values[0]),
            max=float(values[-1]),
            mean=mean,
            std=std,
            valid_count=n,
            nodata_count=self.excluded,
            percentiles=pct,
            histogram=histogram,
        )

    def _empty(self, band: int, bins: int | None) -> BandStats:
        return BandStats(
            band=band,
            min=None,
            max=None,
            mean=None,
            std=None,
            valid_count=0,
            nodata_count=self.excluded,
            percentiles={},
            histogram=Histogram(edges=[], counts=[]) if bins is not None else None,
        )


def _key(p: float) -> str:
    return f"p{p:g}"


def _lerp(a: float, b: float, t: float) -> float:
    # numpy.percentile's formulation, so exact answers match it to the last bit.
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _exact_percentile(values: np.ndarray, cumulative: np.ndarray, n: int, p: float) -> float:
    h = (n - 1) * (p / 100)
    k = math.floor(h)
    low = float(values[np.searchsorted(cumulative, k, side="right")])
    high = float(values[np.searchsorted(cumulative, min(k + 1, n - 1), side="right")])
    return _lerp(low, high, h - k)


def _fine_percentile(fine: np.ndarray | None, lo: float, hi: float, n: int, p: float) -> float:
    if fine is None or hi <= lo:
        return lo
    cumulative = np.cumsum(fine)
    width = (hi - lo) / fine.size

    def order_statistic(k: int) -> float:
        if k <= 0:
            return lo
        if k >= n - 1:
            return hi
        j = int(np.searchsorted(cumulative, k, side="right"))
        before = int(cumulative[j - 1]) if j else 0
        inside = (k - before + 0.5) / int(fine[j])
        return min(hi, max(lo, lo + (j + inside) * width))

    h = (n - 1) * (p / 100)
    k = math.floor(h)
    return _lerp(order_statistic(k), order_statistic(k + 1), h - k)


def _histogram(counts: np.ndarray | None, lo: float, hi: float, bins: int) -> Histogram:
    # numpy widens a zero-width range to [lo - 0.5, hi + 0.5]; reuse its edges so counts and edges agree.
    edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=(lo, hi))
    return Histogram(
        edges=[float(e) for e in edges],
        counts=[int(c) for c in (counts if counts is not None else np.zeros(bins, np.int64))],
    )


# ----------------------------------------------------------------------------------------- reproject


_WARP_ARGS = (
    "dst_crs",
    "resampling",
    "resolution",
    "width",
    "height",
    "bounds",
    "src_nodata",
    "dst_nodata",
    "compress",
)
_COPY_ARGS = (
    "driver",
    "compress",
    "predictor",
    "tiled",
    "blocksize",
    "overviews",
    "overview_resampling",
    "quality",
)


def _reproject_preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    """Refuse a reprojection that cannot run before the gate asks for its justification."""
    _check_src_dst(ctx, args["src"], args["dst"])
    with gdal_env(ctx), open_for_read(ctx, args["src"], "src") as source:
        _plan_warp(ctx, source, **{name: args[name] for name in _WARP_ARGS})


def _convert_preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    """Refuse a conversion that cannot run before the gate asks for its justification."""
    _check_src_dst(ctx, args["src"], args["dst"])
    with gdal_env(ctx), open_for_read(ctx, args["src"], "src") as source:
        _plan_copy(ctx, source, **{name: args[name] for name in _COPY_ARGS})


@operation(
    "raster",
    read_only=False,
    reflection=(REPROJECT_CRS, REPROJECT_RESAMPLING, CONVERT_LOSSY),
    inputs=("src",),
    outputs=("dst",),
    preflight=_reproject_preflight,
)
def reproject(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster (must have a CRS).")],
    dst: Annotated[
        str, Field(description="Workspace-relative output GeoTIFF (.tif/.tiff); replaced if it exists.")
    ],
    dst_crs: Annotated[
        str,
        Field(description="Target CRS: EPSG code ('EPSG:6933'), WKT, PROJ string or PROJJSON."),
    ],
    resampling: Annotated[
        Resampling,
        Field(
            description="How output pixels are computed: 'nearest' or 'mode' for categories; "
            "'bilinear'/'cubic'/'average' for continuous values; 'sum' to conserve totals."
        ),
    ] = "nearest",
    resolution: Annotated[
        float | tuple[float, float] | None,
        Field(description="Output pixel size in dst_crs units: one number or (x, y). Excludes width/height."),
    ] = None,
    width: Annotated[
        int | None,
        Field(description="Output columns. Without height, height keeps the extent's aspect ratio."),
    ] = None,
    height: Annotated[
        int | None,
        Field(description="Output rows. Without width, width keeps the extent's aspect ratio."),
    ] = None,
    bounds: Annotated[
        tuple[float, float, float, float] | None,
        Field(description="Output extent (left, bottom, right, top) in dst_crs units, like gdalwarp -te."),
    ] = None,
    src_nodata: Annotated[
        float | None, Field(description="Treat this source value as nodata (overrides the file's nodata).")
    ] = None,
    dst_nodata: Annotated[
        float | None,
        Field(description="Nodata value of the output; default: the source nodata (see the rule below)."),
    ] = None,
    compress: Annotated[
        Compression,
        Field(description="Output compression; JPEG/WEBP/LERC* are lossy and need a justification."),
    ] = "DEFLATE",
) -> RasterInfo:
    """Reproject a raster to another CRS and write a tiled GeoTIFF; returns the output's raster.info.

    The output grid defaults to GDAL's suggestion: the whole source footprint at about the source
    resolution. ``resolution`` or ``width``/``height`` (not both) set the pixel size or count; width
    or height alone derives the other from the extent's aspect ratio. ``bounds`` sets the extent
    like ``gdalwarp -te``: with a resolution (given or suggested) the top-left corner is kept and the
    size rounded to whole pixels; with width/height the pixels may be non-square. Without bounds, a
    resolution keeps the suggested top-left corner and rounds the size up to cover the footprint.

    Areas outside the source footprint are never silent zeros. Rule: the output nodata is
    ``dst_nodata``, else the source nodata (``src_nodata`` or the file's), else NaN for float
    data. An integer source without nodata gets no nodata value: a source alpha band carries
    validity through the warp, otherwise an internal mask (mask_flags 'per_dataset') marks where the
    output has data. Band descriptions, colour interpretation, colour map, scales/offsets/units and
    metadata tags are carried over (stale STATISTICS_* tags are not). The output is a 512x512-tiled
    GeoTIFF (BigTIFF when needed), predictor 2/3 with DEFLATE/LZW/ZSTD, written block by block so
    rasters larger than memory work, and renamed onto ``dst`` only when complete.

    Errors: InvalidArgument for conflicting or out-of-range grid options, src == dst, a nodata value
    the data type cannot hold, a compression the data cannot use (JPEG/WEBP need uint8), or an output
    over 2**32 pixels per band; CrsError for an unknown dst_crs; RasterError when the source has no
    CRS, its extent cannot be expressed in dst_crs (pass bounds), or reading/writing fails.
    """
    src_path, dst_path = _check_src_dst(ctx, src, dst)
    with gdal_env(ctx), open_for_read(ctx, src, "src") as source:
        plan = _plan_warp(
            ctx,
            source,
            dst_crs=dst_crs,
            resampling=resampling,
            resolution=resolution,
            width=width,
            height=height,
            bounds=bounds,
            src_nodata=src_nodata,
            dst_nodata=dst_nodata,
            compress=compress,
        )
        with _atomic_output(dst_path) as tmp:
            try:
                with (
                    WarpedVRT(source, **plan.vrt_options) as vrt,
                    rasterio.open(tmp, "w", **plan.profile) as out,
                ):
                    _carry_metadata(source, out)
                    _copy_warped(vrt, out, source.count, plan.dtype, plan.use_mask)
            except GDAL_ERRORS as exc:
                raise _write_error(ctx, exc, src_path, dst_path, tmp) from None
    return _describe_output(ctx, dst)


@dataclass(frozen=True)
class _WarpPlan:
    dtype: np.dtype
    use_mask: bool
    profile: dict[str, Any]
    vrt_options: dict[str, Any]


def _plan_warp(
    ctx: OperationContext,
    source: DatasetReader,
    *,
    dst_crs: str,
    resampling: str,
    resolution: float | tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
    src_nodata: float | None,
    dst_nodata: float | None,
    compress: str,
) -> _WarpPlan:
    """Every check and choice of a reprojection, made on the source header without reading pixels."""
    grid_args = _check_grid_args(resolution, width, height, bounds)
    parse_crs(dst_crs, "dst_crs")
    target = _rio_crs(normalize_crs(dst_crs))
    method = _warp_resampling(resampling)
    shown = ctx.workspace.relative(Path(source.name))
    if source.crs is None:
        raise RasterError(
            f"src: '{shown}' has no CRS, so there is nothing to reproject from.",
            fix="Use a georeferenced raster (raster.info shows crs); GCP-only rasters are not supported.",
        )
    dtype = _single_dtype(source, shown)
    nodata = _output_nodata(source, dtype, src_nodata, dst_nodata)
    options = _compression_options(compress, dtype, source.count, None, None, cog=False)
    transform, out_width, out_height = _target_grid(ctx, source, target, dst_crs, *grid_args)
    use_mask = nodata is None and ColorInterp.alpha not in source.colorinterp
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": out_width,
        "height": out_height,
        "count": source.count,
        "dtype": dtype.name,
        "crs": target,
        "transform": transform,
        "nodata": nodata,
        "tiled": True,
        "blockxsize": OUTPUT_BLOCK,
        "blockysize": OUTPUT_BLOCK,
        "BIGTIFF": "IF_SAFER",
        "NUM_THREADS": str(ctx.num_threads),
        **options,
    }
    vrt_options: dict[str, Any] = {
        "crs": target,
        "transform": transform,
        "width": out_width,
        "height": out_height,
        "resampling": method,
        "add_alpha": use_mask,
        "init_dest_nodata": True,
        "warp_mem_limit": WARP_MEM_MB,
        "NUM_THREADS": str(ctx.num_threads),
    }
    # Passing None would not mean "the file's value" to WarpedVRT but "no source nodata".
    if src_nodata is not None:
        vrt_options["src_nodata"] = src_nodata
    if nodata is not None:
        vrt_options["nodata"] = nodata
    return _WarpPlan(dtype=dtype, use_mask=use_mask, profile=profile, vrt_options=vrt_options)


def _check_grid_args(
    resolution: float | tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
) -> tuple[tuple[float, float] | None, int | None, int | None, tuple[float, float, float, float] | None]:
    if resolution is not None and (width is not None or height is not None):
        raise InvalidArgument(
            "resolution conflicts with width/height: both set the pixel size.",
            fix="Pass either resolution or width/height, not both.",
        )
    res = None
    if resolution is not None:
        res = (float(resolution), float(resolution)) if isinstance(resolution, int | float) else resolution
        if not all(math.isfinite(r) and r > 0 for r in res):
            raise InvalidArgument(
                f"resolution {resolution} must be positive and finite.",
                fix="Pass the pixel size in dst_crs units, e.g. 30 (metres) or 0.00025 (degrees).",
            )
    for name, value in (("width", width), ("height", height)):
        if value is not None and value < 1:
            raise InvalidArgument(
                f"{name}={value} must be at least 1.", fix=f"Pass a positive {name} in pixels."
            )
    if bounds is not None:
        left, bottom, right, top = bounds
        if not all(math.isfinite(v) for v in bounds):
            raise InvalidArgument(
                f"bounds {bounds} must be finite numbers.", fix="Pass (left, bottom, right, top)."
            )
        if left >= right or bottom >= top:
            raise InvalidArgument(
                f"bounds {bounds} are empty: they need left < right and bottom < top.",
                fix="Pass (left, bottom, right, top) in dst_crs units, e.g. (-10, 35, 30, 60) in degrees.",
            )
    return res, width, height, bounds


def _check_src_dst(ctx: OperationContext, src: str, dst: str) -> tuple[Path, Path]:
    src_path = ctx.workspace.input_path(src, argument="src")
    dst_path = ctx.workspace.output_path(dst, argument="dst")
    if dst_path.suffix.lower() not in GEOTIFF_SUFFIXES:
        raise InvalidArgument(
            f"dst: '{dst}' does not end in .tif or .tiff, but the output is a GeoTIFF.",
            fix="Name the output with a .tif extension.",
        )
    if src_path == dst_path or (dst_path.exists() and os.path.samefile(src_path, dst_path)):
        raise InvalidArgument(
            f"dst is the same file as src ('{src}').", fix="Write to a new name, e.g. 'out/result.tif'."
        )
    return src_path, dst_path


def _rio_crs(normalized: str) -> RioCRS:
    # Never from_user_input on raw text: GDAL would accept a file name there and read it.
    if ":" in normalized and normalized.split(":", 1)[1].isdigit():
        return RioCRS.from_user_input(normalized)
    return RioCRS.from_wkt(normalized)


def _warp_resampling(name: str) -> RioResampling:
    try:
        return RioResampling[name]
    except KeyError:
        raise InvalidArgument(
            f"resampling '{name}' is not available in this GDAL build.",
            fix="Use one of: " + ", ".join(r.name for r in RioResampling if r.name != "gauss") + ".",
        ) from None


def _single_dtype(ds: DatasetReader, shown: str) -> np.dtype:
    if len(set(ds.dtypes)) != 1:
        raise RasterError(
            f"'{shown}' mixes band data types {sorted(set(ds.dtypes))}; GeoTIFF output needs one.",
            fix="Process the bands separately.",
        )
    return np.dtype(ds.dtypes[0])


def _target_grid(
    ctx: OperationContext,
    source: DatasetReader,
    target: RioCRS,
    dst_crs: str,
    res: tuple[float, float] | None,
    width: int | None,
    height: int | None,
    bounds: tuple[float, float, float, float] | None,
) -> tuple[Affine, int, int]:
    if bounds is not None and (width is not None or height is not None):
        extent = bounds
    else:
        default, default_w, default_h = _default_grid(ctx, source, target, dst_crs)
        if bounds is None and res is None and width is None and height is None:
            return default, default_w, default_h
        extent = bounds or (
            default.c,
            default.f + default_h * default.e,
            default.c + default_w * default.a,
            default.f,
        )
        if res is None and width is None and height is None:
            res = (default.a, -default.e)
    left, bottom, right, top = extent
    if res is not None:
        # gdalwarp -te -tr keeps the top-left corner and rounds the size; without bounds, cover the
        # footprint (the tolerance keeps float noise in an exact fit from adding a pixel).
        def fit(pixels: float) -> int:
            return max(1, round(pixels) if bounds is not None else math.ceil(pixels - 1e-6))

        out_w, out_h = fit((right - left) / res[0]), fit((top - bottom) / res[1])
        transform = Affine(res[0], 0.0, left, 0.0, -res[1], top)
    else:
        aspect = (right - left) / (top - bottom)
        if width is not None and height is not None:
            out_w, out_h = width, height
        elif width is not None:
            out_w, out_h = width, max(1, round(width / aspect))
        else:
            assert height is not None
            out_w, out_h = max(1, round(height * aspect)), height
        transform = Affine((right - left) / out_w, 0.0, left, 0.0, -(top - bottom) / out_h, top)
    if out_w * out_h > MAX_OUTPUT_PIXELS:
        raise InvalidArgument(
            f"the output would be {out_w}x{out_h} pixels per band (over {MAX_OUTPUT_PIXELS}).",
            fix="Check resolution/width/height: the pixel size is in dst_crs units (degrees or metres).",
        )
    return transform, out_w, out_h


def _default_grid(
    ctx: OperationContext, source: DatasetReader, target: RioCRS, dst_crs: str
) -> tuple[Affine, int, int]:
    # A WarpedVRT suggests the grid from the source's full geotransform; calculate_default_transform
    # would only see the bounds and lose a rotation.
    try:
        with WarpedVRT(source, crs=target) as vrt:
            return vrt.transform, vrt.width, vrt.height
    except (*GDAL_ERRORS, ValueError) as exc:
        shown = ctx.workspace.relative(Path(source.name))
        raise RasterError(
            f"The extent of '{shown}' cannot be computed in {dst_crs[:100]!r} "
            f"({translate_gdal_error(exc, ctx, Path(source.name))}).",
            fix="Pass bounds (left, bottom, right, top) in dst_crs units together with resolution or "
            "width/height, or choose a CRS whose area of use covers the raster (crs.info).",
        ) from None


def _output_nodata(
    source: DatasetReader, dtype: np.dtype, src_nodata: float | None, dst_nodata: float | None
) -> float | None:
    if src_nodata is not None:
        _check_nodata(src_nodata, dtype, "src_nodata")
    if dst_nodata is not None:
        _check_nodata(dst_nodata, dtype, "dst_nodata")
        return dst_nodata
    inherited = src_nodata if src_nodata is not None else source.nodata
    if inherited is not None:
        return inherited
    return math.nan if dtype.kind == "f" else None


def _check_nodata(value: float, dtype: np.dtype, argument: str) -> None:
    if dtype.kind == "f":
        if math.isfinite(value) and abs(value) > float(np.finfo(dtype).max):
            raise InvalidArgument(
                f"{argument}={value} does not fit in {dtype.name}.",
                fix=f"Pass a value {dtype.name} can hold.",
            )
        return
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        if not (math.isfinite(value) and value == int(value) and limits.min <= value <= limits.max):
            raise InvalidArgument(
                f"{argument}={value} is not a {dtype.name} value (whole number, {limits.min}..{limits.max}).",
                fix=f"Pass a whole number in {limits.min}..{limits.max} that the data does not use.",
            )


def _compression_options(
    compress: str, dtype: np.dtype, count: int, predictor: int | None, quality: int | None, *, cog: bool
) -> dict[str, str]:
    if compress in ("JPEG", "WEBP") and dtype != np.uint8:
        raise InvalidArgument(
            f"compress='{compress}' needs 8-bit (uint8) data; this raster is {dtype.name}.",
            fix="Use a lossless compression such as DEFLATE or ZSTD, or LERC for lossy float/16-bit data.",
        )
    if compress == "WEBP" and count not in (3, 4):
        raise InvalidArgument(
            f"compress='WEBP' needs 3 (RGB) or 4 (RGBA) bands; this raster has {count}.",
            fix="Use JPEG for 1-band 8-bit data, or a lossless compression.",
        )
    if quality is not None:
        if compress not in ("JPEG", "WEBP"):
            raise InvalidArgument(
                f"quality only applies to JPEG and WEBP, not compress='{compress}'.",
                fix="Drop quality, or use compress='JPEG'/'WEBP'.",
            )
        if not 1 <= quality <= 100:
            raise InvalidArgument(f"quality={quality} is outside 1..100.", fix="Pass e.g. 75 (JPEG default).")
    is_float = dtype.kind == "f"
    if predictor is None:
        predictor = (3 if is_float else 2) if compress in _PREDICTABLE and dtype.kind in "iuf" else 1
    elif predictor != 1:
        if compress not in _PREDICTABLE:
            raise InvalidArgument(
                f"predictor={predictor} only applies to DEFLATE, LZW and ZSTD, not '{compress}'.",
                fix="Drop predictor (null picks the right one).",
            )
        if predictor == 2 and dtype.kind not in "iu":
            raise InvalidArgument(
                f"predictor=2 (horizontal differencing) is for integer data; this raster is {dtype.name}.",
                fix="Use predictor=3 for floating-point data, or null to choose automatically.",
            )
        if predictor == 3 and not is_float:
            raise InvalidArgument(
                f"predictor=3 (floating point) is for float data; this raster is {dtype.name}.",
                fix="Use predictor=2 for integer data, or null to choose automatically.",
            )
    options = {"COMPRESS": compress}
    if predictor != 1:
        options["PREDICTOR"] = _COG_PREDICTOR[predictor] if cog else str(predictor)
    if quality is not None:
        options["QUALITY" if cog else ("JPEG_QUALITY" if compress == "JPEG" else "WEBP_LEVEL")] = str(quality)
    if compress == "JPEG" and count == 3 and not cog:
        # YCbCr JPEG is several times smaller than RGB JPEG at the same quality (COG does it itself).
        options["PHOTOMETRIC"] = "YCBCR"
    return options


def _carry_metadata(source: DatasetReader, out: Any) -> None:
    out.colorinterp = source.colorinterp
    for i in source.indexes:
        if source.descriptions[i - 1]:
            out.set_band_description(i, source.descriptions[i - 1])
        band_tags = {k: v for k, v in source.tags(i).items() if not k.startswith("STATISTICS_")}
        if band_tags:
            out.update_tags(i, **band_tags)
    out.update_tags(**source.tags())
    if any(s != 1 for s in source.scales) or any(o != 0 for o in source.offsets):
        out.scales = source.scales
        out.offsets = source.offsets
    if any(source.units):
        out.units = [u or "" for u in source.units]
    if source.colorinterp[0] == ColorInterp.palette:
        # A palette interpretation without a table (ValueError) leaves nothing to carry.
        with contextlib.suppress(ValueError):
            out.write_colormap(1, source.colormap(1))


def _copy_warped(vrt: WarpedVRT, out: Any, count: int, dtype: np.dtype, use_mask: bool) -> None:
    bands = list(range(1, count + 1))
    # The alpha band has the data type; the mask written from it is one byte per pixel.
    per_pixel = count * dtype.itemsize + (dtype.itemsize + 1 if use_mask else 0)
    for window in _write_windows(out.width, out.height, per_pixel):
        out.write(vrt.read(bands, window=window), window=window)
        if use_mask:
            out.write_mask(vrt.read(count + 1, window=window) > 0, window=window)


def _write_windows(width: int, height: int, bytes_per_pixel: int) -> Iterator[Window]:
    """Windows aligned to the 512-pixel output tiles, about WRITE_CHUNK_BYTES each."""
    tiles = max(1, math.isqrt(max(1, WRITE_CHUNK_BYTES // bytes_per_pixel)) // OUTPUT_BLOCK)
    side = tiles * OUTPUT_BLOCK
    for row in range(0, height, side):
        for col in range(0, width, side):
            yield Window(col, row, min(side, width - col), min(side, height - row))


# ------------------------------------------------------------------------------------------- convert


@operation(
    "raster",
    read_only=False,
    reflection=(CONVERT_LOSSY, CONVERT_OVERVIEWS),
    inputs=("src",),
    outputs=("dst",),
    preflight=_convert_preflight,
)
def convert(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster.")],
    dst: Annotated[
        str, Field(description="Workspace-relative output GeoTIFF (.tif/.tiff); replaced if it exists.")
    ],
    driver: Annotated[
        Literal["GTiff", "COG"],
        Field(description="'GTiff', or 'COG' for a Cloud Optimized GeoTIFF (always tiled, overviews last)."),
    ] = "GTiff",
    compress: Annotated[
        Compression, Field(description="Compression; JPEG/WEBP/LERC* are lossy and need a justification.")
    ] = "DEFLATE",
    predictor: Annotated[
        Literal[1, 2, 3] | None,
        Field(description="1 none, 2 integer, 3 floating point; null picks 2 or 3 for DEFLATE/LZW/ZSTD."),
    ] = None,
    tiled: Annotated[
        bool, Field(description="Tiled layout (blocksize x blocksize); False writes strips.")
    ] = True,
    blocksize: Annotated[
        int,
        Field(
            description="Tile size in pixels (rows per strip when not tiled): a multiple of 16 in 16..4096."
        ),
    ] = 512,
    overviews: Annotated[
        list[int] | Literal["auto"] | None,
        Field(
            description="Overview factors such as [2, 4, 8], or 'auto' (halve until the smaller side is "
            "under 256 pixels); null for none. COG accepts only 'auto' or null."
        ),
    ] = None,
    overview_resampling: Annotated[
        OverviewResampling,
        Field(
            description="How overview pixels are computed: 'nearest'/'mode' for categories, else 'average'..."
        ),
    ] = "nearest",
    quality: Annotated[
        int | None,
        Field(description="JPEG/WEBP quality 1..100 (JPEG default 75); only with those compressions."),
    ] = None,
) -> RasterInfo:
    """Rewrite a raster as GeoTIFF or Cloud Optimized GeoTIFF with a chosen compression, layout, overviews.

    Pixels, CRS, grid, nodata, masks, band descriptions, colour interpretation and tags are copied;
    only the encoding changes (and pixel values too for lossy JPEG/WEBP/LERC). COG goes through
    GDAL's COG driver and validates as a COG; its overviews are 'auto' (regenerated with
    ``overview_resampling``) or none. For GTiff, overviews are built inside the file after the copy.
    'auto' factors are 2, 4, 8, ... until the overview's smaller side is under 256 pixels (none for a
    raster already that small). The output is written beside ``dst`` and renamed onto it when
    complete. JPEG on data with a nodata value blurs the nodata edges: prefer a lossless compression
    for such data.

    Errors: InvalidArgument for options that do not apply: COG with tiled=False or explicit factors,
    blocksize not a multiple of 16 in 16..4096, predictor 2 on float or 3 on integer data, predictor
    or quality with a compression that has none, JPEG/WEBP on non-uint8 data, WEBP without 3/4 bands,
    overview factors below 2, overview_resampling without overviews, src == dst; RasterError when
    reading or writing fails.
    """
    src_path, dst_path = _check_src_dst(ctx, src, dst)
    with gdal_env(ctx), open_for_read(ctx, src, "src") as source:
        options, factors = _plan_copy(
            ctx,
            source,
            driver=driver,
            compress=compress,
            predictor=predictor,
            tiled=tiled,
            blocksize=blocksize,
            overviews=overviews,
            overview_resampling=overview_resampling,
            quality=quality,
        )
        with _atomic_output(dst_path) as tmp:
            try:
                rasterio.shutil.copy(source, str(tmp), driver=driver, **options)
                if driver == "GTiff" and factors:
                    with rasterio.open(tmp, "r+") as out:
                        out.build_overviews(factors, RioOverviewResampling[overview_resampling])
            except GDAL_ERRORS as exc:
                raise _write_error(ctx, exc, src_path, dst_path, tmp) from None
    return _describe_output(ctx, dst)


def _plan_copy(
    ctx: OperationContext,
    source: DatasetReader,
    *,
    driver: str,
    compress: str,
    predictor: int | None,
    tiled: bool,
    blocksize: int,
    overviews: list[int] | str | None,
    overview_resampling: str,
    quality: int | None,
) -> tuple[dict[str, str], list[int]]:
    """Every check of a conversion, and the creation options and overview factors it resolves to."""
    if driver == "COG" and not tiled:
        raise InvalidArgument(
            "driver='COG' is always tiled; tiled=False does not apply.", fix="Drop tiled=False."
        )
    if not (16 <= blocksize <= 4096 and blocksize % 16 == 0):
        raise InvalidArgument(
            f"blocksize={blocksize} must be a multiple of 16 in 16..4096.",
            fix="Pass 256 or 512 (the default).",
        )
    requested = _check_overviews(overviews, driver, overview_resampling)
    dtype = _single_dtype(source, ctx.workspace.relative(Path(source.name)))
    options = _compression_options(compress, dtype, source.count, predictor, quality, cog=driver == "COG")
    factors = _auto_factors(source.width, source.height) if requested == "auto" else (requested or [])
    options.update({"BIGTIFF": "IF_SAFER", "NUM_THREADS": str(ctx.num_threads)})
    if driver == "COG":
        options["BLOCKSIZE"] = str(blocksize)
        if factors:
            options.update(
                OVERVIEWS="IGNORE_EXISTING",
                OVERVIEW_COUNT=str(len(factors)),
                OVERVIEW_RESAMPLING=_gdal_resampling_name(overview_resampling),
            )
        else:
            options["OVERVIEWS"] = "NONE"
    else:
        options["BLOCKYSIZE"] = str(blocksize)
        if tiled:
            options.update(TILED="YES", BLOCKXSIZE=str(blocksize))
    return options, factors


def _check_overviews(
    overviews: list[int] | str | None, driver: str, resampling: str
) -> list[int] | Literal["auto"] | None:
    if overviews is None or (isinstance(overviews, list) and not overviews):
        if resampling != "nearest":
            raise InvalidArgument(
                f"overview_resampling='{resampling}' was given but no overviews are built.",
                fix="Pass overviews='auto' (or factors such as [2, 4, 8]), or drop overview_resampling.",
            )
        return None
    if overviews == "auto":
        return "auto"
    assert isinstance(overviews, list)
    if driver == "COG":
        raise InvalidArgument(
            f"driver='COG' builds its own power-of-two overviews; explicit factors {overviews} do not apply.",
            fix="With driver='COG' pass overviews='auto' (or null for none); use driver='GTiff' for factors.",
        )
    bad = [f for f in overviews if f < 2]
    if bad:
        raise InvalidArgument(
            f"overview factors {bad} must be 2 or more.", fix="Pass factors such as [2, 4, 8]."
        )
    return sorted(set(overviews))


def _auto_factors(width: int, height: int) -> list[int]:
    factors: list[int] = []
    factor = 1
    while math.ceil(min(width, height) / factor) >= AUTO_OVERVIEW_MIN_SIDE:
        factor *= 2
        factors.append(factor)
    return factors


def _gdal_resampling_name(name: str) -> str:
    return name.replace("_", "").upper()


# ------------------------------------------------------------------------------------- writing helpers


@contextmanager
def _atomic_output(dst_path: Path) -> Iterator[Path]:
    """A temporary path beside ``dst_path``, renamed onto it (with its sidecars) only on success."""
    tmp = dst_path.with_name(f".{dst_path.name}.partial-{secrets.token_hex(6)}.tif")
    try:
        yield tmp
        os.replace(tmp, dst_path)
    except BaseException:
        _remove_with_sidecars(tmp)
        raise
    # A sidecar of the file we replaced (stale statistics, external overviews or mask) would be read
    # as belonging to the new one; take the new file's sidecars where GDAL wrote any.
    for suffix in (".aux.xml", ".ovr", ".msk"):
        new, old = Path(f"{tmp}{suffix}"), Path(f"{dst_path}{suffix}")
        if new.exists():
            os.replace(new, old)
        else:
            old.unlink(missing_ok=True)


def _remove_with_sidecars(tmp: Path) -> None:
    for candidate in tmp.parent.iterdir():
        if candidate.name.startswith(tmp.name):
            candidate.unlink(missing_ok=True)


def _write_error(
    ctx: OperationContext, exc: Exception, src_path: Path, dst_path: Path, tmp: Path
) -> RasterError:
    dst_name = ctx.workspace.relative(dst_path)
    text = translate_gdal_error(exc, ctx, tmp, shown=dst_name)
    return RasterError(
        f"Writing '{dst_name}' from '{ctx.workspace.relative(src_path)}' failed ({text}); "
        f"nothing was written under '{dst_name}'.",
        fix="If the source pixels cannot be read, the source file is damaged; otherwise check free "
        "disk space and the options.",
    )


def _describe_output(ctx: OperationContext, name: str) -> RasterInfo:
    with gdal_env(ctx), open_for_read(ctx, name, "dst") as ds:
        return _describe(ctx, ds, include_wkt=False)
