"""Which choices need a justification: operation -> (domain, prompt, decision args).

A spec turns an operation's validated arguments into a :class:`Decision`, or
into nothing when the choice is not consequential (a lossless compression
needs no ``format_selection`` justification). Decision args are normalized
here, once, so ``epsg:4326`` and ``EPSG:4326`` are the same decision, share
one cache key, and are accepted as the same ``choice.method``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from llmc_mcp.crs_text import normalize_crs
from llmc_mcp.errors import InvalidArgument

Domain = Literal["crs_datum", "resampling", "format_selection", "aggregation", "hydrology"]
DOMAINS: frozenset[str] = frozenset(get_args(Domain))

LOSSY_COMPRESSIONS = frozenset({"JPEG", "WEBP", "LERC", "LERC_DEFLATE", "LERC_ZSTD"})
"""Compressions that can change pixel values. LERC is lossy whenever MAX_Z_ERROR > 0, which
is the default we cannot rule out, so it is always gated."""


@dataclass(frozen=True)
class Decision:
    """One consequential choice, normalized: the unit the gate caches."""

    domain: str
    prompt: str
    args: dict[str, Any]
    subject: str
    """The decision arg whose value ``choice.method`` must equal."""


@dataclass(frozen=True)
class ReflectionSpec:
    domain: Domain
    prompt: str
    subject: str
    decision: Callable[[Mapping[str, Any], Mapping[str, str]], dict[str, Any] | None]
    when: str
    """One line for humans and stubs: when this spec asks for a justification."""

    def decide(self, args: Mapping[str, Any], facts: Mapping[str, str]) -> Decision | None:
        decided = self.decision(args, facts)
        if decided is None:
            return None
        return Decision(self.domain, self.prompt, decided, self.subject)


def normalize_subject(domain: str, value: object) -> str:
    """Normalize a justified value the way its domain's decision args are normalized."""
    text = str(value).strip()
    if domain == "crs_datum":
        return normalize_crs(text)
    if domain == "format_selection":
        return text.upper()
    if domain == "hydrology":
        return hydrology_value(text)
    return text.lower()


def hydrology_value(value: object) -> str:
    """A hydrology decision value: numbers as ``repr(float)`` (``5000``, ``5e3`` and ``5000.0`` are one
    threshold), names in lower case."""
    text = str(value).strip().lower()
    try:
        number = float(text)
    except ValueError:
        return text
    return repr(number) if math.isfinite(number) else text


DATA_KINDS = frozenset({"categorical", "continuous", "integer"})
UNKNOWN_DATA = "unknown"
"""The data kind of a decision made without looking at the data (direct gate calls in tests): a scope
of its own, so it can never unlock a decision about categorical or continuous data."""


SOME_OR_NONE = frozenset({"some", "none"})
Facts = dict[str, str]
"""What an operation read about its data that scopes the gate's decisions: ``{"data": "categorical"}``."""

FACT_VALUES: dict[str, Callable[[object], bool]] = {
    "data": lambda v: isinstance(v, str) and v in DATA_KINDS,
    "overlap": lambda v: isinstance(v, str) and v in SOME_OR_NONE,
    "resampled": lambda v: isinstance(v, str) and v in SOME_OR_NONE,
    "crs": lambda v: isinstance(v, str) and 0 < len(v) <= 100_000,
}
"""Facts a preflight may report: the data kind; whether a mosaic's sources overlap and whether any is
resampled (``some``/``none``); the CRS an alignment lands in when it is not the source's. A decision
that depends on a fact asks whenever the fact is missing."""


def check_facts(facts: object) -> dict[str, str]:
    """The facts a worker reports about the data, refused unless they are ones the gate knows."""
    if facts is None:
        return {}
    known = isinstance(facts, dict) and all(k in FACT_VALUES and FACT_VALUES[k](v) for k, v in facts.items())
    if not known:
        raise InvalidArgument(
            f"facts {str(facts)[:100]!r} are not facts the gate knows.",
            fix="Report {'data': 'categorical'|'continuous'|'integer'} (and overlap, resampled, crs where "
            "the operation has them) or nothing.",
        )
    return {str(k): str(v) for k, v in facts.items()}  # type: ignore[union-attr]


def _data(facts: Mapping[str, str]) -> str:
    return facts.get("data", UNKNOWN_DATA)


