from typing import TypedDict
class TransformOperation(TypedDict):
    name: str  # PROJ's description of the operation
    accuracy_m: float | None  # Accuracy in metres as the EPSG database states it (0 for a pure conversion)
    ballpark: bool
    missing_grids: list[str]
class TransformResult(TypedDict):
    points: list[tuple[float, float] | None]  # (x, y) in dst_crs
    failed: int
    operation: TransformOperation
    covers_points: bool  # True when the operation's area of use contains every point
    better_unavailable: list[TransformOperation]  # More accurate operations for these points (or some of them) that PROJ knows but cannot run here because a grid is missing
    note: str
def transform(
    points: list[tuple[float, float]],  # Points as (x, y) pairs, x first whatever the CRS's official axis order: (longitude, latitude) for a geographic CRS, (easting, northing) for a projected one; 1 to 100,000 finite numbers.
    src_crs: str,  # CRS the points are in: 'EPSG:4326', another authority code, WKT, PROJ or PROJJSON.
    dst_crs: str,  # CRS to transform the points into (same forms as src_crs).
) -> TransformResult:
    """Transform points between CRSs, x first, and say which operation PROJ used and how accurate it is.
    Errors: InvalidArgument for no points, more than 100,000, or a coordinate that is not a finite number; CrsError when a CRS is not understood, is not horizontal (geocentric, vertical), or no operation between the two exists.
    """
    ...
