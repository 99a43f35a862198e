"""Which choices need a justification: operation -> (domain, prompt, decision args).

A spec turns an operation's validated arguments into a :class:`Decision`, or
into nothing when the choice is not consequential (a lossless compression
needs no ``format_selection`` justification). Decision args are normalized
here, once, so ``epsg:4326`` and ``EPSG:4326`` are the same decision, share
one cache key, and are accepted as the same ``choice.method``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from llmc_mcp.crs_text import normalize_crs
from llmc_mcp.errors import InvalidArgument

Domain = Literal["crs_datum", "resampling", "format_selection"]
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
    return text.lower()


DATA_KINDS = frozenset({"categorical", "continuous", "integer"})
UNKNOWN_DATA = "unknown"
"""The data kind of a decision made without looking at the data (direct gate calls in tests): a scope
of its own, so it can never unlock a decision about categorical or continuous data."""


def check_facts(facts: object) -> dict[str, str]:
    """The facts a worker reports about the data, refused unless they are ones the gate knows."""
    if facts is None:
        return {}
    known = isinstance(facts, dict) and not set(facts) - {"data"}
    if not known or facts.get("data", "categorical") not in DATA_KINDS:  # type: ignore[union-attr]
        raise InvalidArgument(
            f"facts {str(facts)[:100]!r} are not facts the gate knows.",
            fix="Report {'data': 'categorical'|'continuous'|'integer'} or nothing.",
        )
    return {str(k): str(v) for k, v in facts.items()}


def _data(facts: Mapping[str, str]) -> str:
    return facts.get("data", UNKNOWN_DATA)


def _reproject_crs(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    return {"dst_crs": normalize_crs(args["dst_crs"], "dst_crs")}


def _reproject_resampling(args: Mapping[str, Any], facts: Mapping[str, str]) -> dict[str, Any]:
    # Scoped by what resampling does to data: bilinear is sound for a DEM and wrong for classes, and
    # warping a grid is not building overviews: one justification unlocks only what it argued for.
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
