"""Opening agent-named rasters: the allowed drivers, the path policy for every file GDAL uses beside
one, and where its georeferencing comes from (the file itself or a sidecar that overrides it).

:func:`open_for_read` is the one place an agent-named raster is opened. Call it inside
:func:`~llmc_mcp.gdal.environment.gdal_env`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from affine import Affine
from rasterio.crs import CRS
from rasterio.errors import NotGeoreferencedWarning, RasterioIOError
from rasterio.io import DatasetReader

from llmc_mcp.capture import note_input
from llmc_mcp.crs_text import check_file_crs
from llmc_mcp.errors import NotFound, PathRefused, RasterError, Refused
from llmc_mcp.gdal.environment import READ_DRIVERS, REGISTERED_DRIVERS, GdalContext
from llmc_mcp.gdal.messages import GDAL_ERRORS, relative_or_name, translate_gdal_error
from llmc_mcp.gdal.pointing import check_pointing_metadata
from llmc_mcp.gdal.remote_datasets import open_remote
from llmc_mcp.remote.allowlist import RemoteUrl, looks_remote

GeoreferencingSource = Literal["file", "aux.xml", "world file", "tab file", "none"]
"""Where a raster's geotransform and CRS come from as GDAL opens it."""


def open_for_read(
    ctx: GdalContext,
    name: str,
    argument: str = "path",
    *,
    resolved: Path | RemoteUrl | None = None,
    georeferencing: GeoreferencingPolicy = "refuse",
) -> DatasetReader:
    """Open a workspace raster (or an allowed URL) for reading with the allowed drivers only; errors
    name the relative file (the redacted URL).

    Call inside :func:`~llmc_mcp.gdal.environment.gdal_env` (the drivers are registered there) and
    close the dataset (``with``).
    ``resolved`` is the path :meth:`Workspace.input_path` already returned for ``name``, so a caller
    that checked it does not pay for the policy's checks (a directory listing) again.
    ``georeferencing`` says what to do when a sidecar overrides the file's own georeferencing
    (:data:`GeoreferencingPolicy`); the default refuses, so an operation that has not thought about it
    cannot follow either side silently.
    """
    if looks_remote(name):
        # A remote raster is its own bytes alone (no sidecar can override its georeferencing).
        return open_remote(ctx, name, argument)
    path = resolved or ctx.workspace.input_path(name, argument=argument)
    shown = ctx.workspace.relative(path)
    dataset = _open(ctx, path, shown, argument)
    if georeferencing == "unchecked":
        return dataset
    try:
        found = georeferencing_of(dataset, path)
        if not found.overridden or georeferencing == "sidecar":
            return dataset
        if georeferencing == "refuse":
            raise _conflict(ctx, found, shown, argument)
    except BaseException:
        dataset.close()
        raise
    driver = dataset.driver
    dataset.close()
    return _open_own(ctx, path, shown, argument, found, driver)


def _open(
    ctx: GdalContext,
    path: Path,
    shown: str,
    argument: str,
    drivers: tuple[str, ...] = READ_DRIVERS,
    options: dict[str, str] | None = None,
) -> DatasetReader:
    """``options`` are GDAL open options of this dataset alone; never config options, which rasterio
    sets for the whole process (another thread's open would see them)."""
    try:
        # rasterio.open() refuses a driver list; DatasetReader passes it to GDALOpenEx as allowed drivers.
        dataset = DatasetReader(str(path), driver=list(drivers), sharing=False, **(options or {}))
    except RasterioIOError as exc:
        text = translate_gdal_error(exc, ctx, path)
        if "No such file" in text:
            raise NotFound(
                f"{argument}: '{shown}' does not exist in the workspace.",
                fix="Check the name; files.list() (classic: files_list) shows what the workspace holds.",
            ) from None
        if "not recognized as being in a supported file format" in text:
            text = "not recognized as a supported raster format"
        raise RasterError(
            f"{argument}: '{shown}' is not a raster GDAL can read ({text}).",
            fix=f"Pass a raster in one of these formats: {', '.join(READ_DRIVERS)}.",
        ) from None
    except GDAL_ERRORS as exc:
        raise RasterError(
            f"{argument}: '{shown}' could not be opened ({translate_gdal_error(exc, ctx, path)}).",
            fix="Check that the file is a complete raster; re-create it if it was truncated.",
        ) from None
    try:
        check_dataset(ctx, dataset, path, argument)
    except BaseException:
        dataset.close()
        raise
    note_input(shown, path, dataset.crs.to_wkt() if dataset.crs else None)
    return dataset


