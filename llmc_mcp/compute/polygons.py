"""Polygon zones and masks from a workspace vector file, read under the same rules as rasters.

pyogrio ships its own GDAL (``pyogrio.libs/libgdal-*.so``), a second library beside rasterio's that
:mod:`llmc_mcp.gdal` does not reach. So the first read in a process hardens that
library the same way (DD-MCP-038): every driver but :data:`VECTOR_DRIVERS` is deregistered, and the
network options (dead proxy, no PROJ network, no /vsicurl/) are set as GDAL config options. Paths
go through the workspace policy (no URL, no /vsi prefix, no ':'), only three formats are accepted by
extension, and every file beside the input that GDAL may open (a shapefile's ``.shx/.dbf/.prj/.cpg``,
a GeoPackage's ``-wal/-shm``) must be a regular file inside the workspace.

Geometries are checked before anyone uses them: only (Multi)Polygons (a line or point has no area),
at most :data:`MAX_FEATURES` features and :data:`MAX_VERTICES` vertices, invalid rings repaired with
``shapely.make_valid`` and counted, empty geometries refused. Zones in another CRS are transformed
to the target CRS with pyproj (x first), with the operation PROJ chose named as ``crs.transform``
names it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from pyproj import CRS
from pyproj.exceptions import ProjError

from llmc_mcp.capture import note_input
from llmc_mcp.crs_text import check_file_crs
from llmc_mcp.errors import CrsError, InvalidArgument, NotFound, PathRefused, Refused
from llmc_mcp.gdal.environment import HARDENED_CONFIG, deregister_in
from llmc_mcp.gdal.messages import translate_gdal_error
from llmc_mcp.geodesy.description import TransformOperation
from llmc_mcp.geodesy.routes import choose_operation

if TYPE_CHECKING:
    import rasterio.crs
    import shapely

    from llmc_mcp.compute.context import ComputeContext

VECTOR_DRIVERS: frozenset[str] = frozenset({"GPKG", "GeoJSON", "ESRI Shapefile"})
"""The only drivers left registered in pyogrio's GDAL. None of them opens a file a dataset names:
no OGR VRT (it names any file), no network driver (WFS, OAPIF, ...), no container (ZIP is reached
only through /vsizip/, which the path policy refuses)."""

EXTENSIONS: dict[str, str] = {
    ".gpkg": "GPKG",
    ".geojson": "GeoJSON",
    ".json": "GeoJSON",
    ".shp": "ESRI Shapefile",
}
"""Accepted file extensions and the driver each must be read by (GDAL's choice is checked)."""

MAX_FEATURES = 100_000
"""Features per vector input: ten times the zonal benchmark's 10,000 parcels; more belong in a raster
of zone ids. Read with ``max_features`` one above it, so a larger file costs no more than this."""

MAX_VERTICES = 5_000_000
"""Vertices over all features (~80 MB of coordinates): a country's detailed boundaries fit; a file
built to exhaust memory does not."""

MAX_FILE_BYTES = 512 << 20
"""Bytes in the vector file itself: bounds what GDAL parses before the vertex count can be checked
(the GeoJSON driver holds a whole document in memory)."""

_POLYGONAL = ("Polygon", "MultiPolygon")


@dataclass(frozen=True)
class Polygons:
    """Polygon zones or masks, in the target CRS and in file order."""

    geometries: list[shapely.Geometry]
    """(Multi)Polygons in the target CRS, one per feature, in file order."""
    values: list[Any] | None
    """The ``field`` attribute of each feature, or None when no field was asked for."""
    layer: str
    source_crs: str
    """The file's CRS: its authority code when it has one ("EPSG:4326"), else its name."""
    transformation: str | None
    """None when the file is already in the target CRS; else the operation PROJ used, in words."""
    operation: TransformOperation | None = None
    """The same operation, structured as ``crs.transform`` reports it."""
    repaired: int = 0
    """How many invalid geometries (self-intersections, wrong ring order...) ``make_valid`` repaired."""
    files: tuple[str, ...] = ()
    """Workspace-relative names of every file the input is made of: the file named, then its sidecars."""


def read_polygons(
    ctx: ComputeContext,
    path: str,
    *,
    argument: str,
    target_crs: rasterio.crs.CRS,
    layer: str | None = None,
    field: str | None = None,
) -> Polygons:
    """Read the polygons of one layer of a workspace vector file, in ``target_crs``.

    Errors name ``argument``: PathRefused (policy, a sidecar leading out, a format not allowed),
    NotFound, InvalidArgument (no or unknown layer, unknown field, too many features or vertices),
    Refused (a layer with no features; lines or points, null, empty or collapsed geometries: no
    area), CrsError (no CRS, no transformation, a zone outside the target CRS's domain).
    """
    resolved = ctx.workspace.input_path(path, argument=argument)
    driver = _expected_driver(resolved, path, argument)
    files = _check_sidecars(ctx, resolved, path, argument)
    size = resolved.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidArgument(
            f"{argument}: '{path}' is {size / 2**20:.0f} MiB; vector inputs are limited to "
            f"{MAX_FILE_BYTES >> 20} MiB.",
            fix="Simplify or split the zones, or rasterize them and pass a raster of zone ids.",
        )
    pyogrio = hardened_pyogrio()
    with warnings.catch_warnings():
        # pyogrio turns some GDAL messages into warnings carrying absolute paths; errors say what matters.
        warnings.simplefilter("ignore", RuntimeWarning)
        chosen = _choose_layer(ctx, pyogrio, resolved, path, argument, layer)
        info = _read_info(ctx, pyogrio, resolved, path, argument, chosen)
        _check_info(info, driver, path, argument, chosen, field)
        geometries, values = _read_features(ctx, pyogrio, resolved, path, argument, chosen, field)
    if not geometries:
        raise Refused(
            f"{argument}: layer '{chosen}' of '{path}' has no features, so there is no polygon to use.",
            fix="Pass the file (or layer) that holds the polygons; if a step wrote this one, check that "
            "it selected any.",
        )
    check_file_crs(info["crs"], argument, path)  # before PROJ parses it (and opens grids it names)
    source = _source_crs(info["crs"], path, argument)
    note_input(ctx.workspace.relative(resolved), resolved, source.to_wkt(), chosen)
    geometries, repaired = _check_geometries(geometries, path, argument)
    target = CRS.from_wkt(target_crs.to_wkt())
    operation: TransformOperation | None = None
    if not source.equals(target, ignore_axis_order=True):
        geometries, operation = _transform(geometries, source, target, path, argument)
    return Polygons(
        geometries=geometries,
        values=values,
        layer=chosen,
        source_crs=_crs_label(source),
        transformation=None if operation is None else describe_operation(operation),
        operation=operation,
        repaired=repaired,
        files=tuple(ctx.workspace.relative(f) for f in files),
    )


def _check_info(
    info: dict[str, Any], driver: str, path: str, argument: str, chosen: str, field: str | None
) -> None:
    if info["driver"] != driver:
        raise PathRefused(
            f"{argument}: '{path}' has the extension of {driver} but GDAL reads it as {info['driver']}.",
            fix=f"Give the file the extension of its format ({', '.join(_allowed_extensions())}).",
        )
    if field is not None and field not in list(info["fields"]):
        shown = ", ".join(info["fields"]) or "none"
        raise InvalidArgument(
            f"{argument}: layer '{chosen}' of '{path}' has no field {field!r} (fields: {shown}).",
            fix="Pass one of the layer's fields, or leave the field out to number zones by feature.",
        )


def describe_operation(operation: TransformOperation) -> str:
    """One line for an agent: the operation, its accuracy, and a warning when it is only a ballpark."""
    accuracy = "accuracy unknown" if operation.accuracy_m is None else f"accuracy {operation.accuracy_m:g} m"
    text = f"{operation.name} ({accuracy})"
    if operation.ballpark:
        text += "; ballpark: no datum shift was available, expect errors of tens to hundreds of metres"
    return text


def _allowed_extensions() -> list[str]:
    return sorted(EXTENSIONS)


def _expected_driver(resolved: Path, path: str, argument: str) -> str:
    driver = EXTENSIONS.get(resolved.suffix.lower())
    if driver is None:
        raise PathRefused(
            f"{argument}: '{path}' is not a vector format llmc-mcp reads; accepted: GeoPackage (.gpkg), "
            "GeoJSON (.geojson, .json) and Shapefile (.shp).",
            fix="Convert the zones to GeoPackage or GeoJSON (e.g. with ogr2ogr) and pass that file.",
        )
    return driver


def _check_sidecars(ctx: ComputeContext, resolved: Path, path: str, argument: str) -> list[Path]:
    """Every file beside the input that GDAL may open with it gets the policy of a named input.

    A shapefile is the ``.shp`` and any file of the same stem (``.shx``, ``.dbf``, ``.prj``, ``.cpg``,
    ``.qix``, ``.sbn``, ``.shp.xml``...); a GeoPackage has SQLite's ``-wal``, ``-shm`` and ``-journal``.
    Matching is case-insensitive because the drivers probe both cases. The workspace already refuses a
    folder holding a link that leads out; this also refuses a sidecar that is not a regular file.
    """
    stem = resolved.name[: -len(resolved.suffix)].lower()
    shapefile = resolved.suffix.lower() == ".shp"
    prefix = stem + "." if shapefile else resolved.name.lower() + "-"
    found = [resolved]
    for entry in sorted(resolved.parent.iterdir()):
        if entry == resolved or not entry.name.lower().startswith(prefix):
            continue
        if not ctx.workspace.allows(entry):
            raise PathRefused(
                f"{argument}: '{path}' has a sidecar '{entry.name}' that is not a regular file inside the "
                "workspace (a link leading out, a folder, a device); GDAL would read it.",
                fix="Replace the sidecar with a regular file, or remove it.",
            )
        found.append(entry)
    return found


_HARDEN_LOCK = threading.Lock()


def hardened_pyogrio() -> ModuleType:
    """pyogrio, with its own GDAL reduced to :data:`VECTOR_DRIVERS` and its network switched off.

    Checked and set on every call, not once (both are cheap): a later ``GDALAllRegister`` or a reset of
    the config options in that library would otherwise go unnoticed.
    """
    with _HARDEN_LOCK:
        # A worker's GDAL_SKIP lists rasterio's GDAL's drivers; pyogrio's GDAL, reading it when first
        # imported, warns on stderr for each it does not have. Its extras are deregistered below anyway.
        if "pyogrio" not in sys.modules:
            skip = os.environ.pop("GDAL_SKIP", None)
            try:
                import pyogrio  # registers its GDAL's drivers, once
            finally:
                if skip is not None:
                    os.environ["GDAL_SKIP"] = skip
        import pyogrio

        library = _pyogrio_gdal()
        extra = sorted(set(_driver_names(library)) - VECTOR_DRIVERS)
        if extra:
            deregister_in(library, extra)
            left = sorted(set(_driver_names(library)) - VECTOR_DRIVERS)
            if left:
                raise RuntimeError(f"pyogrio's GDAL drivers could not be deregistered: {', '.join(left)}")
        # PROJ_NETWORK here reaches the PROJ inside pyogrio's GDAL, not pyproj's.
        pyogrio.set_gdal_config_options(dict(HARDENED_CONFIG))
    return pyogrio


def pyogrio_registered_drivers() -> frozenset[str]:
    """The drivers registered in the GDAL pyogrio uses, as GDAL itself lists them."""
    hardened_pyogrio()
    return frozenset(_driver_names(_pyogrio_gdal()))


def _pyogrio_gdal() -> ctypes.CDLL:
    """pyogrio's GDAL: the copy its wheel bundles under ``pyogrio.libs``.

    Found by its file name, which is its soname: ``dlopen`` with ``RTLD_NOLOAD`` then returns the copy
    already loaded without touching the file system (a worker's sandbox may forbid /proc/self/maps).
    """
    import pyogrio

    folder = Path(pyogrio.__file__).resolve().parent.parent / "pyogrio.libs"
    found = sorted(folder.glob("libgdal*.so*"))
    if len(found) != 1:
        raise RuntimeError(
            f"pyogrio's bundled GDAL was not found in {folder} (found {len(found)}); llmc-mcp hardens that "
            "copy and needs pyogrio installed from its wheel"
        )
    return ctypes.CDLL(found[0].name, mode=os.RTLD_NOLOAD)


def _driver_names(library: ctypes.CDLL) -> list[str]:
    library.GDALGetDriverCount.restype = ctypes.c_int
    library.GDALGetDriver.restype = ctypes.c_void_p
    library.GDALGetDriver.argtypes = [ctypes.c_int]
    library.GDALGetDescription.restype = ctypes.c_char_p
    library.GDALGetDescription.argtypes = [ctypes.c_void_p]
    return [
        library.GDALGetDescription(library.GDALGetDriver(i)).decode()
        for i in range(library.GDALGetDriverCount())
    ]


def _open_error(
    ctx: ComputeContext, exc: Exception, resolved: Path, path: str, argument: str
) -> InvalidArgument:
    text = translate_gdal_error(exc, ctx, resolved, shown=path)
    # GDAL suggests a '<DRIVER>:' prefix, which the path policy refuses: advice that cannot be taken.
    text = text.split("; It might help to specify the correct driver")[0].rstrip(". ")
    return InvalidArgument(
        f"{argument}: '{path}' is not a vector file GDAL can read as GeoPackage, GeoJSON or Shapefile "
        f"({text}).",
        fix="Pass a complete GeoPackage (.gpkg), GeoJSON (.geojson) or Shapefile (.shp with .shx, .dbf).",
    )


def _choose_layer(
    ctx: ComputeContext, pyogrio: ModuleType, resolved: Path, path: str, argument: str, layer: str | None
) -> str:
    try:
        layers = [str(name) for name, _ in pyogrio.list_layers(str(resolved))]
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
        raise _open_error(ctx, exc, resolved, path, argument) from None
    if not layers:
        raise InvalidArgument(f"{argument}: '{path}' has no layer.", fix="Pass a file that holds polygons.")
    if layer is None:
        if len(layers) > 1:
            raise InvalidArgument(
                f"{argument}: '{path}' has {len(layers)} layers ({_names(layers)}); say which one.",
                fix="Pass layer= with one of those names.",
            )
        return layers[0]
    if layer not in layers:
        raise NotFound(
            f"{argument}: '{path}' has no layer {layer!r} (layers: {_names(layers)}).",
            fix="Pass one of those layer names.",
        )
    return layer


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _read_info(
    ctx: ComputeContext, pyogrio: ModuleType, resolved: Path, path: str, argument: str, layer: str
) -> dict[str, Any]:
    try:
        info: dict[str, Any] = pyogrio.read_info(str(resolved), layer=layer)
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
        raise _open_error(ctx, exc, resolved, path, argument) from None
    return info


def _read_features(
    ctx: ComputeContext,
    pyogrio: ModuleType,
    resolved: Path,
    path: str,
    argument: str,
    layer: str,
    field: str | None,
) -> tuple[list[Any], list[Any] | None]:
    import shapely

    try:
        _, _, wkb, columns = pyogrio.raw.read(
            str(resolved),
            layer=layer,
            columns=[] if field is None else [field],
            force_2d=True,
            max_features=MAX_FEATURES + 1,
            datetime_as_string=True,  # zone names must be JSON: ISO 8601 text, as the file holds them
        )
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError, pyogrio.errors.FieldError) as exc:
        raise _open_error(ctx, exc, resolved, path, argument) from None
    if len(wkb) > MAX_FEATURES:
        raise InvalidArgument(
            f"{argument}: '{path}' layer '{layer}' has more than {MAX_FEATURES:,} features.",
            fix=f"Split the zones into files of at most {MAX_FEATURES:,} features, or rasterize them and "
            "pass a raster of zone ids.",
        )
    parsed = shapely.from_wkb(wkb, on_invalid="ignore")
    broken = np.flatnonzero(shapely.is_missing(parsed) & np.array([g is not None for g in wkb], dtype=bool))
    if broken.size:
        raise InvalidArgument(
            f"{argument}: '{path}' feature {_indices(broken)} has a geometry GEOS cannot read (a ring of "
            "fewer than 4 points, an unclosed ring...).",
            fix="Fix or remove that feature (e.g. ogr2ogr -makevalid), then pass the file again.",
        )
    geometries = list(parsed)
    values = None if field is None else [_plain(v) for v in columns[0]]
    return geometries, values


