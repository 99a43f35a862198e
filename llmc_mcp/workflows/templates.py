"""The template language of workflow instructions: substitution only, never evaluation.

``${name}``, ``${name[0]}``, ``${name.field}`` (and chains of them, ``${parts[1].title}``) substitute a
saved value; ``${foreach item in list}...${/foreach}`` repeats its body for each item of a list. A
definition is data written by a user, so nothing in a template can run code: a reference is a name
followed by keys and indexes, and that is all the parser accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
"""No leading underscore: nothing a template names looks like a Python internal (``__class__``)."""
_PATH = re.compile(rf"\A({_NAME})((?:\.{_NAME}|\[\d+\])*)\Z")
_PART = re.compile(rf"\.({_NAME})|\[(\d+)\]")
_TAG = re.compile(r"\$\{([^{}]*)\}")
_FOREACH = re.compile(rf"\Aforeach\s+({_NAME})\s+in\s+(.+?)\s*\Z")
MAX_RENDERED_CHARS = 200_000
"""A rendered instruction past this is refused: a foreach over a long list inside another is a bug."""


class TemplateError(ValueError):
    """A template that cannot be parsed, or names a value that is not there when rendered."""


@dataclass(frozen=True)
class Ref:
    """``${name.field[0]}``: a root name and the keys (str) and indexes (int) after it."""

    name: str
    path: tuple[str | int, ...]
    text: str


@dataclass(frozen=True)
class Loop:
    variable: str
    source: Ref
    body: tuple[Node, ...]


Node = str | Ref | Loop


def parse_ref(text: str) -> Ref:
    text = text.strip()
    match = _PATH.match(text)
    if match is None:
        raise TemplateError(
            f"'${{{text}}}' is not a reference: write a name, then .field or [index] parts "
            "(${parts[0]}, ${crs.choice.method}); nothing is evaluated"
        )
    path: list[str | int] = []
    for key, index in _PART.findall(match.group(2)):
        path.append(key if key else int(index))
    return Ref(match.group(1), tuple(path), text)


def parse(template: str) -> tuple[Node, ...]:
    """The template as text, references and loops; a malformed one is a :class:`TemplateError`."""
    stack: list[tuple[str, Ref | None, list[Node]]] = [("", None, [])]
    position = 0
    for tag in _TAG.finditer(template):
        if tag.start() > position:
            stack[-1][2].append(template[position : tag.start()])
        position = tag.end()
        inner = tag.group(1).strip()
        loop = _FOREACH.match(inner)
        if loop is not None:
            stack.append((loop.group(1), parse_ref(loop.group(2)), []))
        elif inner == "/foreach":
            if len(stack) == 1:
                raise TemplateError("'${/foreach}' without an opening '${foreach item in list}'")
            variable, source, body = stack.pop()
            assert source is not None
            stack[-1][2].append(Loop(variable, source, tuple(body)))
        elif inner.startswith("foreach"):
            raise TemplateError(f"'${{{inner}}}': write '${{foreach item in list}}'")
        else:
            stack[-1][2].append(parse_ref(inner))
    rest = template[position:]
    if "${" in rest:
        raise TemplateError("an unclosed '${' (every reference ends with '}')")
    if rest:
        stack[-1][2].append(rest)
    if len(stack) > 1:
        raise TemplateError(f"'${{foreach {stack[-1][0]} in ...}}' is never closed with '${{/foreach}}'")
    return tuple(stack[0][2])


def names(template: str) -> set[str]:
    """The root names a template reads from saved values (loop variables excluded)."""
    found: set[str] = set()

    def visit(nodes: tuple[Node, ...], bound: frozenset[str]) -> None:
        for node in nodes:
            if isinstance(node, Ref) and node.name not in bound:
                found.add(node.name)
            elif isinstance(node, Loop):
                if node.source.name not in bound:
                    found.add(node.source.name)
                visit(node.body, bound | {node.variable})

    visit(parse(template), frozenset())
    return found


def lookup(ref: Ref, values: Mapping[str, Any]) -> Any:
    """The value a reference names; a clear :class:`TemplateError` when it is not there."""
    if ref.name not in values:
        raise TemplateError(f"'${{{ref.text}}}': no value named {ref.name!r} has been saved")
    value = values[ref.name]
    walked = ref.name
    for part in ref.path:
        if isinstance(part, int):
            if not isinstance(value, list) or part >= len(value):
                size = f"a list of {len(value)}" if isinstance(value, list) else f"a {_kind(value)}"
                raise TemplateError(f"'${{{ref.text}}}': {walked} is {size}, it has no item [{part}]")
            value = value[part]
            walked += f"[{part}]"
        else:
            if not isinstance(value, dict) or part not in value:
                raise TemplateError(f"'${{{ref.text}}}': {walked} has no field {part!r}")
            value = value[part]
            walked += f".{part}"
    return value


def render(template: str, values: Mapping[str, Any]) -> str:
    """The template with every reference substituted; lists and objects are written as JSON."""
    out: list[str] = []
    _render(parse(template), dict(values), out)
    text = "".join(out)
    if len(text) > MAX_RENDERED_CHARS:
        raise TemplateError(f"the rendered text has {len(text)} characters, over {MAX_RENDERED_CHARS}")
    return text


def render_value(template: Any, values: Mapping[str, Any]) -> Any:
    """A template that is exactly one reference yields the value itself (a number stays a number)."""
    if not isinstance(template, str):
        return template
    nodes = parse(template)
    if len(nodes) == 1 and isinstance(nodes[0], Ref):
        return lookup(nodes[0], values)
    return render(template, values)


def _render(nodes: tuple[Node, ...], values: dict[str, Any], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, Ref):
            out.append(show(lookup(node, values)))
        else:
            items = lookup(node.source, values)
            if not isinstance(items, list):
                raise TemplateError(
                    f"'${{foreach {node.variable} in {node.source.text}}}': "
                    f"{node.source.text} is a {_kind(items)}, not a list"
                )
            for item in items:
                _render(node.body, {**values, node.variable: item}, out)
                if sum(len(part) for part in out) > MAX_RENDERED_CHARS:
                    raise TemplateError(f"the rendered text is over {MAX_RENDERED_CHARS} characters")


def show(value: Any) -> str:
    """A value as instruction text: strings as they are, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "text"}.get(type(value), type(value).__name__)
