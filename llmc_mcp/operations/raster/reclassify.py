"""``raster.reclassify``: values and half-open ranges of one band become integer classes.

Rules are checked as a whole before any pixel is read: no NaN or infinite bound (an open end is
null), no empty range, no two rules that a value could both match (named, by position). Because
they do not overlap, sorted by their lower end the only rule a value can match is the last one
starting at or below it, so each window is matched with one ``searchsorted`` whatever the number of
rules, and counted per rule with one ``bincount``.

The output is written as a class raster: the smallest integer type holding every class and the
nodata, a nodata no class uses, and the band tagged ``LAYER_TYPE=thematic`` so later operations
(``raster.reproject``'s gate) know its values are categories.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import rasterio
from pydantic import AfterValidator, BeforeValidator, Field
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp.compute.engine import Engine
from llmc_mcp.compute.output import check_src_dst, creation_options, describe_output, write_atomically
from llmc_mcp.compute.pixels import grid_windows, read_valid
from llmc_mcp.compute.scaling import scale_offset
from llmc_mcp.compute.sources import PieceContext, SourceRaster
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.raster.models import (
    ClassCount,
    GeoreferencingChoice,
    OutputGeoTiff,
    ReclassifyResult,
    ReclassRule,
    ReclassRuleCount,
)

ClassDtype = Literal["uint8", "uint16", "int16", "uint32", "int32"]
"""Integer output types, in the order the smallest fitting one is chosen. int8 is left out: GDAL
before 3.7 writes it as a flagged uint8 that other readers take as unsigned."""

AUTO_ORDER: tuple[ClassDtype, ...] = ("uint8", "uint16", "int16", "uint32", "int32")
MAX_RULES = 10_000
OUTPUT_BLOCK = 512
WINDOW_ROWS = 512
WINDOW_COLS = 2048
"""About 1 M cells a window: a few MB whatever the raster's size (as ``raster.calc``)."""


def _rules_from_mapping(value: Any) -> Any:
    """Accept ``{"3": 1, "5": 2}`` (value to class, the shape agents write) besides the list of rules.

    The published schema is the list: a map is an open JSON-schema object, which strict tool-schema
    converters refuse (DD-MCP-032). A key that is not a number is left for validation to refuse.
    """
    if isinstance(value, Mapping):
        rules = []
        for key, to in value.items():
            try:
                number = float(key)
            except (TypeError, ValueError):
                return value
            rules.append({"value": number, "to": to})
        return rules
    return value


def _as_plain(value: list[ReclassRule]) -> list[dict[str, Any]]:
    """Validated rules as plain dicts: arguments cross the worker channel as JSON."""
    return [rule.model_dump() for rule in value]


ReclassRules = Annotated[
    list[ReclassRule],
    BeforeValidator(_rules_from_mapping),
    AfterValidator(_as_plain),
    Field(
        description="Rules: [{'value': 3, 'to': 1}, {'min': 0, 'max': 10, 'to': 2}, ...]; a range is "
        "[min, max): min inclusive, max exclusive, null for an open end. Rules must not overlap. A "
        "mapping {'3': 1, '5': 2} (value to class) is accepted too."
    ),
]


