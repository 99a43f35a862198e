"""What a client may send a workflow, checked before anything is kept: answers of the kind a step
asks for, inputs a workflow declares, all bounded in length, nesting and characters."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from llmc_mcp.errors import InvalidArgument, LlmcError
from llmc_mcp.operations.workflows.definitions import Workflow
from llmc_mcp.reflection.schema import Justification, text_problem

MAX_ANSWER_CHARS = 64_000


MAX_INPUT_CHARS = 4_000


MAX_LIST_ITEMS = 50


MAX_ANSWER_DEPTH = 16
"""Lists and objects inside one another in an answer (a justification is three deep)."""


JUSTIFICATION_SHAPE = (
    '{"intent": ..., "alternatives": [{"method": ..., "why_not": ...}], "choice": {"method": ..., '
    '"rationale": ..., "tradeoffs": ...}, "confidence": "low"|"medium"|"high"}'
)


ANSWER_WORDS = {
    "text": "your answer as text",
    "list": "a list of texts",
    "number": "a number",
    "justification": "a justification " + JUSTIFICATION_SHAPE,
    "any": "any JSON value",
}


class AnswerInvalid(LlmcError):
    """A submitted answer was refused; ``details["errors"]`` lists every problem. Nothing was saved."""

    kind = "answer_invalid"


def answer_problems(kind: str, answer: Any) -> list[str]:
    """Every problem of ``answer`` for a step that asks for ``kind``; empty when it may be kept."""
    shape = data_problem(answer, "answer")
    if shape is not None:
        return [shape]
    size = len(json.dumps(answer, ensure_ascii=False))
    if size > MAX_ANSWER_CHARS:
        return [f"answer: {size} characters serialized, the limit is {MAX_ANSWER_CHARS}; summarize"]
    if kind == "text" and (
        answer is None or answer == "" or (isinstance(answer, str) and not answer.strip())
    ):
        return [f"answer: must be non-empty text, got {kind_of(answer) if answer is None else 'empty text'}"]
    if kind == "number" and (isinstance(answer, bool) or not isinstance(answer, int | float)):
        return [f"answer: must be a number, got {kind_of(answer)}"]
    if kind == "list":
        if not isinstance(answer, list) or not answer:
            return [f"answer: must be a non-empty list of texts, got {kind_of(answer)}"]
        problems = [
            f"answer[{i}]: must be non-empty text, got {kind_of(item)}"
            for i, item in enumerate(answer)
            if not (isinstance(item, str) and item.strip())
        ]
        if len(answer) > MAX_LIST_ITEMS:
            problems.append(f"answer: {len(answer)} items, at most {MAX_LIST_ITEMS}")
        return problems
    if kind == "justification" and not isinstance(answer, dict):
        return [f"answer: must be a justification object {JUSTIFICATION_SHAPE}, got {kind_of(answer)}"]
    return []


def data_problem(value: Any, where: str) -> str | None:
    """Why ``value`` is not data a client may have kept in a state: anything but JSON data, nested over
    :data:`MAX_ANSWER_DEPTH`, a number that is not finite, or text (keys too) that is too long or holds
    a character no text may (controls, bidirectional formatting, lone surrogates, which cannot even be
    written as UTF-8). Walked without recursion, stopping at the first problem."""
    todo: list[tuple[Any, str, int]] = [(value, where, 0)]
    while todo:
        item, at, depth = todo.pop()
        if depth > MAX_ANSWER_DEPTH:
            return f"{where}: nested more than {MAX_ANSWER_DEPTH} lists or objects deep"
        if isinstance(item, str):
            if (problem := text_problem(item, MAX_ANSWER_CHARS)) is not None:
                return f"{at}: the text {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{at}: {item} is not a finite number"
        elif isinstance(item, list):
            todo.extend((v, f"{at}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for key, v in item.items():
                if not isinstance(key, str) or text_problem(key, 200) is not None:
                    return f"{at}: a key is not plain text of at most 200 characters"
                todo.append((v, f"{at}.{key}", depth + 1))
        elif item is not None and not isinstance(item, bool | int | float):
            return f"{at}: not JSON data (text, numbers, lists and objects only)"
    return None


def justification_errors(answer: Any) -> list[str]:
    """The schema errors of a justification, for answers refused before the decision is known."""
    from pydantic import ValidationError

    try:
        Justification.model_validate(answer)
    except ValidationError as exc:
        return [
            f"{'.'.join(str(p) for p in err['loc']) or 'justification'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        ]
    return []


def check_inputs(workflow: Workflow, inputs: Mapping[str, Any]) -> dict[str, str]:
    """The inputs ``workflow`` declares, as text; :class:`InvalidArgument` naming every problem."""
    declared = {spec.name for spec in workflow.inputs}
    problems = [f"{name}: unknown input" for name in sorted(set(inputs) - declared)]
    problems += [f"{name}: required" for name in sorted(declared - set(inputs))]
    for name, value in inputs.items():
        if name in declared and not (isinstance(value, str) and value.strip()):
            problems.append(f"{name}: must be non-empty text, got {kind_of(value)}")
        elif name in declared and (problem := text_problem(value, MAX_INPUT_CHARS)) is not None:
            problems.append(f"{name}: the text {problem}")
    if problems:
        wanted = ", ".join(f"{s.name} ({s.description})" for s in workflow.inputs) or "none"
        raise InvalidArgument(
            f"{workflow.name}: " + "; ".join(problems),
            fix=f"Its inputs: {wanted}.",
            details={"errors": problems},
        )
    return {name: str(inputs[name]) for name in declared}


def kind_of(value: Any) -> str:
    """A JSON value's kind as a refusal names it (``null``, ``a list``, ``text``...)."""
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
