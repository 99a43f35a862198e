"""The justification an agent must give, and how it is checked against the decision it justifies.

The schema alone is not enough: a well-formed justification for ``nearest``
must not unlock ``cubic``. :func:`validate_justification` therefore also checks
that ``choice.method`` names the value being justified (normalized per domain)
and that the chosen method is not also listed as a rejected alternative.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from llmc_mcp.errors import JustificationInvalid
from llmc_mcp.reflection.shipped import copy_problem, normalized
from llmc_mcp.reflection.specs import Decision, normalize_subject

MAX_JUSTIFICATION_CHARS = 16_000
"""Serialized size cap: long enough for real reasoning, short enough to keep records cheap."""

UNSAFE_CHAR = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff]"
)
"""Characters no reasoning needs and that make stored text lie or break: control characters but tab
and line breaks (terminal escapes, NUL), zero-width and bidirectional formatting (text that reads
differently than it is stored), Unicode line separators, and lone surrogates (not encodable: a record
holding one cannot be written as UTF-8)."""


def text_problem(value: object, limit: int) -> str | None:
    """Why ``value`` is not text a client may store: too long, or holding an :data:`UNSAFE_CHAR`."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if len(value) > limit:
        return f"is {len(value)} characters long; the limit is {limit}"
    if (bad := UNSAFE_CHAR.search(value)) is not None:
        code = ord(bad.group())
        return f"contains the character U+{code:04X} at position {bad.start()}, which text may not hold"
    return None


def _plain(value: str) -> str:
    if (problem := text_problem(value, len(value))) is not None:
        raise ValueError(f"the text {problem}")
    return value


PlainText = Annotated[str, AfterValidator(_plain)]
"""Text a client sent that is stored and shown to people: no control, formatting or unpaired characters."""


class Alternative(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    method: PlainText = Field(min_length=1, max_length=300, description="An option that was considered.")
    why_not: PlainText = Field(
        min_length=3, max_length=4000, description="Why it was rejected for this task."
    )


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    method: PlainText = Field(min_length=1, max_length=20_000, description="The value being justified.")
    rationale: PlainText = Field(
        min_length=3, max_length=4000, description="Why it fits what must be preserved."
    )
    tradeoffs: PlainText = Field(min_length=3, max_length=4000, description="What is knowingly given up.")


class Justification(BaseModel):
    """A methodological justification for one consequential choice."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    intent: PlainText = Field(
        min_length=3, max_length=4000, description="What the result is for and what must hold."
    )
    alternatives: list[Alternative] = Field(min_length=1, max_length=10)
    choice: Choice
    confidence: Literal["low", "medium", "high"]


MIN_WORDS = {"intent": 4, "choice.rationale": 4, "choice.tradeoffs": 3, "why_not": 3}
"""Words of their own each text field needs: "Some." or "OK" says nothing a reviewer could check, and
four words is the least that names a purpose ("keep exact class codes"). Stated in every prompt."""
_PLACEHOLDER = re.compile(r"<[^<>]{2,}>")
_COPY_MIN_WORDS = 3


def validate_justification(payload: Any, decision: Decision, prompt_text: str = "") -> Justification:
    """Validate shape, size, content and the tie to ``decision``; every problem is reported at once.

    Beyond the schema, a justification must be the agent's own reasoning about this decision: no
    field may still hold a ``<placeholder>`` or reproduce text of the prompt it answers
    (``prompt_text``), each text field has :data:`MIN_WORDS`, ``choice.method`` must be the value
    being justified, and that value must not also be listed as a rejected alternative.
    """
    try:
        size = len(json.dumps(payload, default=str))
    except RecursionError:
        _fail(["justification: nested too deeply to be a justification"])
    except (TypeError, ValueError):
        size = MAX_JUSTIFICATION_CHARS + 1
    if size > MAX_JUSTIFICATION_CHARS:
        _fail([f"justification: {size} characters serialized, the limit is {MAX_JUSTIFICATION_CHARS}"])
    errors: list[str] = []
    justification: Justification | None = None
    try:
        justification = Justification.model_validate(payload)
    except ValidationError as exc:
        errors += [
            f"{'.'.join(str(p) for p in err['loc']) or 'justification'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        ]
    fields = _text_fields(payload)
    errors += _tie_problems(fields, decision)
    errors += _content_problems(fields, _normalized(prompt_text), decision)
    if errors or justification is None:
        _fail(errors or ["justification: not a justification"])
    return justification


def _text_fields(payload: Any) -> dict[str, str]:
    """Every text field of a payload, by its path, read without trusting its shape."""
    if not isinstance(payload, dict):
        return {}
    fields: dict[str, str] = {}
    if isinstance(payload.get("intent"), str):
        fields["intent"] = payload["intent"]
    choice = payload.get("choice")
    if isinstance(choice, dict):
        for key in ("method", "rationale", "tradeoffs"):
            if isinstance(choice.get(key), str):
                fields[f"choice.{key}"] = choice[key]
    alternatives = payload.get("alternatives")
    if isinstance(alternatives, list):
        for i, alternative in enumerate(alternatives[:10]):
            if isinstance(alternative, dict):
                for key in ("method", "why_not"):
                    if isinstance(alternative.get(key), str):
                        fields[f"alternatives.{i}.{key}"] = alternative[key]
    return fields


def _tie_problems(fields: dict[str, str], decision: Decision) -> list[str]:
    method = fields.get("choice.method")
    if method is None:
        return []
    expected = decision.args[decision.subject]
    try:
        given = normalize_subject(decision.domain, method)
    except Exception:
        # Any failure to read the text (PROJ, a refused definition, a budget) is the text's fault:
        # it is compared as written, and so fails the check below with a field-level error.
        given = method
    problems = []
    if given != expected:
        problems.append(f"choice.method: {method[:200]!r} is not the value being justified ({expected!r})")
    rejected = {_safe_normalize(decision.domain, v) for k, v in fields.items() if k.endswith(".method")
                and k.startswith("alternatives.")}  # fmt: skip
    if expected in rejected:
        problems.append("alternatives: the chosen method is also listed as a rejected alternative")
    return problems


def _content_problems(fields: dict[str, str], prompt: str, decision: Decision) -> list[str]:
    problems = []
    method = normalized(str(decision.args.get(decision.subject, "")))
    for path, text in fields.items():
        if path.endswith("method"):
            continue
        if _PLACEHOLDER.search(text):
            problems.append(f"{path}: still holds a <placeholder> of the example; write your own reasoning")
            continue
        words = len(re.findall(r"\w+", text))
        needed = MIN_WORDS.get(path.split(".")[-1] if path.startswith("alternatives.") else path, 0)
        if words < needed:
            problems.append(f"{path}: {words} word(s); say it in at least {needed} words of your own")
            continue
        own = _normalized(text)
        if prompt and len(own.split()) >= _COPY_MIN_WORDS and own in prompt:
            problems.append(f"{path}: repeats the prompt's text; answer it about your data instead")
        elif (copied := copy_problem(path, text, decision.domain, method)) is not None:
            problems.append(copied)
    return problems


def _normalized(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


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