@operation("raster", read_only=False, inputs=("src",), outputs=("dst",))
def reclassify(
    ctx: OperationContext,
    src: Annotated[str, Field(description="Workspace-relative input raster.")],
    dst: OutputGeoTiff,
    rules: ReclassRules,
    default: Annotated[
        int | None,
        Field(description="Class for valid cells no rule matches; null (default) makes them nodata."),
    ] = None,
    band: Annotated[int, Field(description="Source band, 1-based.")] = 1,
    physical: Annotated[
        bool,
        Field(
            description="Match rules against raw * scale + offset when the band declares a scale or offset "
            "(e.g. temperatures in kelvin); False matches the stored values."
        ),
    ] = True,
    dtype: Annotated[
        ClassDtype | None,
        Field(description="Output data type; default: the smallest holding every class and the nodata."),
    ] = None,
    nodata: Annotated[
        int | None, Field(description="Output nodata value; default: one no class uses (reported).")
    ] = None,
    georeferencing: GeoreferencingChoice = None,
) -> ReclassifyResult:
    """Reclassify one band: values or half-open ranges [min, max) become integer classes (a class raster).

    A value on a range boundary belongs to the range it starts (``max`` is exclusive): with
    [0, 10) -> 1 and [10, 20) -> 2, 10 becomes 2. Value rules match exactly (use ranges for
    scaled or float data). Rules that overlap, NaN or infinite bounds (write null for an open end),
    empty ranges, and classes the output type cannot hold are refused before anything is written.
    Valid cells no rule matches become ``default``, or nodata when ``default`` is null (never left
    with their old value: the output holds classes only). Source nodata (value, mask, alpha, NaN)
    stays nodata. With ``physical=True`` (default) and a declared scale/offset, rules see
    raw * scale + offset.

    The output is one band of the smallest integer type holding every class and the nodata (uint8,
    uint16, int16, uint32, int32), with a nodata value no class uses (255 for uint8 when free; the
    type's largest free value, or smallest for signed types), tagged LAYER_TYPE=thematic, same grid
    as the source, 512x512-tiled DEFLATE, streamed over windows and renamed onto ``dst`` when complete.
    The result counts the cells of each rule and class.

    Errors (ApiError, by e.type): invalid_argument for no rules, a malformed or overlapping rule (both
    named), NaN bounds, a class or nodata the dtype cannot hold, nodata equal to a class, a band
    outside 1..count, or dst equal to src; not_found/raster_error for an unreadable source; refused
    for one whose sidecar overrides its georeferencing (pass georeferencing: the output copies it);
    quota_exceeded past a quota.
    """
    table = _RuleTable.build(rules)
    classes = sorted({rule["to"] for rule in rules} | ({default} if default is not None else set()))
    out_dtype, out_nodata = choose_dtype(classes, dtype, nodata)
    src_path, dst_path = check_src_dst(ctx, src, dst)
    policy = georeferencing or "refuse"
    with gdal_env(ctx), open_for_read(ctx, src, "src", resolved=src_path, georeferencing=policy) as source:
        if not 1 <= band <= source.count:
            raise InvalidArgument(
                f"band {band} does not exist in '{src}', which has {source.count}.",
                fix=f"Pass a band in 1..{source.count}.",
            )
        scale, offset = scale_offset(source, band)
        applied = physical and (scale != 1.0 or offset != 0.0)
        options = creation_options(ctx, "DEFLATE", out_dtype, 1, None, None, cog=False)
        profile: dict[str, Any] = {
            "driver": "GTiff",
            "width": source.width,
            "height": source.height,
            "count": 1,
            "dtype": out_dtype.name,
            "crs": source.crs,
            "transform": source.transform,
            "nodata": out_nodata,
            "tiled": True,
            "blockxsize": OUTPUT_BLOCK,
            "blockysize": OUTPUT_BLOCK,
            **options,
        }
        raster = SourceRaster.of(ctx, source, "src", policy)
        piece = _ReclassPiece(
            raster.context, raster, table, band, (scale, offset) if applied else None, default, out_dtype,
            out_nodata, table.targets.astype(out_dtype),
        )  # fmt: skip
        plan = _ReclassPlan(piece, ctx.engine, profile)
        write_atomically(ctx, plan, source, src_path, dst_path)
    per_class = dict.fromkeys(classes, 0)
    for rule, cells in zip(rules, plan.matched.tolist(), strict=True):
        per_class[rule["to"]] += cells
    if default is not None:
        per_class[default] += plan.unmatched
    nodata_cells = plan.invalid + (plan.unmatched if default is None else 0)
    return ReclassifyResult(
        output=describe_output(ctx, dst, dst_path),
        band=band,
        physical=applied,
        scale=scale,
        offset=offset,
        dtype=out_dtype.name,
        nodata=out_nodata,
        rules=[
            ReclassRuleCount(**rule, cells=cells)
            for rule, cells in zip(rules, plan.matched.tolist(), strict=True)
        ],
        classes=[ClassCount(value=value, cells=cells) for value, cells in per_class.items()],
        unmatched_cells=plan.unmatched,
        nodata_cells=nodata_cells,
        note=_note(applied, scale, offset, default, out_nodata, plan.unmatched),
    )


