"""The justification an agent must give, and how it is checked against the decision it justifies.

The schema alone is not enough: a well-formed justification for ``nearest``
must not unlock ``cubic``. :func:`validate_justification` therefore also checks
that ``choice.method`` names the value being justified (normalized per domain)
and that the chosen method is not also listed as a rejected alternative.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmc_mcp.errors import JustificationInvalid
from llmc_mcp.reflection.specs import Decision, normalize_subject

MAX_JUSTIFICATION_CHARS = 16_000
"""Serialized size cap: long enough for real reasoning, short enough to keep records cheap."""


class Alternative(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    method: str = Field(min_length=1, max_length=300, description="An option that was considered.")
    why_not: str = Field(min_length=3, max_length=4000, description="Why it was rejected for this task.")


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    method: str = Field(min_length=1, max_length=20_000, description="The value being justified.")
    rationale: str = Field(min_length=3, max_length=4000, description="Why it fits what must be preserved.")
    tradeoffs: str = Field(min_length=3, max_length=4000, description="What is knowingly given up.")


class Justification(BaseModel):
    """A methodological justification for one consequential choice."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    intent: str = Field(
        min_length=3, max_length=4000, description="What the result is for and what must hold."
    )
    alternatives: list[Alternative] = Field(min_length=1, max_length=10)
    choice: Choice
    confidence: Literal["low", "medium", "high"]


def validate_justification(payload: Any, decision: Decision) -> Justification:
    """Validate shape, size and the tie to ``decision``; field-level errors go back to the agent."""
    try:
        size = len(json.dumps(payload, default=str))
    except RecursionError:
        _fail(["justification: nested too deeply to be a justification"])
    except (TypeError, ValueError):
        size = MAX_JUSTIFICATION_CHARS + 1
    if size > MAX_JUSTIFICATION_CHARS:
        _fail([f"justification: {size} characters serialized, the limit is {MAX_JUSTIFICATION_CHARS}"])
    try:
        justification = Justification.model_validate(payload)
    except ValidationError as exc:
        _fail(
            [
                f"{'.'.join(str(p) for p in err['loc']) or 'justification'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            ]
        )
    expected = decision.args[decision.subject]
    try:
        given = normalize_subject(decision.domain, justification.choice.method)
    except Exception:
        # Any failure to read the text (PROJ, a refused definition, a budget) is the text's fault:
        # it is compared as written, and so fails the check below with a field-level error.
        given = justification.choice.method
    if given != expected:
        _fail(
            [
                f"choice.method: {justification.choice.method!r} is not the value being justified "
                f"({expected!r})"
            ]
        )
    rejected = {_safe_normalize(decision.domain, alt.method) for alt in justification.alternatives}
    if expected in rejected:
        _fail(["alternatives: the chosen method is also listed as a rejected alternative"])
    return justification


_AUTHORITY_CODE = re.compile(r"\A[A-Za-z][A-Za-z0-9_]*:[A-Za-z0-9_.\-]+\Z")


def _safe_normalize(domain: str, value: str) -> str:
    """Normalize a rejected alternative for comparison with the choice.

    Alternatives are often prose ("a geographic CRS (degrees)"): only text that looks like an
    authority code goes through PROJ, which spends up to a second failing to parse prose.
    """
    if domain == "crs_datum" and not _AUTHORITY_CODE.match(value.strip()):
        return value.strip()
    try:
        return normalize_subject(domain, value)
    except Exception:
        return value


def _fail(errors: list[str]) -> None:
    raise JustificationInvalid(
        "The justification is not valid: " + "; ".join(errors),
        fix="Correct the listed fields and persist again; the prompt_text of the hint shows the JSON shape.",
        details={"errors": errors},
    )
