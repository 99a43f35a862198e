"""Writing one GeoTIFF from one workspace raster, shared by ``raster.reproject`` and ``raster.convert``.

Both operations follow the same pipeline, defined once here:

1. the paths: ``dst`` is a .tif/.tiff and is not the source;
2. a *plan*: the operation's function ``plan(ctx, source, **options)`` makes every check and choice
   on the source header, without reading pixels, and returns a :class:`Plan`; run alone, it is the
   operation's preflight (:func:`preflight_output`), so anything the write would refuse is refused
   before the gate asks for a justification;
3. :func:`write_output`: the server grants the write (quotas, a byte budget, the hidden temporary
   name beside ``dst``, journaled: :mod:`llmc_mcp.outputs`); ``plan.write`` writes the temporary
   file under that budget; any GDAL error *or warning* while writing or closing fails the write,
   and so does a re-read of every block that finds one missing or unreadable (a full disk can end
   a GeoTIFF short without an exception); only then the server renames it (with its sidecars)
   onto ``dst``. On any failure the temporary file goes and an existing ``dst`` stays as it was.
   GDAL errors become one :class:`RasterError` naming both files; a write stopped by its budget,
   a :class:`~llmc_mcp.outputs.QuotaExceeded` naming the limit.

The creation options both operations share (compression, predictor, quality, BigTIFF, threads)
and their checks are :func:`creation_options`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from rasterio.enums import MaskFlags
from rasterio.io import DatasetReader
from rasterio.windows import Window

from llmc_mcp import capture as provenance_capture
from llmc_mcp.compute.context import ComputeContext
from llmc_mcp.compute.description import describe
from llmc_mcp.compute.models import RasterInfo
from llmc_mcp.errors import InvalidArgument, LlmcError, RasterError
from llmc_mcp.gdal.datasets import GeoreferencingPolicy, check_dataset, open_for_read
from llmc_mcp.gdal.environment import READ_DRIVERS, gdal_env
from llmc_mcp.gdal.messages import GDAL_ERRORS, translate_gdal_error
from llmc_mcp.gdal.remote_datasets import InputLocation, input_location, same_file, shown_location
from llmc_mcp.outputs import Grant, QuotaExceeded, WriteLimit
from llmc_mcp.provenance.record import RECORD_SUFFIX, Written, failure_record, write_beside
from llmc_mcp.reflection.specs import Facts

log = logging.getLogger(__name__)

GEOTIFF_SUFFIXES = (".tif", ".tiff")

_PREDICTABLE = frozenset({"DEFLATE", "LZW", "ZSTD"})
_COG_PREDICTOR = {2: "STANDARD", 3: "FLOATING_POINT"}


class Plan(Protocol):
    """Every choice of one write, made on the source header; :meth:`write` carries it out."""

    def write(self, source: DatasetReader, tmp: Path) -> None: ...


PlanFunction = Callable[..., Plan]
"""``plan(ctx, source, **options) -> Plan``; raises InvalidArgument/RasterError/CrsError to refuse."""


def preflight_output(ctx: ComputeContext, args: Mapping[str, Any], plan: PlanFunction) -> Facts:
    """Refuse a write that cannot run, before the gate asks for its justification; the source's facts.

    ``args`` are the operation's validated arguments: ``src``, ``dst`` and the plan's options. The
    facts (:func:`data_kind` of ``src``) come from the same open of the header.
    """
    src_path, _ = check_src_dst(ctx, args["src"], args["dst"])
    options = {name: value for name, value in args.items() if name not in ("src", "dst", "georeferencing")}
    georeferencing = args.get("georeferencing") or "refuse"
    with (
        gdal_env(ctx),
        open_for_read(ctx, args["src"], "src", resolved=src_path, georeferencing=georeferencing) as source,
    ):
        plan(ctx, source, **options)
        return {"data": data_kind(source)}


def data_kind(ds: DatasetReader) -> str:
    """What a raster's values are, as far as its header can tell: categories, measurements, or unknown.

    ``categorical``: a band with a colour table or declared thematic (GDAL's ``LAYER_TYPE=thematic``,
    as Erdas/HFA and GDAL's own tools write for class rasters). ``continuous``: floating-point bands,
    or integer bands with a declared scale or offset (quantized measurements). ``integer``: integer
    bands with neither, which may be class codes or counts; a justification given for continuous
    data must not unlock them, so they are a scope of their own.
    """
    for band in ds.indexes:
        if ds.tags(band).get("LAYER_TYPE", "").lower() == "thematic":
            return "categorical"
        with contextlib.suppress(ValueError):  # no colour table
            ds.colormap(band)
            return "categorical"
    floating = all(np.dtype(dtype).kind == "f" for dtype in ds.dtypes)
    scaled = any(scale != 1.0 for scale in ds.scales) or any(offset != 0.0 for offset in ds.offsets)
    return "continuous" if floating or scaled else "integer"


def write_output(
    ctx: ComputeContext,
    src: str,
    dst: str,
    plan: PlanFunction,
    georeferencing: GeoreferencingPolicy = "refuse",
    **options: Any,
) -> RasterInfo:
    """Plan, then write ``dst`` from ``src`` atomically; the result is ``raster.info`` of ``dst``.

    ``georeferencing`` is the operation's choice when a sidecar overrides the source's own (see
    :func:`open_for_read`); the preflight reads it from the arguments of the same name.
    """
    src_path, dst_path = check_src_dst(ctx, src, dst)
    with (
        gdal_env(ctx),
        open_for_read(ctx, src, "src", resolved=src_path, georeferencing=georeferencing) as source,
    ):
        planned = plan(ctx, source, **options)
        write_atomically(ctx, planned, source, src_path, dst_path)
    return describe_output(ctx, dst, dst_path)


def write_atomically(
    ctx: ComputeContext, planned: Plan, source: DatasetReader, src_path: InputLocation, dst_path: Path
) -> None:
    """Granted, written under the budget, checked, then committed; or nothing changes under ``dst``."""
    guard = ctx.outputs
    assert guard is not None
    grant = guard.begin(ctx.workspace.relative(dst_path))
    tmp = ctx.workspace.root / grant.tmp
    limit = WriteLimit()
    try:
        try:
            with guard.limit(grant) as limit, gdal_messages() as messages:
                planned.write(source, tmp)
            messages.check()
            with gdal_messages() as messages:
                written = _read_every_block(ctx, tmp)
            messages.check()
        except (*GDAL_ERRORS, OSError, GdalComplaint) as exc:
            raise _write_error(ctx, exc, grant, limit, src_path, dst_path, tmp) from None
        invocation = provenance_capture.current()
        if invocation is not None:
            # A sidecar of the temporary file: the commit moves it onto dst with the output.
            write_beside(tmp, grant.dst, invocation, written)
        guard.commit(grant)
    except BaseException as exc:
        # The server deletes the temporary file, its sidecars and the folders this write created.
        with contextlib.suppress(Exception):
            guard.abort(grant)
        if isinstance(exc, Exception):  # a failure, not a cancellation: the audit trail keeps it
            _record_failure(ctx, dst_path, exc)
        raise


def _record_failure(ctx: ComputeContext, dst_path: Path, error: Exception) -> None:
    """Leave ``<dst>.provenance.json`` saying the run failed, where no output stands.

    An existing ``dst`` keeps its own record (it describes the bytes there). A write refused for
    space (a quota, the disk reserve) gets no record: that would spend the space the refusal keeps,
    and a quota's count of files would move with every refusal. Nor does a failed write into folders
    it created: the failure removes those, and a record would leave them. The record is a granted
    write like any output (quotas, journal), and failing to write it never hides ``error``.
    """
    invocation = provenance_capture.current()
    guard = ctx.outputs
    if invocation is None or guard is None or dst_path.exists() or isinstance(error, QuotaExceeded):
        return
    if not dst_path.parent.is_dir():
        return
    dst = ctx.workspace.relative(dst_path)
    try:
        record = failure_record(dst, invocation, error)
        grant = guard.begin(f"{dst}{RECORD_SUFFIX}")
    except Exception as exc:
        log.warning("no provenance record of the failed write of %s: %s", dst, type(exc).__name__)
        return
    try:
        (ctx.workspace.root / grant.tmp).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        guard.commit(grant)
    except Exception as exc:
        with contextlib.suppress(Exception):
            guard.abort(grant)
        log.warning("no provenance record of the failed write of %s: %s", dst, type(exc).__name__)


class GdalComplaint(Exception):
    """GDAL reported an error or a warning that did not surface as an exception."""


class _Collector(logging.Handler):
    """Keeps what rasterio relays from GDAL: CE_Warning and above (CE_Failure is relayed at INFO)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        complaint = record.levelno >= logging.WARNING or text.startswith(_GDAL_FAILURE_PREFIXES)
        if complaint and len(self.messages) < _KEPT_MESSAGES and text not in self.messages:
            self.messages.append(text)

    def check(self) -> None:
        if self.messages:
            raise GdalComplaint("; ".join(_GDAL_MESSAGE.sub(r"\1", m) for m in self.messages))


_GDAL_FAILURE_PREFIXES = ("GDAL signalled an error", "CPLE_None in")
_GDAL_MESSAGE = re.compile(r"^(?:GDAL signalled an error: err_no=\d+, msg=|CPLE_\w+ in )'?(.*?)'?$", re.S)
_KEPT_MESSAGES = 5
_capture_lock = threading.Lock()
_collectors: list[_Collector] = []
_saved_logger_state: tuple[int, bool] = (logging.NOTSET, True)


@contextmanager
def gdal_messages() -> Iterator[_Collector]:
    """Collect the errors and warnings GDAL reports meanwhile (rasterio relays them to ``logging``).

    rasterio raises only for the calls it checks; a failed block flush at close, or a warning that
    the file is incomplete, is only logged. The ``rasterio`` logger is switched to INFO (where it
    relays CE_Failure) and kept from propagating while any collection runs; concurrent collections
    in one process all see every message, so a doubt fails each of them rather than none.
    """
    global _saved_logger_state
    logger = logging.getLogger("rasterio")
    collector = _Collector()
    with _capture_lock:
        if not _collectors:
            _saved_logger_state = (logger.level, logger.propagate)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        _collectors.append(collector)
        logger.addHandler(collector)
    try:
        yield collector
    finally:
        with _capture_lock:
            logger.removeHandler(collector)
            _collectors.remove(collector)
            if not _collectors:
                logger.setLevel(_saved_logger_state[0])
                logger.propagate = _saved_logger_state[1]


VERIFY_CHUNK_BYTES = 8 * 1024 * 1024
"""Pixels read at once when re-reading a written file: whole rows of blocks, about this many bytes."""


def _read_every_block(ctx: ComputeContext, path: Path) -> Written:
    """Re-open ``path`` with the allowed drivers and decode every block of every band, mask and overview;
    what the provenance record says of the output comes from this open.

    A write that ran out of space can leave offsets pointing past the end of the file, or blocks
    never written, and still close without an exception; reading everything back is the one check
    that does not depend on GDAL having said so. Decoding overviews and masks makes GDAL look beside
    the file, so the dataset gets the same check as any input first.
    """
    with DatasetReader(str(path), driver=list(READ_DRIVERS), sharing=False) as ds:
        check_dataset(ctx, ds, path, "dst")
        _read_blocks(ds)
        levels = len(ds.overviews(1))
        written = Written.of(ds)
    for level in range(levels):
        with DatasetReader(str(path), driver=list(READ_DRIVERS), sharing=False, overview_level=level) as ds:
            _read_blocks(ds)
    return written


def _read_blocks(ds: DatasetReader) -> None:
    block_height, block_width = ds.block_shapes[0]
    per_pixel = sum(np.dtype(t).itemsize for t in ds.dtypes)
    per_dataset_mask = MaskFlags.per_dataset in ds.mask_flag_enums[0]
    row_bytes = per_pixel * ds.width * block_height
    if row_bytes <= VERIFY_CHUNK_BYTES:  # whole rows of blocks, as many as fit in a chunk
        columns, rows = ds.width, block_height * (VERIFY_CHUNK_BYTES // row_bytes)
    else:  # a row of blocks wider than a chunk: some blocks of it at a time
        columns = max(1, VERIFY_CHUNK_BYTES // (per_pixel * block_height * block_width)) * block_width
        rows = block_height
    for row in range(0, ds.height, rows):
        for col in range(0, ds.width, columns):
            window = Window(col, row, min(columns, ds.width - col), min(rows, ds.height - row))
            ds.read(window=window)
            if per_dataset_mask:
                ds.read_masks(1, window=window)


def check_src_dst(ctx: ComputeContext, src: str, dst: str) -> tuple[InputLocation, Path]:
    """Both paths, refused when dst is not a GeoTIFF name, is src itself (the write would destroy it) or
    is a file llmc-mcp did not write (an original: only the server's own outputs are replaced)."""
    src_path = input_location(ctx, src, "src")
    dst_path = geotiff_output_path(ctx, dst)
    if same_file(src_path, dst_path):
        raise InvalidArgument(
            f"dst is the same file as src ('{src}').", fix="Write to a new name, e.g. 'out/result.tif'."
        )
    if ctx.outputs is not None:  # the server decides again when it grants the write
        ctx.outputs.check_writable(ctx.workspace.relative(dst_path))
    return src_path, dst_path


def geotiff_output_path(ctx: ComputeContext, dst: str) -> Path:
    """``dst`` as a workspace output path, refused unless it names a GeoTIFF, as every raster output
    is. Public because calc, merge and hydrology, which check their several inputs against ``dst``
    their own way, take the same first step as :func:`check_src_dst`."""
    dst_path = ctx.workspace.output_path(dst, argument="dst")
    if dst_path.suffix.lower() not in GEOTIFF_SUFFIXES:
        raise InvalidArgument(
            f"dst: '{dst}' does not end in .tif or .tiff, but the output is a GeoTIFF.",
            fix="Name the output with a .tif extension.",
        )
    return dst_path


def single_dtype(ds: DatasetReader, shown: str) -> np.dtype:
    """The one data type of all bands: a GeoTIFF cannot mix them, so a mixed source is refused up front."""
    if len(set(ds.dtypes)) != 1:
        raise RasterError(
            f"'{shown}' mixes band data types {sorted(set(ds.dtypes))}; GeoTIFF output needs one.",
            fix="Process the bands separately.",
        )
    return np.dtype(ds.dtypes[0])


def creation_options(
    ctx: ComputeContext,
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


def _write_error(
    ctx: ComputeContext,
    exc: Exception,
    grant: Grant,
    limit: WriteLimit,
    src_path: InputLocation,
    dst_path: Path,
    tmp: Path,
) -> LlmcError:
    dst_name = ctx.workspace.relative(dst_path)
    if limit.reached:
        return QuotaExceeded(
            f"Writing '{dst_name}' was stopped at {grant.max_bytes:,} bytes, the most it may take: "
            f"{grant.bound}. Nothing was written under '{dst_name}'.",
            fix=grant.fix,
        )
    text = translate_gdal_error(exc, ctx, tmp, shown=dst_name)
    return RasterError(
        f"Writing '{dst_name}' from '{shown_location(ctx, src_path)}' failed ({text}); "
        f"nothing was written under '{dst_name}'.",
        fix="If the source pixels cannot be read, the source file is damaged; otherwise check free "
        "disk space and the options.",
    )


def describe_output(ctx: ComputeContext, name: str, path: Path) -> RasterInfo:
    """The result's description of the raster just written at ``path`` (``name`` as the agent gave it)."""
    with gdal_env(ctx), open_for_read(ctx, name, "dst", resolved=path) as ds:
        return describe(ctx, ds, include_wkt=False)
