"""The provenance record of one output: built from the call's capture, written beside the output.

:func:`write_beside` runs in the write pipeline of :mod:`llmc_mcp.compute.output`, after
the temporary file has been read back and before the server commits it. It writes
``<temporary>.provenance.json``; the commit renames it onto ``<dst>.provenance.json`` with the
output (it is one of the output's sidecars, :data:`llmc_mcp.outputs.SIDECAR_SUFFIXES`), so a record
and the bytes it describes land together or not at all, a replaced output never keeps the old
output's record, and ``files.remove`` deletes both.

The record follows the open provenance manifest format (:mod:`.conformance`): the operation and the
parameters it ran with, every file it read with its SHA-256 and CRS, the output's digest, the
engine (llmc-mcp, with GDAL, PROJ, rasterio and each library loaded for the work), the checks that
ran on the result, and the reasons for the decisions the gate required: the CRS decision in
``crs_decisions`` with the coordinate operation the warp applied (noted by the operation as it ran:
pipeline, accuracy, ballpark or not, and the share of the data's points outside its area of use),
every justification (any domain) in ``x-llmc:justifications``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pyproj
import rasterio
from rasterio.io import DatasetReader

from llmc_mcp import __version__
from llmc_mcp.capture import InputSeen, Invocation, sha256_of, utc_now
from llmc_mcp.crs_text import identify, parse_crs
from llmc_mcp.errors import LlmcError
from llmc_mcp.provenance.conformance import PRODUCER_PREFIX, SPEC_VERSION, problems

RECORD_SUFFIX = ".provenance.json"

_LIBRARIES = {
    "numpy": "numpy",
    "numexpr": "numexpr",
    "exactextract": "exactextract",
    "pyogrio": "pyogrio",
    "shapely": "shapely",
    "pyflwdir": "pyflwdir",
    "xrspatial": "xarray-spatial",
    "numba": "numba",
    "distributed": "distributed",
    "PIL": "pillow",
}
"""Modules whose presence in the worker means an operation used them: each is imported lazily by the
operations that need it (import name -> distribution name)."""


@dataclass(frozen=True)
class Written:
    """What the record says of the output, taken from the read-back's open of it (not a new one)."""

    crs_wkt: str | None
    width: int
    height: int
    count: int

    @classmethod
    def of(cls, ds: DatasetReader) -> Written:
        return cls(ds.crs.to_wkt() if ds.crs else None, ds.width, ds.height, ds.count)


def write_beside(tmp: Path, dst: str, invocation: Invocation, written: Written) -> dict[str, Any]:
    """Write the record of the checked temporary output ``tmp`` (to become ``dst``); return it.

    Raises ``ValueError`` if the record would not conform: a record that fails the format is a bug
    here, and the write fails rather than leaving an audit trail nobody can read.
    """
    crs = _label(written.crs_wkt) if written.crs_wkt else None
    shape, count = (written.height, written.width), written.count
    inputs = [_input(seen) for seen in invocation.inputs.values()]
    record: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "operation": invocation.operation,
        "parameters": invocation.parameters,
        "inputs": inputs,
        "output": {"path": dst, "sha256": sha256_of(tmp), "crs": crs},
        "engine": _engine(invocation.compute_engine),
        "producer": {"name": "llmc-mcp", "version": __version__},
        "verification": _checks(crs, shape, count, invocation.parameters),
        "environment": _environment(),
        "started_at": invocation.started_at,
        "finished_at": utc_now(),
    }
    decisions = _crs_decisions(invocation, {item["crs"] for item in inputs if item["crs"]}, crs)
    if decisions is not None:
        record["crs_decisions"] = decisions
    if invocation.justifications:
        record[f"{PRODUCER_PREFIX}justifications"] = [_justification(j) for j in invocation.justifications]
    found = problems(record)
    if found:
        raise ValueError("provenance record does not conform: " + "; ".join(found))
    path = Path(f"{tmp}{RECORD_SUFFIX}")
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def failure_record(dst: str, invocation: Invocation, error: BaseException) -> dict[str, Any]:
    """The record of a run that wrote nothing: what was asked, what was read, and why it failed.

    The format keeps an audit trail of failures too; there is no output, so no ``output`` digest,
    and the failed check says what happened.
    """
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    record: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "operation": invocation.operation,
        "parameters": invocation.parameters,
        "inputs": [_input(seen) for seen in invocation.inputs.values()],
        "engine": _engine(invocation.compute_engine),
        "producer": {"name": "llmc-mcp", "version": __version__},
        "verification": [
            {
                "name": f"{PRODUCER_PREFIX}output_written",
                "passed": False,
                "detail": f"{dst} was not written: {message}"[:2000],
                "critical": True,
            }
        ],
        "environment": _environment(),
        "started_at": invocation.started_at,
        "finished_at": utc_now(),
        f"{PRODUCER_PREFIX}outcome": "failed",
    }
    if invocation.justifications:
        record[f"{PRODUCER_PREFIX}justifications"] = [_justification(j) for j in invocation.justifications]
    found = problems(record)
    if found:
        raise ValueError("provenance record does not conform: " + "; ".join(found))
    return record


def _input(seen: InputSeen) -> dict[str, Any]:
    crs = _label(seen.crs_wkt) if seen.crs_wkt else None
    if seen.remote is not None:
        return {"path": seen.path, "sha256": seen.remote.digest.hexdigest(), "crs": crs, **_remote(seen)}
    assert seen.absolute is not None
    item: dict[str, Any] = {"path": seen.path, "sha256": sha256_of(seen.absolute), "crs": crs}
    if seen.layer is not None:
        item["layer"] = seen.layer
    return item


