"""``raster.calc``: band math over rasters of one grid, evaluated by numexpr window by window.

The expression is written in Python syntax but never run as Python: :mod:`.calc_expression` checks
it against an allowlist before numexpr sees it; :mod:`.calc_evaluation` evaluates it window by
window. This module checks the arguments, binds each name to a band and writes the output.

Every input is read with the hostile-file checks (:func:`open_for_read`), every value is computed in
float64 (so ``a - b`` on uint8 bands cannot wrap around), and the output goes through the atomic,
granted, read-back write of :mod:`.output` that ``raster.reproject`` and ``raster.convert`` use.
"""

from __future__ import annotations

import contextlib
import keyword
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numexpr
import numpy as np
import rasterio
from pydantic import AfterValidator, BeforeValidator, Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.output import creation_options, describe_output, geotiff_output_path, write_atomically
from llmc_mcp.compute.pixels import grid_windows
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.compute.sources import SourceRaster
from llmc_mcp.errors import InvalidArgument, Refused
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import (
    InputLocation,
    dataset_location,
    input_location,
    same_file,
    shown_dataset,
)
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.calc_evaluation import Bound, WindowProgram
from llmc_mcp.operations.raster.calc_expression import FUNCTIONS, check_program, parse_expression
from llmc_mcp.operations.raster.models import (
    CalcInput,
    CalcInputUsed,
    CalcResult,
    GeoreferencingChoice,
    OutputGeoTiff,
)

CalcDtype = Literal["float32", "float64", "uint8", "uint16", "int16", "uint32", "int32"]
"""Output data types. Float outputs keep fractions; integer outputs are rounded (half to even)."""


MAX_INPUTS = 16
"""numexpr programs take a bounded number of operands; 16 bands cover every index we know of."""

WINDOW_ROWS = 512
WINDOW_COLS = 2048
"""Each window is 512 rows (one row of the output's 512-pixel tiles) by up to 2048 columns: about 1 M
cells, so memory is a few MB per input whatever the raster's size, and a striped input's rows are
decoded once per row of windows (GDAL's block cache holds them while the columns are walked)."""
OUTPUT_BLOCK = 512


def _inputs_from_mapping(value: Any) -> Any:
    """Accept ``{"nir": {"path": ..., "band": 8}}`` (the shape agents write) besides the list of inputs.

    The published schema is the list: JSON schemas of maps are open objects, which strict tool-schema
    converters refuse (DD-MCP-032), so the map form is accepted here without being advertised as a type.
    """
    if isinstance(value, Mapping):
        items = []
        for name, spec in value.items():
            if isinstance(spec, Mapping):
                items.append({"name": name, **spec})
            else:
                items.append({"name": name, "path": spec})
        return items
    return value


def _as_plain(value: list[CalcInput]) -> list[dict[str, Any]]:
    """Validated inputs as plain dicts: arguments cross the worker channel as JSON."""
    return [item.model_dump() for item in value]


CalcInputs = Annotated[
    list[CalcInput],
    BeforeValidator(_inputs_from_mapping),
    AfterValidator(_as_plain),
    Field(
        description="The expression's names: [{'name': 'nir', 'path': 's2.tif', 'band': 8}, ...] (band "
        "defaults to 1). A mapping {'nir': {'path': 's2.tif', 'band': 8}, ...} is accepted too."
    ),
]


Expression = Annotated[
    str,
    Field(
        description="Band math over the input names, e.g. '(nir - red) / (nir + red)': numbers, + - * / "
        "** %, comparisons, & | ~, where(cond, a, b) and element-wise math functions (sqrt, log, ...)."
    ),
]
Physical = Annotated[
    bool,
    Field(
        description="Apply each band's declared scale and offset (raw * scale + offset) before the "
        "expression, so it sees physical values (reflectance, kelvin); False uses stored values."
    ),
]


