"""Writing one GeoTIFF from one workspace raster, shared by ``raster.reproject`` and ``raster.convert``.

Both operations follow the same pipeline, defined once here:

1. the paths: ``dst`` is a .tif/.tiff and is not the source;
2. a *plan*: the operation's function ``plan(ctx, source, **options)`` makes every check and choice
   on the source header, without reading pixels, and returns a :class:`Plan`; run alone, it is the
   operation's preflight (:func:`preflight_output`), so anything the write would refuse is refused
   before the gate asks for a justification;
3. :func:`write_output`: ``plan.write`` into a hidden temporary file beside ``dst``, renamed onto
   it (with its sidecars) only once complete, so a failure never leaves a partial raster under the
   destination name; GDAL errors become one :class:`RasterError` naming both files.

The creation options both operations share (compression, predictor, quality, BigTIFF, threads)
and their checks are :func:`creation_options`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from rasterio.io import DatasetReader

from llmc_mcp.errors import InvalidArgument, RasterError
from llmc_mcp.operations.catalog import OperationContext
from llmc_mcp.operations.gdal_env import GDAL_ERRORS, gdal_env, open_for_read, translate_gdal_error
from llmc_mcp.operations.models import RasterInfo
from llmc_mcp.operations.raster.info import describe

GEOTIFF_SUFFIXES = (".tif", ".tiff")

_PREDICTABLE = frozenset({"DEFLATE", "LZW", "ZSTD"})
_COG_PREDICTOR = {2: "STANDARD", 3: "FLOATING_POINT"}


class Plan(Protocol):
    """Every choice of one write, made on the source header; :meth:`write` carries it out."""

    def write(self, source: DatasetReader, tmp: Path) -> None: ...


PlanFunction = Callable[..., Plan]
"""``plan(ctx, source, **options) -> Plan``; raises InvalidArgument/RasterError/CrsError to refuse."""


def preflight_output(ctx: OperationContext, args: Mapping[str, Any], plan: PlanFunction) -> None:
    """Refuse a write that cannot run, before the gate asks for its justification.

    ``args`` are the operation's validated arguments: ``src``, ``dst`` and the plan's options.
    """
    src_path, _ = _check_src_dst(ctx, args["src"], args["dst"])
    options = {name: value for name, value in args.items() if name not in ("src", "dst")}
    with gdal_env(ctx), open_for_read(ctx, args["src"], "src", resolved=src_path) as source:
        plan(ctx, source, **options)


def write_output(ctx: OperationContext, src: str, dst: str, plan: PlanFunction, **options: Any) -> RasterInfo:
    """Plan, then write ``dst`` from ``src`` atomically; the result is ``raster.info`` of ``dst``."""
    src_path, dst_path = _check_src_dst(ctx, src, dst)
    with gdal_env(ctx), open_for_read(ctx, src, "src", resolved=src_path) as source:
        planned = plan(ctx, source, **options)
        with _atomic_output(dst_path) as tmp:
            try:
                planned.write(source, tmp)
            except GDAL_ERRORS as exc:
                raise _write_error(ctx, exc, src_path, dst_path, tmp) from None
    return _describe_output(ctx, dst, dst_path)


def _check_src_dst(ctx: OperationContext, src: str, dst: str) -> tuple[Path, Path]:
    """Both paths, refused when dst is not a GeoTIFF name or is src itself (the write would destroy it)."""
    src_path = ctx.workspace.input_path(src, argument="src")
    dst_path = ctx.workspace.output_path(dst, argument="dst")
    if dst_path.suffix.lower() not in GEOTIFF_SUFFIXES:
        raise InvalidArgument(
            f"dst: '{dst}' does not end in .tif or .tiff, but the output is a GeoTIFF.",
            fix="Name the output with a .tif extension.",
        )
    if src_path == dst_path or (dst_path.exists() and os.path.samefile(src_path, dst_path)):
        raise InvalidArgument(
            f"dst is the same file as src ('{src}').", fix="Write to a new name, e.g. 'out/result.tif'."
        )
    return src_path, dst_path


def single_dtype(ds: DatasetReader, shown: str) -> np.dtype:
    """The one data type of all bands: a GeoTIFF cannot mix them, so a mixed source is refused up front."""
    if len(set(ds.dtypes)) != 1:
        raise RasterError(
            f"'{shown}' mixes band data types {sorted(set(ds.dtypes))}; GeoTIFF output needs one.",
            fix="Process the bands separately.",
        )
    return np.dtype(ds.dtypes[0])


def creation_options(
    ctx: OperationContext,
    compress: str,
    dtype: np.dtype,
    count: int,
    predictor: int | None,
    quality: int | None,
    *,
    cog: bool,
) -> dict[str, str]:
    """GeoTIFF/COG creation options: checked compression settings, BigTIFF when needed, GDAL threads."""
    options = _compression_options(compress, dtype, count, predictor, quality, cog=cog)
    options.update({"BIGTIFF": "IF_SAFER", "NUM_THREADS": str(ctx.num_threads)})
    return options


def _compression_options(
    compress: str, dtype: np.dtype, count: int, predictor: int | None, quality: int | None, *, cog: bool
) -> dict[str, str]:
    if compress in ("JPEG", "WEBP") and dtype != np.uint8:
        raise InvalidArgument(
            f"compress='{compress}' needs 8-bit (uint8) data; this raster is {dtype.name}.",
            fix="Use a lossless compression such as DEFLATE or ZSTD, or LERC for lossy float/16-bit data.",
        )
    if compress == "WEBP" and count not in (3, 4):
        raise InvalidArgument(
            f"compress='WEBP' needs 3 (RGB) or 4 (RGBA) bands; this raster has {count}.",
            fix="Use JPEG for 1-band 8-bit data, or a lossless compression.",
        )
    if quality is not None:
        if compress not in ("JPEG", "WEBP"):
            raise InvalidArgument(
                f"quality only applies to JPEG and WEBP, not compress='{compress}'.",
                fix="Drop quality, or use compress='JPEG'/'WEBP'.",
            )
        if not 1 <= quality <= 100:
            raise InvalidArgument(f"quality={quality} is outside 1..100.", fix="Pass e.g. 75 (JPEG default).")
    is_float = dtype.kind == "f"
    if predictor is None:
        predictor = (3 if is_float else 2) if compress in _PREDICTABLE and dtype.kind in "iuf" else 1
    elif predictor != 1:
        if compress not in _PREDICTABLE:
            raise InvalidArgument(
                f"predictor={predictor} only applies to DEFLATE, LZW and ZSTD, not '{compress}'.",
                fix="Drop predictor (null picks the right one).",
            )
        if predictor == 2 and dtype.kind not in "iu":
            raise InvalidArgument(
                f"predictor=2 (horizontal differencing) is for integer data; this raster is {dtype.name}.",
                fix="Use predictor=3 for floating-point data, or null to choose automatically.",
            )
        if predictor == 3 and not is_float:
            raise InvalidArgument(
                f"predictor=3 (floating point) is for float data; this raster is {dtype.name}.",
                fix="Use predictor=2 for integer data, or null to choose automatically.",
            )
    options = {"COMPRESS": compress}
    if predictor != 1:
        options["PREDICTOR"] = _COG_PREDICTOR[predictor] if cog else str(predictor)
    if quality is not None:
        options["QUALITY" if cog else ("JPEG_QUALITY" if compress == "JPEG" else "WEBP_LEVEL")] = str(quality)
    if compress == "JPEG" and count == 3 and not cog:
        # YCbCr JPEG is several times smaller than RGB JPEG at the same quality (COG does it itself).
        options["PHOTOMETRIC"] = "YCBCR"
    return options


@contextmanager
def _atomic_output(dst_path: Path) -> Iterator[Path]:
    """A temporary path beside ``dst_path``, renamed onto it (with its sidecars) only on success."""
    tmp = dst_path.with_name(f".{dst_path.name}.partial-{secrets.token_hex(6)}.tif")
    try:
        yield tmp
        os.replace(tmp, dst_path)
    except BaseException:
        _remove_with_sidecars(tmp)
        raise
    # A sidecar of the file we replaced (stale statistics, external overviews or mask) would be read
    # as belonging to the new one; take the new file's sidecars where GDAL wrote any.
    for suffix in (".aux.xml", ".ovr", ".msk"):
        new, old = Path(f"{tmp}{suffix}"), Path(f"{dst_path}{suffix}")
        if new.exists():
            os.replace(new, old)
        else:
            old.unlink(missing_ok=True)


def _remove_with_sidecars(tmp: Path) -> None:
    for candidate in tmp.parent.iterdir():
        if candidate.name.startswith(tmp.name):
            candidate.unlink(missing_ok=True)


def _write_error(
    ctx: OperationContext, exc: Exception, src_path: Path, dst_path: Path, tmp: Path
) -> RasterError:
    dst_name = ctx.workspace.relative(dst_path)
    text = translate_gdal_error(exc, ctx, tmp, shown=dst_name)
    return RasterError(
        f"Writing '{dst_name}' from '{ctx.workspace.relative(src_path)}' failed ({text}); "
        f"nothing was written under '{dst_name}'.",
        fix="If the source pixels cannot be read, the source file is damaged; otherwise check free "
        "disk space and the options.",
    )


def _describe_output(ctx: OperationContext, name: str, path: Path) -> RasterInfo:
    with gdal_env(ctx), open_for_read(ctx, name, "dst", resolved=path) as ds:
        return describe(ctx, ds, include_wkt=False)