GeoreferencingPolicy = Literal["refuse", "file", "sidecar", "unchecked"]
"""What :func:`open_for_read` does when a sidecar overrides the file's own georeferencing: ``refuse``
(naming both), follow the ``file`` (this dataset opened with GDAL's ``GEOREF_SOURCES=INTERNAL,PAM``:
the file's georeferencing first, the rest of the .aux.xml still read) or the ``sidecar`` (GDAL's
default); ``unchecked`` for results that do not depend on
georeferencing (statistics, listings, the header itself)."""

_GEOREF_SOURCES_DRIVERS = frozenset({"GTiff", "JP2OpenJPEG"})
"""Drivers with the ``GEOREF_SOURCES`` open option: ``INTERNAL`` alone reads the file's own
georeferencing (and no .aux.xml at all); ``INTERNAL,PAM`` prefers it and still reads the rest of the
.aux.xml (nodata, scale, metadata). Only these formats hold georeferencing a PAM file can override."""

_NO_INTERNAL_GEOREFERENCING = frozenset({"PNG", "JPEG", "GIF", "BMP"})
"""Formats that cannot hold georeferencing themselves: a sidecar is their only source. The other
readable formats (HFA, ENVI, EHdr, AAIGrid, netCDF) take theirs from their own header."""

MAX_PAM_BYTES = 1 << 20
"""An .aux.xml longer than this is not searched for georeferencing (GDAL's own are a few KiB)."""


@dataclass(frozen=True)
class Georeferencing:
    """Where a dataset's georeferencing (as GDAL opened it by default) comes from."""

    source: GeoreferencingSource
    sidecar: Path | None
    """The file the georeferencing comes from when ``source`` is a sidecar."""
    transform: Affine
    crs: CRS | None
    """What GDAL follows by default (the sidecar, when there is one that overrides)."""
    file_transform: Affine | None
    file_crs: CRS | None
    """The file's own georeferencing; None when the format or the file holds none."""
    overridden: bool
    """A sidecar gives other georeferencing than the file's own, and GDAL follows the sidecar."""


def georeferencing_of(dataset: DatasetReader, path: Path) -> Georeferencing:
    """Where ``dataset``'s georeferencing comes from, with the file's own beside it.

    GDAL takes a GeoTIFF's geotransform and CRS from its .aux.xml (PAM) before the file's own tags,
    and from a .tab or world file when the file has none (``GDAL_GEOREF_SOURCES`` defaults to
    PAM,INTERNAL,TABFILE,WORLDFILE). The file is opened again only when GDAL lists such a sidecar.
    """
    transform, crs = dataset.transform, dataset.crs
    sidecars = _georeferencing_sidecars(dataset, path)
    driver = dataset.driver
    if not sidecars or driver not in _GEOREF_SOURCES_DRIVERS | _NO_INTERNAL_GEOREFERENCING:
        source: GeoreferencingSource = "file" if _located(transform, crs) else "none"
        own = (transform, crs) if source == "file" else (None, None)
        return Georeferencing(source, None, transform, crs, *own, overridden=False)
    if driver in _GEOREF_SOURCES_DRIVERS:
        own = _georeferencing_with(path, driver, {"GEOREF_SOURCES": "INTERNAL"})
    else:
        own = (None, None)
    if own[0] is not None:
        same = _same_georeferencing(own[0], own[1], transform, crs)
        if same:
            return Georeferencing("file", None, transform, crs, *own, overridden=False)
        # Only PAM comes before the file's own tags in GDAL's order, so a disagreement is the .aux.xml.
        kind = "aux.xml" if "aux.xml" in sidecars else next(iter(sidecars))
        return Georeferencing(kind, sidecars[kind], transform, crs, *own, overridden=True)
    if not _located(transform, crs):
        return Georeferencing("none", None, transform, crs, None, None, overridden=False)
    # The file holds none, so a sidecar gave it: PAM first in GDAL's order when it has any, then the
    # .tab, then the world file.
    pam = sidecars.get("aux.xml")
    order: list[GeoreferencingSource] = ["aux.xml"] if pam is not None and _pam_georeferences(pam) else []
    order += [k for k in ("tab file", "world file", "aux.xml") if k in sidecars]
    kind = order[0]
    return Georeferencing(kind, sidecars[kind], transform, crs, None, None, overridden=False)