@dataclass(frozen=True)
class _RuleTable:
    """The rules as disjoint half-open intervals sorted by lower end: slot ``i`` covers [lows[i],
    highs[i]) and writes targets[i]; it is rule ``order[i - 1]`` of the caller's list. Slot 0 is an
    empty sentinel (-inf, -inf) so every value has a slot. A value rule v is [v, nextafter(v, inf)):
    in float64 that holds v and nothing else, so one comparison serves both kinds of rule."""

    lows: np.ndarray
    highs: np.ndarray
    targets: np.ndarray
    order: np.ndarray

    @classmethod
    def build(cls, rules: Sequence[Mapping[str, Any]]) -> _RuleTable:
        if not rules:
            raise InvalidArgument(
                "rules is empty.",
                fix="Pass rules, e.g. [{'min': 0, 'max': 10, 'to': 1}, {'value': 255, 'to': 0}].",
            )
        if len(rules) > MAX_RULES:
            raise InvalidArgument(
                f"rules holds {len(rules):,} rules; at most {MAX_RULES:,}.", fix="Merge ranges."
            )
        lows, highs, points = [], [], []
        for i, rule in enumerate(rules):
            low, high, point = _interval(i, rule)
            lows.append(low)
            highs.append(high)
            points.append(point)
        order = sorted(range(len(rules)), key=lambda i: (lows[i], highs[i]))
        _check_overlaps(rules, order, lows, highs, points)
        ends = [math.nextafter(lows[i], math.inf) if points[i] else highs[i] for i in order]
        return cls(
            lows=np.asarray([-math.inf, *(lows[i] for i in order)], dtype=np.float64),
            highs=np.asarray([-math.inf, *ends], dtype=np.float64),
            targets=np.asarray([0, *(rules[i]["to"] for i in order)], dtype=np.int64),
            order=np.asarray(order, dtype=np.int64),
        )

    def slots(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each value's slot (the last interval starting at or below it: the only one that can hold
        it, the rules being disjoint) and whether the value is in it. NaN lands in the last slot and
        is in none."""
        slot = np.searchsorted(self.lows, values, side="right") - 1
        return slot, values < self.highs[slot]


def _interval(i: int, rule: Mapping[str, Any]) -> tuple[float, float, bool]:
    """[low, high) of one rule (a value rule is the point ``low``), or a refusal naming the rule."""
    value, low, high = rule["value"], rule["min"], rule["max"]
    shown = _show(i, rule)
    for name, bound in (("value", value), ("min", low), ("max", high)):
        if bound is not None and not math.isfinite(bound):
            raise InvalidArgument(
                f"rules: {shown} has {name}={bound}, which no cell equals or orders against.",
                fix="Use finite numbers; write null (None) for an open end of a range. NaN cells are "
                "nodata and stay nodata.",
            )
    if value is not None:
        if low is not None or high is not None:
            raise InvalidArgument(
                f"rules: {shown} gives both value and min/max.",
                fix="Give either value (one value) or min/max (a range [min, max)).",
            )
        return value, value, True
    if low is None and high is None:
        raise InvalidArgument(
            f"rules: {shown} has no value, min or max, so it would match every cell.",
            fix="Use default for every cell no rule matches, or give value or min/max.",
        )
    if low is not None and high is not None and low >= high:
        raise InvalidArgument(
            f"rules: {shown} is an empty range (min {low:g} >= max {high:g}; max is exclusive).",
            fix="Give min < max, or use value for a single value.",
        )
    return (-math.inf if low is None else low), (math.inf if high is None else high), False


def _check_overlaps(
    rules: Sequence[Mapping[str, Any]],
    order: list[int],
    lows: list[float],
    highs: list[float],
    points: list[bool],
) -> None:
    """Refuse the first pair of overlapping rules. Sorted by lower end, a rule overlaps an earlier one
    exactly when it starts before the end of the earlier rule reaching furthest (a point's end is
    closed, a range's open)."""
    reach: tuple[float, int] | None = None
    holder = -1
    for i in order:
        if reach is not None and (lows[i] < reach[0] or (lows[i] == reach[0] and reach[1] == 1)):
            raise InvalidArgument(
                f"rules: {_show(holder, rules[holder])} and {_show(i, rules[i])} overlap: a value "
                "could match both.",
                fix="Make the ranges disjoint (max is exclusive: [0, 10) and [10, 20) do not overlap).",
            )
        end = (lows[i], 1) if points[i] else (highs[i], 0)
        if reach is None or end > reach:
            reach, holder = end, i


def _show(i: int, rule: Mapping[str, Any]) -> str:
    if rule["value"] is not None:
        what = f"value {rule['value']:g}"
    else:
        low = "-inf" if rule["min"] is None else f"{rule['min']:g}"
        high = "inf" if rule["max"] is None else f"{rule['max']:g}"
        what = f"[{low}, {high})"
    return f"rule {i} ({what} -> {rule['to']})"


def choose_dtype(classes: Sequence[int], dtype: str | None, nodata: int | None) -> tuple[np.dtype, int]:
    """The output type (given, or the first of :data:`AUTO_ORDER` that holds every class and a nodata)
    and the nodata (given, or the type's largest unused value; smallest for signed types)."""
    if nodata is not None and nodata in classes:
        raise InvalidArgument(
            f"nodata={nodata} is also a class: those cells would read as nodata.",
            fix="Pass a nodata value no rule or default writes, or omit it to have one chosen.",
        )
    candidates = (dtype,) if dtype is not None else AUTO_ORDER
    for name in candidates:
        kind = np.dtype(name)
        limits = np.iinfo(kind)
        needed = [*classes, *([nodata] if nodata is not None else [])]
        if any(not limits.min <= value <= limits.max for value in needed):
            continue
        chosen = nodata if nodata is not None else _free_value(kind, set(classes))
        if chosen is not None:
            return kind, chosen
    span = f"{min(classes)}..{max(classes)}"
    if dtype is not None:
        limits = np.iinfo(np.dtype(dtype))
        raise InvalidArgument(
            f"dtype='{dtype}' ({limits.min}..{limits.max}) cannot hold the classes ({span})"
            + (f" and nodata={nodata}" if nodata is not None else " and a nodata value no class uses")
            + ".",
            fix="Omit dtype to get the smallest type that fits, or change the classes.",
        )
    raise InvalidArgument(
        f"No integer output type holds the classes ({span})"
        + (f" and nodata={nodata}" if nodata is not None else "")
        + "; the largest supported is int32 or uint32.",
        fix="Use classes within -2147483648..4294967295 (signed and unsigned cannot both exceed int32).",
    )


def _free_value(kind: np.dtype, used: set[int]) -> int | None:
    limits = np.iinfo(kind)
    start, step = (int(limits.max), -1) if kind.kind == "u" else (int(limits.min), 1)
    # At most len(used) values can be taken, so one of the first len(used) + 1 is free if any is.
    for value in range(start, start + step * (len(used) + 1), step):
        if limits.min <= value <= limits.max and value not in used:
            return value
    return None


@dataclass(frozen=True)
class _Counts:
    """What one window adds to the result's counts."""

    per_slot: np.ndarray
    """Cells matched by each slot of the rule table; slot 0, the sentinel, counts every cell no rule
    took (unmatched or nodata) and is not reported."""
    unmatched: int
    invalid: int


@dataclass(frozen=True)
class _ReclassPiece:
    """What one window computes, wherever the engine runs it: its classes and its counts, returned
    rather than added up here, so every engine folds the same windows' counts in the same order."""

    ctx: PieceContext
    source: SourceRaster
    table: _RuleTable
    band: int
    scale_offset: tuple[float, float] | None
    default: int | None
    dtype: np.dtype
    nodata: int
    targets: np.ndarray
    """The rule table's classes, cast once to the output type (every class fits it: choose_dtype)."""

    def __call__(self, window: Window) -> tuple[np.ndarray, _Counts]:
        """One window's classes (the default or nodata where no rule matched) and its counts."""
        raw, valid = read_valid(self.ctx, self.source.dataset(), self.band, window)
        values = raw.astype(np.float64, copy=False)
        if self.scale_offset is not None:
            values = values * self.scale_offset[0] + self.scale_offset[1]
        # Nodata cells are matched too (whatever they hold) and then set aside by ``valid``.
        slot, inside = self.table.slots(values)
        hit = inside & valid
        if self.default is None:
            fill: np.ndarray | int = self.nodata
        else:
            fill = np.where(valid, np.asarray(self.default, self.dtype), np.asarray(self.nodata, self.dtype))
        out = np.where(hit, self.targets[slot], fill).astype(self.dtype, copy=False)
        per_slot = np.bincount(np.where(hit, slot, 0).ravel(), minlength=len(self.table.lows))
        hits, valids = int(np.count_nonzero(hit)), int(np.count_nonzero(valid))
        return out, _Counts(per_slot, valids - hits, valid.size - valids)


@dataclass
class _ReclassPlan:
    """The write: each window matched, its counts folded in the windows' order."""

    piece: _ReclassPiece
    engine: Engine
    profile: dict[str, Any]
    per_slot: np.ndarray = field(init=False)
    unmatched: int = 0
    invalid: int = 0

    def __post_init__(self) -> None:
        self.per_slot = np.zeros(len(self.piece.table.lows), dtype=np.int64)

    @property
    def matched(self) -> np.ndarray:
        """Cells matched by each rule, in the caller's order."""
        counts = np.zeros(len(self.piece.table.order), dtype=np.int64)
        counts[self.piece.table.order] = self.per_slot[1:]
        return counts

    def write(self, source: DatasetReader, tmp: Path) -> None:
        with rasterio.open(tmp, "w", **self.profile) as out:
            out.set_band_description(1, f"classes of band {self.piece.band}")
            out.update_tags(1, LAYER_TYPE="thematic")
            windows = _windows(out.width, out.height)
            for window, (classes, counts) in self.engine.map(
                windows, self.piece, progress=False, writes=True
            ):
                self.per_slot += counts.per_slot
                self.unmatched += counts.unmatched
                self.invalid += counts.invalid
                out.write(classes, 1, window=window)


def _windows(width: int, height: int) -> Iterator[Window]:
    return grid_windows(Window(0, 0, width, height), WINDOW_ROWS, WINDOW_COLS)


def _note(
    applied: bool, scale: float, offset: float, default: int | None, nodata: int, unmatched: int
) -> str:
    if applied:
        text = f"Rules matched against raw * {scale:g} + {offset:g} (the band's declared scale and offset)."
    elif scale != 1.0 or offset != 0.0:
        text = (
            f"physical=False: rules matched the stored values although the band declares raw * {scale:g} "
            f"+ {offset:g}."
        )
    else:
        text = "Rules matched the stored values (no scale or offset declared)."
    if default is None:
        fate = f"{unmatched} valid cell(s) matched no rule and are nodata ({nodata})"
    else:
        fate = f"{unmatched} valid cell(s) matched no rule and took the default class {default}"
    return f"{text} Ranges are [min, max). {fate}; source nodata stays nodata."
