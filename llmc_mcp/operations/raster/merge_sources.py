"""``raster.merge``'s checks and choices on the sources' headers, before any pixel is read.

What the sources must share to be mosaicked (a CRS, the band count, a north-up grid, real values,
and, unless counting, one scale and offset, which ``sum``, ``min`` and ``max`` need to mean the same
on raw values), the kind of data the mosaic holds (which the gate's decisions key on), and the output's
data type and nodata value. :mod:`.merge` plans and writes the mosaic; :mod:`.merge_grid` places
each source on its lattice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rasterio.io import DatasetReader

from llmc_mcp.compute.grid_checks import is_rotated
from llmc_mcp.compute.output import data_kind, single_dtype
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.raster.reproject import check_nodata, require_crs


def check_sources(
    ctx: OperationContext, datasets: Sequence[DatasetReader], shown: Sequence[str], method: str
) -> None:
    """Refuses sources that cannot be combined cell by cell (each refusal names the step that fixes it)."""
    first = datasets[0]
    for ds, name in zip(datasets, shown, strict=True):
        require_crs(ctx, ds, "sources")
        if ds.crs != first.crs:
            raise Refused(
                f"sources '{name}' and '{shown[0]}' are on different CRSs; a mosaic does not reproject, "
                "because that hides a choice of CRS and of resampling for each source.",
                fix=f"raster.align '{name}' onto '{shown[0]}' (or raster.reproject every source to one CRS) "
                "first, then merge the results.",
            )
        if ds.count != first.count:
            raise Refused(
                f"sources '{name}' has {ds.count} band(s) and '{shown[0]}' {first.count}; bands combine "
                "by number.",
                fix="Mosaic rasters with the same bands; raster.calc extracts one (expression 'b', inputs "
                "[{'name': 'b', 'path': ..., 'band': n}]) to mosaic band by band.",
            )
        if is_rotated(ds.transform):
            raise InvalidArgument(
                f"sources '{name}' has a rotated grid; the mosaic's cells are north-up.",
                fix=f"raster.reproject '{name}' to its own CRS first (that writes a north-up grid).",
            )
        if single_dtype(ds, name).kind == "c":
            raise InvalidArgument(f"sources '{name}' is complex-valued.", fix="Mosaic real-valued rasters.")
    if method == "count":
        return
    for ds, name in zip(datasets, shown, strict=True):
        if tuple(ds.scales) != tuple(first.scales) or tuple(ds.offsets) != tuple(first.offsets):
            raise Refused(
                f"sources '{name}' and '{shown[0]}' declare different scales/offsets, so one stored value "
                "is not the same quantity in both.",
                fix="raster.calc each source to physical values first (physical=True), then merge those.",
            )
    if method == "sum" and any(offset != 0 for offset in first.offsets):
        raise InvalidArgument(
            "method='sum' on values with a declared offset: the sum of raw values would carry the offset "
            "once where the physical sum carries it once per source.",
            fix="raster.calc the sources to physical values first, then sum those.",
        )
    if method in ("min", "max") and any(scale < 0 for scale in first.scales):
        raise InvalidArgument(
            f"method='{method}' on values with a negative scale: the smallest stored value is the largest "
            "physical one.",
            fix="raster.calc the sources to physical values first, then merge those.",
        )


def mosaic_data_kind(datasets: Sequence[DatasetReader]) -> str:
    """Of the mosaic: categorical if any source is, continuous only if every source is, else integer,
    so a justification given for one kind never unlocks a mix that includes another."""
    kinds = {data_kind(ds) for ds in datasets}
    if "categorical" in kinds:
        return "categorical"
    return "continuous" if kinds == {"continuous"} else "integer"


def output_dtype(datasets: Sequence[DatasetReader], method: str) -> np.dtype:
    """A count's uint16, a mean's or sum's float64, else a type that holds every source's values."""
    if method == "count":
        return np.dtype("uint16")
    if method in ("mean", "sum"):
        return np.dtype("float64")
    return np.result_type(*(np.dtype(ds.dtypes[0]) for ds in datasets))


def output_nodata(
    datasets: Sequence[DatasetReader], dtype: np.dtype, method: str, nodata: float | None
) -> tuple[float | None, str]:
    """The output nodata value and a sentence saying where it came from."""
    if method == "count":
        if nodata is not None:
            raise InvalidArgument(
                "method='count' has no nodata: every cell holds a count, 0 where no source has a value.",
                fix="Drop nodata.",
            )
        return None, "no nodata (0: no source has a value)."
    if nodata is not None:
        check_nodata(nodata, dtype, "nodata")
        return nodata, f"nodata {nodata:g} as given."
    if method in ("mean", "sum"):
        return math.nan, "nodata NaN where no source has a value."
    declared = {"nan" if v is not None and math.isnan(v) else v for v in (ds.nodata for ds in datasets)}
    if len(declared) == 1 and None not in declared:
        value = datasets[0].nodata
        assert value is not None
        return value, f"nodata {value:g}, the value every source declares."
    if dtype.kind == "f":
        return math.nan, "nodata NaN (the sources do not declare one common value)."
    if declared == {None}:
        return None, "no nodata value: an internal mask marks the cells no source covers."
    raise InvalidArgument(
        f"the sources declare different nodata values ({', '.join(sorted(str(v) for v in declared))}) "
        f"and the output is {dtype.name}: inheriting one could turn another source's valid value into "
        "nodata.",
        fix="Pass nodata: a value no source uses as data.",
    )