def _georeferencing_sidecars(dataset: DatasetReader, path: Path) -> dict[GeoreferencingSource, Path]:
    """The files GDAL lists beside ``path`` that can carry georeferencing, by kind."""
    # GDAL's world-file names for x.tif: x.tfw (first and last letter of the extension, and w), x.tifw,
    # x.wld.
    extension = path.suffix.lower().lstrip(".")
    world = {".wld", f".{extension}w"} | ({f".{extension[0]}{extension[-1]}w"} if extension else set())
    found: dict[GeoreferencingSource, Path] = {}
    for listed in map(Path, dataset.files):
        suffix = listed.suffix.lower()
        if listed == path:
            continue
        if listed.name.lower().endswith(".aux.xml"):
            found.setdefault("aux.xml", listed)
        elif suffix == ".tab":
            found.setdefault("tab file", listed)
        elif suffix in world:
            found.setdefault("world file", listed)
    return found


def _georeferencing_with(
    path: Path, driver: str, options: dict[str, str]
) -> tuple[Affine | None, CRS | None]:
    """The georeferencing ``driver`` reads from ``path`` with open ``options``; (None, None) if none.

    The caller already opened and checked the same path with every source allowed; this open reads a
    subset of the same files. Finding no georeferencing is an answer here, not a warning.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with DatasetReader(str(path), driver=[driver], sharing=False, **options) as ds:
            transform, crs = ds.transform, ds.crs
    return (transform, crs) if _located(transform, crs) else (None, None)


def _pam_georeferences(pam: Path) -> bool:
    """Whether an .aux.xml holds a geotransform or a CRS (most hold only statistics and metadata)."""
    try:
        with pam.open("rb") as handle:
            text = handle.read(MAX_PAM_BYTES)
    except OSError:
        return False
    return b"<GeoTransform" in text or b"<SRS" in text


def _located(transform: Affine, crs: CRS | None) -> bool:
    return crs is not None or not transform.is_identity


def _same_georeferencing(a: Affine, a_crs: CRS | None, b: Affine, b_crs: CRS | None) -> bool:
    tolerance = 1e-9 * max(abs(a.a), abs(a.e), abs(b.a), abs(b.e), 1e-12)
    return a.almost_equals(b, precision=tolerance) and a_crs == b_crs


def describe_georeferencing(transform: Affine | None, crs: CRS | None) -> str:
    """One phrase a person can compare: 'cell 10 m at (500000, 5030000) in EPSG:32633'."""
    if transform is None or not _located(transform, crs):
        return "no georeferencing"
    unit = _unit(crs)
    width, height = abs(transform.a), abs(transform.e)
    size = f"{width:.10g}{unit}" if width == height else f"{width:.10g} x {height:.10g}{unit}"
    text = f"cell {size} at ({transform.c:.10g}, {transform.f:.10g})"
    if transform.b or transform.d:
        text += f", rotated (b={transform.b:.6g}, d={transform.d:.6g})"
    if transform.e > 0:
        text += ", south-up"
    return f"{text} in {_crs_label(crs)}"


def _unit(crs: CRS | None) -> str:
    if crs is None:
        return ""
    if crs.is_geographic:
        return " degrees"
    unit = crs.linear_units or ""
    return {"metre": " m", "meter": " m", "foot": " ft", "us survey foot": " US survey ft"}.get(
        unit.lower(), f" {unit}" if unit and unit != "unknown" else ""
    )


def _crs_label(crs: CRS | None) -> str:
    if crs is None:
        return "no CRS"
    epsg = crs.to_epsg(confidence_threshold=100)
    if epsg:
        return f"EPSG:{epsg}"
    name = crs.to_wkt().split('"')[1] if '"' in crs.to_wkt() else "a custom CRS"
    return f"the CRS '{name}'"


def _conflict(ctx: GdalContext, found: Georeferencing, shown: str, argument: str) -> Refused:
    assert found.sidecar is not None
    sidecar = relative_or_name(ctx, found.sidecar)
    own = describe_georeferencing(found.file_transform, found.file_crs)
    other = describe_georeferencing(found.transform, found.crs)
    return Refused(
        f"{argument}: '{shown}' has two georeferencings that disagree: the file itself says {own}; its "
        f"sidecar '{sidecar}' says {other}, and GDAL (so QGIS and most tools) follows the sidecar. This "
        "result depends on where the cells are, so it is not computed on either silently.",
        fix=f"Pass georeferencing='file' to use the file's own, or georeferencing='sidecar' to use "
        f"'{sidecar}'. An operation without that argument takes a copy written by raster.convert with "
        "it; or correct or delete the sidecar. raster.info shows both.",
    )


def _open_own(
    ctx: GdalContext, path: Path, shown: str, argument: str, found: Georeferencing, driver: str
) -> DatasetReader:
    """Open ``path`` again with GDAL told to prefer the file's georeferencing, and check it did.

    Only :data:`_GEOREF_SOURCES_DRIVERS` have georeferencing of their own that PAM overrides, so only
    they get here; the rest of the .aux.xml (nodata, scale, metadata) still applies.
    """
    dataset = _open(ctx, path, shown, argument, (driver,), {"GEOREF_SOURCES": "INTERNAL,PAM"})
    assert found.file_transform is not None
    if not _same_georeferencing(dataset.transform, dataset.crs, found.file_transform, found.file_crs):
        dataset.close()
        raise RasterError(
            f"{argument}: GDAL could not be made to ignore the georeferencing of the sidecar of '{shown}'.",
            fix="Pass georeferencing='sidecar', or delete or correct the sidecar.",
        )
    return dataset


MAX_SIDECAR_DEPTH = 4
"""How deep overviews of overviews (``x.tif.ovr.ovr``...) are checked before GDAL lists them."""


def check_dataset(ctx: GdalContext, dataset: Any, path: Path, argument: str = "path") -> None:
    """Refuse a dataset that would make GDAL open anything the path policy has not allowed.

    First the metadata that names files (:data:`POINTING_DOMAINS`), in the dataset and in the overview
    and mask files GDAL will open beside it: listing the dataset's files opens those (and follows what
    they name), so this must come first. Then every file GDAL says the dataset uses (``.aux.xml``,
    ``.ovr``, ``.msk``, world files, RPC/IMD metadata files, HFA spill files...) gets the policy of a
    named input: a regular file inside the workspace, outside the server's folders.
    """
    shown = ctx.workspace.relative(path)
    # Its header or .aux.xml may name a grid by path, which PROJ would open when it is warped.
    check_file_crs(dataset.crs.to_wkt() if dataset.crs else None, argument, shown)
    check_pointing_metadata(dataset, shown, shown, argument)
    _check_side_datasets(ctx, path, shown, argument, MAX_SIDECAR_DEPTH)
    try:
        files = dataset.files
    except GDAL_ERRORS as exc:
        raise RasterError(
            f"{argument}: '{shown}': the files it uses could not be listed "
            f"({translate_gdal_error(exc, ctx, path)}).",
            fix="Pass a raster without sidecar files, or re-create the sidecars.",
        ) from None
    for listed in files:
        _check_used_file(ctx, Path(listed), path, shown, argument)


def _check_side_datasets(ctx: GdalContext, path: Path, shown: str, argument: str, depth: int) -> None:
    """Check the pointing metadata of the overview, mask and .aux files GDAL opens beside ``path``.

    These are the names GDAL's overview manager probes (``x.ovr``/``x.OVR``, ``x.msk``/``x.MSK``, and
    ``x.aux`` for ERDAS overviews); they are opened here the way GDAL would, with metadata read only.
    """
    if depth == 0:
        return
    candidates = [Path(f"{path}{suffix}") for suffix in (".ovr", ".OVR", ".msk", ".MSK", ".aux", ".AUX")]
    candidates += [path.with_suffix(".aux"), path.with_suffix(".AUX")]
    for candidate in dict.fromkeys(candidates):
        if not candidate.is_file():
            continue
        _check_used_file(ctx, candidate, path, shown, argument)
        try:
            side = DatasetReader(str(candidate), driver=list(REGISTERED_DRIVERS), sharing=False)
        except GDAL_ERRORS:
            continue  # GDAL will not open it either
        with side:
            check_pointing_metadata(side, shown, candidate.name, argument)
        _check_side_datasets(ctx, candidate, shown, argument, depth - 1)


def _check_used_file(ctx: GdalContext, listed: Path, path: Path, shown: str, argument: str) -> None:
    if listed == path:
        return
    if not ctx.workspace.allows(listed):
        inside = listed.is_relative_to(ctx.workspace.root)
        label = ctx.workspace.relative(listed) if inside else listed.name
        raise PathRefused(
            f"{argument}: '{shown}' uses a sidecar file '{label}' that is not a regular file inside the "
            "workspace (a link leading out, a server folder, a URL or a device); GDAL would read it.",
            fix="Remove or replace that sidecar, or pass a copy of the raster without it.",
        )
