"""``hydrology.watershed``: the catchment of each pour point, on a D8 grid.

Pour points given as coordinates rarely fall on the one-cell-wide channel of a D8 grid: a gauge
placed a cell off the channel has a catchment of a few hillslope cells. Each point is therefore
snapped (``snap_distance``) to the cell of highest accumulation whose centre lies within that ground
distance (geodesic, on the CRS's ellipsoid), and the result reports how far it moved. The
accumulation is computed here from the directions (one pass once the network is built), so it cannot
disagree with them. Catchments nest: a cell belongs to the first pour point downstream of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field
from pyproj import Geod, Transformer
from rasterio.io import DatasetReader

from llmc_mcp.compute.points import cells_of, to_raster_crs
from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import InvalidArgument
from llmc_mcp.gdal.datasets import open_for_read
from llmc_mcp.gdal.environment import gdal_env
from llmc_mcp.gdal.remote_datasets import shown_dataset
from llmc_mcp.geodesy.reference import geographic_degrees, horizontal_part
from llmc_mcp.operations.catalog import OperationContext, operation
from llmc_mcp.operations.hydrology._grid import check_dst, check_grid, flow_network, write_grid
from llmc_mcp.operations.hydrology.flow_accumulation import cell_areas, ground_areas
from llmc_mcp.operations.hydrology.models import OutputGrid, PourPoint, WatershedResult

MAX_POINTS = 1000
NO_CATCHMENT = 0
WATERSHED_NODATA = -1


def _preflight(ctx: OperationContext, args: Mapping[str, Any]) -> None:
    _check_points(args["pour_points"], args["snap_distance"])
    check_dst(ctx, args["dst"], {"flow_dir": args["flow_dir"]})
    with gdal_env(ctx), open_for_read(ctx, args["flow_dir"], "flow_dir") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "flow_dir")
        _check_crs(ds, shown)
        cell_areas(ds, shown)


@operation("hydrology", read_only=False, inputs=("flow_dir",), outputs=("dst",), preflight=_preflight)
def watershed(
    ctx: OperationContext,
    flow_dir: Annotated[str, Field(description="Workspace-relative D8 grid from hydrology.flow_direction.")],
    pour_points: Annotated[
        list[tuple[float, float]],
        Field(description="Outlets as [[x, y], ...] (x = easting or longitude), at most 1000."),
    ],
    dst: OutputGrid,
    points_crs: Annotated[
        str | None,
        Field(description="CRS of the points (EPSG code, WKT, PROJ string), x first; default: the grid's."),
    ] = None,
    snap_distance: Annotated[
        float | None,
        Field(
            description="Move each point to the cell of highest accumulation within this ground distance "
            "(metres); default: no snapping, the cell the point falls in."
        ),
    ] = None,
) -> WatershedResult:
    """Catchments of pour points on a D8 grid: int32 ids (1..n, in the order given), 0 none, -1 nodata.
    Reads the whole grid into memory (routing needs it): at most what the worker's memory holds.

    Points in any CRS (points_crs) are placed on the grid's cells; with snap_distance (m) each moves
    to the cell of highest upstream cell count whose centre is within that geodesic distance (ties:
    the nearest), and ``points[].snap_distance_m`` reports how far it moved. Catchments nest: a cell
    belongs to the first pour point downstream of it, so an upstream gauge's catchment is cut out of
    the downstream one. Each point reports its outlet cell, its accumulation, its catchment's cell
    count and ground area (m², on the ellipsoid). Reads the whole grid (4096² in 2 GiB).

    Errors: InvalidArgument for no points or more than 1000, a negative snap_distance, a point off
    the grid or on nodata, two points on one outlet cell, a grid without a CRS, not D8 codes or
    drains in a loop, or too many cells; CrsError for an unknown points_crs.
    """
    given = _check_points(pour_points, snap_distance)
    dst_path = check_dst(ctx, dst, {"flow_dir": flow_dir})
    with gdal_env(ctx), open_for_read(ctx, flow_dir, "flow_dir") as ds:
        shown = shown_dataset(ctx, ds)
        check_grid(ds, shown, "flow_dir")
        _check_crs(ds, shown)
        cells = cell_areas(ds, shown)
        network = flow_network(ctx, ds, shown, "flow_dir")
        valid = network.mask.reshape(ds.height, ds.width)
        accumulation = network.upstream_area(unit="cell")
        xs, ys = to_raster_crs(ds, given, points_crs, shown)
        rows, cols, inside = cells_of(ds, xs, ys)
        snapper = _Snapper(ds, valid, accumulation)
        outlets = [
            snapper.snap(
                i, float(xs[i]), float(ys[i]), int(rows[i]), int(cols[i]), bool(inside[i]), snap_distance
            )
            for i in range(len(given))
        ]
        _check_distinct(outlets)
        idxs = np.asarray([row * ds.width + col for row, col, _ in outlets], dtype=np.intp)
        ids = np.arange(1, len(outlets) + 1, dtype=np.uint32)
        catchments = network.basins(idxs=idxs, ids=ids).astype("int32")
        catchments[~valid] = WATERSHED_NODATA
        areas = ground_areas(ds, shown, cells)
        counts = np.bincount(catchments[valid].ravel(), minlength=len(outlets) + 1)
        sums = np.bincount(
            catchments[valid].ravel(), weights=areas[valid].ravel(), minlength=len(outlets) + 1
        )
        output = write_grid(ctx, ds, dst, dst_path, catchments, WATERSHED_NODATA)
        centres_x, centres_y = ds.transform @ (
            np.asarray([c + 0.5 for _, c, _ in outlets]),
            np.asarray([r + 0.5 for r, _, _ in outlets]),
        )
    points = [
        PourPoint(
            id=i + 1,
            x=float(given[i, 0]),
            y=float(given[i, 1]),
            row=row,
            col=col,
            cell_x=float(centres_x[i]),
            cell_y=float(centres_y[i]),
            snap_distance_m=moved,
            accumulation_cells=int(accumulation[row, col]),
            cells=int(counts[i + 1]),
            area_m2=float(sums[i + 1]),
        )
        for i, (row, col, moved) in enumerate(outlets)
    ]
    how = (
        f"snapped to the highest accumulation within {snap_distance:g} m (geodesic)"
        if snap_distance
        else "not snapped: the cell each point falls in"
    )
    return WatershedResult(
        output=output,
        points=points,
        note=f"Pour points {how}; catchments nest (a cell belongs to the first pour point downstream); "
        "areas on the ellipsoid.",
    )


class _Snapper:
    """Places points on cells, moving them to the highest accumulation within a ground distance."""

    def __init__(self, ds: DatasetReader, valid: np.ndarray, accumulation: np.ndarray):
        self.ds, self.valid, self.accumulation = ds, valid, accumulation
        horizontal = horizontal_part(parse_crs(ds.crs.to_wkt()))
        ellipsoid = horizontal.ellipsoid
        self.geod = Geod(a=ellipsoid.semi_major_metre, b=ellipsoid.semi_minor_metre)
        self.to_geo = Transformer.from_crs(horizontal, geographic_degrees(horizontal), always_xy=True)

    def snap(
        self, i: int, x: float, y: float, row: int, col: int, inside: bool, distance: float | None
    ) -> tuple[int, int, float]:
        if not inside:
            raise InvalidArgument(
                f"pour_points[{i}] ({x:.10g}, {y:.10g} in the grid's CRS) is off the grid, which covers "
                f"({', '.join(f'{v:.10g}' for v in self.ds.bounds)}) (left, bottom, right, top).",
                fix="Pass points inside the DEM (and points_crs if they are in another CRS).",
            )
        window = self._window(x, y, row, col, distance or 0.0)
        r0, r1, c0, c1 = window
        rr, cc = np.mgrid[r0:r1, c0:c1]
        cx, cy = self.ds.transform @ (cc.ravel() + 0.5, rr.ravel() + 0.5)
        ground = self._distances(x, y, np.asarray(cx), np.asarray(cy))
        near = (ground <= (distance or 0.0)) | ((rr.ravel() == row) & (cc.ravel() == col))
        near &= self.valid[rr.ravel(), cc.ravel()]
        if not near.any():
            raise InvalidArgument(
                f"pour_points[{i}] ({x:.10g}, {y:.10g}) falls on nodata"
                + (f" and no valid cell is within {distance:g} m." if distance else "."),
                fix="Move the point onto the DEM's data, or pass a snap_distance that reaches the channel.",
            )
        acc = np.where(near, self.accumulation[rr.ravel(), cc.ravel()], -1)
        order = np.lexsort((ground, -acc))
        best = int(order[0])
        return int(rr.ravel()[best]), int(cc.ravel()[best]), float(ground[best])

    def _window(self, x: float, y: float, row: int, col: int, distance: float) -> tuple[int, int, int, int]:
        """Rows and columns around the point holding every cell within ``distance``, with a cell to spare."""
        t = self.ds.transform
        cx, cy = t @ (col + 0.5, row + 0.5)
        across, down = t @ (col + 1.5, row + 0.5), t @ (col + 0.5, row + 1.5)
        step_x = max(self._distances(cx, cy, np.asarray([across[0]]), np.asarray([across[1]]))[0], 1e-9)
        step_y = max(self._distances(cx, cy, np.asarray([down[0]]), np.asarray([down[1]]))[0], 1e-9)
        dc = math.ceil(distance / step_x * 1.5) + 1
        dr = math.ceil(distance / step_y * 1.5) + 1
        return (
            max(0, row - dr),
            min(self.ds.height, row + dr + 1),
            max(0, col - dc),
            min(self.ds.width, col + dc + 1),
        )

    def _distances(self, x: float, y: float, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        lon0, lat0 = self.to_geo.transform(x, y)
        lons, lats = self.to_geo.transform(xs, ys)
        lons, lats = np.asarray(lons, dtype="float64"), np.asarray(lats, dtype="float64")
        _, _, dist = self.geod.inv(np.full(lons.shape, lon0), np.full(lats.shape, lat0), lons, lats)
        return np.asarray(dist, dtype="float64")


def _check_points(points: list[tuple[float, float]], snap_distance: float | None) -> np.ndarray:
    if not points:
        raise InvalidArgument("pour_points is empty.", fix="Pass outlets as [[x, y], ...].")
    if len(points) > MAX_POINTS:
        raise InvalidArgument(
            f"pour_points holds {len(points):,} points; at most {MAX_POINTS:,}.",
            fix=f"Split them into calls of at most {MAX_POINTS:,}.",
        )
    if snap_distance is not None and not (math.isfinite(snap_distance) and snap_distance >= 0):
        raise InvalidArgument(
            f"snap_distance={snap_distance} is not a distance in metres.",
            fix="Pass a ground distance, e.g. 100 (m), or null to take the cell each point falls in.",
        )
    return np.asarray(points, dtype=np.float64).reshape(-1, 2)


def _check_crs(ds: DatasetReader, shown: str) -> None:
    if ds.crs is None:
        raise InvalidArgument(
            f"flow_dir: '{shown}' has no CRS, so points cannot be placed or distances and areas measured.",
            fix="Assign the DEM its CRS, then derive the flow directions again.",
        )


def _check_distinct(outlets: list[tuple[int, int, float]]) -> None:
    seen: dict[tuple[int, int], int] = {}
    for i, (row, col, _) in enumerate(outlets):
        if (row, col) in seen:
            raise InvalidArgument(
                f"pour_points[{seen[(row, col)]}] and pour_points[{i}] both have the outlet cell (row {row}, "
                f"column {col}), so they would share one catchment.",
                fix="Drop one of them, or reduce snap_distance.",
            )
        seen[(row, col)] = i