def _plain(value: Any) -> Any:
    """A JSON-friendly Python value for a field read by pyogrio (numpy scalars, bytes, NaN)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.hex()
    return value


def _check_geometries(geometries: list[Any], path: str, argument: str) -> tuple[list[Any], int]:
    """Polygons only, none empty, vertices bounded; invalid ones repaired (and counted).

    Repair, not refusal (DD-MCP-038): self-touching rings and wrong winding are common in real parcel
    files and GEOS's 'structure' repair keeps exactly the area the rings enclose. Empty or missing
    geometries are refused: a zone with no area is a mistake in the file, and dropping it would
    renumber the zones after it.
    """
    import shapely

    array = np.asarray(geometries, dtype=object)
    missing = np.flatnonzero(shapely.is_missing(array) | shapely.is_empty(array))
    if missing.size:
        raise Refused(
            f"{argument}: '{path}' feature {_indices(missing)} has no geometry (null or empty).",
            fix="Remove the features without geometry, or give them their polygon.",
        )
    types = shapely.get_type_id(array)
    wrong = np.flatnonzero(~np.isin(types, (3, 6)))
    if wrong.size:
        found = sorted({shapely.get_type_id(g) for g in array[wrong]})
        names = ", ".join(_TYPE_NAMES[t] for t in found)
        raise Refused(
            f"{argument}: '{path}' holds {names} geometries (feature {_indices(wrong)}); zones and masks "
            "must be Polygons or MultiPolygons: a line or a point covers no area.",
            fix="Buffer lines or points into polygons first (e.g. ogr2ogr -dialect SQLite -sql with "
            "ST_Buffer), or use raster.sample for values at points.",
        )
    vertices = int(shapely.get_num_coordinates(array).sum())
    if vertices > MAX_VERTICES:
        raise InvalidArgument(
            f"{argument}: '{path}' has {vertices:,} vertices; at most {MAX_VERTICES:,} are accepted.",
            fix="Simplify the polygons (e.g. ogr2ogr -simplify) to a tolerance below the raster's cell size.",
        )
    invalid = np.flatnonzero(~shapely.is_valid(array))
    for index in invalid:
        repaired = shapely.make_valid(array[index], method="structure", keep_collapsed=False)
        array[index] = repaired
    if invalid.size:
        collapsed = np.flatnonzero(shapely.is_empty(array[invalid]))
        if collapsed.size:
            raise Refused(
                f"{argument}: '{path}' feature {_indices(invalid[collapsed])} is an invalid polygon that "
                "encloses no area once repaired.",
                fix="Fix or remove that feature.",
            )
    return list(array), int(invalid.size)


_TYPE_NAMES = {
    0: "Point",
    1: "LineString",
    2: "LinearRing",
    3: "Polygon",
    4: "MultiPoint",
    5: "MultiLineString",
    6: "MultiPolygon",
    7: "GeometryCollection",
}


def _indices(indices: np.ndarray) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:5])
    return shown + (f" and {indices.size - 5} more" if indices.size > 5 else "")


def _source_crs(text: str | None, path: str, argument: str) -> CRS:
    if not text:
        raise CrsError(
            f"{argument}: '{path}' does not say which CRS its coordinates are in (a shapefile without "
            ".prj?).",
            fix="Add the CRS to the file (ogr2ogr -a_srs EPSG:xxxx) so the zones can be placed on the "
            "raster.",
        )
    try:
        return CRS.from_user_input(text)
    except ProjError as exc:
        raise CrsError(
            f"{argument}: '{path}' has a CRS PROJ does not understand ({str(exc)[:200]}).",
            fix="Rewrite the file with an EPSG CRS (ogr2ogr -t_srs EPSG:xxxx).",
        ) from None


def _crs_label(crs: CRS) -> str:
    authority = crs.to_authority(min_confidence=100)
    return f"{authority[0]}:{authority[1]}" if authority else crs.name


def _transform(
    geometries: list[Any], source: CRS, target: CRS, path: str, argument: str
) -> tuple[list[Any], TransformOperation]:
    """Vertices transformed with the operation crs.transform would choose for them.

    Vertices only, edges not densified: an edge is straight in the file's CRS and becomes slightly
    curved in another, which is negligible for parcels but not for a single polygon spanning degrees.
    """
    import shapely

    array = np.asarray(geometries, dtype=object)
    coords = shapely.get_coordinates(array)
    try:
        chosen = choose_operation(source, target, coords[:, 0], coords[:, 1])
    except CrsError as exc:
        raise CrsError(
            f"{argument}: the CRS of '{path}' cannot be transformed to the raster's: {exc.message}",
            fix="Reproject the zones to the raster's CRS first.",
        ) from None
    x, y = chosen.transformer.transform(coords[:, 0], coords[:, 1], errcheck=False)
    moved = np.column_stack([x, y])
    bad = ~np.isfinite(moved).all(axis=1)
    if bad.any():
        raise CrsError(
            f"{argument}: {int(bad.sum()):,} vertices of '{path}' cannot be transformed to the raster's CRS "
            "(outside its projection's domain).",
            fix="Clip the zones to the raster's area first, or reproject the raster to the zones' CRS.",
        )
    out = shapely.set_coordinates(array.copy(), moved)
    return list(out), chosen.operation