def _remote(seen: InputSeen) -> dict[str, Any]:
    """A remote input as read: its version, and the bytes the digest covers (a remote file is never
    read whole, so the digest is of the ranges read, in the order listed)."""
    source = seen.remote
    return {
        f"{PRODUCER_PREFIX}remote": {
            "url": seen.path,
            "etag": source.file.etag,
            "last_modified": source.file.last_modified,
            "size": source.file.size,
            "bytes_read": source.bytes_read,
            "ranges": [list(r) for r in source.ranges],
            "ranges_complete": source.ranges_complete,
            "sha256_of": "the bytes read, ranges in the order listed",
        }
    }


def _label(wkt: str) -> str:
    """``EPSG:32618`` when PROJ identifies the CRS with certainty, else its name: a label, not an identity.

    Strict identification, cached and time-bounded, as ``raster.info`` reports it.
    """
    parsed = parse_crs(wkt)
    _, authority = identify(parsed)
    return authority or parsed.name


def _engine(compute: str) -> dict[str, Any]:
    libraries = {
        "GDAL": rasterio.__gdal_version__,
        "PROJ": pyproj.proj_version_str,
        "rasterio": rasterio.__version__,
        "pyproj": pyproj.__version__,
    }
    for module, distribution in _LIBRARIES.items():
        if module in sys.modules:
            try:
                libraries[distribution] = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
    return {
        "name": "llmc-mcp",
        "version": __version__,
        f"{PRODUCER_PREFIX}compute_engine": compute,
        f"{PRODUCER_PREFIX}libraries": libraries,
    }


def _environment() -> dict[str, str]:
    """The configuration that can change a number and is in no argument (section 3.8 of the format)."""
    return {
        "PROJ_NETWORK": "ON" if pyproj.network.is_network_enabled() else "OFF",
        "PROJ_DATA": str(pyproj.datadir.get_data_dir()),
    }


def _checks(crs: str | None, shape: tuple[int, int], count: int, parameters: Mapping[str, Any]) -> list[dict]:
    checks: list[dict[str, Any]] = [
        {
            "name": "crs_present",
            "passed": crs is not None,
            "detail": f"the output declares {crs}" if crs else "the output declares no CRS",
        },
        {
            "name": f"{PRODUCER_PREFIX}blocks_readable",
            "passed": True,
            "detail": f"every block of the {shape[1]} x {shape[0]} x {count} output was read back with no "
            "GDAL error or warning before it was committed",
            "critical": True,
        },
    ]
    wanted = parameters.get("dst_crs")
    if isinstance(wanted, str):
        expected = _label(parse_crs(wanted).to_wkt()) if _parses(wanted) else wanted
        checks.append(
            {
                "name": "crs_matches",
                "passed": crs == expected,
                "detail": f"expected {expected}, got {crs}",
                "argument": "dst_crs",
            }
        )
    return checks


def _parses(text: str) -> bool:
    try:
        parse_crs(text)
    except LlmcError:
        return False
    return True


def _crs_decisions(
    invocation: Invocation, sources: set[str], output_crs: str | None
) -> dict[str, Any] | None:
    """The CRS decision and its reason; None when nothing about the CRS was decided or can be said."""
    source = next(iter(sources)) if len(sources) == 1 else None
    for item in invocation.justifications:
        if item.get("domain") != "crs_datum":
            continue
        justification = item["justification"]
        target = str(item.get("prompt_args", {}).get("dst_crs") or output_crs)
        decision: dict[str, Any] = {
            "analysis_crs": target,
            "reason": _reason(justification),
            "source_crs": source,
            "target_crs": target,
        }
        if source is not None and invocation.transformation is not None:
            decision["transformation"] = _transformation(invocation.transformation)
        return decision
    if output_crs is not None and sources == {output_crs}:
        return {
            "analysis_crs": output_crs,
            "reason": "computed in the CRS of its inputs; nothing was reprojected, so no CRS was chosen",
            "source_crs": output_crs,
        }
    return None


def _reason(justification: Mapping[str, Any]) -> str:
    choice = justification["choice"]
    rejected = "; ".join(f"{a['method']}: {a['why_not']}" for a in justification.get("alternatives", []))
    text = f"{choice['rationale']} Intent: {justification['intent']}"
    return f"{text} Rejected: {rejected}" if rejected else text


def _transformation(applied: Mapping[str, Any]) -> dict[str, Any]:
    """The coordinate operation the warp applied, as the operation noted it
    (:meth:`~llmc_mcp.geodesy.routes.ChosenOperation.provenance`); the format has fields for
    the pipeline, accuracy and ballpark flag, the rest is ours."""
    return {
        "pipeline": applied["pipeline"],
        "accuracy_m": applied["accuracy_m"],
        "is_ballpark": applied["is_ballpark"],
        f"{PRODUCER_PREFIX}operation": applied["operation"],
        f"{PRODUCER_PREFIX}route": applied["route"],
        f"{PRODUCER_PREFIX}outside_area_of_use": {
            "points_checked": applied["points_checked"],
            "share": applied["share_outside_area_of_use"],
        },
    }


def _justification(item: Mapping[str, Any]) -> dict[str, Any]:
    justification = item["justification"]
    return {
        "key": item.get("key"),
        "domain": item.get("domain"),
        "decision": item.get("prompt_args", {}),
        "intent": justification["intent"],
        "alternatives": justification.get("alternatives", []),
        "choice": justification["choice"]["method"],
        "rationale": justification["choice"]["rationale"],
        "tradeoffs": justification["choice"]["tradeoffs"],
        "confidence": justification["confidence"],
        "justified_at": item.get("created_at"),
        "answered_by": item.get("answered_by") or "agent",
        "review": item.get("review"),
    }