@operation("raster", read_only=False, outputs=("dst",))
def calc(
    ctx: OperationContext,
    expression: Expression,
    inputs: CalcInputs,
    dst: OutputGeoTiff,
    dtype: Annotated[
        CalcDtype, Field(description="Output data type; integer types round to the nearest whole number.")
    ] = "float32",
    nodata: Annotated[
        float | None,
        Field(description="Output nodata value; default NaN for float outputs. Integer outputs need one."),
    ] = None,
    physical: Physical = True,
    georeferencing: GeoreferencingChoice = None,
) -> CalcResult:
    """Band math: evaluate an expression over bands of rasters that share one grid; write one-band GeoTIFF.

    ``inputs`` names bands (``{'name': 'nir', 'path': 's2.tif', 'band': 8}``); the expression uses those
    names, numbers, ``+ - * / ** %``, comparisons, ``&``/``|``/``~`` between parenthesised comparisons,
    ``where(cond, a, b)`` and the element-wise functions listed in the error for anything else (sqrt,
    log, exp, abs, sin, arctan2, minimum, maximum, floor, ...). It is checked against that allowlist
    and never run as Python. Every value is computed in float64; with ``physical=True`` (default) each
    band's declared scale and offset are applied first, so NDVI from scaled reflectance is right, and
    ``inputs[].applied`` and ``note`` say what was applied. A comparison gives 1 or 0.

    All inputs must share one grid (CRS, transform, width, height). A cell that is nodata in any input
    (nodata value, mask, alpha, or NaN) is nodata in the output, and so is a result that is not finite
    (x/0, log(0)) or, for integer outputs, does not fit the type. Float outputs use NaN as nodata
    unless ``nodata`` is given; integer outputs need ``nodata``, and a computed value equal to it
    fails the call (it would read as nodata). Streams over windows of about 1 M cells, so memory
    does not grow with the raster; the output is a 512x512-tiled DEFLATE GeoTIFF written beside
    ``dst`` and renamed onto it when complete and read back.

    Errors (ApiError, by e.type): invalid_argument for an expression outside the allowlist (the
    message lists what is allowed), an input name that is not an identifier or is unused, an integer
    dtype without nodata, a nodata value the dtype cannot hold, or dst equal to an input; refused
    for inputs on different grids (align them first) or one whose sidecar overrides its
    georeferencing (pass georeferencing); not_found/raster_error for an unreadable input;
    quota_exceeded when the output would pass a quota.
    """
    out_dtype = np.dtype(dtype)
    specs, program = check_expression(expression, inputs)
    out_nodata = output_nodata(out_dtype, nodata)
    dst_path, sources = _check_dst(ctx, dst, specs)
    with gdal_env(ctx), contextlib.ExitStack() as stack:
        bound = bind_inputs(ctx, stack, specs, sources, physical, georeferencing or "refuse")
        first = bound[0].dataset
        options = creation_options(ctx, "DEFLATE", out_dtype, 1, None, None, cog=False)
        profile: dict[str, Any] = {
            "driver": "GTiff",
            "width": first.width,
            "height": first.height,
            "count": 1,
            "dtype": out_dtype.name,
            "crs": first.crs,
            "transform": first.transform,
            "nodata": out_nodata,
            "tiled": True,
            "blockxsize": OUTPUT_BLOCK,
            "blockysize": OUTPUT_BLOCK,
            **options,
        }
        numexpr.set_num_threads(max(1, ctx.num_threads))
        plan = _CalcPlan(ctx, program, expression, bound, profile, out_dtype, out_nodata, physical)
        write_atomically(ctx, plan, first, dataset_location(first), dst_path)
    return CalcResult(
        output=describe_output(ctx, dst, dst_path),
        expression=program,
        physical=physical,
        inputs=[b.used for b in bound],
        nodata=out_nodata,
        valid_count=plan.valid,
        nodata_count=plan.invalid,
        note=calc_note(bound, physical, out_dtype),
    )


