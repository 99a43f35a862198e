"""Which coordinate operation takes data from one CRS to another: one choice for points, rasters and boxes.

``crs.transform``, ``raster.reproject``, ``raster.align`` and ``raster.clip``'s ``bounds_crs`` all
call :func:`choose_operation` with the data's points (for a raster, :func:`raster_points`), so the
same data gets the same operation everywhere and the provenance record can name it.

The rule (DD-MCP-070): PROJ's candidates (``TransformerGroup``) whose area of use holds every point,
most accurate first, a ballpark (datums taken as equal, tens to hundreds of metres off) never while
anything else exists. When no candidate covers the points, or only ballparks do, PROJ has not looked
further, so two routes are tried: through the source's Greenwich-meridian twin (Monte Mario (Rome)
to Monte Mario is a longitude rotation, exact; PROJ's only precise operation from Monte Mario (Rome)
covers Sardinia alone) and through the source datum's geographic CRS when the source is not itself
geographic. Each leg is chosen by the same rule. A route's pipeline is its legs' steps in one
``proj=pipeline`` (PROJ refuses nested pipelines), checked against applying the legs in turn.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyproj.network
from pyproj import CRS, Transformer
from pyproj.crs import CoordinateOperation
from pyproj.database import query_crs_info
from pyproj.enums import PJType
from pyproj.exceptions import ProjError
from pyproj.transformer import AreaOfInterest, TransformerGroup

from llmc_mcp.errors import CrsError
from llmc_mcp.geodesy.description import (
    TransformOperation,
    accuracy_of,
    describe_transformer,
    is_ballpark,
    operation_name,
)
from llmc_mcp.geodesy.reference import degrees_of, extent_of

MAX_BETTER = 5
_SAME_RELATIVE, _SAME_ABSOLUTE = 1e-12, 1e-9
"""How far two ways of applying one operation may differ: float noise of the unit conversions between
legs (1e-9 degree is 0.1 mm; 1e-12 of a projected coordinate of 5,000 km is 5 µm)."""


@dataclass(frozen=True)
class ChosenOperation:
    """The operation chosen for some data, how it was found, and what it says of the data's points."""

    transformer: Transformer
    """Applies the operation, x first (always_xy)."""
    operation: TransformOperation
    pipeline: str
    """The PROJ pipeline in each CRS's own axis order: what GDAL's COORDINATE_OPERATION takes."""
    route: str | None
    """The intermediate CRS of a two-leg route ("'Monte Mario' (EPSG:4265)"); None for PROJ's own."""
    covers: bool
    outside_share: float
    """Share of the data's points outside the operation's area of use (0 when it covers them)."""
    points: int
    """How many of the data's points were checked (those that convert to degrees)."""
    better_unavailable: list[TransformOperation]
    why_ballpark: str | None
    """Why nothing better than a ballpark exists for these points; None when the operation is not one."""

    def gdal_options(self) -> dict[str, str]:
        """GDAL transformer options that make a warp apply exactly this operation."""
        return {"COORDINATE_OPERATION": self.pipeline}

    def box(self, bounds: tuple[float, float, float, float], densify_pts: int) -> tuple[float, ...]:
        """The bounding box of ``bounds`` (left, bottom, right, top) after the operation, edges densified.

        PROJ's own bounds transform for one of its operations (it handles the antimeridian); for a
        chained route, whose pipeline PROJ cannot bound (it answers infinity), the extremes of the
        densified edges; infinity too when an edge point does not transform.
        """
        if self.route is None:
            return tuple(self.transformer.transform_bounds(*bounds, densify_pts=densify_pts))
        left, bottom, right, top = bounds
        along = np.linspace(0.0, 1.0, densify_pts + 2)
        xs = np.concatenate(
            [
                left + (right - left) * along,
                np.full(along.size, right),
                right - (right - left) * along,
                np.full(along.size, left),
            ]
        )
        ys = np.concatenate(
            [
                np.full(along.size, bottom),
                bottom + (top - bottom) * along,
                np.full(along.size, top),
                top - (top - bottom) * along,
            ]
        )
        x, y = self.transformer.transform(xs, ys, errcheck=False)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            return (math.inf,) * 4
        return (float(np.min(x)), float(np.min(y)), float(np.max(x)), float(np.max(y)))

    def provenance(self) -> dict[str, Any]:
        """What the provenance record says of the operation applied: pipeline, accuracy, coverage."""
        return {
            "pipeline": self.pipeline,
            "accuracy_m": self.operation.accuracy_m,
            "is_ballpark": self.operation.ballpark,
            "operation": self.operation.name,
            "route": self.route,
            "points_checked": self.points,
            "share_outside_area_of_use": round(self.outside_share, 6),
        }