def _reproject_crs(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    return {"dst_crs": normalize_crs(args["dst_crs"], "dst_crs")}


def _reproject_resampling(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    # Scoped by what resampling does to data: bilinear is sound for a DEM and wrong for classes, and
    # warping a grid is not building overviews: one justification unlocks only what it argued for.
    return {"method": str(args["resampling"]).lower(), "data": _data(facts), "purpose": "warping"}


def _align_crs(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any] | None:
    # The same decision as reprojecting into like's CRS (same args, same prompt): landing in a CRS is
    # one choice whichever operation makes it. On the source's own CRS nothing is chosen.
    if "crs" not in facts:
        return None
    return {"dst_crs": normalize_crs(facts["crs"], "like")}


def _merge_aggregation(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any] | None:
    # Sources whose footprints share no cell combine nothing: every method gives each cell its one
    # source's value (count gives 1), so there is no choice to justify (DD-MCP-045).
    if facts.get("overlap") == "none":
        return None
    return {"method": str(args["method"]).lower(), "data": _data(facts)}


def _merge_resampling(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any] | None:
    # Sources already on the mosaic's cell lattice are copied cell for cell: no method is applied.
    if facts.get("resampled") == "none":
        return None
    return {"method": str(args["resampling"]).lower(), "data": _data(facts), "purpose": "warping"}


def _convert_lossy(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any] | None:
    compress = args.get("compress")
    if compress is None or str(compress).upper() not in LOSSY_COMPRESSIONS:
        return None
    return {"compress": str(compress).upper(), "driver": str(args.get("driver", "GTiff"))}


def _convert_overviews(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any] | None:
    if not args.get("overviews"):
        return None
    return {"method": str(args["overview_resampling"]).lower(), "data": _data(facts), "purpose": "overviews"}


REPROJECT_CRS = ReflectionSpec(
    domain="crs_datum",
    prompt="justify_crs_selection",
    subject="dst_crs",
    decision=_reproject_crs,
    when="always: the target CRS (dst_crs)",
)
REPROJECT_RESAMPLING = ReflectionSpec(
    domain="resampling",
    prompt="justify_resampling_method",
    subject="method",
    decision=_reproject_resampling,
    when="always: the resampling method, for this kind of data (categorical, continuous or integer)",
)
ALIGN_CRS = ReflectionSpec(
    domain="crs_datum",
    prompt="justify_crs_selection",
    subject="dst_crs",
    decision=_align_crs,
    when="when like's CRS is not src's: like's CRS, as raster.reproject's dst_crs",
)
MERGE_AGGREGATION = ReflectionSpec(
    domain="aggregation",
    prompt="justify_overlap_aggregation",
    subject="method",
    decision=_merge_aggregation,
    when="when source footprints overlap: how overlapping cells combine, for this kind of data",
)
MERGE_RESAMPLING = ReflectionSpec(
    domain="resampling",
    prompt="justify_resampling_method",
    subject="method",
    decision=_merge_resampling,
    when="when a source is off the mosaic's cell lattice: the resampling method, for this kind of data",
)
CONVERT_LOSSY = ReflectionSpec(
    domain="format_selection",
    prompt="justify_lossy_compression",
    subject="compress",
    decision=_convert_lossy,
    when="when compress is lossy (JPEG, WEBP, LERC*)",
)
CONVERT_OVERVIEWS = ReflectionSpec(
    domain="resampling",
    prompt="justify_resampling_method",
    subject="method",
    decision=_convert_overviews,
    when="when overviews are built: overview_resampling, for this kind of data",
)


def _condition(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    # Filling every depression and keeping those deeper than a depth are different hydrology: one
    # justification unlocks only the depth it argued for.
    depth = args.get("max_depth")
    kept = "none" if depth is None else hydrology_value(depth)
    return {"method": hydrology_value(args["method"]), "max_depth": kept}


def _flow_routing(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    return {"routing": hydrology_value(args["routing"])}


def _stream_threshold(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    # Scoped by the exact value and unit: 500 cells and 5000 cells draw different river networks.
    return {"threshold": hydrology_value(args["threshold"]), "units": str(args["threshold_units"]).lower()}


HYDROLOGY_CONDITION = ReflectionSpec(
    domain="hydrology",
    prompt="justify_depression_handling",
    subject="method",
    decision=_condition,
    when="always: how depressions are handled (method, and max_depth: which sinks are kept)",
)
HYDROLOGY_ROUTING = ReflectionSpec(
    domain="hydrology",
    prompt="justify_flow_routing",
    subject="routing",
    decision=_flow_routing,
    when="always: the flow routing model (single- or multiple-flow)",
)
HYDROLOGY_STREAM_THRESHOLD = ReflectionSpec(
    domain="hydrology",
    prompt="justify_stream_threshold",
    subject="threshold",
    decision=_stream_threshold,
    when="always: the drainage area (threshold, in its units) that makes a cell a channel",
)

SPECS: tuple[ReflectionSpec, ...] = (
    REPROJECT_CRS,
    REPROJECT_RESAMPLING,
    ALIGN_CRS,
    MERGE_AGGREGATION,
    MERGE_RESAMPLING,
    CONVERT_LOSSY,
    CONVERT_OVERVIEWS,
    HYDROLOGY_CONDITION,
    HYDROLOGY_ROUTING,
    HYDROLOGY_STREAM_THRESHOLD,
)


def subject_of(domain: str, prompt: str) -> str | None:
    """The decision arg a justification's ``choice.method`` names, for a stored record's domain and prompt."""
    return next((s.subject for s in SPECS if s.domain == domain and s.prompt == prompt), None)