def check_expression(
    expression: str, inputs: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """The inputs checked as names and the expression parsed and checked against the allowlist: what
    ``raster.calc`` and ``raster.calc_stats`` refuse before they open a file."""
    specs = _check_inputs(inputs)
    names = [spec["name"] for spec in specs]
    program = parse_expression(expression, names)
    check_program(program, names)
    return specs, program


def input_locations(ctx: OperationContext, specs: Sequence[Mapping[str, Any]]) -> dict[str, InputLocation]:
    """Each distinct input's resolved path (resolved once: the policy lists folders)."""
    paths = dict.fromkeys(spec["path"] for spec in specs)
    return {path: input_location(ctx, path, "inputs.path") for path in paths}


def bind_inputs(
    ctx: OperationContext,
    stack: contextlib.ExitStack,
    specs: Sequence[Mapping[str, Any]],
    sources: Mapping[str, InputLocation],
    physical: bool,
    policy: GeoreferencingPolicy,
) -> list[Bound]:
    """Every input opened (closed with ``stack``), bound to its name, band, scale and offset, and
    checked to share one grid."""
    opened: dict[str, SourceRaster] = {}
    for name, resolved in sources.items():
        ds = stack.enter_context(
            open_for_read(ctx, name, "inputs.path", resolved=resolved, georeferencing=policy)
        )
        opened[name] = SourceRaster.of(ctx, ds, "inputs.path", policy)
    bound = [_bind(ctx, spec, opened[spec["path"]], physical) for spec in specs]
    _check_one_grid(ctx, bound)
    return bound


def _check_inputs(inputs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    specs = [dict(item) for item in inputs]
    if not specs:
        raise InvalidArgument("inputs is empty.", fix="Name at least one band: [{'name': 'a', 'path': ...}].")
    if len(specs) > MAX_INPUTS:
        raise InvalidArgument(
            f"inputs names {len(specs)} bands; at most {MAX_INPUTS}.", fix="Split the computation."
        )
    seen: set[str] = set()
    for spec in specs:
        name = spec["name"]
        plain = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
        if len(name) > 64 or not plain or name in FUNCTIONS:
            raise InvalidArgument(
                f"inputs: {name[:64]!r} cannot be an expression name.",
                fix="Use a plain identifier that is not a function name, e.g. 'nir', 'red', 'b4'.",
            )
        if name in seen:
            raise InvalidArgument(f"inputs: the name {name!r} is given twice.", fix="Name each band once.")
        seen.add(name)
        if spec["band"] < 1:
            raise InvalidArgument(
                f"inputs.{name}: band {spec['band']} is not 1 or more.", fix="Bands start at 1."
            )
    return specs


def output_nodata(dtype: np.dtype, nodata: float | None) -> float | None:
    if nodata is None:
        if dtype.kind == "f":
            return math.nan
        raise InvalidArgument(
            f"dtype='{dtype.name}' has no NaN, so the output needs a nodata value.",
            fix=f"Pass nodata, e.g. {np.iinfo(dtype).max if dtype.kind == 'u' else np.iinfo(dtype).min}, "
            "a value the result never takes, or use dtype='float32'.",
        )
    if dtype.kind == "f":
        if math.isfinite(nodata) and abs(nodata) > float(np.finfo(dtype).max):
            raise InvalidArgument(
                f"nodata={nodata} does not fit in {dtype.name}.", fix="Pass a smaller value."
            )
        return float(nodata)
    limits = np.iinfo(dtype)
    if not (math.isfinite(nodata) and nodata == int(nodata) and limits.min <= nodata <= limits.max):
        raise InvalidArgument(
            f"nodata={nodata} is not a {dtype.name} value (whole number, {limits.min}..{limits.max}).",
            fix=f"Pass a whole number in {limits.min}..{limits.max} that the result never takes.",
        )
    return float(nodata)


def _check_dst(
    ctx: OperationContext, dst: str, specs: Sequence[Mapping[str, Any]]
) -> tuple[Path, dict[str, InputLocation]]:
    """The output path and each distinct input's resolved path (resolved once: the policy lists folders)."""
    dst_path = geotiff_output_path(ctx, dst)
    sources = input_locations(ctx, specs)
    for spec in specs:
        if same_file(sources[spec["path"]], dst_path):
            raise InvalidArgument(
                f"dst is the same file as the input '{spec['path']}'; writing would destroy it.",
                fix="Write to a new name, e.g. 'out/result.tif'.",
            )
    return dst_path, sources


def _bind(ctx: OperationContext, spec: Mapping[str, Any], source: SourceRaster, physical: bool) -> Bound:
    ds = source.dataset()
    band = spec["band"]
    if band > ds.count:
        raise InvalidArgument(
            f"inputs.{spec['name']}: band {band} does not exist in '{spec['path']}', which has {ds.count}.",
            fix=f"Pass a band in 1..{ds.count}.",
        )
    dtype = np.dtype(ds.dtypes[band - 1])
    if dtype.kind == "c":
        raise InvalidArgument(
            f"inputs.{spec['name']}: band {band} of '{spec['path']}' is complex-valued.",
            fix="Use a real-valued band.",
        )
    scale, offset = scale_offset(ds, band)
    nodata = ds.nodatavals[band - 1]
    declared = scale != 1.0 or offset != 0.0
    used = CalcInputUsed(
        name=spec["name"],
        path=shown_dataset(ctx, ds),
        band=band,
        dtype=dtype.name,
        nodata=None if nodata is None else float(nodata),
        scale=scale,
        offset=offset,
        applied=physical and declared,
    )
    return Bound(source, band, scale, offset, used)


def _check_one_grid(ctx: OperationContext, bound: Sequence[Bound]) -> None:
    """Same CRS, size and transform (to a millionth of a cell), or a refusal naming the fix."""
    first = bound[0]
    ref = first.dataset
    tolerance = 1e-6 * max(abs(ref.transform.a), abs(ref.transform.e), 1e-12)
    for other in bound[1:]:
        ds = other.dataset
        problems = []
        if (ds.width, ds.height) != (ref.width, ref.height):
            problems.append(f"size {ds.width}x{ds.height} vs {ref.width}x{ref.height}")
        if ds.crs != ref.crs:
            problems.append(f"CRS {_crs_name(ds)} vs {_crs_name(ref)}")
        if not ds.transform.almost_equals(ref.transform, precision=tolerance):
            problems.append(f"transform {tuple(ds.transform)[:6]} vs {tuple(ref.transform)[:6]}")
        if problems:
            raise Refused(
                f"inputs '{other.used.path}' and '{first.used.path}' are not on one grid ("
                + "; ".join(problems)
                + "): cells of the same row and column are not the same place.",
                fix="Align them first: raster.align, or raster.reproject one onto the other's grid (same "
                "dst_crs, bounds, width and height; resampling is a choice to justify).",
            )


def _crs_name(ds: DatasetReader) -> str:
    if ds.crs is None:
        return "none"
    epsg = ds.crs.to_epsg(confidence_threshold=100)
    return f"EPSG:{epsg}" if epsg else "a custom CRS"


@dataclass
class _CalcPlan:
    """The write: windows of every input, the program, the output; counts what it wrote."""

    ctx: OperationContext
    program: str
    expression: str
    bound: Sequence[Bound]
    profile: dict[str, Any]
    dtype: np.dtype
    nodata: float | None
    physical: bool
    valid: int = 0
    invalid: int = 0

    def write(self, source: DatasetReader, tmp: Path) -> None:
        evaluation = WindowProgram.prepare(self.program, self.bound, self.physical, self.dtype, self.nodata)
        with rasterio.open(tmp, "w", **self.profile) as out:
            out.set_band_description(1, self.expression[:200])
            out.update_tags(LLMC_EXPRESSION=self.expression[:1000], LLMC_PHYSICAL=str(self.physical))
            windows = _windows(out.width, out.height)
            for window, (values, good) in self.ctx.engine.map(windows, evaluation, writes=True):
                self.valid += good
                self.invalid += values.size - good
                out.write(values, 1, window=window)


def _windows(width: int, height: int) -> Iterator[Window]:
    return grid_windows(Window(0, 0, width, height), WINDOW_ROWS, WINDOW_COLS)


def calc_note(bound: Sequence[Bound], physical: bool, dtype: np.dtype, kept: str = "written") -> str:
    """What was applied before the expression, and the type its values were ``kept`` in."""
    declared = [b.used for b in bound if b.used.scale != 1.0 or b.used.offset != 0.0]
    forms = ", ".join(f"{u.name} = raw * {u.scale:g} + {u.offset:g}" for u in declared)
    if physical and declared:
        text = f"Scale and offset applied before the expression ({forms})."
    elif physical:
        text = "No input declares a scale or offset: stored values were used."
    elif declared:
        text = (
            f"physical=False: stored values were used although {', '.join(u.name for u in declared)} "
            f"declare scale/offset ({forms}); the result is not in physical units, and ratios such as "
            "NDVI are wrong when an offset is not 0."
        )
    else:
        text = "Stored values were used (no input declares a scale or offset)."
    rounding = " Integer output: rounded half to even." if dtype.kind in "iu" else ""
    return f"{text} Computed in float64, {kept} as {dtype.name}.{rounding}"