@dataclass(frozen=True)
class _Candidate:
    transformers: tuple[Transformer, ...]
    """One per leg, always_xy."""
    outside: np.ndarray
    route: str | None

    @property
    def accuracy(self) -> float | None:
        values = [accuracy_of(t.accuracy) for t in self.transformers]
        return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))

    @property
    def ballpark(self) -> bool:
        return any(is_ballpark(t) for t in self.transformers)

    def rank(self) -> tuple[float, bool, float]:
        accuracy = self.accuracy
        share = float(self.outside.mean()) if self.outside.size else 0.0
        return (share, accuracy is None, accuracy if accuracy is not None else math.inf)


def choose_operation(src: CRS, dst: CRS, xs: np.ndarray, ys: np.ndarray) -> ChosenOperation:
    """The most accurate operation from ``src`` to ``dst`` whose area of use holds the points (x first).

    Raises CrsError when PROJ knows no operation at all between the two CRSs.
    """
    if pyproj.network.is_network_enabled():
        # The project's rule (DD-MCP-018): never download grids. Workers switch it off at start.
        pyproj.network.set_network_enabled(False)
    lon, lat = degrees_of(src, xs, ys)
    aoi = extent_of(lon, lat)
    direct, unavailable = _group(src, dst, aoi)
    if not direct:
        raise CrsError(
            f"PROJ knows no usable operation from {src.name!r} to {dst.name!r} here.",
            fix="Check the two CRSs; a CRS of another body (Mars, Moon) cannot be transformed to Earth's.",
        )
    candidates = [_single(transformer, lon, lat) for transformer in direct]
    precise = [c for c in candidates if _usable(c)]
    if not any(not c.outside.any() for c in precise) or _off_greenwich(src) or _off_greenwich(dst):
        # PROJ stops looking for pivots once it has a candidate: for a datum counted from Rome or
        # Paris its one candidate may be a regional (or less accurate) operation while the route
        # through the Greenwich twin covers the data more accurately (Sardinia: 44 m direct, 4 m
        # through Monte Mario), so those routes are always weighed.
        precise += [route for route in _routes(src, dst, aoi, lon, lat) if _usable(route)]
    why = None
    if precise:
        chosen = min(precise, key=_Candidate.rank)
    else:
        chosen = candidates[0]
        why = _why_ballpark(src, dst, aoi)
    used = _describe(chosen)
    better = _better_unavailable(unavailable, used.accuracy_m, aoi) if not chosen.route else []
    share = float(chosen.outside.mean()) if chosen.outside.size else 0.0
    return ChosenOperation(
        transformer=_concatenated(chosen.transformers, xs, ys),
        operation=used,
        pipeline=_own_axis_order(_pipeline(chosen.transformers), src, dst, xs, ys),
        route=chosen.route,
        covers=not chosen.outside.any(),
        outside_share=share,
        points=int(chosen.outside.size),
        better_unavailable=better,
        why_ballpark=why,
    )


def _off_greenwich(crs: CRS) -> bool:
    """Whether ``crs`` counts longitudes from a meridian other than Greenwich's (Rome, Paris...)."""
    meridian = crs.prime_meridian
    return meridian is not None and meridian.longitude != 0


def _usable(candidate: _Candidate) -> bool:
    """Not a ballpark, and its area of use holds at least some of the points (an operation used wholly
    outside its area is no better than a ballpark, and says less about it)."""
    return not candidate.ballpark and not (candidate.outside.size and candidate.outside.all())


