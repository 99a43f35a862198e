"""The parts of a CRS and of a raster's grid that operations reason with: the horizontal component of
a compound or bound CRS, the geographic CRS in degrees from Greenwich that areas of use are given in,
and the spread of points that stands for a raster when an operation is chosen for it."""

from __future__ import annotations

from typing import Any

import numpy as np
from affine import Affine
from pyproj import CRS, Transformer
from pyproj.exceptions import ProjError
from pyproj.transformer import AreaOfInterest

RASTER_SPREAD = 21
"""Cell centres per side of the grid of points that stands for a raster (plus its four edges)."""


def raster_points(transform: Affine, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """A spread of a raster's points in its CRS: a grid of RASTER_SPREAD² cell centres and its edges."""

    def positions(size: int) -> np.ndarray:
        return np.unique(np.concatenate([[0.0, float(size)], np.linspace(0.5, size - 0.5, RASTER_SPREAD)]))

    cols, rows = np.meshgrid(positions(width), positions(height))
    xs, ys = transform @ (cols.ravel(), rows.ravel())
    return np.asarray(xs, dtype="float64"), np.asarray(ys, dtype="float64")


def geographic_degrees(crs: CRS) -> CRS:
    """src's geodetic CRS as longitude/latitude in degrees from Greenwich (what areas of use are in)."""
    geodetic = crs.geodetic_crs or crs
    json: dict[str, Any] = geodetic.to_json_dict()
    if json.get("type") == "GeographicCRS":
        # Areas of use are in longitudes from Greenwich: a datum's own prime meridian (Paris) would
        # put the area of interest 2.34 degrees off, and the choice of operation with it.
        json.get("datum", {}).pop("prime_meridian", None)
        json.pop("id", None)
        json["coordinate_system"] = {
            "subtype": "ellipsoidal",
            "axis": [
                {"name": "Longitude", "abbreviation": "lon", "direction": "east", "unit": "degree"},
                {"name": "Latitude", "abbreviation": "lat", "direction": "north", "unit": "degree"},
            ],
        }
        return CRS.from_json_dict(json)
    return CRS.from_epsg(4326)


def area_of_interest(src: CRS, xs: np.ndarray, ys: np.ndarray) -> AreaOfInterest | None:
    """The points' extent in degrees from Greenwich; None (the whole area of use) when no point converts.

    Found through src's own geographic CRS, which is a conversion (no datum shift), so nothing here
    depends on the operation being chosen.
    """
    return extent_of(*degrees_of(src, xs, ys))


def degrees_of(src: CRS, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points as longitude/latitude from Greenwich on src's own datum; those that do not convert
    are dropped."""
    try:
        to_degrees = Transformer.from_crs(src, geographic_degrees(src), always_xy=True)
        lon, lat = to_degrees.transform(xs, ys, errcheck=False)
    except ProjError:
        return np.empty(0), np.empty(0)
    lon, lat = np.asarray(lon, dtype="float64"), np.asarray(lat, dtype="float64")
    ok = np.isfinite(lon) & np.isfinite(lat)
    return np.clip(lon[ok], -180.0, 180.0), np.clip(lat[ok], -90.0, 90.0)


def extent_of(lon: np.ndarray, lat: np.ndarray) -> AreaOfInterest | None:
    """The area of interest of points in degrees; None when none of them converted."""
    if not lon.size:
        return None
    return AreaOfInterest(float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max()))


def horizontal_part(crs: CRS) -> CRS:
    """The component that carries the projection and datum: a bound CRS's source, a compound's first."""
    if crs.is_bound and crs.source_crs is not None:
        return horizontal_part(crs.source_crs)
    if crs.is_compound and crs.sub_crs_list:
        return horizontal_part(crs.sub_crs_list[0])
    return crs
