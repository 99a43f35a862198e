"""Does a record conform to the provenance manifest specification v1? Every reason it does not.

Written from the specification's text (``spec/manifest-v1.md`` of the open manifest-spec, draft 3)
rather than from its schema file, so the project's tests check our records against the rules as
stated, not against a copy of one implementation. :func:`problems` returns every violation at once;
an empty list means the record conforms. Unknown fields are allowed everywhere (section 3.5): only
fields the specification defines are checked, and only for what it says of them.

One rule is ours, stricter than the format's text: a CRS decision between two datums must name the
pipeline that moved the data (``crs_decisions.transformation.pipeline``, a PROJ string), since a datum
shift is the one step of a reprojection whose choice changes positions by metres to hundreds of
metres (DD-MCP-070). Records that leave it null, omit it or hold a placeholder are flagged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from llmc_mcp.crs_text import parse_crs
from llmc_mcp.errors import LlmcError

SPEC_VERSION = "1.0.0-draft.3"
"""The version our records declare: the text this module and the writer were made from."""

CORE_CHECKS = frozenset(
    {
        "crs_present",
        "crs_matches",
        "geometry_valid",
        "feature_count_exact",
        "feature_count_bounded",
        "row_count_exact",
        "result_not_empty",
        "extent_within_expected",
        "shape_preserved",
        "values_in_expected_range",
        "input_crs_present",
        "input_not_empty",
        "inputs_share_crs",
        "inputs_may_intersect",
        "geometry_types",
    }
)
"""Section 3.6: check names with a fixed meaning; any other name carries an ``x-<producer>:`` prefix."""

PRODUCER_PREFIX = "x-llmc:"
"""Our extension prefix, for check names and for fields of our own (section 3.5)."""

_EXTENSION_CHECK = re.compile(r"x-[a-z0-9][a-z0-9_-]*:[a-z0-9][a-z0-9_]*")
_VERSION = re.compile(r"1\.\d+\.\d+(-[0-9A-Za-z.-]+)?")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
_PROJ_STRING = re.compile(r"\+?proj=\S")
_REQUIRED = ("spec_version", "operation", "parameters", "inputs", "engine", "verification")


def problems(record: object) -> list[str]:
    """Every way ``record`` (parsed JSON) fails the specification; empty when it conforms."""
    if not isinstance(record, dict):
        return ["a manifest is a JSON object"]
    found: list[str] = []
    for name in (*_REQUIRED, "started_at", "finished_at"):
        if name not in record:
            found.append(f"`{name}` is required")
    for name, check in _FIELD_CHECKS.items():
        if name in record:
            found.extend(check(record[name]))
    start, end = record.get("started_at"), record.get("finished_at")
    comparable = (
        isinstance(start, str) and isinstance(end, str) and _UTC.fullmatch(start) and _UTC.fullmatch(end)
    )
    # Fixed-width UTC text orders like the instants it names (section 3.3): compare as text.
    if comparable and _padded(end) < _padded(start):
        found.append("`finished_at` precedes `started_at`")
    return found


def _padded(stamp: str) -> str:
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}"


def _spec_version(value: Any) -> list[str]:
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        return [f"`spec_version` must be a 1.x.y version, not {value!r}"]
    return []


def _operation(value: Any) -> list[str]:
    return [] if isinstance(value, str) and value else ["`operation` must be a non-empty string"]


def _parameters(value: Any) -> list[str]:
    return [] if isinstance(value, dict) else ["`parameters` must be an object (empty when there are none)"]


def _path(value: Any, where: str) -> list[str]:
    if not isinstance(value, str) or not value:
        return [f"`{where}` must be a non-empty string"]
    if "\\" in value:
        return [f"`{where}` has a backslash: `/` is the only separator"]
    return []


def _digest(value: Any, where: str) -> list[str]:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        return [f"`{where}` must be 64 lowercase hex characters"]
    return []


def _string_or_null(item: dict[str, Any], name: str, where: str) -> list[str]:
    value = item.get(name)
    return [] if value is None or isinstance(value, str) else [f"`{where}.{name}` must be a string or null"]


def _inputs(value: Any) -> list[str]:
    if not isinstance(value, list):
        return ["`inputs` must be an array"]
    found: list[str] = []
    for n, item in enumerate(value):
        where = f"inputs[{n}]"
        if not isinstance(item, dict):
            found.append(f"`{where}` must be an object")
            continue
        found += _path(item.get("path"), f"{where}.path") + _digest(item.get("sha256"), f"{where}.sha256")
        found += _string_or_null(item, "crs", where) + _string_or_null(item, "layer", where)
    return found


def _output(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["`output` must be an object"]
    return _path(value.get("path"), "output.path") + _digest(value.get("sha256"), "output.sha256")


def _engine(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["`engine` must be an object"]
    return [
        f"`engine.{name}` must be a non-empty string"
        for name in ("name", "version")
        if not isinstance(value.get(name), str) or not value[name]
    ]


def _verification(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        return ["`verification` must be an array of at least one check"]
    found: list[str] = []
    for n, check in enumerate(value):
        where = f"verification[{n}]"
        if not isinstance(check, dict):
            found.append(f"`{where}` must be an object")
            continue
        name = check.get("name")
        if not isinstance(name, str) or not (name in CORE_CHECKS or _EXTENSION_CHECK.fullmatch(name)):
            found.append(f"`{where}.name` {name!r} is neither a core check name nor `x-<producer>:<name>`")
        if not isinstance(check.get("passed"), bool):
            found.append(f"`{where}.passed` must be a boolean")
        if not isinstance(check.get("detail"), str):
            found.append(f"`{where}.detail` must be a string")
        if "critical" in check and not isinstance(check["critical"], bool):
            found.append(f"`{where}.critical` must be a boolean")
        found += _string_or_null(check, "hint", where) + _string_or_null(check, "argument", where)
    return found


def _timestamp(name: str) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, str) or not _UTC.fullmatch(value):
            return [f"`{name}` must be RFC 3339 in UTC, ending in Z"]
        return []

    return check


def _crs_decisions(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["`crs_decisions` must be an object"]
    found = [
        f"`crs_decisions.{name}` must be a string"
        for name in ("analysis_crs", "reason")
        if name in value and not isinstance(value[name], str)
    ]
    found += _string_or_null(value, "source_crs", "crs_decisions")
    found += _string_or_null(value, "target_crs", "crs_decisions")
    shift = value.get("transformation")
    pipeline = shift.get("pipeline") if isinstance(shift, dict) else None
    if not (isinstance(pipeline, str) and _PROJ_STRING.match(pipeline)) and _datums_differ(value):
        found.append(
            "`crs_decisions.transformation.pipeline` must be the PROJ pipeline that was applied: "
            "`source_crs` and `target_crs` are on different datums"
        )
    if shift is None:
        return found
    if not isinstance(shift, dict):
        return [*found, "`crs_decisions.transformation` must be an object"]
    found += _string_or_null(shift, "pipeline", "crs_decisions.transformation")
    accuracy = shift.get("accuracy_m")
    if accuracy is not None and (isinstance(accuracy, bool) or not isinstance(accuracy, int | float)):
        found.append("`crs_decisions.transformation.accuracy_m` must be a number or null")
    if "is_ballpark" in shift and not isinstance(shift["is_ballpark"], bool):
        found.append("`crs_decisions.transformation.is_ballpark` must be a boolean")
    return found


def _datums_differ(decision: dict[str, Any]) -> bool:
    """Whether the decision's source and target CRSs are known and on different datums (a label that
    is not a CRS definition, such as a bare name PROJ does not know, says nothing either way)."""
    labels = decision.get("source_crs"), decision.get("target_crs")
    if not all(isinstance(label, str) and label for label in labels):
        return False
    try:
        source, target = (parse_crs(str(label)) for label in labels)
    except LlmcError:
        return False
    return source.datum is not None and target.datum is not None and source.datum != target.datum


def _environment(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["`environment` must be an object"]
    return [f"`environment.{k}` must be a string" for k, v in value.items() if not isinstance(v, str)]


def _notes(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(note, str) for note in value):
        return ["`notes` must be an array of strings"]
    return []


def _repairs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(repair, dict) for repair in value):
        return ["`repairs` must be an array of objects"]
    return []


def _redacted(value: Any) -> list[str]:
    return [] if isinstance(value, bool) else ["`parameters_redacted` must be a boolean"]


def _producer(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["`producer` must be an object"]
    return [
        f"`producer.{name}` must be a string"
        for name in ("name", "version")
        if name in value and not isinstance(value[name], str)
    ]


_FIELD_CHECKS: dict[str, Callable[[Any], list[str]]] = {
    "spec_version": _spec_version,
    "operation": _operation,
    "parameters": _parameters,
    "inputs": _inputs,
    "output": _output,
    "engine": _engine,
    "verification": _verification,
    "started_at": _timestamp("started_at"),
    "finished_at": _timestamp("finished_at"),
    "crs_decisions": _crs_decisions,
    "environment": _environment,
    "notes": _notes,
    "repairs": _repairs,
    "parameters_redacted": _redacted,
    "producer": _producer,
}