def _bounds(aoi: AreaOfInterest | None) -> tuple[float, float, float, float] | None:
    if aoi is None:
        return None
    return (aoi.west_lon_degree, aoi.south_lat_degree, aoi.east_lon_degree, aoi.north_lat_degree)


def _group(
    src: CRS, dst: CRS, aoi: AreaOfInterest | None
) -> tuple[list[Transformer], list[CoordinateOperation]]:
    """PROJ's candidates from src to dst, x first, and the operations that lack a grid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyproj warns about a missing grid: the result says it
        try:
            group = TransformerGroup(src, dst, always_xy=True, area_of_interest=aoi)
        except ProjError as exc:
            raise CrsError(
                f"PROJ found no operation from {src.name!r} to {dst.name!r} ({str(exc)[:200]}).",
                fix="Check that both CRSs are horizontal CRSs of the Earth (EPSG codes are safest).",
            ) from None
    return list(group.transformers), list(group.unavailable_operations)


def _single(transformer: Transformer, lon: np.ndarray, lat: np.ndarray) -> _Candidate:
    return _Candidate((transformer,), _outside(transformer.area_of_use, lon, lat), None)


def _outside(area: Any, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Which points an area of use (None: unstated, so unlimited) leaves out."""
    if area is None:
        return np.zeros(lon.shape, dtype=bool)
    inside_lat = (lat >= area.south) & (lat <= area.north)
    if area.west <= area.east:
        inside_lon = (lon >= area.west) & (lon <= area.east)
    else:  # across the antimeridian
        inside_lon = (lon >= area.west) | (lon <= area.east)
    return ~(inside_lat & inside_lon)


def _intersects(area: Any, aoi: AreaOfInterest | None) -> bool:
    """Whether an area of use (None: unlimited) holds some of the area of interest."""
    if area is None or aoi is None:
        return True
    if area.south > aoi.north_lat_degree or aoi.south_lat_degree > area.north:
        return False
    spans = [(area.west, area.east)] if area.west <= area.east else [(area.west, 180.0), (-180.0, area.east)]
    return any(west <= aoi.east_lon_degree and aoi.west_lon_degree <= east for west, east in spans)


def _routes(
    src: CRS, dst: CRS, aoi: AreaOfInterest | None, lon: np.ndarray, lat: np.ndarray
) -> list[_Candidate]:
    """Two-leg routes src -> intermediate -> dst, each leg precise (no ballpark) and chosen by coverage.

    The intermediates: the Greenwich twins of either side's geographic CRS (a datum counted from Rome
    or Paris), and either side's geographic CRS when that side is projected."""
    intermediates: list[CRS] = []
    for side in (src, dst):
        geodetic = side.geodetic_crs
        if geodetic is None:
            continue
        twin = greenwich_twin(geodetic.to_wkt(), _bounds(aoi))
        for via in (twin, None if side.is_geographic else geodetic):
            if via is not None and not any(via.equals(seen) for seen in (src, dst, *intermediates)):
                intermediates.append(via)
    routes = []
    for via in intermediates:
        legs = []
        for start, end in ((src, via), (via, dst)):
            try:
                found, _ = _group(start, end, aoi)
            except CrsError:
                break
            options = [c for c in (_single(t, lon, lat) for t in found) if not c.ballpark]
            if not options:
                break
            legs.append(min(options, key=_Candidate.rank))
        if len(legs) == 2:
            routes.append(
                _Candidate(
                    (legs[0].transformers[0], legs[1].transformers[0]),
                    legs[0].outside | legs[1].outside,
                    _label(via),
                )
            )
    return routes


