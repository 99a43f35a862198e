"""``raster.merge``: a mosaic of rasters on one CRS, combined cell by cell, window by window.

The output grid is the sources' union (or ``bounds``) at the first source's cell size (or
``resolution``), anchored on the first source's cell lattice, so sources on one lattice land on
whole cells. A source on that lattice is copied cell for cell; one off it (another cell size, a
fractional offset) is warped onto it through a WarpedVRT with ``resampling``, a decision gated as
raster.reproject's. Sources on different CRSs are refused: reprojecting inside a mosaic would hide a
CRS choice and a resampling choice per source, which raster.align and raster.reproject make in the
open (DD-MCP-044).

Each output window reads, from every source whose footprint meets it, the matching window and folds
it into running accumulators (the value so far and which source gave it, or a sum, and a count of
valid sources), so memory is a few arrays of one window whatever the size and number of sources.
A window is one piece (:class:`MergePiece`): it opens the sources by their checked paths wherever
the engine runs it and returns its cells with what each source gave to them, which the write adds
up in the windows' order.
How overlapping cells combine is the ``aggregation`` decision, asked only when two footprints share
a cell of the output grid (DD-MCP-045).

What the sources must share, and the output's type and nodata, are checked in :mod:`.merge_sources`;
each source's place on the output lattice is worked out in :mod:`.merge_grid`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import rasterio
from pydantic import Field
from rasterio.io import DatasetReader
from rasterio.vrt import WarpedVRT
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.output import (
    creation_options,
    describe_output,
    geotiff_output_path,
    write_atomically,
)
from llmc_mcp.compute.pixels import read_valid
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import InputLocation, input_location, same_file, shown_dataset
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.grid import Resolution, check_grid_args
from llmc_mcp.operations.raster.merge_grid import (
    Placement,
    footprints_overlap,
    intersection,
    mosaic_grid,
    place,
)
from llmc_mcp.operations.raster.merge_sources import (
    check_sources,
    mosaic_data_kind,
    output_dtype,
    output_nodata,
)
from llmc_mcp.operations.raster.models import (
    GeoreferencingChoice,
    MergeMethod,
    MergeResult,
    MergeSource,
    OutputGeoTiff,
    Resampling,
)
from llmc_mcp.operations.raster.reproject import (
    OUTPUT_BLOCK,
    carry_metadata,
    write_windows,
)
from llmc_mcp.reflection.specs import MERGE_AGGREGATION, MERGE_RESAMPLING, Facts

MAX_SOURCES = 256
"""Every source stays open while the mosaic is written; the count of valid sources is a uint16."""

_COMBINE = {
    "first": "where sources overlap, the first in the list that has a value gives it",
    "last": "where sources overlap, the last in the list that has a value gives it",
    "min": "where sources overlap, the smallest value",
    "max": "where sources overlap, the largest value",
    "mean": "the mean of the sources that have a value (nodata takes no part)",
    "sum": "the sum of the sources that have a value; a cell where none has one is nodata",
    "count": "how many sources have a value (0: none)",
}
_PICKING = frozenset({"first", "last", "min", "max"})


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> Facts:
    """Refuse a mosaic that cannot run before the gate asks; its data kind, overlap and resampling."""
    paths, _ = _check_paths(ctx, args["sources"], args["dst"])
    policy = args["georeferencing"] or "refuse"
    with gdal_env(ctx), _opened(ctx, args["sources"], paths, policy) as datasets:
        return _plan(
            ctx,
            datasets,
            georeferencing=policy,
            method=args["method"],
            resampling=args["resampling"],
            bounds=args["bounds"],
            resolution=args["resolution"],
            nodata=args["nodata"],
        ).facts


@operation(
    "raster",
    read_only=False,
    reflection=(MERGE_AGGREGATION, MERGE_RESAMPLING),
    outputs=("dst",),
    preflight=_preflight,
)
def merge(
    ctx: OperationContext,
    sources: Annotated[
        list[str], Field(description="Workspace-relative rasters on one CRS, in order (first/last use it).")
    ],
    dst: OutputGeoTiff,
    method: Annotated[
        MergeMethod,
        Field(
            description="How a cell several sources cover is combined: first/last (by list order), min, "
            "max, mean, sum, or count (how many sources have a value). Nodata never takes part."
        ),
    ] = "first",
    resampling: Annotated[
        Resampling,
        Field(description="For sources off the mosaic's cell lattice only: how they are warped onto it."),
    ] = "nearest",
    bounds: Annotated[
        tuple[float, float, float, float] | None,
        Field(
            description="Output extent (left, bottom, right, top) in the sources' CRS; default: their union."
        ),
    ] = None,
    resolution: Annotated[
        Resolution | None,
        Field(description="Output cell size, [size] or [x, y], in CRS units; default: the first source's."),
    ] = None,
    nodata: Annotated[
        float | None,
        Field(description="Output nodata; default: the sources' common one, else NaN for float output."),
    ] = None,
    georeferencing: GeoreferencingChoice = None,
) -> MergeResult:
    """Mosaic rasters of one CRS onto one grid, combining overlapping cells with ``method``.

    The grid is the union of the sources (or ``bounds``) at the first source's cell size (or
    ``resolution``), on the first source's cell lattice: sources on it are copied cell for cell,
    others are warped onto it with ``resampling``. All sources need the same CRS (else
    raster.align or raster.reproject them first) and band count. Output type: the sources' common
    type for first/last/min/max, float64 for mean/sum, uint16 for count. Nodata: ``nodata``, else the
    value every source declares, else NaN for float output (always for mean/sum), else an internal
    mask; count has none (0 is "no source"). The result reports each source's footprint, valid and
    used cells, and how many cells overlapped. The gate asks how overlaps combine only when two
    footprints share a cell, and the resampling only when a source is off the lattice.
    ``georeferencing`` applies to every source.

    Errors: invalid_argument for no or duplicate sources, rotated grids, dst equal to a source, an
    output over 2**32 cells, a nodata the type cannot hold or that a computed cell equals; refused
    for sources on different CRSs, with different band counts, scales or offsets, or one whose
    georeferencing a sidecar overrides (pass georeferencing); raster_error for a source without CRS
    or unreadable.
    """
    paths, dst_path = _check_paths(ctx, sources, dst)
    policy = georeferencing or "refuse"
    with gdal_env(ctx), _opened(ctx, sources, paths, policy) as datasets:
        plan = _plan(
            ctx,
            datasets,
            georeferencing=policy,
            method=method,
            resampling=resampling,
            bounds=bounds,
            resolution=resolution,
            nodata=nodata,
        )
        write_atomically(ctx, plan, datasets[0], paths[0], dst_path)
    return MergeResult(
        output=describe_output(ctx, dst, dst_path),
        method=method,
        sources=[
            MergeSource(
                path=p.shown,
                resampled=p.vrt_options is not None,
                footprint_cells=0 if p.window is None else p.window.width * p.window.height,
                valid_cells=plan.valid[i],
                used_cells=plan.used[i],
            )
            for i, p in enumerate(plan.placements)
        ],
        overlap_cells=plan.overlap,
        nodata=plan.nodata,
        note=plan.note,
    )


def _check_paths(ctx: OperationContext, sources: Sequence[str], dst: str) -> tuple[list[InputLocation], Path]:
    if not sources:
        raise InvalidArgument("sources is empty.", fix="Name the rasters to mosaic: ['a.tif', 'b.tif'].")
    if len(sources) > MAX_SOURCES:
        raise InvalidArgument(
            f"sources names {len(sources)} rasters; at most {MAX_SOURCES}.",
            fix="Mosaic them in groups, then mosaic the groups.",
        )
    dst_path = geotiff_output_path(ctx, dst)
    paths: list[InputLocation] = []
    for name in sources:
        path = input_location(ctx, name, "sources")
        if same_file(path, dst_path):
            raise InvalidArgument(
                f"dst is the same file as the source '{name}'; writing would destroy it.",
                fix="Write to a new name, e.g. 'out/mosaic.tif'.",
            )
        if path in paths:
            raise InvalidArgument(
                f"sources lists '{name}' twice: mean, sum and count would count it twice.",
                fix="List each raster once.",
            )
        paths.append(path)
    return paths, dst_path


@contextlib.contextmanager
def _opened(
    ctx: OperationContext, names: Sequence[str], paths: Sequence[InputLocation], policy: GeoreferencingPolicy
) -> Iterator[list[DatasetReader]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(open_for_read(ctx, name, "sources", resolved=path, georeferencing=policy))
            for name, path in zip(names, paths, strict=True)
        ]


def _plan(
    ctx: OperationContext,
    datasets: Sequence[DatasetReader],
    *,
    georeferencing: GeoreferencingPolicy,
    method: str,
    resampling: str,
    bounds: tuple[float, float, float, float] | None,
    resolution: float | tuple[float, float] | None,
    nodata: float | None,
) -> _MergePlan:
    """Every check and choice of the mosaic, made on the source headers without reading pixels;
    ``georeferencing`` is the policy the sources were opened with, and are opened with by pieces."""
    res, _, _, bounds = check_grid_args(resolution, None, None, bounds)
    shown = [shown_dataset(ctx, ds) for ds in datasets]
    check_sources(ctx, datasets, shown, method)
    first = datasets[0]
    res = res or (abs(first.transform.a), abs(first.transform.e))
    transform, width, height = mosaic_grid(datasets, bounds, res)
    sources = [SourceRaster.of(ctx, ds, "sources", georeferencing) for ds in datasets]
    placements = [
        place(ctx, source, name, transform, width, height, resampling)
        for source, name in zip(sources, shown, strict=True)
    ]
    dtype = output_dtype(datasets, method)
    out_nodata, nodata_note = output_nodata(datasets, dtype, method, nodata)
    use_mask = out_nodata is None and method != "count"
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": first.count,
        "dtype": dtype.name,
        "crs": first.crs,
        "transform": transform,
        "nodata": out_nodata,
        "tiled": True,
        "blockxsize": OUTPUT_BLOCK,
        "blockysize": OUTPUT_BLOCK,
        **creation_options(ctx, "DEFLATE", dtype, first.count, None, None, cog=False),
    }
    resampled = [p.shown for p in placements if p.vrt_options is not None]
    facts: Facts = {
        "data": mosaic_data_kind(datasets),
        "overlap": "some" if footprints_overlap(placements) else "none",
        "resampled": "some" if resampled else "none",
    }
    warped = f" Warped onto the lattice with {resampling}: {', '.join(resampled)}." if resampled else ""
    note = f"{method}: {_COMBINE[method]}. Output {dtype.name}; {nodata_note}{warped}"
    return _MergePlan(ctx.engine, method, placements, profile, dtype, out_nodata, use_mask, facts, note)


@dataclass
class _MergePlan:
    """The write: each output window folded from the sources that meet it; counts what each gave."""

    engine: Engine
    method: str
    placements: list[Placement]
    profile: dict[str, Any]
    dtype: np.dtype
    nodata: float | None
    use_mask: bool
    facts: Facts
    note: str
    valid: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    overlap: int = 0

    def write(self, source: DatasetReader, tmp: Path) -> None:
        self.valid = [0] * len(self.placements)
        self.used = [0] * len(self.placements)
        self.overlap = 0
        bands = self.profile["count"]
        widest = max(np.dtype(p.source.dataset().dtypes[0]).itemsize for p in self.placements)
        # Accumulator (<= 8 bytes), count and owner (2 + 2), a source's window and its mask, temporaries.
        per_pixel = bands * (8 + 2 + 2 + widest + 1 + 8)
        piece = MergePiece(self.method, tuple(self.placements), self.dtype, self.nodata, bands, self.use_mask)
        with rasterio.open(tmp, "w", **self.profile) as out:
            self._carry(out)
            windows = write_windows(out.width, out.height, per_pixel)
            # Counts are added here, in the windows' order, never inside a piece: a piece may run
            # in another process.
            for window, merged in self.engine.map(windows, piece, writes=True):
                out.write(merged.values, window=window)
                if merged.mask is not None:
                    out.write_mask(merged.mask, window=window)
                self.valid = [a + b for a, b in zip(self.valid, merged.valid, strict=True)]
                self.used = [a + b for a, b in zip(self.used, merged.used, strict=True)]
                self.overlap += merged.overlap

    def _carry(self, out: Any) -> None:
        first = self.placements[0].source.dataset()
        out.update_tags(LLMC_MERGE_METHOD=self.method)
        if self.method in _PICKING and self.dtype == np.dtype(first.dtypes[0]):
            carry_metadata(first, out)
            return
        for i in first.indexes:
            if first.descriptions[i - 1]:
                out.set_band_description(i, first.descriptions[i - 1])
        if self.method == "count":
            return
        if any(s != 1 for s in first.scales) or any(o != 0 for o in first.offsets):
            out.scales = first.scales
            out.offsets = first.offsets
        if any(first.units):
            out.units = [u or "" for u in first.units]


@dataclass(frozen=True)
class MergedWindow:
    """One window of the mosaic, and what each source gave to it."""

    values: np.ndarray
    mask: np.ndarray | None
    """Where some source has a value, when the output marks that with an internal mask."""
    valid: tuple[int, ...]
    """Per source: its valid cells in this window."""
    used: tuple[int, ...]
    """Per source: the cells of this window whose value it gave (its valid ones, unless picking)."""
    overlap: int
    """Cells (per band) of this window where two or more sources have a value."""


@dataclass(frozen=True)
class MergePiece:
    """One output window folded from the sources that meet it, wherever the engine runs it; the
    sources are read by their checked paths, in the list's order, so the first still wins."""

    method: str
    placements: tuple[Placement, ...]
    dtype: np.dtype
    nodata: float | None
    bands: int
    use_mask: bool

    def __call__(self, window: Window) -> MergedWindow:
        shape = (self.bands, window.height, window.width)
        count = np.zeros(shape, np.uint16)
        picking = self.method in _PICKING
        values = np.zeros(shape, self.dtype if picking else np.float64)
        owner = np.full(shape, -1, np.int16) if picking else None
        valid = [0] * len(self.placements)
        for i, placement in enumerate(self.placements):
            part = intersection(window, placement.window)
            if part is None:
                continue
            where = Window(
                part.col_off - placement.origin[0],
                part.row_off - placement.origin[1],
                part.width,
                part.height,
            )
            raw, ok = self._read(placement, where)
            rows = slice(part.row_off - window.row_off, part.row_off - window.row_off + part.height)
            cols = slice(part.col_off - window.col_off, part.col_off - window.col_off + part.width)
            here = (slice(None), rows, cols)
            if owner is not None:
                take = ok & self._wins(raw, values[here], count[here] > 0)
                np.copyto(values[here], raw, where=take)
                owner[here][take] = i
            elif self.method != "count":
                np.add(values[here], raw, out=values[here], where=ok)
            count[here] += ok
            valid[i] = int(ok.sum())
        have = count > 0
        overlap = int((count >= 2).sum())
        if owner is not None:
            used = tuple(int(n) for n in np.bincount(owner[have], minlength=len(valid)))
        else:
            used = tuple(valid)
        if self.method == "count":
            return MergedWindow(count, None, tuple(valid), used, overlap)
        if self.method == "mean":
            values = np.divide(values, count, out=np.zeros(shape), where=have)
        if self.nodata is not None and not math.isnan(self.nodata):
            collide = have & (values == self.nodata)
            if collide.any():
                raise InvalidArgument(
                    f"{int(collide.sum())} cell value(s) of the mosaic equal {self.nodata:g}, the output's "
                    "nodata value: they would read as nodata.",
                    fix="Pass a nodata value no source uses as data.",
                )
        fill = self.nodata if self.nodata is not None else 0
        merged = np.where(have, values, fill).astype(self.dtype)
        return MergedWindow(merged, have.any(axis=0) if self.use_mask else None, tuple(valid), used, overlap)

    def _read(self, placement: Placement, where: Window) -> tuple[np.ndarray, np.ndarray]:
        """The source's values and validity in ``where`` (of the source, or of its warp onto the
        lattice). The warp is made for this window: GDAL warps a WarpedVRT block by block, each block
        from the source alone, so its cells do not depend on which window asked for them."""
        dataset = placement.source.dataset()
        indexes = list(range(1, self.bands + 1))
        if placement.vrt_options is None:
            return read_valid(placement.source.context, dataset, indexes, where)
        with WarpedVRT(dataset, **placement.vrt_options) as warped:
            return read_valid(placement.source.context, warped, indexes, where)

    def _wins(self, raw: np.ndarray, so_far: np.ndarray, seen: np.ndarray) -> np.ndarray:
        if self.method == "first":
            return ~seen
        if self.method == "last":
            return np.ones_like(seen)
        if self.method == "min":
            return ~seen | (raw < so_far)
        return ~seen | (raw > so_far)