def greenwich_twin(geodetic_wkt: str, near: tuple[float, float, float, float] | None = None) -> CRS | None:
    """The geographic CRS that differs from this one only by counting longitudes from Greenwich.

    EPSG pairs them by a longitude rotation (Monte Mario (Rome) and Monte Mario, NTF (Paris) and NTF):
    the twin is the Greenwich geographic CRS on the same ellipsoid, within the same area, that PROJ
    reaches by exact rotations alone. The area is the CRS's area of use, its EPSG entry's when the
    definition has none (GDAL's WKT1 of a file), else ``near`` (west, south, east, north in degrees).
    None when the prime meridian is Greenwich or no twin exists.
    """
    geodetic = CRS.from_wkt(geodetic_wkt)
    if geodetic.prime_meridian is None or geodetic.prime_meridian.longitude == 0:
        return None
    area = _area_of(geodetic) or near
    return None if area is None else _twin_within(geodetic_wkt, area)


@functools.lru_cache(maxsize=64)
def _twin_within(geodetic_wkt: str, area: tuple[float, float, float, float]) -> CRS | None:
    geodetic = CRS.from_wkt(geodetic_wkt)
    ellipsoid = geodetic.ellipsoid
    if ellipsoid is None:
        return None
    found = query_crs_info(
        auth_name="EPSG", pj_types=[PJType.GEOGRAPHIC_2D_CRS], area_of_interest=AreaOfInterest(*area)
    )
    for info in found:
        candidate = CRS.from_authority(info.auth_name, info.code)
        # Close, not equal: a GeoTIFF's key for International 1924 reads back 297.000000000005.
        same_shape = candidate.ellipsoid is not None and (
            math.isclose(candidate.ellipsoid.semi_major_metre, ellipsoid.semi_major_metre, rel_tol=1e-12)
            and math.isclose(
                candidate.ellipsoid.inverse_flattening, ellipsoid.inverse_flattening, rel_tol=1e-12
            )
        )
        if candidate.prime_meridian is None or candidate.prime_meridian.longitude != 0 or not same_shape:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            group = TransformerGroup(geodetic, candidate, always_xy=True)
        if any(_only_rotation(t) for t in group.transformers):
            return candidate
    return None


def _area_of(crs: CRS) -> tuple[float, float, float, float] | None:
    if crs.area_of_use is not None:
        return crs.area_of_use.bounds
    authority = crs.to_authority(min_confidence=90)
    if authority is None:
        return None
    area = CRS.from_authority(*authority).area_of_use
    return area.bounds if area is not None else None


def _only_rotation(transformer: Transformer) -> bool:
    methods = {step.method_name.lower() for step in transformer.operations or () if step.method_name}
    methods = {method for method in methods if not method.startswith("axis order reversal")}
    return transformer.accuracy == 0 and not is_ballpark(transformer) and methods == {"longitude rotation"}


def _label(crs: CRS) -> str:
    authority = crs.to_authority(min_confidence=100)
    return f"{crs.name!r} ({authority[0]}:{authority[1]})" if authority else repr(crs.name)


def _steps_of(definition: str) -> list[str]:
    """A PROJ definition's steps, each starting "step"; one operation is a pipeline of one step."""
    text = definition.strip()
    if not text.startswith("proj=pipeline"):
        return [f"step {text}"]
    head, *steps = text.split(" step ")
    if head.strip() != "proj=pipeline":
        # Options before the first step apply to every step: concatenating would drop them.
        raise ValueError(f"pipeline with global options: {head}")
    return [f"step {step}" for step in steps]


def _pipeline(legs: Sequence[Transformer]) -> str:
    if len(legs) == 1:
        return legs[0].definition
    return "proj=pipeline " + " ".join(step for leg in legs for step in _steps_of(leg.definition))


def _concatenated(legs: Sequence[Transformer], xs: np.ndarray, ys: np.ndarray) -> Transformer:
    """One transformer for the legs; for two, checked against applying them in turn on the points."""
    if len(legs) == 1:
        return legs[0]
    combined = Transformer.from_pipeline(_pipeline(legs))
    x, y = np.asarray(xs, dtype="float64"), np.asarray(ys, dtype="float64")
    ax, ay = combined.transform(x, y, errcheck=False)
    bx, by = x, y
    for leg in legs:
        bx, by = leg.transform(bx, by, errcheck=False)
    _check_same((ax, ay), (bx, by), "a concatenated pipeline differs from its legs applied in turn")
    return combined


def _own_axis_order(pipeline: str, src: CRS, dst: CRS, xs: np.ndarray, ys: np.ndarray) -> str:
    """The x-first pipeline for coordinates in each CRS's own axis order, as GDAL applies a pipeline.

    always_xy swaps a CRS's axes when its first axis points north or south (latitude or northing
    first); undoing that is one axis swap before, one after. Checked on the points: it must give what
    the x-first pipeline gives, swapped.
    """
    swap_in, swap_out = _north_first(src), _north_first(dst)
    if not swap_in and not swap_out:
        return pipeline
    swap = "step proj=axisswap order=2,1"
    steps = [swap] * swap_in + _steps_of(pipeline) + [swap] * swap_out
    own = "proj=pipeline " + " ".join(steps)
    x, y = np.asarray(xs, dtype="float64"), np.asarray(ys, dtype="float64")
    ax, ay = Transformer.from_pipeline(pipeline).transform(x, y, errcheck=False)
    first, second = (y, x) if swap_in else (x, y)
    bx, by = Transformer.from_pipeline(own).transform(first, second, errcheck=False)
    if swap_out:
        bx, by = by, bx
    _check_same((ax, ay), (bx, by), "an axis-order pipeline differs from its x-first one")
    return own


def _north_first(crs: CRS) -> bool:
    horizontal = crs
    while True:
        if horizontal.is_bound and horizontal.source_crs is not None:
            horizontal = horizontal.source_crs
        elif horizontal.is_compound and horizontal.sub_crs_list:
            horizontal = horizontal.sub_crs_list[0]
        else:
            break
    axes = horizontal.axis_info
    return bool(axes) and axes[0].direction.lower() in ("north", "south")


def _check_same(a: tuple[Any, Any], b: tuple[Any, Any], problem: str) -> None:
    same = all(
        np.allclose(u, v, rtol=_SAME_RELATIVE, atol=_SAME_ABSOLUTE, equal_nan=True)
        for u, v in zip(a, b, strict=True)
    )
    if not same:
        raise AssertionError(problem)


def _describe(candidate: _Candidate) -> TransformOperation:
    legs = [describe_transformer(t) for t in candidate.transformers]
    return TransformOperation(
        name=" + ".join(leg.name for leg in legs),
        accuracy_m=None if candidate.ballpark else candidate.accuracy,
        ballpark=candidate.ballpark,
        missing_grids=[],
    )


def _why_ballpark(src: CRS, dst: CRS, aoi: AreaOfInterest | None) -> str:
    where = (
        "these points"
        if aoi is None
        else f"these points (longitude {aoi.west_lon_degree:.4g} to {aoi.east_lon_degree:.4g}, "
        f"latitude {aoi.south_lat_degree:.4g} to {aoi.north_lat_degree:.4g})"
    )
    twins = [
        _label(twin)
        for twin in (
            greenwich_twin(side.geodetic_crs.to_wkt(), _bounds(aoi))
            for side in (src, dst)
            if side.geodetic_crs
        )
        if twin is not None
    ]
    tried = f", neither directly nor through {' or '.join(twins)}" if twins else ""
    return (
        f"PROJ knows no datum shift from {src.name!r} to {dst.name!r} whose area of use holds {where}{tried}"
    )


def _better_unavailable(
    unavailable: Sequence[CoordinateOperation], accuracy: float | None, aoi: AreaOfInterest | None
) -> list[TransformOperation]:
    """Operations for (some of) the points' area more accurate than ``accuracy`` that lack a grid."""
    better = []
    for op in unavailable:
        op_accuracy = accuracy_of(op.accuracy)
        if op_accuracy is None or (accuracy is not None and op_accuracy >= accuracy):
            continue
        if not _intersects(op.area_of_use, aoi):
            continue
        better.append(
            TransformOperation(
                name=operation_name(op.name),
                accuracy_m=op_accuracy,
                ballpark=bool(op.has_ballpark_transformation),
                missing_grids=[grid.short_name for grid in op.grids if not grid.available],
            )
        )
    better.sort(key=lambda op: op.accuracy_m if op.accuracy_m is not None else math.inf)
    return better[:MAX_BETTER]
